#!/usr/bin/env bash
# Regenerates the TLS test certificates of tests/e2e (committed next to this script, so the tests
# need no openssl at run time): a CA, a server certificate for localhost and 127.0.0.1 (subject
# alternative names), a client certificate signed by the same CA for mutual TLS, and a second,
# unrelated CA with a client certificate of its own (a client the server must refuse).
# Every certificate is valid for 100 years. The keys are test keys: never use them elsewhere.
#
#   tests/e2e/certs/make_certs.sh [output dir, default: this script's directory]
set -euo pipefail

out="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
days=36500
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
cd "${work}"

new_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$1" 2>/dev/null; }

# ca <name> <subject>
ca() {
  new_key "$1.key"
  openssl req -x509 -new -key "$1.key" -sha256 -days "${days}" -subj "$2" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" -out "$1.crt"
}

# leaf <name> <subject> <ca name> <extensions>
leaf() {
  new_key "$1.key"
  openssl req -new -key "$1.key" -subj "$2" -out "$1.csr"
  printf '%s\n' "$4" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$3.crt" -CAkey "$3.key" -CAcreateserial -sha256 \
    -days "${days}" -extfile "$1.ext" -out "$1.crt" 2>/dev/null
}

ca ca "/CN=dflash e2e test CA"
leaf server "/CN=localhost" ca "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1"
leaf client "/CN=dflash e2e test client" ca "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
ca other_ca "/CN=dflash e2e unrelated CA"
leaf other_client "/CN=dflash e2e unrelated client" other_ca "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"

openssl verify -CAfile ca.crt server.crt client.crt >/dev/null
openssl verify -CAfile other_ca.crt other_client.crt >/dev/null

mkdir -p "${out}"
for name in ca server client other_ca other_client; do
  cp "${name}.crt" "${out}/${name}.pem"
done
for name in server client other_client; do
  cp "${name}.key" "${out}/${name}.key"
  chmod 644 "${out}/${name}.key"  # Test keys: readable by the test runner whoever it is.
done
echo "wrote ${out}/{ca,server,client,other_ca,other_client}.pem and {server,client,other_client}.key"
