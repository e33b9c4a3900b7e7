#!/usr/bin/env bash
# The service benchmarks of loadtest/README.md in one run: the server's own overhead on the null
# engine (64-token Classify calls at concurrency 1 and at saturation) and the CPU engine's
# requests/s on the MNLI-like mix, each against a dflash-server started here on 127.0.0.1.
# Reports land in bench/results/loadtest-*.json.
#
# Usage: bench/loadtest_server.sh [BUILD_DIR] [SECONDS]      (defaults: build, 30)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
seconds=${2:-30}
out=bench/results
port=50151
model_dir="$(cd "$build/demo-model" && pwd)"

source bench/server_health.sh
start_server() {  # start_server <backend>
  "$build/bin/dflash-server" --config=config/server.yaml --set="models.demo.path=$model_dir" \
    --listen=127.0.0.1:$port --metrics_listen=off --backend="$1" >"/tmp/dflash-bench-$1.log" 2>&1 &
  server_pid=$!
  wait_until_serving "$build/bin/dflash-cli" $port "$server_pid" "/tmp/dflash-bench-$1.log" ||
    exit 1
}
stop_server() { kill -TERM "$server_pid" && wait "$server_pid" || true; }
load() {  # load <report name> <loadtest args...>
  local name=$1
  shift
  echo "== $name"
  "$build/bin/dflash-loadtest" --target=127.0.0.1:$port --report="$out/$name.json" "$@" 2>/dev/null
}

start_server null
load loadtest-null-classify64-c1 --workload=loadtest/workloads/classify_64.json \
  --mode=closed --concurrency=1 --duration="${seconds}s" --warmup=3s
load loadtest-null-classify64-c64 --workload=loadtest/workloads/classify_64.json \
  --mode=closed --concurrency=64 --channels=4 --duration="${seconds}s" --warmup=3s
stop_server

start_server cpu
load loadtest-cpu-mnli-c32 --workload=loadtest/workloads/mnli_mix.json \
  --mode=closed --concurrency=32 --duration="$((2 * seconds))s" --warmup=10s
rate=$(python3 -c "import json; print(round(0.7 * json.load(open('$out/loadtest-cpu-mnli-c32.json'))['measured']['ok_rate_per_s'], 1))")
load loadtest-cpu-mnli-poisson --workload=loadtest/workloads/mnli_mix.json \
  --mode=poisson --rate="$rate" --duration="$((2 * seconds))s" --warmup=5s
stop_server
