#!/usr/bin/env bash
# The README's first command: installs the dependencies (Debian/Ubuntu packages), builds the
# project, generates the bundled demo model (random weights, no download), starts the gRPC server
# on it (config/server.yaml: gRPC on port 50051, metrics on 9464) and makes a first call with
# dflash-cli. The server keeps running in the foreground; Ctrl-C drains it and exits.
#
# Usage: scripts/quickstart.sh [MODEL_DIR]   (default: the bundled demo model in build/demo-model)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if [[ -x /usr/local/cuda/bin/nvcc ]]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
scripts/build.sh

server_args=(--config=config/server.yaml)
model_id=demo
if [[ $# -gt 0 ]]; then
  server_args=(--model="$1" --model_name=model --listen=0.0.0.0:50051)
  model_id=model
fi

echo
echo "== starting dflash-server ${server_args[*]}"
build/bin/dflash-server "${server_args[@]}" &
server_pid=$!
stop_server() {
  if kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid"
    wait "$server_pid" || true
  fi
}
trap stop_server EXIT
trap 'exit 130' INT TERM

# Loading includes a warm-up batch of max_batch_tokens tokens; wait for health to say SERVING.
for _ in $(seq 1 240); do
  if build/bin/dflash-cli --target=localhost:50051 health >/dev/null 2>&1; then break; fi
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "dflash-server exited during start-up (see its log above)" >&2
    exit 1
  fi
  sleep 0.5
done

echo
echo "== build/bin/dflash-cli classify --model=$model_id ..."
build/bin/dflash-cli --target=localhost:50051 classify --model="$model_id" --pretty \
  --text="A man is playing a guitar on stage." \
  --text_pair="A person is performing music."

echo
echo "== dflash-server is running on localhost:50051 (metrics: http://localhost:9464/metrics)."
echo "   Try: build/bin/dflash-cli info --pretty     Ctrl-C stops the server (graceful drain)."
wait "$server_pid"
