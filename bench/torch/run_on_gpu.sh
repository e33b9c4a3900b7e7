#!/usr/bin/env bash
# The PyTorch package's GPU run (python/, docs in python/README.md): install dflash_torch on the
# GPU host (built from source by pip where nvcc exists, else the carried wheel), its tests, the
# Hub layout check, parity on v3-base / v3-large / v2-xlarge-shaped random models, the MNLI-like
# decision parity, and the speed benchmark against stock transformers and the Triton peers.
# Results collect in /tmp/dft/results and are copied into $OUT (default /tmp/out) by every call,
# so the sections can run in separate calls of a warm host; `results` joins them into
# h200-torch.json (bench/results/h200-torch.json is its committed copy).
#
# Build machine, once: bash bench/torch/fetch_wheels.sh [--prebuilt]; for cxx_ms also
#   scripts/collect-runtime.sh .carry build/bin/dflash-bench-attention
# GPU host: bash bench/torch/run_on_gpu.sh [SECTION...]
#   sections: install tests hub parity decisions speed results   (default: all, in this order)
#   QUICK=1 shortens everything (smoke run: 256 pairs, one parity shape, few repeats)
#   INSTALL=wheel installs the carried prebuilt wheel even where the host could build from source
#   SPEED_ARGS: more speed.py arguments, e.g. "--skip-e2e --skip-compile" for the op rows alone
#   SPEED_TAG: names this speed section's files speed-TAG.json / .log, so that a run split over
#     device calls keeps each part; `results` joins every speed*.json
set -uo pipefail
if [[ "${1:-}" == "--help" ]]; then sed -n 2,18p "$0"; exit 0; fi
sections=("$@")
(( ${#sections[@]} )) || sections=(install tests hub parity decisions speed results)
root=$(pwd)
work=/tmp/dft
results=$work/results
site=$work/site
out=${OUT:-/tmp/out}
mkdir -p "$work" "$results" "$out"
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$results/gpu.txt"
quick=${QUICK:-0}
pairs_count=9815; parity_shapes="v3-base v3-large v2-xlarge"; repeats=2; op_repeats=30
if (( quick )); then pairs_count=256; parity_shapes="v3-base"; repeats=1; op_repeats=5; fi

section_install() {
  if python3 -c "import dflash_torch, sys; sys.exit(not dflash_torch.kernel_available())" \
      2> /dev/null; then
    echo "dflash_torch already installed in $site"; return 0
  fi
  local host_build_deps=0
  python3 -c "import scikit_build_core, cmake, ninja" 2> /dev/null && host_build_deps=1
  if [[ ${INSTALL:-} != wheel && -x /usr/local/cuda/bin/nvcc ]] && { (( host_build_deps )) || \
      compgen -G ".whl/torch-build/scikit_build_core-*" > /dev/null; }; then
    echo "== pip install ./python (from source: nvcc $(/usr/local/cuda/bin/nvcc --version | \
      grep -o 'release [0-9.]*'))"
    # The build backend and tools come from the host's Python where it has them, else the wheels.
    if (( ! host_build_deps )); then
      python3 -m pip install -q --no-index --find-links .whl/torch-build \
        --target "$work/build-deps" scikit-build-core cmake ninja || return 1
    fi
    local start=$SECONDS
    PATH="$work/build-deps/bin:$PATH" PYTHONPATH="$work/build-deps:$PYTHONPATH" \
      CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-deps --no-build-isolation \
      --no-index --target "$site" ./python > "$results/pip_install.log" 2>&1
    local status=$?
    echo "pip install exit $status in $((SECONDS - start)) s" | tee -a "$results/pip_install.log"
    (( status == 0 )) || { tail -30 "$results/pip_install.log"; return 1; }
  elif compgen -G ".whl/torch-prebuilt/dflash_torch-*.whl" > /dev/null; then
    echo "== no nvcc or build wheels: installing the carried wheel"
    python3 -m pip install -q --no-deps --no-index --target "$site" .whl/torch-prebuilt/*.whl \
      || return 1
    # The wheel brings the compiled library (its ABI version is checked at load); the Python
    # modules are the checkout's, so a wheel built before a Python-only change still serves.
    cp python/src/dflash_torch/*.py "$site/dflash_torch/"
  else
    echo "nothing to install from: run bench/torch/fetch_wheels.sh on the build machine"; return 1
  fi
  if compgen -G ".whl/disentangled_flash-*.whl" > /dev/null; then
    python3 -m pip install -q --no-deps --no-index --target "$site" .whl/flashdeberta-*.whl \
      .whl/disentangled_flash-*.whl
  fi
  python3 -c "import dflash_torch, dflash_torch._native as n; l = n.require(); \
print('dflash_torch', dflash_torch.__file__, 'cuda', l.cuda_version, 'wgmma', l.wgmma_compiled)"
}

section_tests() {
  echo "== python/tests (CPU and GPU tests against the installed package)"
  if python3 -c "import pytest" 2> /dev/null; then
    python3 -m pytest -q python/tests > "$results/tests.log" 2>&1
  else
    python3 -m unittest discover -s python/tests -p 'test_*.py' > "$results/tests.log" 2>&1
  fi
  echo "tests exit $?"; tail -5 "$results/tests.log"
}

section_hub() {
  echo "== Hub layout through the kernels package"
  # From another folder: the checkout's own kernels/ would import as a namespace package.
  if ! (cd /tmp && python3 -c "import kernels.layer") 2> /dev/null; then
    compgen -G ".whl/torch-hub/kernels-*" > /dev/null || { echo "kernels not carried"; return 0; }
    # kernels and tomlkit alone: its other needs are on the host, and sigstore (signature
    # verification of downloads) is not imported by a local load.
    python3 -m pip install -q --no-index --no-deps --target "$work/hub-site" \
      .whl/torch-hub/kernels-*.whl .whl/torch-hub/tomlkit-*.whl || return 1
  fi
  PYTHONPATH="$PYTHONPATH:$work/hub-site" python3 python/tools/check_hub_layout.py \
    --library "$site/dflash_torch/libdflash_attention.so" --device cuda 2>&1 | \
    tee "$results/hub_check.log" | tail -6
}

models_and_pairs() {
  [[ -s $work/mnli_like.jsonl ]] || python3 bench/engine/mnli_like_pairs.py \
    --out "$work/mnli_like.jsonl" --pairs "$pairs_count" 2>&1 | tail -1
  local shape
  for shape in "$@"; do
    [[ -f $work/models/$shape/model.safetensors ]] || python3 bench/engine/make_random_models.py \
      --out "$work/models" --shapes "$shape" --num-labels 3 --seed 0 --device cuda 2>&1 | tail -2
  done
}

section_parity() {
  local shape
  for shape in $parity_shapes; do
    models_and_pairs "$shape"
    echo "== parity $shape"
    python3 bench/torch/parity.py --model "$work/models/$shape" --pairs "$work/mnli_like.jsonl" \
      --count 512 --out "$results/parity-$shape.json" 2>&1 | tail -6
  done
}

section_decisions() {
  models_and_pairs v3-base
  echo "== MNLI-like decision parity (v3-base, fp16, batch 8)"
  python3 bench/torch/mnli_decisions.py --model "$work/models/v3-base" \
    --pairs "$work/mnli_like.jsonl" --batch 8 --out "$results/mnli-decisions.json" \
    --logits "$results/mnli-decisions-logits.npz" 2>&1 | tail -4
}

section_speed() {
  models_and_pairs v3-base
  if [[ " ${SPEED_ARGS:-} " == *" --skip-op "* ]]; then
    :  # no op rows to join cxx_ms to
  elif [[ -x .carry/bin/dflash-bench-attention ]]; then
    echo "== the same kernel from C++ (dflash-bench-attention)"
    LD_LIBRARY_PATH="$root/.carry/lib:$LD_LIBRARY_PATH" .carry/bin/dflash-bench-attention \
      --dtypes=bf16 --head_dims=64 --lengths=128,256,512,1024,2048,4096,8192 --accuracy=false \
      --mnli_mix=false --repeats="$op_repeats" --json="$results/cxx.jsonl" 2>&1 | tail -9
  else
    echo "no .carry/bin/dflash-bench-attention: cxx_ms stays null"
  fi
  local tag=${SPEED_TAG:+-$SPEED_TAG}
  echo "== speed$tag (e2e, compile, attention op: ${SPEED_ARGS:-all})"
  python3 bench/torch/speed.py --model "$work/models/v3-base" --pairs "$work/mnli_like.jsonl" \
    --repeats "$repeats" --op-repeats "$op_repeats" --out "$results/speed$tag.json" \
    ${SPEED_ARGS:-} 2>&1 | \
    tee "$results/speed$tag.log" | grep -v "^\s" | tail -40
}

section_results() {
  local parity=() speed=()
  mapfile -t parity < <(ls "$results"/parity-*.json 2> /dev/null)
  mapfile -t speed < <(ls "$results"/speed*.json 2> /dev/null)
  python3 bench/torch/make_results.py --speed "${speed[@]}" --cxx "$results/cxx.jsonl" \
    --parity "${parity[@]}" --decisions "$results/mnli-decisions.json" --gpu "$gpu" \
    --command "bash bench/torch/run_on_gpu.sh (QUICK=$quick)" --out "$results/h200-torch.json"
}

for section in "${sections[@]}"; do
  case "$section" in
    install|tests|hub|parity|decisions|speed|results) "section_$section" ;;
    *) echo "unknown section $section (see --help)" >&2; exit 2 ;;
  esac
done
cp -r "$results"/. "$out"/
echo "results: $out"
