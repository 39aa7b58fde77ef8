#!/usr/bin/env bash
# Runs the OCI distribution-spec conformance suite against a fresh `berth serve`
# on loopback. Usage: test/conformance/run.sh /path/to/distribution-spec
# (a checkout of github.com/opencontainers/distribution-spec; its conformance/
# folder is built here, nothing of it is kept in this repository).
# Referrers are tested (berth serves the referrers API; set OCI_API_REFERRER=false to leave them out).
# sha512 content is left out: distribution v3, which berth embeds, verifies sha512 uploads but
# stores and answers with sha256 digests (set OCI_DATA_SHA512=true to see it).
set -euo pipefail
src=${1:?usage: $0 /path/to/distribution-spec}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'kill "${pid:-}" 2>/dev/null || true; wait "${pid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT

(cd "$src/conformance" && go build -o "$work/conformance" .)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$root/bin/berth" serve --addr "127.0.0.1:$port" --data "$work/data" 2>"$work/berth.log" &
pid=$!
for _ in $(seq 50); do curl -fs "http://127.0.0.1:$port/v2/" >/dev/null && break; sleep 0.1; done

mkdir -p "$root/test/conformance/results"
(cd "$work" && \
  OCI_REGISTRY="127.0.0.1:$port" OCI_TLS=disabled \
  OCI_REPO1=conformance/repo1 OCI_REPO2=conformance/repo2 \
  OCI_API_REFERRER="${OCI_API_REFERRER:-true}" OCI_DATA_SHA512="${OCI_DATA_SHA512:-false}" \
  OCI_RESULTS_DIR="$root/test/conformance/results" \
  "$work/conformance")
