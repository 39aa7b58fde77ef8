#!/usr/bin/env bash
# Runs the OCI distribution-spec conformance suite against berth on loopback.
# Usage: test/conformance/run.sh [--auth] [--replicas] /path/to/distribution-spec
# (a checkout of github.com/opencontainers/distribution-spec; its conformance/
# folder is built here, nothing of it is kept in this repository).
# berth is bin/berth (make build), or $BERTH.
# Without --replicas, the suite runs against one fresh `berth serve`. With --replicas, against
# berth as docs/scale-out.md deploys it (test/conformance/replicas): two `berth serve` on one
# throwaway PostgreSQL (internal/pgtest) and one versitygw bucket (bin/versitygw, make tools),
# behind a reverse proxy that sends every request to the next replica in turn, so that each
# upload, token and manifest flow of the suite crosses replicas.
# With --auth, berth runs with auth on: one htpasswd user, granted pull, push and
# delete on conformance/* (both OCI_REPO1 and OCI_REPO2, the cross-mount source),
# and nothing else; the suite logs in as that user (OCI_USERNAME/OCI_PASSWORD)
# through berth's token flow. Results go to test/conformance/results, suffixed
# -replicas and -auth by the options.
# Both generations of the suite are driven: main's (OCI_REGISTRY, OCI_REPO1...) and
# v1.1.1's (OCI_ROOT_URL, OCI_NAMESPACE...); each ignores the other's variables.
# Referrers are tested (berth serves the referrers API; set OCI_API_REFERRER=false to leave them out).
# sha512 content is left out: distribution v3, which berth embeds, verifies sha512 uploads but
# stores and answers with sha256 digests (set OCI_DATA_SHA512=true to see it).
set -euo pipefail
auth=false
replicas=false
while [ $# -gt 0 ]; do
  case "$1" in
    --auth) auth=true ;;
    --replicas) replicas=true ;;
    -*) echo "unknown option $1; usage: $0 [--auth] [--replicas] /path/to/distribution-spec" >&2; exit 2 ;;
    *) break ;;
  esac
  shift
done
src=${1:?usage: $0 [--auth] [--replicas] /path/to/distribution-spec}
root=$(cd "$(dirname "$0")/../.." && pwd)
berth=${BERTH:-$root/bin/berth}
work=$(mktemp -d)
trap 'kill "${pid:-}" 2>/dev/null || true; wait "${pid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT

# The suite is a program on distribution-spec's main branch, and a Go test
# (built with go test -c) in its releases up to v1.1.1.
if [ -f "$src/conformance/main.go" ]; then
  (cd "$src/conformance" && go build -o "$work/conformance" .)
else
  (cd "$src/conformance" && go test -c -o "$work/conformance" .)
fi
results="$root/test/conformance/results"
config=()
if $auth; then
  OCI_USERNAME=conformance
  OCI_PASSWORD=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
  export OCI_USERNAME OCI_PASSWORD
  (cd "$root" && go run ./test/conformance/htpasswd "$OCI_USERNAME" <<<"$OCI_PASSWORD") >"$work/htpasswd"
  # The replicas share the token key: the first creates it.
  cat >"$work/berth.yaml" <<YAML
auth:
  htpasswd: $work/htpasswd
  keyFile: $work/token-key.pem
  rules:
    - subjects: [user:$OCI_USERNAME]
      repositories: ["conformance/*"]
      actions: [pull, push, delete]
YAML
  config=(--config "$work/berth.yaml")
fi
if $replicas; then
  (cd "$root" && go build -o "$work/replicas" ./test/conformance/replicas)
  extra=()
  $auth && extra=(-config "$work/berth.yaml")
  "$work/replicas" -berth "$berth" -versitygw "$root/bin/versitygw" -work "$work" "${extra[@]}" \
    >"$work/address" 2>"$work/replicas.log" &
  pid=$!
  for _ in $(seq 600); do [ -s "$work/address" ] && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  addr=$(head -n1 "$work/address")
  [ -n "$addr" ] || { echo "the replicas did not start:" >&2; cat "$work/replicas.log" >&2; exit 1; }
  results+=-replicas
else
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  addr="127.0.0.1:$port"
  "$berth" serve --addr "$addr" --data "$work/data" "${config[@]}" 2>"$work/berth.log" &
  pid=$!
fi
$auth && results+=-auth
for _ in $(seq 50); do curl -fs "http://$addr/readyz" >/dev/null && break; sleep 0.1; done
if $auth; then
  # Auth is on: an anonymous request is challenged, and the suite's user gets a token.
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://$addr/v2/")
  [ "$code" = 401 ] || { echo "berth with auth on answered GET /v2/ anonymously with $code, want 401" >&2; exit 1; }
fi

mkdir -p "$results"
(cd "$work" && \
  OCI_REGISTRY="$addr" OCI_TLS=disabled \
  OCI_REPO1=conformance/repo1 OCI_REPO2=conformance/repo2 \
  OCI_API_REFERRER="${OCI_API_REFERRER:-true}" OCI_DATA_SHA512="${OCI_DATA_SHA512:-false}" \
  OCI_RESULTS_DIR="$results" \
  OCI_ROOT_URL="http://$addr" OCI_NAMESPACE=conformance/repo1 OCI_CROSSMOUNT_NAMESPACE=conformance/repo2 \
  OCI_TEST_PULL=1 OCI_TEST_PUSH=1 OCI_TEST_CONTENT_DISCOVERY=1 OCI_TEST_CONTENT_MANAGEMENT=1 OCI_REPORT_DIR="$results" \
  "$work/conformance")
