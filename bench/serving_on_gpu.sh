#!/usr/bin/env bash
# The served path on one GPU against the engine alone, and the MNLI mix through every protocol
# (docs/gpu.md). On a v3-base-shaped random model in float16:
#   engine     dflash-bench-engine on the MNLI-like set: the engine's offline tokens/s
#   serving    dflash-server (backend cuda) pinned to cores 0-11, dflash-loadtest to 12-15:
#              concurrency-1 p50, closed-loop throughput at concurrency 256 and 512, then an
#              open-loop Poisson sweep for the highest rate whose p99 <= 50 ms with no errors and
#              the schedule kept, sent by one dflash-loadtest thread per load core (--senders: a
#              single sender could not send much beyond 38,000 calls/s); the server's CPU
#              microseconds per call in every run
#   protocols  the MNLI mix at concurrency 256 through dflash.v1 Classify, HTTP POST /predict
#              and KServe ModelInfer against the same server
# Several server binaries (e.g. before and after a change) run the same sections in one call:
# --server=LABEL=PATH, repeated. Reports land in $OUT (default /tmp/out); serving_results.py
# joins them into the results of record (bench/results/<gpu>-serving.json, <gpu>-protocols.json,
# <gpu> being h200 or h100).
#
# Build machine: scripts/collect-runtime.sh .carry build/bin/{dflash-server,dflash-cli,\
#   dflash-loadtest,dflash-bench-engine,dflash-make-demo-model} build/lib/libdflash_sentencepiece_shim.so
#   and cp build/demo-model/spm.model .carry/   (docs/gpu.md: strip, pack, carry)
# Usage (GPU host): bash bench/serving_on_gpu.sh [--server=LABEL=PATH ...] [--sections=LIST]
#   sections: engine,serving,protocols (default all). Environment: SECONDS_PER_RUN (8),
#   SERVER_CORES (0-11), LOAD_CORES (12-15), CHANNELS (the load generator's gRPC connections, 8),
#   BACKEND (cuda; null for a smoke run without a GPU),
#   POISSON_FRACTIONS (the open-loop rates as fractions of the best closed-loop rate;
#   default "0.5 0.7 0.8 0.9 1.0 1.1"), HOST_THREADS (the model's batching.host_threads: the host
#   threads that pack batches and send answers; default 0, two per engine; several values, e.g.
#   "2 4 8", run every server once per value, labelled LABEL-ht<N>), MAX_BATCH_SEQUENCES (the
#   model's batching.max_batch_sequences; default: the server's; several values run every server
#   once per value, labelled LABEL-bs<N>)
set -uo pipefail
if [[ "${1:-}" == "--help" ]]; then sed -n 2,30p "$0"; exit 0; fi
servers=(); sections=engine,serving,protocols
for arg in "$@"; do
  case "$arg" in
    --server=*=*) servers+=("${arg#--server=}") ;;
    --sections=*) sections=${arg#--sections=} ;;
    *) echo "unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done
(( ${#servers[@]} )) || servers=("current=.carry/bin/dflash-server")
[[ -d .carry ]] || tar -xJf .carrypack/carry.tar.xz
export LD_LIBRARY_PATH="$PWD/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp/out}
work=/tmp/dfs
seconds=${SECONDS_PER_RUN:-8}
mkdir -p "$out" "$work"
server_cores=${SERVER_CORES:-0-11}; load_cores=${LOAD_CORES:-12-15}; channels=${CHANNELS:-8}
load_senders=$(taskset -c "$load_cores" nproc 2> /dev/null || echo auto)  # One per load core.
port=50171; http_port=50172; metrics_port=9574
has() { [[ ",$sections," == *",$1,"* ]]; }

echo "== model and pairs"
[[ -f $work/models/v3-base/model.safetensors ]] || python3 bench/engine/make_random_models.py \
  --out "$work/models" --shapes v3-base --num-labels 3 --seed 0 \
  --device "$(nvidia-smi > /dev/null 2>&1 && echo cuda || echo cpu)" 2>&1 | tail -2
cp .carry/spm.model "$work/models/v3-base/spm.model"
[[ -s $work/mnli_like.jsonl ]] || python3 bench/engine/mnli_like_pairs.py \
  --out "$work/mnli_like.jsonl" 2>&1 | tail -1

if has engine; then
  echo "== the engine alone (MNLI-like set, fp16)"
  .carry/bin/dflash-bench-engine --model="$work/models/v3-base" --pairs="$work/mnli_like.jsonl" \
    --dtype=fp16 --long_sequences=false --parity_count=0 --parity_hidden_count=0 \
    --json="$out/engine.json" 2>&1 | grep -E "MNLI|tokens/s" | head -6
fi

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

source bench/thread_cpu.sh
source bench/server_health.sh

# The batch counters of the server's metrics: batches, tokens and the time of each stage.
batch_metrics() {
  curl -s 127.0.0.1:$metrics_port/metrics | grep -E "^dflash_batch_(stage_seconds|tokens)_(sum|count)"
}

# load <label> <name> <loadtest args...>: one pinned dflash-loadtest run; its report gets the
# server's CPU time over the run (clock ticks) in $out/<label>-<name>.cpu, per thread
# (thread_cpu.sh snapshots, the run's wall seconds) in $out/<label>-<name>.threads-*, and the
# batch counters before and after in $out/<label>-<name>.metrics-*.
load() {
  local label=$1 name=$2
  shift 2
  local before after start
  batch_metrics > "$out/$label-$name.metrics-before"
  before=$(cpu_ticks "$server_pid")
  thread_ticks "$server_pid" > "$out/$label-$name.threads-before"
  start=$(date +%s.%N)
  taskset -c "$load_cores" .carry/bin/dflash-loadtest --workload=loadtest/workloads/mnli_mix.json \
    --corpus=config/demo/corpus.txt --duration="${seconds}s" --warmup=2s --progress=0 \
    --report="$out/$label-$name.json" "$@" 2>&1 | grep -E "^per second|^ok |WARNING" | head -4
  after=$(cpu_ticks "$server_pid")
  thread_ticks "$server_pid" > "$out/$label-$name.threads-after"
  python3 -c "print($(date +%s.%N) - $start)" > "$out/$label-$name.threads-wall"
  batch_metrics > "$out/$label-$name.metrics-after"
  echo "$before $after $(getconf CLK_TCK)" > "$out/$label-$name.cpu"
}

read -r -a host_threads_values <<< "${HOST_THREADS:-0}"
read -r -a batch_sequences_values <<< "${MAX_BATCH_SEQUENCES:-default}"
runs=()  # LABEL=PATH=HOST_THREADS=MAX_BATCH_SEQUENCES
for entry in "${servers[@]}"; do
  for threads in "${host_threads_values[@]}"; do
    for sequences in "${batch_sequences_values[@]}"; do
      label=${entry%%=*}
      (( ${#host_threads_values[@]} > 1 )) && label+="-ht$threads"
      (( ${#batch_sequences_values[@]} > 1 )) && label+="-bs$sequences"
      runs+=("$label=${entry#*=}=$threads=$sequences")
    done
  done
done
for run in "${runs[@]}"; do
  IFS='=' read -r label binary host_threads batch_sequences <<< "$run"
  cat > "$work/server.yaml" <<YAML
server:
  listen: 127.0.0.1:$port
  metrics_listen: 127.0.0.1:$metrics_port
  http_listen: 127.0.0.1:$http_port
models:
  - name: demo
    path: $work/models/v3-base
    backend: "${BACKEND:-cuda}"
    dtype: float16
    devices: [0]
    batching:
      host_threads: $host_threads
YAML
  [[ $batch_sequences == default ]] || \
    echo "      max_batch_sequences: $batch_sequences" >> "$work/server.yaml"
  echo "== server $label ($binary)"
  start=$SECONDS
  DFLASH_SENTENCEPIECE_SHIM="$PWD/.carry/lib/libdflash_sentencepiece_shim.so" \
    taskset -c "$server_cores" "$binary" --config="$work/server.yaml" \
    > "$out/server-$label.log" 2>&1 &
  server_pid=$!
  wait_until_serving .carry/bin/dflash-cli $port "$server_pid" "$out/server-$label.log" || continue
  echo "serving after $((SECONDS - start)) s"
  if has serving; then
    load "$label" c1 --target=127.0.0.1:$port --mode=closed --concurrency=1
    for c in 256 512; do
      load "$label" "c$c" --target=127.0.0.1:$port --mode=closed --concurrency=$c --channels="$channels"
    done
    best=$(python3 -c "import json,sys; print(max(json.load(open(f'$out/$label-c{c}.json'))['measured']['ok_rate_per_s'] for c in (256, 512)))")
    for fraction in ${POISSON_FRACTIONS:-0.5 0.7 0.8 0.9 1.0 1.1}; do
      rate=$(python3 -c "print(round($best * $fraction))")
      load "$label" "poisson-$rate" --target=127.0.0.1:$port --mode=poisson --rate="$rate" \
        --channels="$channels" --max_in_flight=20000 --senders="$load_senders"
    done
  fi
  if has protocols; then
    load "$label" proto-dflash --target=127.0.0.1:$port --protocol=dflash --mode=closed \
      --concurrency=256 --channels="$channels"
    load "$label" proto-http --target=127.0.0.1:$http_port --protocol=http --mode=closed \
      --concurrency=256
    load "$label" proto-kserve --target=127.0.0.1:$port --protocol=kserve --mode=closed \
      --concurrency=256 --channels="$channels"
  fi
  curl -s 127.0.0.1:$metrics_port/metrics | grep -E "^dflash_(batch|batches_total|requests_total)" \
    > "$out/metrics-$label.txt"
  kill -TERM "$server_pid"; wait "$server_pid"; echo "server exit $?"
done
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | head -1)
python3 bench/serving_results.py --dir "$out" --gpu "${gpu:-none}" --server-cores "$server_cores" \
  --load-cores "$load_cores" --command "SECONDS_PER_RUN=$seconds CHANNELS=$channels POISSON_FRACTIONS=\"${POISSON_FRACTIONS:-0.5 0.7 0.8 0.9 1.0 1.1}\" HOST_THREADS=\"${HOST_THREADS:-0}\" MAX_BATCH_SEQUENCES=\"${MAX_BATCH_SEQUENCES:-default}\" bash bench/serving_on_gpu.sh $*"
# Everything but the results of record travels back as one archive ($OUT returns few files).
(cd "$out" && tar -czf /tmp/serving_reports.tgz --exclude='*-serving.json' --exclude='*-protocols.json' . && \
  find . -maxdepth 1 -type f ! -name '*-serving.json' ! -name '*-protocols.json' -delete && mv /tmp/serving_reports.tgz .)
echo "results: $out"
