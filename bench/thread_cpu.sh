# Sourced by the bench scripts that read a server's CPU time per thread.
# thread_ticks PID: "<thread id> <thread name> <utime+stime ticks>" for every thread of PID, one
# per line (spaces in names become underscores).
thread_ticks() {
  for stat in /proc/"$1"/task/*/stat; do
    # The name is in parentheses and may hold spaces; fields after it are space-separated.
    sed -E 's/^([0-9]+) \((.*)\) [A-Za-z] (.*)$/\1|\2|\3/' "$stat" 2>/dev/null |
      awk -F'|' '{ split($3, f, " "); name = $2; gsub(/ /, "_", name); print $1, name, f[11] + f[12] }'
  done
}
