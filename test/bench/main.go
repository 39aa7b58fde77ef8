// Command bench compares the throughput of `berth serve` with that of its
// peers, side by side on this machine: the upstream distribution registry
// (cmd/registry of the distribution module berth embeds, at the same
// version), zot, and a floor. `make bench` runs it (`make bench
// ZOT=/path/to/zot` to include zot); it is not part of `make test`.
//
// It builds berth, the upstream registry and the floor from this module and
// starts each server on its own loopback port with filesystem storage in
// its own temporary directory (under $TMPDIR): berth and the upstream
// registry with the storage settings berth gives its embedded registry; zot,
// the binary -zot names, with commit on, so that it syncs every file it
// writes as distribution's filesystem driver does (zot's default is off),
// and zot's defaults otherwise (dedupe and garbage collection on). zot is
// not built here: without -zot the harness says that zot is skipped and
// leaves its columns out (docs/benchmarks.md says how to build zot's
// minimal binary). The floor (test/bench/floor) is a bare net/http server
// answering the pull requests the workloads send from files on disk with
// http.ServeContent, the least a pull can cost on this machine; it takes
// part in the pull rows only, and the harness writes their content into its
// directory instead of pushing it.
//
// The same oras-go client code drives every server, one HTTP client per
// server. With the default flags (see -h for sizes, counts and runs) the
// seven rows are:
//
//   - blob push and pull: a fresh random 64 MiB blob uploaded monolithically
//     (POST, then one PUT), then fetched, read to the end and its digest
//     verified. In MB/s (10^6 bytes per second).
//   - packages push and pull, at c=1 and at c=8: 300 packages shaped like
//     berth's wire format (a JSON metadata config, a 50 KiB content layer,
//     an OCI manifest with berth's artifact type) pushed by tag to 30
//     repositories, 1 or 8 at a time; then all pulled back the same way:
//     resolve the tag, fetch the manifest, config and content, verify every
//     digest. In packages/s.
//   - mixed 80% pull / 20% push (c=8): after each c=8 push and pull, 300
//     operations (as many as -packages), 8 at a time, started in a fixed
//     order: every fifth pushes a fresh package (a new version in one of
//     the same repositories), the others pull the packages just pushed, in
//     turn. In operations/s.
//
// A second table compares berth with auth on (an htpasswd user granted pull
// and push, a client that logs in through the token flow with oras-go's
// token cache, as oras does) against berth without (a second berth started
// beside it, so that both have served the same requests), on the package push
// and pull rows: the ratio is berth+auth/berth, and the target 0.95x reads
// "at most 5% slower". Below it, the token endpoint's p50 and p99: GET
// /auth/token with the user's Basic credentials, -token-requests times, one
// at a time.
//
// A third table compares berth serving TLS (http.tls, a certificate of an
// authority the harness makes; the client negotiates HTTP/2 as Go clients
// do) against berth over plain HTTP, two more berths started side by side,
// on the blob, package and mixed rows: the ratio is berth+tls/berth, target
// 0.95x. With -tls (make bench-tls) the harness runs that table alone.
//
// A fourth table (quota.go; -quota runs it alone) compares pushes into a
// namespace at 99% of its quota with the same pushes into one without, each
// on a berth of its own: the package push rows at c=1 and c=8, with the
// namespace filled to 99% of its quota before each run (both berths hold the
// same bytes), the quota sized so that a run pushes at most 0.8% of it. The
// ratio is berth+quota/berth, target 0.95x. It reads the namespace's usage
// from GET /api/v1/namespaces/bench/usage, so it fails on a berth that
// keeps no quota ledger.
//
// Content is fresh for every run, so nothing is deduplicated, and a run's
// repositories are its own, so immutable tags never collide. Every server
// is warmed up first. The order of the servers rotates from one run to the
// next (berth, upstream, zot, floor; then upstream, zot, floor, berth; ...),
// so that over as many runs as there are servers each takes every place
// once and noise from the machine hits all alike; before each run the
// harness flushes dirty pages to disk and collects its own garbage, so that
// no run pays for the write-back of the one before.
//
// Reading the table: each cell is the median of that row's runs on that
// server ("-" where the server takes no part), then the ratios of berth's
// median to upstream's, zot's and the floor's; every row is a throughput,
// so higher is better and 1.00x is parity. A row is marked MISS when it
// misses its target, judged on the ratios as printed: on the package and
// mixed rows berth/zot >= 1.20x (berth/upstream >= 0.95x when zot is
// skipped), on the blob rows berth >= 1.00x the better of upstream and
// zot. berth/floor has no target: it says how close berth's pulls come to
// the floor. The numbers compare the servers on this machine and say
// little about absolute speed elsewhere; with -v the harness also prints
// every sample, in run order, to show how noisy the machine was. The exit
// status is 0 whenever every run completed, whatever the ratios.
//
// With -catalog (make bench-catalog) it runs the catalog benchmarks instead:
// berth serve alone, with a generated catalog of 100,000 package versions
// plus the fixtures (catalog.go; docs/benchmarks.md describes the rows).
// With -provenance (make bench-provenance) it runs the provenance benchmarks:
// berth serve alone with a trust policy, timed on the OCI referrers API and
// from the real cosign CLI signing a package to the search listing it as
// verified (provenance.go; docs/benchmarks.md describes the rows).
// With -mirror (make bench-mirror) it runs the mirror benchmarks: a source
// berth filled with signed packages copied into fresh empty berths by berth
// mirror, regctl and oras, timed one after another (mirror.go;
// docs/benchmarks.md describes the rows).
// With -olm (make bench-olm) it runs the OLM catalog benchmarks: berth serve
// holding one namespace of OLM packages, timed from a push to the
// namespace's catalog image holding it, against a full rebuild of that
// catalog and opm's render of it (olm.go; docs/benchmarks.md describes the
// rows).
//
// With -sources (make bench-sources) it runs the tracked-sources
// benchmarks: berth serve following git repositories (git http-backend)
// and tarballs on loopback, timed from a pushed tag and its webhook to the
// version in the search, and the CPU cost of polling unchanged sources
// (sources.go; docs/benchmarks.md describes the rows).
//
// The harness talks only to the servers it starts on 127.0.0.1, and points
// cosign only at berth. It is Unix-only: it stops the servers with SIGTERM
// and calls sync(2). The servers and the temporary directories are removed
// at the end, after a failure or Ctrl-C too.
package main

import (
	"context"
	crand "crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// The targets, in percent of the ratios as printed.
const (
	// packageTargetPercent is berth/zot on the package and mixed rows.
	packageTargetPercent = 120
	// blobTargetPercent is berth over the better of upstream and zot on the
	// blob rows.
	blobTargetPercent = 100
	// parityTargetPercent is berth/upstream on the package and mixed rows
	// when zot is skipped, and berth+auth/berth on the auth table's rows.
	parityTargetPercent = 95
)

// packageConcurrencies are the package rows' concurrencies.
var packageConcurrencies = []int{1, 8}

// mixedConcurrency is the mixed row's, one of packageConcurrencies: the
// mixed row runs in the package rounds at it, on their packages.
const mixedConcurrency = 8

// options are the command-line flags.
type options struct {
	blobRuns, packageRuns int
	blobMiB               int
	packages, repos       int
	packageKiB            int
	tokenRequests         int
	zot                   string
	quotaOnly             bool
	verbose               bool
	// tlsOnly runs the TLS table alone.
	tlsOnly    bool
	catalog    catalogOptions
	provenance provenanceOptions
	mirror     mirrorOptions
	olm        olmOptions
	scale      scaleOptions
	sources    sourcesOptions
}

func parseFlags() (options, error) {
	var o options
	flag.IntVar(&o.blobRuns, "blob-runs", 5, "runs per server of the blob rows")
	flag.IntVar(&o.packageRuns, "package-runs", 3, "runs per server of the package rows")
	flag.IntVar(&o.blobMiB, "blob-mib", 64, "size of the blob, in MiB")
	flag.IntVar(&o.packages, "packages", 300, "packages pushed and pulled per run, and operations of the mixed row")
	flag.IntVar(&o.repos, "repos", 30, "repositories the packages are spread over")
	flag.IntVar(&o.packageKiB, "package-kib", 50, "size of each package's content layer, in KiB")
	flag.IntVar(&o.tokenRequests, "token-requests", 500, "tokens issued, one at a time, to time the token endpoint")
	flag.StringVar(&o.zot, "zot", "", "zot binary to compare with (docs/benchmarks.md says how to build one); without it zot is skipped")
	flag.BoolVar(&o.verbose, "v", false, "print every sample of every row")
	flag.BoolVar(&o.quotaOnly, "quota", false, "run the quota table alone: pushes into a namespace at 99% of its quota against one without (it needs a berth that keeps its quota ledger)")
	flag.BoolVar(&o.tlsOnly, "tls", false, "run only the TLS table: berth over TLS against berth over plain HTTP")
	registerCatalogFlags(&o.catalog)
	registerProvenanceFlags(&o.provenance)
	registerMirrorFlags(&o.mirror)
	registerOLMFlags(&o.olm)
	registerScaleFlags(&o.scale)
	registerSourcesFlags(&o.sources)
	flag.Parse()
	if flag.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	modes := 0
	for _, on := range []bool{o.catalog.enabled, o.provenance.enabled, o.mirror.enabled, o.olm.enabled, o.scale.enabled, o.sources.enabled, o.quotaOnly, o.tlsOnly} {
		if on {
			modes++
		}
	}
	if modes > 1 {
		return o, errors.New("-catalog, -provenance, -mirror, -olm, -scale, -sources, -quota and -tls are separate runs; choose one")
	}
	for _, f := range []struct {
		name  string
		value int
	}{
		{"blob-runs", o.blobRuns}, {"package-runs", o.packageRuns}, {"blob-mib", o.blobMiB},
		{"packages", o.packages}, {"repos", o.repos}, {"package-kib", o.packageKiB},
		{"token-requests", o.tokenRequests},
	} {
		if f.value < 1 {
			return o, fmt.Errorf("-%s must be at least 1", f.name)
		}
	}
	if o.repos > o.packages {
		return o, errors.New("-repos must not exceed -packages")
	}
	return o, nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	o, err := parseFlags()
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if o.catalog.enabled {
		return runCatalog(ctx, o.catalog)
	}
	if o.provenance.enabled {
		return runProvenance(ctx, o.provenance)
	}
	if o.mirror.enabled {
		return runMirror(ctx, o.mirror)
	}
	if o.olm.enabled {
		return runOLM(ctx, o.olm)
	}
	if o.scale.enabled {
		return runScale(ctx, o.scale)
	}
	if o.sources.enabled {
		return runSources(ctx, o.sources)
	}
	if o.quotaOnly {
		return runQuotaOnly(ctx, o)
	}
	began := time.Now()
	if o.tlsOnly {
		return runTLSOnly(ctx, o, began)
	}
	if o.zot == "" {
		logf("zot skipped: no -zot binary given (docs/benchmarks.md says how to build one)")
	} else if _, err := os.Stat(o.zot); err != nil {
		return fmt.Errorf("-zot: %w", err)
	}

	root, err := os.MkdirTemp("", "berth-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	for _, d := range []string{"bin", "berth", "upstream", "zot", "floor", "berth-auth", "berth-open"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}

	logf("building berth, %s and the floor", upstreamPkg)
	bins, err := build(ctx, filepath.Join(root, "bin"))
	if err != nil {
		return err
	}
	berth, err := startBerth(ctx, bins.berth, filepath.Join(root, "berth"))
	if err != nil {
		return err
	}
	defer stop(berth)
	upstream, err := startUpstream(ctx, bins.upstream, filepath.Join(root, "upstream"))
	if err != nil {
		return err
	}
	defer stop(upstream)
	servers := []*server{berth, upstream}
	peers := fmt.Sprintf("distribution %s (upstream registry built from the same module)", bins.distribution)
	if o.zot != "" {
		zot, err := startZot(ctx, o.zot, filepath.Join(root, "zot"))
		if err != nil {
			return err
		}
		defer stop(zot)
		servers = append(servers, zot)
		peers += "; " + zotVersion(ctx, o.zot)
	} else {
		peers += "; zot skipped"
	}
	floorServer, store, err := startFloor(ctx, bins.floor, filepath.Join(root, "floor"))
	if err != nil {
		return err
	}
	defer store.Close()
	defer stop(floorServer)
	servers = append(servers, floorServer)
	// The auth table compares berth with auth against a berth without
	// that starts beside it and sees the same requests, not against the
	// first table's berth: a server that has served more holds a larger
	// catalog and heap, which changes how often its garbage collector runs.
	authed, password, err := startBerthAuth(ctx, bins.berth, filepath.Join(root, "berth-auth"))
	if err != nil {
		return err
	}
	defer stop(authed)
	unauthed, err := startBerth(ctx, bins.berth, filepath.Join(root, "berth-open"))
	if err != nil {
		return err
	}
	defer stop(unauthed)

	targets := make([]*target, len(servers))
	addrs := make([]string, len(servers))
	for i, s := range servers {
		targets[i] = newTarget(s.name, s.addr)
		addrs[i] = s.name + " on " + s.addr
	}
	l := lineup{berth: 0, upstream: 1, zot: -1, floor: len(targets) - 1}
	if o.zot != "" {
		l.zot = 2
	}
	targets[l.floor].store = store
	logf("%s, berth with auth on %s and without on %s", strings.Join(addrs, ", "), authed.addr, unauthed.addr)

	rows, err := measureAll(ctx, o, targets)
	if err != nil {
		return err
	}
	header := fmt.Sprintf("machine: %d cores, %s/%s, %s; %s; floor: net/http, http.ServeContent from disk",
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, bins.goVersion, peers)
	printTable(os.Stdout, peerTable(header, targets, l, rows), o.verbose)

	// Auth on against auth off: the package rows, berth with auth on (the
	// client logs in as a user through the token flow) against berth
	// without, and the token endpoint's latency.
	logf("auth on against auth off")
	login := newLoginTarget(authed.name, authed.addr, benchUser, password)
	authTargets := []*target{login, newTarget(unauthed.name, unauthed.addr)}
	authRows, err := measurePackages(ctx, o, authTargets, newRand(), "bench/auth", false)
	if err != nil {
		return err
	}
	p50, p99, err := tokenLatency(ctx, login, benchUser, password, o.tokenRequests)
	if err != nil {
		return err
	}
	fmt.Println()
	printTable(os.Stdout, authTable(authTargets, authRows), o.verbose)
	fmt.Printf("token issue (GET /auth/token, Basic, %d one at a time): p50 %s, p99 %s\n",
		o.tokenRequests, formatDuration(p50), formatDuration(p99))
	// TLS on against TLS off, two more berths side by side.
	stop(authed)
	stop(unauthed)
	if err := runTLSTable(ctx, o, bins.berth, root); err != nil {
		return err
	}

	logf("a namespace at 99%% of its quota against one without")
	if err := runQuota(ctx, o, bins.berth, root); err != nil {
		return err
	}
	logf("done in %s", time.Since(began).Round(time.Second))
	return nil
}

// runTLSOnly is `bench -tls`: berth built, then the TLS table alone.
func runTLSOnly(ctx context.Context, o options, began time.Time) error {
	root, err := os.MkdirTemp("", "berth-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	logf("building berth")
	bins, err := build(ctx, root)
	if err != nil {
		return err
	}
	if err := runTLSTable(ctx, o, bins.berth, root); err != nil {
		return err
	}
	logf("done in %s", time.Since(began).Round(time.Second))
	return nil
}

func stop(s *server) {
	if err := s.stop(); err != nil {
		logf("stop %v", err)
	}
}

// rowKind says which target a row has.
type rowKind int

const (
	// blobRow: berth >= 1.00x the better of upstream and zot.
	blobRow rowKind = iota
	// packageRow, the package rows and the mixed row: berth/zot >= 1.20x,
	// or berth/upstream >= 0.95x when zot is skipped.
	packageRow
)

// row is one line of a table: a throughput measured on each target.
type row struct {
	name    string
	unit    string
	kind    rowKind
	samples [][]float64 // one per target, in run order; none for a target that takes no part
}

func newRow(name, unit string, kind rowKind, targets int) *row {
	return &row{name: name, unit: unit, kind: kind, samples: make([][]float64, targets)}
}

// measurement is a throughput one round measured, for row.
type measurement struct {
	row   *row
	value float64
}

// round is one timed run of a workload on a target; rep numbers the run. It
// returns what it measured, one measurement per row the target takes part in.
type round func(ctx context.Context, t *target, rep int) ([]measurement, error)

// measureAll warms every target up, then measures the blob rows, the
// package rows and the mixed row.
func measureAll(ctx context.Context, o options, targets []*target) ([]*row, error) {
	rnd := newRand()
	blobPushRow := newRow(fmt.Sprintf("%d MiB blob push", o.blobMiB), "MB/s", blobRow, len(targets))
	blobPullRow := newRow(fmt.Sprintf("%d MiB blob pull", o.blobMiB), "MB/s", blobRow, len(targets))
	// blobs pushes a fresh blob of size and pulls it back; the floor has
	// it written instead.
	blobs := func(size int) round {
		return func(ctx context.Context, t *target, _ int) ([]measurement, error) {
			data := make([]byte, size)
			rnd.Read(data)
			desc := descriptor("application/octet-stream", data)
			var got []measurement
			if t.store != nil {
				if err := t.store.PutBlob(desc.Digest, data); err != nil {
					return nil, fmt.Errorf("%s: %w", t.name, err)
				}
				settle()
			} else {
				settle()
				push, err := blobPush(ctx, t, desc, data)
				if err != nil {
					return nil, err
				}
				got = append(got, measurement{blobPushRow, push})
			}
			pull, err := blobPull(ctx, t, desc)
			if err != nil {
				return nil, err
			}
			return append(got, measurement{blobPullRow, pull}), nil
		}
	}

	logf("warming up")
	for _, t := range targets {
		if _, err := blobs(1<<20)(ctx, t, 0); err != nil {
			return nil, err
		}
	}
	if err := measure(ctx, targets, o.blobRuns, blobs(o.blobMiB<<20)); err != nil {
		return nil, err
	}
	pkgRows, err := measurePackages(ctx, o, targets, rnd, "bench/run", true)
	if err != nil {
		return nil, err
	}
	return append([]*row{blobPushRow, blobPullRow}, pkgRows...), nil
}

func newRand() *rand.ChaCha8 {
	var seed [32]byte
	crand.Read(seed[:])
	return rand.NewChaCha8(seed)
}

// measurePackages warms the targets up with a few packages, then measures
// the package push and pull rows at each of packageConcurrencies, in
// repositories under prefix-<run>-c<concurrency>; with mixed, also the
// mixed row, in the rounds at mixedConcurrency. The floor has its packages
// written instead of pushed, and takes part in the pull rows only.
func measurePackages(ctx context.Context, o options, targets []*target, rnd io.Reader, prefix string, mixed bool) ([]*row, error) {
	packages := func(prefix string, count, offset, repos int) ([]pkg, error) {
		return newPackages(rnd, packageSet{prefix: prefix, count: count, offset: offset, repos: repos, contentSize: o.packageKiB << 10})
	}
	repos := min(o.repos, o.packages)
	// pushPull pushes pkgs to t and pulls them back, c at a time; the floor
	// has them written instead, and push is 0.
	pushPull := func(ctx context.Context, t *target, pkgs []pkg, c int) (push, pull float64, err error) {
		if t.store == nil {
			settle()
			return packageRound(ctx, t, pkgs, c)
		}
		if err := t.put(pkgs); err != nil {
			return 0, 0, err
		}
		settle()
		pull, err = pullRound(ctx, t, pkgs, c)
		return 0, pull, err
	}

	warm := 4 * mixedConcurrency
	for _, t := range targets {
		pkgs, err := packages(prefix+"-warmup", warm, 0, min(o.repos, warm))
		if err != nil {
			return nil, err
		}
		if _, _, err := pushPull(ctx, t, pkgs, mixedConcurrency); err != nil {
			return nil, err
		}
	}

	var rows []*row
	var mixedRow *row
	for _, c := range packageConcurrencies {
		pushRow := newRow(fmt.Sprintf("%d packages push (c=%d)", o.packages, c), "packages/s", packageRow, len(targets))
		pullRow := newRow(fmt.Sprintf("%d packages pull (c=%d)", o.packages, c), "packages/s", packageRow, len(targets))
		rows = append(rows, pushRow, pullRow)
		if mixed && c == mixedConcurrency {
			mixedRow = newRow(fmt.Sprintf("mixed 80%% pull / 20%% push (c=%d)", c), "ops/s", packageRow, len(targets))
		}
		r := func(ctx context.Context, t *target, rep int) ([]measurement, error) {
			run := fmt.Sprintf("%s-%d-c%d", prefix, rep+1, c)
			pkgs, err := packages(run, o.packages, 0, repos)
			if err != nil {
				return nil, err
			}
			push, pull, err := pushPull(ctx, t, pkgs, c)
			if err != nil {
				return nil, err
			}
			if t.store != nil {
				return []measurement{{pullRow, pull}}, nil
			}
			got := []measurement{{pushRow, push}, {pullRow, pull}}
			if mixedRow == nil || c != mixedConcurrency {
				return got, nil
			}
			// The mixed row: new versions in the same repositories, pushed
			// among pulls of the packages just pushed.
			fresh, err := packages(run, o.packages/mixedEvery, o.packages, repos)
			if err != nil {
				return nil, err
			}
			settle()
			ops, err := mixedRound(ctx, t, mixedSchedule(o.packages, len(pkgs)), pkgs, fresh, c)
			if err != nil {
				return nil, err
			}
			return append(got, measurement{mixedRow, ops}), nil
		}
		if err := measure(ctx, targets, o.packageRuns, r); err != nil {
			return nil, err
		}
	}
	if mixedRow != nil {
		rows = append(rows, mixedRow)
	}
	return rows, nil
}

// measure runs r runs times on each target, in the order runOrder gives,
// and records what it measures.
func measure(ctx context.Context, targets []*target, runs int, r round) error {
	for rep := range runs {
		for _, i := range runOrder(rep, len(targets)) {
			got, err := r(ctx, targets[i], rep)
			if err != nil {
				return err
			}
			for _, s := range got {
				s.row.samples[i] = append(s.row.samples[i], s.value)
				logf("%s, run %d/%d, %s: %.1f %s", s.row.name, rep+1, runs, targets[i].name, s.value, s.row.unit)
			}
		}
	}
	return nil
}

// runOrder is the order of n targets in run rep: the order of the targets
// rotated by rep (with two, ABBAAB...), so that over any n runs in a row
// each target takes each place once.
func runOrder(rep, n int) []int {
	order := make([]int, n)
	for k := range order {
		order[k] = (rep + k) % n
	}
	return order
}

// settle flushes dirty pages to disk and collects the harness's garbage, so
// that the next run does not pay for what the one before left behind.
func settle() {
	syscall.Sync()
	runtime.GC()
}

// logf reports progress on stderr; the table goes to stdout.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}
