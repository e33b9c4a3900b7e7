#!/usr/bin/env bash
# The deploy checks (scripts/test.sh's deploy stage), each by the tool that consumes the file:
#   1. hadolint lints the Dockerfile (any finding, style included, fails);
#   2. the runtime folder the images copy (scripts/collect-runtime.sh) is complete: every shared
#      library its binaries and the sentencepiece shim need is in it or in every base image;
#   3. kubectl kustomize renders both overlays (with throw-away secrets) and kubernetes-validate
#      checks every rendered object against the Kubernetes 1.30 and 1.37 schemas, strictly;
#   4. dflash-server --check_config accepts the server container's arguments of each overlay with
#      the ConfigMap's server.yaml, and Envoy 1.40 validates envoy.yaml (--mode validate);
#   5. promtool checks the rules and runs the alerts' unit tests;
#   6. deploy/tests/prometheus_test.py: the real Prometheus scrapes a loaded server; every
#      dashboard query, recording rule and prometheus-adapter query must return data.
#
# Usage: scripts/check-deploy.sh [BUILD_DIR]   (default build; needs its dflash-server,
#        dflash-cli, dflash-loadtest and demo model, and scripts/install-deps.sh's tools)
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ${1:-} == -h || ${1:-} == --help ]]; then sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
build=${1:-build}
venv=${DFLASH_DEPLOY_VENV:-.venv-deploy}
for tool in hadolint kubectl kubernetes-validate envoy; do
  if [[ ! -x $venv/bin/$tool ]]; then
    echo "check-deploy: $venv/bin/$tool missing: run scripts/install-deps.sh" >&2
    exit 1
  fi
done
for binary in dflash-server dflash-cli dflash-loadtest; do
  if [[ ! -x $build/bin/$binary ]]; then
    echo "check-deploy: $build/bin/$binary missing: build it first" >&2
    exit 1
  fi
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "-- hadolint $("$venv/bin/hadolint" --version | awk '{print $NF}'): Dockerfile"
"$venv/bin/hadolint" --failure-threshold style Dockerfile

echo "-- runtime folder (scripts/collect-runtime.sh, as the Dockerfile runs it)"
runtime=$work/runtime
scripts/collect-runtime.sh "$runtime" "$build/bin/dflash-server" "$build/bin/dflash-cli" \
  "$build/lib/libdflash_sentencepiece_shim.so"
# What collect-runtime.sh leaves to the base image; anything else must resolve inside the folder.
base_libs='^(libc|libm|libdl|libpthread|librt|ld-linux[^ ]*|libgcc_s|libstdc\+\+|libcuda|libcudart|libcublas[A-Za-z]*|libnvidia[^ ]*)\.so'
for file in "$runtime"/bin/* "$runtime"/lib/libdflash_sentencepiece_shim.so; do
  outside=$(LD_LIBRARY_PATH=$runtime/lib ldd "$file" | awk '/=>/ {print $1, $3}' |
    grep -vE "^[^ ]+ $runtime/lib/" | grep -vE "$base_libs" || true)
  if [[ -n $outside ]]; then
    echo "check-deploy: $(basename "$file") needs libraries outside the runtime folder:" >&2
    echo "$outside" >&2
    exit 1
  fi
done
echo "every library of $(ls "$runtime/bin" | tr '\n' ' ')and the shim is in the folder"

echo "-- kustomize overlays, Kubernetes schemas"
cp -r deploy/k8s "$work/k8s"
"$work/k8s/make-dev-secrets.sh" dflash.local "$work/k8s/base/secrets" >/dev/null
overlays=()
for dir in deploy/k8s/overlays/*/; do
  overlay=$(basename "$dir")
  overlays+=("$overlay")
  "$venv/bin/kubectl" kustomize "$work/k8s/overlays/$overlay" >"$work/$overlay.yaml"
  echo "$overlay: $(grep -c '^kind:' "$work/$overlay.yaml") objects rendered"
done
for version in 1.30.0 1.37.0; do
  "$venv/bin/kubernetes-validate" --strict --quiet -k "$version" "$work"/*.yaml
  echo "every object valid against Kubernetes $version (strict)"
done

echo "-- server arguments and Envoy configuration"
for overlay in "${overlays[@]}"; do
  # The server container's arguments, with the in-pod paths mapped to the files they mount.
  mapfile -t server_args < <(/usr/bin/python3 - "$work/$overlay.yaml" "$work" <<'PY'
import sys, yaml
rendered, work = sys.argv[1], sys.argv[2]
deployment = next(d for d in yaml.safe_load_all(open(rendered))
                  if d["kind"] == "Deployment" and d["metadata"]["name"] == "dflash")
container = deployment["spec"]["template"]["spec"]["containers"][0]
for arg in container["args"]:
    print(arg.replace("/etc/dflash/config/", "deploy/k8s/base/")
             .replace("/etc/dflash/secrets/api-keys", work + "/k8s/base/secrets/api-keys"))
PY
  )
  summary=$("$build/bin/dflash-server" "${server_args[@]}" --check_config)
  # Every overlay keeps the API keys on (an overlay that replaced the base's --set would drop them).
  if ! grep -q "API keys required" <<<"$summary"; then
    echo "check-deploy: $overlay: the server would run without API keys:" >&2
    echo "$summary" >&2
    exit 1
  fi
  echo "$overlay: dflash-server --check_config accepts ${server_args[*]} (API keys on)"
done
sed "s#/etc/envoy/tls/#$work/k8s/base/secrets/#" deploy/k8s/base/envoy.yaml >"$work/envoy.yaml"
"$venv/bin/envoy" --mode validate -c "$work/envoy.yaml" --log-level error
echo "envoy $("$venv/bin/envoy" --version | grep -o '[0-9]*\.[0-9]*\.[0-9]*' | head -1): envoy.yaml valid"

echo "-- promtool: rules and alert tests"
promtool check rules deploy/observability/rules/dflash-recording.yml \
  deploy/observability/rules/dflash-alerts.yml
(cd deploy/observability/rules && promtool test rules dflash-alerts.test.yml)

echo "-- Prometheus against a loaded server"
/usr/bin/python3 deploy/tests/prometheus_test.py --runtime="$runtime" --build="$build"
