# Sourced by the bench scripts that start a dflash-server.
# wait_until_serving CLI PORT PID LOG [SECONDS]: polls the health RPC of the server on
# 127.0.0.1:PORT every 0.5 s. Returns 0 once it answers SERVING; returns 1, with the end of LOG on
# stderr, when the process PID exits first or SECONDS (default 120) pass without an answer (it
# then stops PID, so that no server is left behind).
wait_until_serving() {
  local cli=$1 port=$2 pid=$3 log=$4 seconds=${5:-120} try
  for ((try = 0; try < 2 * seconds; ++try)); do
    "$cli" --target="127.0.0.1:$port" health > /dev/null 2>&1 && return 0
    if ! kill -0 "$pid" 2> /dev/null; then
      echo "the server (pid $pid) exited before it served; the end of $log:" >&2
      tail -n 20 "$log" >&2
      return 1
    fi
    sleep 0.5
  done
  echo "the server did not answer health within $seconds s; the end of $log:" >&2
  tail -n 20 "$log" >&2
  kill -TERM "$pid" 2> /dev/null
  wait "$pid" 2> /dev/null
  return 1
}
