#!/usr/bin/env bash
# The HTTP/JSON front's cost against gRPC on the null engine (the server's own overhead): the same
# workload (loadtest/workloads/classify_64.json, same seed, so the same texts: one 64-token text
# per call), closed loop at concurrency 1 (latency) and 16 (throughput), both driven by
# dflash-loadtest: --protocol=dflash over gRPC and --protocol=http (POST /predict over HTTP/1.1
# keep-alive, one connection per worker) against one dflash-server started here on 127.0.0.1.
# Rounds alternate the protocols so that a change of the machine's load hits both. Writes the
# figures, their ratios and the load average to OUT (JSON).
#
# Usage: bench/http_vs_grpc.sh [BUILD_DIR] [SECONDS] [ROUNDS] [OUT]
#   defaults: build, 15, 3, bench/results/http-vs-grpc-null.json.
#   BUILD_DIR holds bin/{dflash-server,dflash-cli,dflash-loadtest} and demo-model/.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
seconds=${2:-15}
rounds=${3:-3}
out=${4:-bench/results/http-vs-grpc-null.json}
port=50161
http_port=50162
model_dir="$(cd "$build/demo-model" && pwd)"
work=$(mktemp -d)
trap 'kill -TERM "$server_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
source bench/server_health.sh

"$build/bin/dflash-server" --config=config/server.yaml \
  --set="models.demo.path=$model_dir,server.http_listen=127.0.0.1:$http_port" \
  --listen=127.0.0.1:$port --metrics_listen=off --backend=null >"$work/server.log" 2>&1 &
server_pid=$!
wait_until_serving "$build/bin/dflash-cli" $port "$server_pid" "$work/server.log"

common=(--workload=loadtest/workloads/classify_64.json --mode=closed --duration="${seconds}s"
        --warmup=3s --progress=0)
cat /proc/loadavg >"$work/loadavg-start"
for round in $(seq 1 "$rounds"); do
  for concurrency in 1 16; do
    echo "== round $round, concurrency $concurrency"
    "$build/bin/dflash-loadtest" "${common[@]}" --target=127.0.0.1:$port --protocol=dflash \
      --concurrency=$concurrency --channels=$((concurrency < 4 ? 1 : 4)) \
      --report="$work/grpc-c$concurrency-$round.json" >/dev/null
    "$build/bin/dflash-loadtest" "${common[@]}" --target=127.0.0.1:$http_port --protocol=http \
      --concurrency=$concurrency --report="$work/http-c$concurrency-$round.json" >/dev/null
  done
done
cat /proc/loadavg >"$work/loadavg-end"

python3 - "$work" "$out" "$seconds" "$rounds" "$(nproc)" "$*" <<'PY'
import json, statistics, sys
work, out, seconds, rounds, cores, args = sys.argv[1:7]
seconds, rounds = int(seconds), int(rounds)

def figures(name):
    report = json.load(open(f"{work}/{name}.json"))
    return {"ok_per_s": round(report["measured"]["ok_rate_per_s"], 1),
            "p50_ms": report["latency_ms"]["p50"], "p99_ms": report["latency_ms"]["p99"],
            "errors": report["measured"]["errors"],
            "errors_by_code": report["measured"]["errors_by_code"]}

result = {
    "tool": "bench/http_vs_grpc.sh",
    "command": f"bench/http_vs_grpc.sh {args}".strip(),
    "generator": "dflash-loadtest for both: --protocol=dflash (gRPC, 1 channel at c1, 4 at c16) "
                 "and --protocol=http (POST /predict, one keep-alive connection per worker)",
    "engine": "null", "seconds_per_run": seconds, "warmup_s": 3, "rounds": rounds,
    "cores": int(cores),
    "workload": "loadtest/workloads/classify_64.json: one 64-token text per call, same seed",
    "load_average_before": open(f"{work}/loadavg-start").read().split()[:3],
    "load_average_after": open(f"{work}/loadavg-end").read().split()[:3],
    "runs": {}}
for concurrency in (1, 16):
    per_round = []
    for r in range(1, rounds + 1):
        grpc, http = figures(f"grpc-c{concurrency}-{r}"), figures(f"http-c{concurrency}-{r}")
        per_round.append({"round": r, "grpc": grpc, "http": http,
                          "http_over_grpc_throughput": round(http["ok_per_s"] / grpc["ok_per_s"], 3),
                          "http_minus_grpc_p50_ms": round(http["p50_ms"] - grpc["p50_ms"], 4)})
    grpc_rate = sum(x["grpc"]["ok_per_s"] for x in per_round)
    http_rate = sum(x["http"]["ok_per_s"] for x in per_round)
    result["runs"][f"c{concurrency}"] = {
        "rounds": per_round,
        "http_over_grpc_throughput": round(http_rate / grpc_rate, 3),
        "http_minus_grpc_p50_ms_median": round(
            statistics.median(x["http_minus_grpc_p50_ms"] for x in per_round), 4)}
json.dump(result, open(out, "w"), indent=2)
print(json.dumps({k: {"throughput_ratio": v["http_over_grpc_throughput"],
                      "p50_diff_ms": v["http_minus_grpc_p50_ms_median"]}
                  for k, v in result["runs"].items()}, indent=2))
PY
