#!/usr/bin/env bash
# Makes throw-away secrets for trying the manifests: a self-signed TLS certificate for Envoy
# (CN and SAN = the given host name) and one random API key, written where the base kustomization's
# secretGenerator reads them (deploy/k8s/base/secrets/, ignored by git). Production secrets come
# from your secret store into the same three files, never from this script.
#
# Usage: deploy/k8s/make-dev-secrets.sh [HOST_NAME] [DIR]   (defaults: dflash.local, base/secrets)
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
host=${1:-dflash.local}
dir=${2:-"$(dirname "$0")/base/secrets"}
mkdir -p "$dir"
umask 077
openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=$host" \
  -addext "subjectAltName=DNS:$host" -keyout "$dir/tls.key" -out "$dir/tls.crt" 2>/dev/null
# 64 hex characters; the server wants at least 16 (server.auth in config/server.yaml).
openssl rand -hex 32 >"$dir/api-keys"
echo "make-dev-secrets: wrote $dir/{tls.crt,tls.key,api-keys} (self-signed for $host)"
