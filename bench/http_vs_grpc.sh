#!/usr/bin/env bash
# The HTTP/JSON front's cost against gRPC on the null engine (the server's own overhead): the same
# 64-token single-text classification, closed loop at concurrency 1 (latency) and 16
# (throughput), over gRPC with dflash-loadtest (loadtest/workloads/classify_64.json) and over
# HTTP/1.1 keep-alive with wrk (POST /predict, 48 words of config/demo/corpus.txt: 62 text
# tokens + [CLS] and [SEP], as the workload's texts), against one dflash-server started here on
# 127.0.0.1. Writes the figures and their ratios to OUT (JSON).
#
# Usage: bench/http_vs_grpc.sh [BUILD_DIR] [SECONDS] [OUT]
#   defaults: build, 20, bench/results/http-vs-grpc-null.json. Needs wrk (apt-get install wrk).
#   BUILD_DIR holds bin/{dflash-server,dflash-cli,dflash-loadtest} and demo-model/.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
seconds=${2:-20}
out=${3:-bench/results/http-vs-grpc-null.json}
port=50161
http_port=50162
model_dir="$(cd "$build/demo-model" && pwd)"
work=$(mktemp -d)
trap 'kill -TERM "$server_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install wrk" >&2; exit 2; }

"$build/bin/dflash-server" --config=config/server.yaml \
  --set="models.demo.path=$model_dir,server.http_listen=127.0.0.1:$http_port" \
  --listen=127.0.0.1:$port --metrics_listen=off --backend=null >"$work/server.log" 2>&1 &
server_pid=$!
healthy=0
for _ in $(seq 1 240); do
  if "$build/bin/dflash-cli" --target=127.0.0.1:$port health >/dev/null 2>&1; then
    healthy=1
    break
  fi
  sleep 0.5
done
if [[ $healthy -ne 1 ]]; then
  cat "$work/server.log" >&2
  echo "the server did not become healthy" >&2
  exit 1
fi

text=$(tr -s ' \n' ' ' <config/demo/corpus.txt | cut -d' ' -f1-48 | sed 's/"/\\"/g')
cat >"$work/predict.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"inputs": "$text"}'
LUA

for concurrency in 1 16; do
  echo "== gRPC, concurrency $concurrency"
  "$build/bin/dflash-loadtest" --target=127.0.0.1:$port --workload=loadtest/workloads/classify_64.json \
    --mode=closed --concurrency=$concurrency --channels=$((concurrency < 4 ? 1 : 4)) \
    --duration="${seconds}s" --warmup=3s --report="$work/grpc-c$concurrency.json" >/dev/null 2>&1
  echo "== HTTP, concurrency $concurrency"
  wrk -t1 -c$concurrency -d3s -s "$work/predict.lua" "http://127.0.0.1:$http_port/predict" \
    >/dev/null  # warm-up
  wrk -t1 -c$concurrency -d"${seconds}s" --latency -s "$work/predict.lua" \
    "http://127.0.0.1:$http_port/predict" >"$work/http-c$concurrency.txt"
done

python3 - "$work" "$out" "$seconds" "$(nproc)" "$@" <<'PY'
import json, re, sys
work, out, seconds, cores = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

def millis(value, unit):
    return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]

result = {"tool": "bench/http_vs_grpc.sh", "command": " ".join(["bench/http_vs_grpc.sh"] + sys.argv[5:]),
          "engine": "null", "seconds": seconds, "cores": cores,
          "workload": "classify_64: one 64-token text per call; HTTP: POST /predict", "runs": {}}
for concurrency in (1, 16):
    grpc = json.load(open(f"{work}/grpc-c{concurrency}.json"))
    text = open(f"{work}/http-c{concurrency}.txt").read()
    p50 = re.search(r"50%\s+([\d.]+)(us|ms|s)\b", text)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    http = {"ok_per_s": rps, "p50_ms": millis(*p50.groups()),
            "non_2xx": int(errors.group(1)) if errors else 0}
    grpc_run = {"ok_per_s": grpc["measured"]["ok_rate_per_s"], "p50_ms": grpc["latency_ms"]["p50"],
                "errors": grpc["measured"]["errors"]}
    result["runs"][f"c{concurrency}"] = {
        "grpc": grpc_run, "http": http,
        "http_over_grpc_throughput": http["ok_per_s"] / grpc_run["ok_per_s"],
        "http_minus_grpc_p50_ms": http["p50_ms"] - grpc_run["p50_ms"]}
json.dump(result, open(out, "w"), indent=2)
print(json.dumps(result, indent=2))
PY
