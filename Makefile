# berth — build, run and test. `make run` and `make test` work on a fresh
# machine with only Go installed: every tool the tests need is pinned in
# go.mod (tool directives) and built here.

GO      ?= go
BIN     := bin/berth
GOFLAGS ?=
# Test timeout for the whole suite; CI allows 90 minutes, a cold run takes far less.
TEST_TIMEOUT ?= 30m
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: all build run test tools axe postgres chromium git bench bench-tls bench-catalog bench-scale bench-provenance bench-mirror bench-olm bench-sources bench-yaml lint conformance conformance-auth conformance-replicas clean

all: build

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/berth

## run: build and start `berth serve` with embedded defaults (filesystem storage under ./data)
run: build
	./$(BIN) serve

## tools: build the pinned tools the end-to-end tests drive: the oras, helm, cosign and crane CLIs,
## distribution's registry (the upstream registry a split `berth serve catalog` follows), and
## operator-registry's opm into bin/opm and the versitygw S3 gateway into bin/versitygw (each pinned in a
## module of its own, tools/opm and tools/versitygw, so that their dependencies stay out of berth's go.mod),
## and axe-core, the accessibility engine the browser tests run, from npm (see axe)
tools: bin/opm bin/versitygw axe
	@$(GO) tool -n oras >/dev/null
	@$(GO) tool -n helm >/dev/null
	@$(GO) tool -n cosign >/dev/null
	@$(GO) tool -n crane >/dev/null
	@$(GO) tool -n registry >/dev/null
	@echo "tools: oras $$($(GO) tool oras version | head -1); helm $$($(GO) tool helm version --short); cosign $$($(GO) tool cosign version --json 2>/dev/null | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p'); crane $$($(GO) tool crane version); registry $$($(GO) tool registry --version | cut -d' ' -f3); opm $$($(GO) version -m bin/opm | awk '$$1 == "mod" {print $$3}'); versitygw $$($(GO) version -m bin/versitygw | awk '$$1 == "mod" {print $$3}')"

# bin/opm is rebuilt only when its pin changes: a cold build takes about two minutes.
bin/opm: tools/opm/go.mod tools/opm/go.sum
	cd tools/opm && CGO_ENABLED=0 $(GO) build -tags containers_image_openpgp -o ../../bin/opm github.com/operator-framework/operator-registry/cmd/opm

# bin/versitygw, the S3 server the s3 storage tests run berth against, likewise: a cold build takes about
# five minutes on two cores.
bin/versitygw: tools/versitygw/go.mod tools/versitygw/go.sum
	cd tools/versitygw && CGO_ENABLED=0 $(GO) build -o ../../bin/versitygw github.com/versity/versitygw/cmd/versitygw

## axe: install axe-core, pinned in tools/axe/package-lock.json, into tools/axe/node_modules with npm ci;
## internal/browsertest injects its axe.min.js into the pages the browser tests check
axe: tools/axe/node_modules/axe-core/axe.min.js

tools/axe/node_modules/axe-core/axe.min.js: tools/axe/package.json tools/axe/package-lock.json
	npm ci --prefix tools/axe --no-audit --no-fund
	@touch $@

## postgres: install PostgreSQL's server programs from the OS package when they are missing; the tests
## run throwaway clusters of their own (internal/pgtest) and never touch the package's default one
postgres:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null; then :; \
	elif command -v apt-get >/dev/null; then \
		echo "postgres: installing the OS package postgresql"; \
		sudo=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -q --no-install-recommends postgresql; \
	else echo "postgres: initdb not found and no apt-get; install PostgreSQL's server programs" >&2; exit 1; fi

## git: install Debian's git package when git or git http-backend is missing; the package source tests
## (pkgsource, berth import) serve repositories with git http-backend (internal/gittest)
git:
	@if [ -x /usr/bin/git ] && [ -x /usr/lib/git-core/git-http-backend ]; then :; \
	elif command -v apt-get >/dev/null; then \
		echo "git: installing the OS package git"; \
		sudo=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -q --no-install-recommends git; \
	else echo "git: /usr/bin/git or git http-backend not found and no apt-get; install git" >&2; exit 1; fi

## chromium: install Debian's chromium package (and a font, which it does not depend on) when /usr/bin/chromium
## is missing; internal/browsertest drives it headless for the Web UI's browser tests
chromium:
	@if [ -x /usr/bin/chromium ]; then :; \
	elif command -v apt-get >/dev/null; then \
		echo "chromium: installing the OS package chromium"; \
		sudo=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core; \
	else echo "chromium: /usr/bin/chromium not found and no apt-get; install Chromium" >&2; exit 1; fi

## test: vet, then every test (unit and end-to-end with the real oras, helm, cosign, crane and opm CLIs,
## s3 storage against versitygw, a real PostgreSQL, and the Web UI in headless Chromium)
test: tools postgres chromium git lint
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

## lint: gofmt and go vet must be clean
lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

## bench: berth vs the upstream distribution registry, zot and a bare net/http floor, side by side
## (not part of `make test`); ZOT=/path/to/zot-minimal adds zot, which docs/benchmarks.md says how to build
bench:
	$(GO) run ./test/bench $(if $(ZOT),-zot $(ZOT))

## bench-tls: berth over TLS against berth over plain HTTP, the blob, package and mixed rows (part of `make bench`)
bench-tls:
	$(GO) run ./test/bench -tls

## bench-catalog: the catalog at 100,000 package versions: rebuild, restart, search latency,
## index.yaml, time to searchable (not part of `make test`; about 4 minutes on an idle 2-core machine)
bench-catalog:
	$(GO) run ./test/bench -catalog

## bench-scale: the catalog on PostgreSQL against SQLite at 100,000 versions, package push and pull through
## 1 and 2 replicas on PostgreSQL and S3 (versitygw), and 2 with auth behind a round-robin reverse proxy,
## against the upstream registry on the same S3, and online
## garbage collection of 10,000 versions after deleting half (not part of `make test`)
bench-scale: tools postgres
	$(GO) run ./test/bench -scale

## bench-provenance: the referrers API with 1, 100 and 5,000 referrers, and the time from the real
## `cosign sign` exiting to search listing the package verified (not part of `make test`)
bench-provenance:
	$(GO) run ./test/bench -provenance

## bench-mirror: copying 500 signed packages (about 2,500 versions) into an empty berth with `berth mirror`
## export + import and sync, against regctl and oras cp -r, 3 runs each; then 20 OLM packages with about
## 1 GiB of their images, against regctl image copy and oras cp -r (not part of `make test`;
## about 20 minutes on a 2-core machine for the packages, nearly all of it regctl and oras, plus the images)
bench-mirror:
	$(GO) run ./test/bench -mirror

## bench-olm: the OLM catalog image of a namespace of 5,000 packages (25,000 versions): p50/p99 from a push
## to the image holding it and the bytes each update pushes, against a full rebuild of the image and
## `opm render` of its FBC (bin/opm, if `make tools` built it) (not part of `make test`; estimated under 10
## minutes on a 2-core machine)
bench-olm:
	$(GO) run ./test/bench -olm

## bench-sources: tracked sources on loopback (git http-backend, an ETag tarball server): p50/p99 from a
## pushed tag and its webhook to the version in the search, over 50 tags; berth's CPU per polling cycle of
## 1,000 unchanged sources, and that none is built again (not part of `make test`)
bench-sources:
	$(GO) run ./test/bench -sources

## bench-yaml: peak RSS, allocation and CPU time of reading hostile YAML shapes (not part of `make test`)
bench-yaml:
	$(GO) test -run '^$$' -bench BenchmarkYAMLShapes -benchtime 3x ./pkgformat/

## conformance: run the OCI distribution-spec conformance suite against berth.
## Needs a checkout of github.com/opencontainers/distribution-spec: make conformance CONFORMANCE_SRC=/path/to/distribution-spec
conformance: build
	./test/conformance/run.sh "$(CONFORMANCE_SRC)"

## conformance-auth: the same suite against berth with auth on, logged in as a user granted
## pull, push and delete on conformance/* (OCI_USERNAME/OCI_PASSWORD, through the token flow)
conformance-auth: build
	./test/conformance/run.sh --auth "$(CONFORMANCE_SRC)"

## conformance-replicas: the same suite with auth on, against berth as docs/scale-out.md deploys it:
## two replicas on one PostgreSQL and one versitygw bucket behind a round-robin proxy
conformance-replicas: build bin/versitygw postgres
	./test/conformance/run.sh --replicas --auth "$(CONFORMANCE_SRC)"

clean:
	rm -rf bin
