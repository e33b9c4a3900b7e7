#!/usr/bin/env bash
# The reliability figures of the service under overload and over time, on one host, with the CPU
# engine (no GPU used): the server's capacity on the MNLI-like mix (closed loop), then a Poisson
# load at 2x that capacity with 5 s client deadlines against this build and, when given, an
# earlier build (goodput: answers received OK per second, and whether the server's counters equal
# what the clients received), then a soak at 70% of capacity (bench/soak_server.py). Reports land
# in OUT_DIR.
#
# Usage: bench/overload_on_host.sh BUILD_DIR OUT_DIR [EARLIER_SERVER_BINARY] [SOAK_MINUTES]
#   SOAK_MINUTES defaults to 8; 0 skips the soak (run bench/soak_server.py on its own).
#   EARLIER_CONFIG (environment): the earlier build's config/server.yaml (default: this one's;
#   an earlier build refuses keys it does not know).
#   BUILD_DIR holds bin/{dflash-server,dflash-cli,dflash-loadtest} and demo-model/ (or
#   bin/dflash-make-demo-model and spm.model to make it); run from the repository root.
set -euo pipefail
if [[ $# -lt 2 || ${1:-} == --help ]]; then sed -n 2,11p "$0" | sed 's/^# \{0,1\}//'; exit 2; fi
build=$(cd "$1" && pwd)
out=$2
earlier=${3:-}
soak_minutes=${4:-8}
mkdir -p "$out"
port=50181
metrics_port=50182
if [[ ! -d "$build/demo-model" ]]; then
  "$build/bin/dflash-make-demo-model" --out_dir="$build/demo-model" \
    --spm_model="$build/spm.model" > /dev/null
fi

source bench/server_health.sh
start_server() {  # start_server <binary> <log> [config]
  "$1" --config="${3:-config/server.yaml}" --set="models.demo.path=$build/demo-model" \
    --listen=127.0.0.1:$port --metrics_listen=127.0.0.1:$metrics_port --backend=cpu >"$2" 2>&1 &
  server_pid=$!
  wait_until_serving "$build/bin/dflash-cli" $port "$server_pid" "$2" || exit 1
}
stop_server() { kill -TERM "$server_pid" && wait "$server_pid" || true; }
counted_ok() {  # counted_ok <metrics file>: saves the exposition there, prints the OK answers.
  python3 - "$1" "$metrics_port" <<'PY'
import sys, urllib.request
text = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[2]}/metrics", timeout=10).read().decode()
open(sys.argv[1], "w").write(text)
print(int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line.startswith("dflash_requests_total{") and 'code="OK"' in line)))
PY
}
load() {  # load <report> <loadtest args...>
  local report=$1
  shift
  "$build/bin/dflash-loadtest" --target=127.0.0.1:$port --channels=4 \
    --workload=loadtest/workloads/mnli_mix.json --report="$out/$report.json" --progress=0 "$@" \
    > "$out/$report.txt" 2>&1
}
# Offers 2x the capacity for 60 s with 5 s deadlines; writes <tag>-overload.json and the server's
# OK count beside the clients'.
overload() {  # overload <server binary> <tag> <rate> [config]
  start_server "$1" "$out/server-$2.log" "${4:-}"
  load "$2-overload" --mode=poisson --rate="$3" --duration=60s --warmup=0s --timeout=5s
  sleep 2
  echo "{\"server_ok\": $(counted_ok "$out/$2-metrics.txt")}" > "$out/$2-overload-counted.json"
  stop_server
}

start_server "$build/bin/dflash-server" "$out/server-capacity.log"
load capacity --mode=closed --concurrency=64 --duration=20s --warmup=5s --timeout=30s
stop_server
capacity=$(python3 -c "import json; print(json.load(open('$out/capacity.json'))['measured']['ok_rate_per_s'])")
rate=$(python3 -c "print(round(2 * $capacity, 1))")
echo "capacity $capacity calls/s; overload at $rate calls/s"
overload "$build/bin/dflash-server" this "$rate"
if [[ -n "$earlier" ]]; then overload "$earlier" earlier "$rate" "${EARLIER_CONFIG:-}"; fi
if [[ "$soak_minutes" != 0 ]]; then
  python3 bench/soak_server.py --build="$build" --backend=cpu --minutes="$soak_minutes" \
    --fraction=0.7 --concurrency=64 --report="$out/soak.json" > "$out/soak.txt" 2>&1
fi
python3 - "$out" <<'EOF'
import json, os, sys
out = sys.argv[1]
def summary(tag):
    path = os.path.join(out, f"{tag}-overload.json")
    if not os.path.exists(path):
        return None
    run = json.load(open(path))
    counted = json.load(open(os.path.join(out, f"{tag}-overload-counted.json")))["server_ok"]
    m = run["measured"]
    server = {}
    for line in open(os.path.join(out, f"{tag}-metrics.txt")):
        if line.startswith("#") or " " not in line:
            continue
        name, value = line.rsplit(" ", 1)
        family = name.split("{", 1)[0]
        if family in ("dflash_requests_total", "dflash_dropped_requests_total"):
            code = name.split('code="', 1)[1].split('"', 1)[0]
            key = f"{family}:{code}"
        elif family in ("dflash_tokens_total", "dflash_batches_total",
                        "dflash_batch_duration_seconds_sum"):
            key = family
        else:
            continue
        server[key] = server.get(key, 0) + float(value)
    return {"server": server,"offered_per_s": m["offered_rate_per_s"], "ok_per_s": m["ok_rate_per_s"],
            "ok": m["ok"], "errors_by_code": m.get("errors_by_code", {}),
            "ok_p99_ms": run["latency_ms"].get("p99"), "server_counted_ok": counted,
            "server_counted_ok_equals_clients": counted == m["ok"] + run["warmup"]["ok"]}
capacity = json.load(open(os.path.join(out, "capacity.json")))["measured"]["ok_rate_per_s"]
result = {"capacity_per_s": capacity, "this": summary("this"), "earlier": summary("earlier")}
if os.path.exists(os.path.join(out, "soak.json")):
    soak = json.load(open(os.path.join(out, "soak.json")))
    result["soak"] = {k: soak[k] for k in ("offered_calls_per_s", "minutes", "p99_drift",
                                           "errors", "counters")}
    result["soak"]["rss_mib"] = {k: v for k, v in soak["rss_mib"].items() if k != "samples"}
json.dump(result, open(os.path.join(out, "summary.json"), "w"), indent=1)
print(json.dumps(result, indent=1))
EOF
