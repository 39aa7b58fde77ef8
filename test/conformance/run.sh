#!/usr/bin/env bash
# Runs the OCI distribution-spec conformance suite against a fresh `berth serve`
# on loopback. Usage: test/conformance/run.sh [--auth] /path/to/distribution-spec
# (a checkout of github.com/opencontainers/distribution-spec; its conformance/
# folder is built here, nothing of it is kept in this repository).
# With --auth, berth runs with auth on: one htpasswd user, granted pull, push and
# delete on conformance/* (both OCI_REPO1 and OCI_REPO2, the cross-mount source),
# and nothing else; the suite logs in as that user (OCI_USERNAME/OCI_PASSWORD)
# through berth's token flow. Results go to test/conformance/results (results-auth with --auth).
# Both generations of the suite are driven: main's (OCI_REGISTRY, OCI_REPO1...) and
# v1.1.1's (OCI_ROOT_URL, OCI_NAMESPACE...); each ignores the other's variables.
# Referrers are tested (berth serves the referrers API; set OCI_API_REFERRER=false to leave them out).
# sha512 content is left out: distribution v3, which berth embeds, verifies sha512 uploads but
# stores and answers with sha256 digests (set OCI_DATA_SHA512=true to see it).
set -euo pipefail
auth=false
if [ "${1:-}" = --auth ]; then
  auth=true
  shift
fi
src=${1:?usage: $0 [--auth] /path/to/distribution-spec}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'kill "${pid:-}" 2>/dev/null || true; wait "${pid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT

# The suite is a program on distribution-spec's main branch, and a Go test
# (built with go test -c) in its releases up to v1.1.1.
if [ -f "$src/conformance/main.go" ]; then
  (cd "$src/conformance" && go build -o "$work/conformance" .)
else
  (cd "$src/conformance" && go test -c -o "$work/conformance" .)
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
serve=("$root/bin/berth" serve --addr "127.0.0.1:$port" --data "$work/data")
results="$root/test/conformance/results"
if $auth; then
  OCI_USERNAME=conformance
  OCI_PASSWORD=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
  export OCI_USERNAME OCI_PASSWORD
  (cd "$root" && go run ./test/conformance/htpasswd "$OCI_USERNAME" <<<"$OCI_PASSWORD") >"$work/htpasswd"
  cat >"$work/berth.yaml" <<YAML
auth:
  htpasswd: $work/htpasswd
  rules:
    - subjects: [user:$OCI_USERNAME]
      repositories: ["conformance/*"]
      actions: [pull, push, delete]
YAML
  serve+=(--config "$work/berth.yaml")
  results+=-auth
fi
"${serve[@]}" 2>"$work/berth.log" &
pid=$!
for _ in $(seq 50); do curl -fs "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
if $auth; then
  # Auth is on: an anonymous request is challenged, and the suite's user gets a token.
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v2/")
  [ "$code" = 401 ] || { echo "berth with auth on answered GET /v2/ anonymously with $code, want 401" >&2; exit 1; }
fi

mkdir -p "$results"
(cd "$work" && \
  OCI_REGISTRY="127.0.0.1:$port" OCI_TLS=disabled \
  OCI_REPO1=conformance/repo1 OCI_REPO2=conformance/repo2 \
  OCI_API_REFERRER="${OCI_API_REFERRER:-true}" OCI_DATA_SHA512="${OCI_DATA_SHA512:-false}" \
  OCI_RESULTS_DIR="$results" \
  OCI_ROOT_URL="http://127.0.0.1:$port" OCI_NAMESPACE=conformance/repo1 OCI_CROSSMOUNT_NAMESPACE=conformance/repo2 \
  OCI_TEST_PULL=1 OCI_TEST_PUSH=1 OCI_TEST_CONTENT_DISCOVERY=1 OCI_TEST_CONTENT_MANAGEMENT=1 OCI_REPORT_DIR="$results" \
  "$work/conformance")
