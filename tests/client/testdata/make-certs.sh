#!/usr/bin/env bash
# Regenerates the TLS fixtures of cli_end_to_end_test: a test CA, a server certificate for the
# name "dflash.test" (the test connects to 127.0.0.1 and overrides the name with
# --tls_server_name) and a client certificate for mutual TLS. EC P-256 keys, valid for 100 years.
# Test-only secrets: never use them anywhere else.
set -euo pipefail
cd "$(dirname "$0")"
days=36500
openssl ecparam -name prime256v1 -genkey -noout -out ca.key
openssl req -x509 -new -key ca.key -sha256 -days "$days" -subj "/CN=dflash test CA" -out ca.pem
for who in server client; do
  openssl ecparam -name prime256v1 -genkey -noout -out "$who.key.ec"
  openssl pkcs8 -topk8 -nocrypt -in "$who.key.ec" -out "$who.key"
  rm "$who.key.ec"
  openssl req -new -key "$who.key" -subj "/CN=dflash-$who" -out "$who.csr"
  if [[ $who == server ]]; then
    ext="subjectAltName=DNS:dflash.test
extendedKeyUsage=serverAuth"
  else
    ext="extendedKeyUsage=clientAuth"
  fi
  openssl x509 -req -in "$who.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -sha256 \
    -days "$days" -extfile <(printf '%s\n' "$ext") -out "$who.pem"
  rm "$who.csr"
done
rm -f ca.key ca.srl  # nothing else is ever signed with this CA
