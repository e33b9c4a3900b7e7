#!/usr/bin/env bash
# KServe v2 ModelInfer against dflash.v1 Classify on the null engine: the same workload
# (loadtest/workloads/classify_64.json, same seed, so the same texts), closed loop, through
# dflash-loadtest --protocol=kserve|dflash against one server. Rounds alternate the protocols so
# that a change of the machine's load hits both. Writes the reports and a summary with the ratio
# (kserve calls/s over dflash calls/s, per round and overall) to bench/results/kserve-vs-dflash/.
#
# Usage: bench/kserve_vs_dflash.sh [build dir] [seconds per run] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
seconds=${2:-20}
rounds=${3:-3}
out=bench/results/kserve-vs-dflash
port=50161
mkdir -p "$out"
model_dir="$(cd "$build/demo-model" && pwd)"

"$build/bin/dflash-server" --config=config/server.yaml --set="models.demo.path=$model_dir" \
  --listen=127.0.0.1:$port --metrics_listen=off --backend=null >"$out/server.log" 2>&1 &
server_pid=$!
trap 'kill -TERM "$server_pid" 2>/dev/null; wait "$server_pid" || true' EXIT
source bench/server_health.sh
wait_until_serving "$build/bin/dflash-cli" $port "$server_pid" "$out/server.log"

command=(--target=127.0.0.1:$port --workload=loadtest/workloads/classify_64.json --mode=closed
         --concurrency=64 --channels=4 --duration="${seconds}s" --warmup=3s --progress=0)
for round in $(seq 1 "$rounds"); do
  for protocol in dflash kserve; do
    "$build/bin/dflash-loadtest" "${command[@]}" --protocol=$protocol \
      --report="$out/$protocol-$round.json" > /dev/null
  done
done

python3 - "$out" "$rounds" "$build/bin/dflash-loadtest ${command[*]} --protocol=<dflash|kserve>" \
  <<'PY'
import json, sys
out, rounds, command = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def rate(protocol, r):
    report = json.load(open(f"{out}/{protocol}-{r}.json"))
    return report["measured"]["ok_rate_per_s"], report["measured"].get("errors", 0)
per_round = []
for r in range(1, rounds + 1):
    (d, d_err), (k, k_err) = rate("dflash", r), rate("kserve", r)
    per_round.append({"round": r, "dflash_classify_ok_per_s": d, "kserve_modelinfer_ok_per_s": k,
                      "ratio": round(k / d, 4), "errors": {"dflash": d_err, "kserve": k_err}})
dflash = sum(x["dflash_classify_ok_per_s"] for x in per_round)
kserve = sum(x["kserve_modelinfer_ok_per_s"] for x in per_round)
summary = {"command": command, "engine": "null", "workload": "loadtest/workloads/classify_64.json",
           "rounds": per_round, "ratio_overall": round(kserve / dflash, 4)}
json.dump(summary, open(f"{out}/summary.json", "w"), indent=2)
print(json.dumps(summary, indent=2))
PY
