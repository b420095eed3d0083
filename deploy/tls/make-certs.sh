#!/usr/bin/env bash
# deploy/tls/make-certs.sh: a private CA and PEM keystores for kq's TLS listeners, with openssl.
#
#   deploy/tls/make-certs.sh DIR NAME...
#
# Makes DIR/ca.pem (the CA certificate: every node's and client's ssl.truststore.location) and
# DIR/ca.key once, then for each NAME the keystore DIR/NAME.pem: a certificate whose subject is
# CN=NAME, signed by the CA, followed by its unencrypted private key (ssl.keystore.location).
# The principal of that certificate is User:CN=NAME: name node ID's certificate node-ID and an
# operator's after the operator (docs/security.md). An existing CA or keystore is kept; delete
# it to make a new one.
# Keys are EC P-256; certificates are valid for KQ_CERT_DAYS days (default 825).
# Files holding keys are written mode 0600.
set -euo pipefail

[[ $# -ge 2 ]] || { sed -n '2,13p' "$0" >&2; exit 2; }
command -v openssl > /dev/null || { echo "make-certs.sh: openssl is not installed" >&2; exit 1; }
dir=$1
shift
days=${KQ_CERT_DAYS:-825}
mkdir -p "$dir"
umask 077

if [[ ! -s $dir/ca.pem || ! -s $dir/ca.key ]]; then
    openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -sha256 \
        -days "$days" -subj "/CN=kq CA $(date -u +%Y%m%dT%H%M%SZ)" \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
        -keyout "$dir/ca.key" -out "$dir/ca.pem" 2> "$dir/.openssl.err" ||
        { cat "$dir/.openssl.err" >&2; exit 1; }
    chmod 0644 "$dir/ca.pem"
fi

for name in "$@"; do
    [[ $name =~ ^[A-Za-z0-9._-]+$ ]] ||
        { echo "make-certs.sh: '$name': use letters, digits, '.', '_' and '-'" >&2; exit 2; }
    out=$dir/$name.pem
    [[ -s $out ]] && continue
    tmp=$(mktemp -d)
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -sha256 \
        -subj "/CN=$name" -keyout "$tmp/key.pem" -out "$tmp/req.pem" 2> "$dir/.openssl.err" &&
        printf '%s\n' basicConstraints=CA:FALSE keyUsage=critical,digitalSignature \
            extendedKeyUsage=serverAuth,clientAuth "subjectAltName=DNS:$name,DNS:localhost,IP:127.0.0.1" \
            > "$tmp/ext.cnf" &&
        openssl x509 -req -in "$tmp/req.pem" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
            -CAcreateserial -days "$days" -sha256 -extfile "$tmp/ext.cnf" -out "$tmp/cert.pem" \
            2>> "$dir/.openssl.err" ||
        { cat "$dir/.openssl.err" >&2; rm -rf "$tmp"; exit 1; }
    cat "$tmp/cert.pem" "$tmp/key.pem" > "$out"
    rm -rf "$tmp"
done
rm -f "$dir/.openssl.err" "$dir/ca.srl"
