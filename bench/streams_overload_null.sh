#!/usr/bin/env bash
# The server under open-loop overload by server.max_concurrent_streams, on the null engine (the
# host path alone, no GPU): for each limit, a fresh dflash-server (every batch sleeps
# ENGINE_DELAY, as if waiting on a device) pinned to SERVER_CORES, and dflash-loadtest pinned to
# LOAD_CORES sending MNLI-like Classify calls as Poisson arrivals on 8 connections, at most
# 20,000 unanswered, at each rate of RATES. Reports calls answered OK per second, errors by code
# and latency per limit and rate, and writes them as JSON.
#
# Usage: bench/streams_overload_null.sh [BUILD_DIR] [REPORT]
#   defaults: build, bench/results/streams-overload-null-2core.json. Environment: STREAMS
#   (limits, 0 = none; default "0 1024 256 64"), RATES (calls/s; default "26000 49000": about
#   the capacity of a one-core server on the 2-core machine, and twice that), SECONDS_PER_RUN (6),
#   SERVER_CORES (0), LOAD_CORES (1), ENGINE_DELAY (1ms).
set -euo pipefail
if [[ ${1:-} == --help ]]; then sed -n 2,13p "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
cd "$(dirname "$0")/.."
build=${1:-build}
report=${2:-bench/results/streams-overload-null-2core.json}
streams_values=${STREAMS:-"0 1024 256 64"}
rates=${RATES:-"26000 49000"}
seconds=${SECONDS_PER_RUN:-6}
server_cores=${SERVER_CORES:-0}
load_cores=${LOAD_CORES:-1}
port=50193
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source bench/server_health.sh
if [[ ! -d "$build/demo-model" ]]; then
  "$build/bin/dflash-make-demo-model" --out_dir="$build/demo-model" > /dev/null
fi
model_dir=$(cd "$build/demo-model" && pwd)

for streams in $streams_values; do
  DFLASH_TEST_NULL_ENGINE_DELAY=${ENGINE_DELAY:-1ms} taskset -c "$server_cores" \
    "$build/bin/dflash-server" --config=config/server.yaml --set="models.demo.path=$model_dir" \
    --set="server.max_concurrent_streams=$streams" --listen=127.0.0.1:$port --metrics_listen=off \
    --backend=null > "$work/server-$streams.log" 2>&1 &
  server_pid=$!
  wait_until_serving "$build/bin/dflash-cli" $port "$server_pid" "$work/server-$streams.log" 60 ||
    exit 1
  for rate in $rates; do
    echo "== max_concurrent_streams $streams, $rate calls/s offered"
    taskset -c "$load_cores" "$build/bin/dflash-loadtest" --target=127.0.0.1:$port \
      --workload=loadtest/workloads/mnli_mix.json --corpus=config/demo/corpus.txt \
      --mode=poisson --rate="$rate" --channels=8 --max_in_flight=20000 --senders=1 \
      --duration="${seconds}s" --warmup=1s --progress=0 \
      --report="$work/report-$streams-$rate.json" 2>&1 | grep -E "^per second" || true
  done
  kill -TERM "$server_pid"; wait "$server_pid" || true
done

python3 - "$work" "$report" "$streams_values" "$rates" "$seconds" <<'PY'
import json, os, platform, sys
work, report, streams_values, rates, seconds = sys.argv[1:]
runs = []
for streams in streams_values.split():
    for rate in rates.split():
        d = json.load(open(os.path.join(work, f"report-{streams}-{rate}.json")))
        m, lat = d["measured"], d["latency_ms"]
        runs.append({"max_concurrent_streams": int(streams), "offered_per_s": float(rate),
                     "ok_per_s": round(m["ok_rate_per_s"], 1), "errors": m["errors"],
                     "errors_by_code": m.get("errors_by_code", {}),
                     "p50_ms": round(lat["p50"], 2), "p99_ms": round(lat["p99"], 2),
                     "server_total_p99_ms": round(d.get("server_total_ms", {}).get("p99", 0), 2)})
result = {
    "tool": "bench/streams_overload_null.sh",
    "what": "Open-loop Poisson overload of the null-engine server (1 ms per batch, no compute) "
            "by server.max_concurrent_streams (0 = no limit): MNLI-like Classify calls on 8 "
            "connections, at most 20,000 unanswered, server and load generator pinned to one "
            "core each.",
    "machine": f"{os.cpu_count()} cores, {platform.machine()}",
    "seconds_per_run": float(seconds),
    "runs": runs,
}
with open(report, "w") as f:
    json.dump(result, f, indent=1)
    f.write("\n")
for r in runs:
    print(f"streams {r['max_concurrent_streams']:5d} offered {r['offered_per_s']:8.0f}: "
          f"ok {r['ok_per_s']:8.1f}/s errors {r['errors']:6d} p50 {r['p50_ms']:8.1f} ms "
          f"p99 {r['p99_ms']:8.1f} ms")
print(f"wrote {report}")
PY
