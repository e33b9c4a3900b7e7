#!/usr/bin/env bash
# One engine against two behind the model's one queue, without GPUs: dflash-server with
# `backend: "null"` and `devices: [0]` or `[0, 1]` (one stand-in engine per entry), every batch
# sleeping ENGINE_DELAY (a stand-in for the device's time per batch, which uses no host CPU), under
# closed-loop dflash-loadtest at each concurrency, for classify_64 and the MNLI mix. Reports
# calls/s, p50 / p99 and the two-engine over one-engine ratio per workload and concurrency: the scheduler's
# sharing of one queue by several runners on the current build, the CPU-side counterpart of the
# two-GPU service run (bench/engine/run_on_gpu.sh --two-gpus).
#
# Usage: bench/engines_null_cpu.sh [BUILD_DIR] [SECONDS] [REPORT]
#   defaults: build, 10, bench/results/engines-null-2core.json. Environment: ENGINE_DELAY (20ms;
#   "1ms+2us/token" adds a time per token of the batch), CONCURRENCIES ("64 256"), SERVER_CORES (0)
#   and LOAD_CORES (1): taskset lists; WORKLOADS ("classify_64 mnli_mix": names in
#   loadtest/workloads/); SERVER (BUILD_DIR/bin/dflash-server): another build's server, its
#   sentencepiece shim in lib/ beside its bin/.
set -euo pipefail
if [[ "${1:-}" == "--help" ]]; then sed -n 2,15p "$0"; exit 0; fi
cd "$(dirname "$0")/.."
build=${1:-build}
seconds=${2:-10}
report=${3:-bench/results/engines-null-2core.json}
delay=${ENGINE_DELAY:-20ms}
concurrencies=${CONCURRENCIES:-"64 256"}
workloads=${WORKLOADS:-"classify_64 mnli_mix"}
server_cores=${SERVER_CORES:-0}
load_cores=${LOAD_CORES:-1}
server=${SERVER:-$build/bin/dflash-server}
port=50163
model_dir="$(cd "$build/demo-model" && pwd)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source bench/server_health.sh

for engines in 1 2; do
  # One --set per device (an index one past the list's end appends): flags split values at commas.
  devices=()
  for ((d = 0; d < engines; ++d)); do devices+=(--set="models.demo.devices.$d=$d"); done
  DFLASH_TEST_NULL_ENGINE_DELAY="$delay" taskset -c "$server_cores" "$server" \
    --config=config/server.yaml --set="models.demo.path=$model_dir" "${devices[@]}" \
    --listen=127.0.0.1:$port --metrics_listen=off --backend=null \
    > "$work/server-$engines.log" 2>&1 &
  pid=$!
  wait_until_serving "$build/bin/dflash-cli" $port "$pid" "$work/server-$engines.log" || exit 1
  for workload in $workloads; do
    for concurrency in $concurrencies; do
      name="$workload-c$concurrency-engines$engines"
      taskset -c "$load_cores" "$build/bin/dflash-loadtest" --target=127.0.0.1:$port \
        --workload="loadtest/workloads/$workload.json" --mode=closed \
        --concurrency="$concurrency" --channels=4 --duration="${seconds}s" --warmup=2s \
        --progress=0 --report="$work/$name.json" > /dev/null 2>&1
      python3 -c "
import json; r = json.load(open('$work/$name.json'))
print('$name: %.0f calls/s, p50 %.2f ms, p99 %.2f ms, %d errors' % (r['measured']['ok_rate_per_s'],
      r['latency_ms']['p50'], r['latency_ms']['p99'], r['measured']['errors']))"
    done
  done
  kill -TERM "$pid" && wait "$pid" || true
done

python3 - "$work" "$report" "$delay" "$concurrencies" "$seconds" "$server_cores" "$load_cores" \
  "$workloads" "$server" <<'EOF'
import datetime, json, os, sys
work, report, delay, concurrencies, seconds, server_cores, load_cores, workloads, server = \
    sys.argv[1:]
rows = []
for workload in workloads.split():
    for concurrency in concurrencies.split():
        row = {"workload": workload, "concurrency": int(concurrency)}
        for engines in (1, 2):
            r = json.load(open(f"{work}/{workload}-c{concurrency}-engines{engines}.json"))
            row[f"engines{engines}"] = {
                "ok_per_s": round(r["measured"]["ok_rate_per_s"], 1),
                "p50_ms": r["latency_ms"]["p50"], "p99_ms": r["latency_ms"]["p99"],
                "errors": r["measured"]["errors"]}
        one, two = row["engines1"]["ok_per_s"], row["engines2"]["ok_per_s"]
        row["two_over_one"] = round(two / one, 3) if one else None
        rows.append(row)
result = {
    "description": "dflash-server with the null engine, devices [0] (one engine) and [0, 1] (two "
                   "stand-in engines behind one queue); every batch sleeps the engine delay, a "
                   "stand-in for device time; closed-loop dflash-loadtest, 4 channels.",
    "engine_delay": delay, "seconds_per_run": int(seconds), "server_cores": server_cores,
    "load_generator_cores": load_cores, "server": server,
    "machine": f"{os.cpu_count()}-core x86-64",
    "date": datetime.date.today().isoformat(),
    "command": f"ENGINE_DELAY={delay} CONCURRENCIES=\"{concurrencies}\" "
               f"WORKLOADS=\"{workloads}\" bash bench/engines_null_cpu.sh BUILD_DIR {seconds} "
               f"{report}",
    "rows": rows}
with open(report, "w") as f:
    json.dump(result, f, indent=1)
    f.write("\n")
for row in rows:
    print(f"{row['workload']} c{row['concurrency']}: two engines / one = {row['two_over_one']}")
print(f"wrote {report}")
EOF
