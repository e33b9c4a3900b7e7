#!/usr/bin/env bash
# The HTTP listener's connection handling, two dflash-server builds side by side (A: the baseline,
# B: the change), on the null engine so that the server's own cost is what is measured. Three
# loads of POST /predict (one 64-token text per call): `alone`, closed-loop dflash-loadtest
# --protocol=http at concurrency 16 (one keep-alive connection per worker, the
# loadtest/workloads/classify_64.json texts); `idle`, the same with IDLE more keep-alive
# connections open that send nothing (a helper holds them), where an event loop whose cost grows
# with its number of connections shows; `fresh`, ApacheBench (`ab`, package apache2-utils; skipped
# without it) at the same concurrency with a new connection for every call, where the cost of
# accepting shows. Rounds alternate A and B, in turns (A first in odd rounds, B in even ones), so
# that a change of the machine's load hits both.
# Writes calls/s, p50 and p99 per build, load and round, and B over A, to OUT (JSON).
#
# Usage: bench/http_event_loop.sh SERVER_A SERVER_B [SECONDS] [ROUNDS] [OUT]
#   SERVER_A, SERVER_B: dflash-server binaries, each with its sentencepiece shim in lib/ beside its
#   bin/. Defaults: 10 s per run, 3 rounds, bench/results/http-event-loop-null.json. Environment:
#   BUILD_DIR (build: dflash-cli, dflash-loadtest, demo-model/), IDLE (2000), CONCURRENCY (16),
#   FRESH_CALLS (3000).
set -euo pipefail
if [[ "${1:-}" == "--help" || $# -lt 2 ]]; then sed -n 2,19p "$0"; [[ $# -ge 2 ]]; exit; fi
cd "$(dirname "$0")/.."
servers=("$1" "$2")
seconds=${3:-10}
rounds=${4:-3}
out=${5:-bench/results/http-event-loop-null.json}
build=${BUILD_DIR:-build}
idle=${IDLE:-2000}
fresh_calls=${FRESH_CALLS:-3000}
concurrency=${CONCURRENCY:-16}
port=50171
http_port=50172
model_dir="$(cd "$build/demo-model" && pwd)"
work=$(mktemp -d)
server_pid=""
idle_pid=""
loads="alone idle"
if command -v ab > /dev/null; then
  loads+=" fresh"
else
  echo "no ab (apt-get install apache2-utils): the 'fresh' load is skipped" >&2
fi
cleanup() {
  [[ -n $idle_pid ]] && kill "$idle_pid" 2> /dev/null
  [[ -n $server_pid ]] && kill -TERM "$server_pid" 2> /dev/null && wait "$server_pid" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
source bench/server_health.sh
ulimit -n "$(ulimit -Hn)"

# Opens COUNT connections to the HTTP port and holds them, sending nothing, until killed; writes
# "open" to READY once all are connected. Run in the background: exec makes $! the holder itself.
hold_idle_connections() {
  exec python3 - "$http_port" "$1" "$2" <<'PY'
import signal, socket, sys
port, count, ready = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
held = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
open(ready, "w").write("open")
signal.pause()
PY
}

# ApacheBench, a new connection per call: FRESH_CALLS calls after 500 to warm up. Not for a time:
# every closed connection holds its port pair in TIME_WAIT for a minute, and a sustained run soon
# measures the kernel's search for a free port instead of the server. Writes REPORT in the shape of
# dflash-loadtest's report (the fields read below).
fresh_connections() {
  local report=$1 body=$work/body.json
  printf '{"inputs":"%s"}' "$(printf 'the quick brown fox jumps over the lazy dog %.0s' {1..7})" \
    > "$body"
  local common=(-c "$concurrency" -p "$body" -T application/json)
  ab "${common[@]}" -n 500 "http://127.0.0.1:$http_port/predict" > /dev/null 2>&1 || true
  ab "${common[@]}" -n "$fresh_calls" "http://127.0.0.1:$http_port/predict" > "$work/ab.txt" 2>&1 \
    || true
  python3 - "$work/ab.txt" "$report" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
def number(pattern):
    match = re.search(pattern, text, re.M)
    if match is None:
        sys.exit(f"ab gave no '{pattern}':\n{text[-2000:]}")
    return float(match.group(1))
failed = number(r"^Failed requests:\s+(\d+)")
non_2xx = re.search(r"^Non-2xx responses:\s+(\d+)", text, re.M)
json.dump({"measured": {"ok_rate_per_s": number(r"^Requests per second:\s+([\d.]+)"),
                        "errors": int(failed) + (int(non_2xx.group(1)) if non_2xx else 0)},
           "latency_ms": {"p50": number(r"^\s+50%\s+(\d+)"), "p99": number(r"^\s+99%\s+(\d+)")}},
          open(sys.argv[2], "w"))
PY
}

run_one() {  # run_one BUILD_INDEX LOAD ROUND
  local server=${servers[$1]} load=$2 round=$3 name="$2-$1-$3"
  "$server" --config=config/server.yaml \
    --set="models.demo.path=$model_dir,server.http_listen=127.0.0.1:$http_port" \
    --set="server.http_idle_timeout=600s" \
    --listen=127.0.0.1:$port --metrics_listen=off --backend=null > "$work/server-$name.log" 2>&1 &
  server_pid=$!
  wait_until_serving "$build/bin/dflash-cli" $port "$server_pid" "$work/server-$name.log"
  if [[ $load == idle ]]; then
    rm -f "$work/ready"
    hold_idle_connections "$idle" "$work/ready" &
    idle_pid=$!
    while [[ ! -s $work/ready ]]; do
      kill -0 "$idle_pid" 2> /dev/null || { echo "the idle connections did not open" >&2; exit 1; }
      sleep 0.2
    done
  fi
  if [[ $load == fresh ]]; then
    fresh_connections "$work/$name.json"
  else
    "$build/bin/dflash-loadtest" --workload=loadtest/workloads/classify_64.json --mode=closed \
      --duration="${seconds}s" --warmup=3s --progress=0 --target=127.0.0.1:$http_port \
      --protocol=http --concurrency="$concurrency" --report="$work/$name.json" > /dev/null
  fi
  if [[ -n $idle_pid ]]; then kill "$idle_pid"; wait "$idle_pid" 2> /dev/null || true; fi
  idle_pid=""
  kill -TERM "$server_pid" && wait "$server_pid" || true
  server_pid=""
  python3 -c "
import json; r = json.load(open('$work/$name.json'))
print('round $round, $load, build ${1/0/A}: %.0f calls/s, p50 %.3f ms, p99 %.3f ms, %d errors' % (
    r['measured']['ok_rate_per_s'], r['latency_ms']['p50'], r['latency_ms']['p99'],
    r['measured']['errors']))" | sed 's/build 1/build B/'
}

cat /proc/loadavg > "$work/loadavg-start"
for round in $(seq 1 "$rounds"); do
  for load in $loads; do
    order="0 1"
    (( round % 2 )) || order="1 0"
    for index in $order; do run_one "$index" "$load" "$round"; done
  done
done
cat /proc/loadavg > "$work/loadavg-end"

python3 - "$work" "$out" "$seconds" "$rounds" "$idle" "$concurrency" "$(nproc)" \
  "${servers[0]}" "${servers[1]}" "$loads" <<'PY'
import datetime, json, sys
work, out, seconds, rounds, idle, concurrency, cores, server_a, server_b, loads = sys.argv[1:]
rounds = int(rounds)

def figures(name):
    report = json.load(open(f"{work}/{name}.json"))
    return {"ok_per_s": round(report["measured"]["ok_rate_per_s"], 1),
            "p50_ms": report["latency_ms"]["p50"], "p99_ms": report["latency_ms"]["p99"],
            "errors": report["measured"]["errors"]}

result = {
    "tool": "bench/http_event_loop.sh",
    "command": f"bench/http_event_loop.sh {server_a} {server_b} {seconds} {rounds} {out}",
    "description": "dflash-server with the null engine, POST /predict: 'alone', closed-loop "
                   "dflash-loadtest over HTTP (one keep-alive connection per worker); 'idle', the "
                   "same with idle keep-alive connections open that send nothing; 'fresh', "
                   "ApacheBench with a new connection per call (latencies in whole ms)",
    "server_a": server_a, "server_b": server_b, "concurrency": int(concurrency),
    "idle_connections": int(idle), "seconds_per_run": int(seconds), "warmup_s": 3,
    "rounds": rounds, "cores": int(cores), "date": datetime.date.today().isoformat(),
    "load_average_before": open(f"{work}/loadavg-start").read().split()[:3],
    "load_average_after": open(f"{work}/loadavg-end").read().split()[:3],
    "loads": {}}
for load in loads.split():
    per_round = [{"round": r, "a": figures(f"{load}-0-{r}"), "b": figures(f"{load}-1-{r}")}
                 for r in range(1, rounds + 1)]
    rate_a = sum(x["a"]["ok_per_s"] for x in per_round)
    rate_b = sum(x["b"]["ok_per_s"] for x in per_round)
    result["loads"][load] = {"rounds": per_round, "b_over_a_throughput": round(rate_b / rate_a, 3)}
with open(out, "w") as f:
    json.dump(result, f, indent=1)
    f.write("\n")
for load, figures_of_load in result["loads"].items():
    print(f"{load}: B / A throughput {figures_of_load['b_over_a_throughput']}")
print(f"wrote {out}")
PY
