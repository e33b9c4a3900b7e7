#!/usr/bin/env bash
# Where the server's CPU goes per call on the null engine (the host path alone: gRPC, parsing,
# tokenization, queueing, packing, answering; no model time): for each server binary and each
# closed-loop concurrency, dflash-loadtest drives MNLI-like Classify calls (about 45 tokens each)
# against a fresh dflash-server on 127.0.0.1, and the server's CPU time is read from
# /proc/<pid>/stat (utime + stime) and per thread from /proc/<pid>/task/*/stat around the measured
# run. Prints calls/s, p50/p99 latency, server CPU microseconds per call, the CPU per call of each
# thread name (the batcher names its threads dflash-runner and dflash-host) and how busy the
# busiest single thread was (near 1.0: a serial section caps the rate). Writes a JSON report.
#
# Usage: bench/host_path_cpu.sh [BUILD_DIR] [SECONDS] [REPORT] [LABEL=SERVER_BINARY ...]
#   defaults: build, 10, bench/results/host-path-null-2core.json, now=BUILD_DIR/bin/dflash-server
# Several LABEL=BINARY pairs (e.g. before=/tmp/old/dflash-server after=build/bin/dflash-server)
# compare server builds in one run, on the same load generator and machine. Environment:
# CONCURRENCIES (default "1 16 64"); ENGINE_DELAY (e.g. 1ms: every null-engine batch sleeps that
# long without using CPU, a stand-in for a device whose Run waits on the GPU, so that host work
# can overlap it; default none).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
seconds=${2:-10}
report=${3:-bench/results/host-path-null-2core.json}
shift $(($# < 3 ? $# : 3))
servers=("$@")
[ ${#servers[@]} -gt 0 ] || servers=("now=$build/bin/dflash-server")
concurrencies=${CONCURRENCIES:-"1 16 64"}
engine_delay=${ENGINE_DELAY:-}
port=50161
model_dir="$(cd "$build/demo-model" && pwd)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

source bench/thread_cpu.sh
source bench/server_health.sh

runs=()
for entry in "${servers[@]}"; do
  label=${entry%%=*}
  binary=${entry#*=}
  for concurrency in $concurrencies; do
    DFLASH_TEST_NULL_ENGINE_DELAY="$engine_delay" "$binary" --config=config/server.yaml --set="models.demo.path=$model_dir" \
      --listen=127.0.0.1:$port --metrics_listen=off --backend=null >"$work/server.log" 2>&1 &
    pid=$!
    wait_until_serving "$build/bin/dflash-cli" $port "$pid" "$work/server.log" || exit 1
    load=("$build/bin/dflash-loadtest" --target=127.0.0.1:$port
      --workload=loadtest/workloads/mnli_mix.json --mode=closed --concurrency="$concurrency"
      --channels=$((concurrency >= 16 ? 4 : 1)) --progress=0)
    "${load[@]}" --duration=2s --warmup=0s >/dev/null 2>&1  # Warm the server's caches and pools.
    thread_ticks "$pid" >"$work/before.txt"
    start=$(date +%s.%N)
    "${load[@]}" --duration="${seconds}s" --warmup=0s --report="$work/load.json" >/dev/null 2>&1
    end=$(date +%s.%N)
    thread_ticks "$pid" >"$work/after.txt"
    kill -TERM "$pid" && wait "$pid" || true
    run=$(python3 - "$work" "$label" "$concurrency" "$start" "$end" <<'EOF'
import json, sys
sys.path.insert(0, "bench")
import thread_cpu
work, label, concurrency, start, end = sys.argv[1:]
wall = float(end) - float(start)
load = json.load(open(f"{work}/load.json"))
calls = load["measured"]["completed"]
threads = thread_cpu.summary(thread_cpu.read(f"{work}/before.txt"),
                             thread_cpu.read(f"{work}/after.txt"), wall, calls,
                             thread_cpu.CLOCK_TICKS_PER_SECOND)
print(json.dumps(dict({
    "server": label, "concurrency": int(concurrency), "calls": calls,
    "errors": load["measured"]["errors"],
    "calls_per_s": round(calls / wall, 1),
    "p50_ms": round(load["latency_ms"]["p50"], 3), "p99_ms": round(load["latency_ms"]["p99"], 3),
}, **threads)))
EOF
    )
    echo "$run"
    runs+=("$run")
  done
done
python3 - "$report" "$seconds" "$engine_delay" "${runs[@]}" <<'EOF'
import json, os, sys
report, seconds, delay = sys.argv[1], sys.argv[2], sys.argv[3]
runs = [json.loads(r) for r in sys.argv[4:]]
json.dump({
    "tool": "bench/host_path_cpu.sh",
    "machine": f"{os.cpu_count()} cores (load generator on the same cores)",
    "backend": "null", "engine_delay": delay or "0",
    "workload": "loadtest/workloads/mnli_mix.json", "mode": "closed",
    "seconds_per_run": float(seconds), "runs": runs,
}, open(report, "w"), indent=2)
open(report, "a").write("\n")
print(f"{'server':>8} {'conc':>5} {'calls/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'cpu us/call':>11}"
      f" {'busiest thread':>22}")
for r in runs:
    print(f"{r['server']:>8} {r['concurrency']:>5} {r['calls_per_s']:>9} {r['p50_ms']:>8}"
          f" {r['p99_ms']:>8} {r['server_cpu_us_per_call']:>11}"
          f" {r['busiest_thread'] + ' ' + str(r['busiest_thread_busy_fraction']):>22}")
print(f"report: {report}")
EOF
