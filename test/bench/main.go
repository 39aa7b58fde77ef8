// Command bench compares the throughput of `berth serve` with that of the
// upstream distribution registry (cmd/registry of the distribution module
// berth embeds, at the same version), side by side on this machine. `make
// bench` runs it; it is not part of `make test`.
//
// It builds both binaries from this module, starts each on its own loopback
// port with filesystem storage in its own temporary directory (under $TMPDIR)
// and the storage settings berth gives its embedded registry, and drives both
// with the same oras-go client code, one HTTP client per server. With the
// default flags (see -h for sizes, counts and runs) the four rows are:
//
//   - blob push and pull: a fresh random 64 MiB blob uploaded monolithically
//     (POST, then one PUT), then fetched, read to the end and its digest
//     verified. In MB/s (10^6 bytes per second).
//   - packages push and pull: 1,000 packages shaped like berth's wire format
//     (a JSON metadata config, a 50 KiB content layer, an OCI manifest with
//     berth's artifact type) pushed by tag to 50 repositories, 4 at a time;
//     then all pulled back, 4 at a time: resolve the tag, fetch the manifest,
//     config and content, verify every digest. In packages/s.
//
// A second table compares berth with auth on (an htpasswd user granted pull
// and push, a client that logs in through the token flow with oras-go's
// token cache, as oras does) against berth without, on the package rows: the
// ratio is berth+auth/berth, and the same 0.95x target reads "at most 5%
// slower". Below it, the token endpoint's p50 and p99: GET /auth/token with
// the user's Basic credentials, -token-requests times, one at a time.
//
// Content is fresh for every run, so nothing is deduplicated, and a run's
// repositories are its own, so immutable tags never collide. Both servers
// are warmed up first. Runs alternate between the servers, and which one goes
// first alternates too (berth, upstream, upstream, berth, ...), so that noise
// from the machine hits both alike; before each run the harness flushes dirty
// pages to disk and collects its own garbage, so that no run pays for the
// write-back of the one before.
//
// Reading the table: each cell is the median of that row's runs on that
// server, and berth/upstream is the ratio of the two medians; every row is a
// throughput, so higher is better and 1.00x is parity. A row whose ratio, as
// printed, is under 0.95x is marked MISS. The numbers compare the two servers
// on this machine and say little about absolute speed elsewhere; with -v the
// harness also prints every sample, in run order, to show how noisy the
// machine was. The exit status is 0 whenever every run completed, whatever
// the ratios.
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
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// targetPercent is the berth/upstream ratio every row should reach, in percent.
const targetPercent = 95

// options are the command-line flags.
type options struct {
	blobRuns, packageRuns int
	blobMiB               int
	packages, repos       int
	packageKiB            int
	concurrency           int
	tokenRequests         int
	verbose               bool
	catalog               catalogOptions
	provenance            provenanceOptions
	mirror                mirrorOptions
	olm                   olmOptions
}

func parseFlags() (options, error) {
	var o options
	flag.IntVar(&o.blobRuns, "blob-runs", 5, "runs per server of the blob rows")
	flag.IntVar(&o.packageRuns, "package-runs", 3, "runs per server of the package rows")
	flag.IntVar(&o.blobMiB, "blob-mib", 64, "size of the blob, in MiB")
	flag.IntVar(&o.packages, "packages", 1000, "packages pushed and pulled per run")
	flag.IntVar(&o.repos, "repos", 50, "repositories the packages are spread over")
	flag.IntVar(&o.packageKiB, "package-kib", 50, "size of each package's content layer, in KiB")
	flag.IntVar(&o.concurrency, "concurrency", 4, "packages pushed or pulled at a time")
	flag.IntVar(&o.tokenRequests, "token-requests", 500, "tokens issued, one at a time, to time the token endpoint")
	flag.BoolVar(&o.verbose, "v", false, "print every sample of every row")
	registerCatalogFlags(&o.catalog)
	registerProvenanceFlags(&o.provenance)
	registerMirrorFlags(&o.mirror)
	registerOLMFlags(&o.olm)
	flag.Parse()
	if flag.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	modes := 0
	for _, on := range []bool{o.catalog.enabled, o.provenance.enabled, o.mirror.enabled, o.olm.enabled} {
		if on {
			modes++
		}
	}
	if modes > 1 {
		return o, errors.New("-catalog, -provenance, -mirror and -olm are separate runs; choose one")
	}
	for _, f := range []struct {
		name  string
		value int
	}{
		{"blob-runs", o.blobRuns}, {"package-runs", o.packageRuns}, {"blob-mib", o.blobMiB},
		{"packages", o.packages}, {"repos", o.repos}, {"package-kib", o.packageKiB}, {"concurrency", o.concurrency},
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
	began := time.Now()

	root, err := os.MkdirTemp("", "berth-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	for _, d := range []string{"bin", "berth", "upstream", "berth-auth"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}

	logf("building berth and %s", upstreamPkg)
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
	authed, password, err := startBerthAuth(ctx, bins.berth, filepath.Join(root, "berth-auth"))
	if err != nil {
		return err
	}
	defer stop(authed)
	logf("berth on %s, upstream on %s, berth with auth on %s", berth.addr, upstream.addr, authed.addr)
	targets := [2]*target{newTarget(berth.name, berth.addr), newTarget(upstream.name, upstream.addr)}

	rows, err := measureAll(ctx, o, targets)
	if err != nil {
		return err
	}
	header := fmt.Sprintf("machine: %d cores, %s/%s, %s; distribution %s (upstream registry built from the same module)",
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, bins.goVersion, bins.distribution)
	printTable(os.Stdout, header, targets, rows, o.verbose)

	// Auth on against auth off: the same package rows, berth with auth on
	// (the client logs in as a user through the token flow) against berth
	// without, and the token endpoint's latency.
	logf("auth on against auth off")
	login := newLoginTarget(authed.name, authed.addr, benchUser, password)
	authTargets := [2]*target{login, targets[0]}
	authRows, err := measurePackages(ctx, o, authTargets, newRand(), "bench/auth")
	if err != nil {
		return err
	}
	p50, p99, err := tokenLatency(ctx, login, benchUser, password, o.tokenRequests)
	if err != nil {
		return err
	}
	fmt.Println()
	printTable(os.Stdout, "auth on against auth off (berth+auth: htpasswd user, bcrypt cost 10, token flow with oras-go's token cache)", authTargets, authRows, o.verbose)
	fmt.Printf("token issue (GET /auth/token, Basic, %d one at a time): p50 %s, p99 %s\n",
		o.tokenRequests, formatDuration(p50), formatDuration(p99))
	logf("done in %s", time.Since(began).Round(time.Second))
	return nil
}

func stop(s *server) {
	if err := s.stop(); err != nil {
		logf("stop %v", err)
	}
}

// row is one line of the table: a throughput measured on both servers.
type row struct {
	name    string
	unit    string
	samples [2][]float64 // berth, upstream; in run order
}

// round is one timed push-then-pull run of a workload on a target; rep
// numbers the run. It returns both throughputs.
type round func(ctx context.Context, t *target, rep int) (push, pull float64, err error)

// measureAll warms both servers up, then measures the four rows.
func measureAll(ctx context.Context, o options, targets [2]*target) ([]*row, error) {
	rnd := newRand()
	blobs := func(ctx context.Context, t *target, _ int) (float64, float64, error) {
		data := make([]byte, o.blobMiB<<20)
		rnd.Read(data)
		settle()
		return blobRound(ctx, t, data)
	}

	logf("warming up")
	for _, t := range targets {
		data := make([]byte, 1<<20)
		rnd.Read(data)
		if _, _, err := blobRound(ctx, t, data); err != nil {
			return nil, err
		}
	}
	blobPush := &row{name: fmt.Sprintf("%d MiB blob push", o.blobMiB), unit: "MB/s"}
	blobPull := &row{name: fmt.Sprintf("%d MiB blob pull", o.blobMiB), unit: "MB/s"}
	if err := measure(ctx, targets, o.blobRuns, blobs, blobPush, blobPull); err != nil {
		return nil, err
	}
	pkgRows, err := measurePackages(ctx, o, targets, rnd, "bench/run")
	if err != nil {
		return nil, err
	}
	return append([]*row{blobPush, blobPull}, pkgRows...), nil
}

func newRand() *rand.ChaCha8 {
	var seed [32]byte
	crand.Read(seed[:])
	return rand.NewChaCha8(seed)
}

// measurePackages warms both targets up with a few packages, then measures
// the package push and pull rows, in repositories under prefix-<run>.
func measurePackages(ctx context.Context, o options, targets [2]*target, rnd io.Reader, prefix string) ([]*row, error) {
	packages := func(prefix string, count int) ([]pkg, error) {
		return newPackages(rnd, packageSet{prefix: prefix, count: count, repos: min(o.repos, count), contentSize: o.packageKiB << 10})
	}
	pkgs := func(ctx context.Context, t *target, rep int) (float64, float64, error) {
		p, err := packages(fmt.Sprintf("%s-%d", prefix, rep+1), o.packages)
		if err != nil {
			return 0, 0, err
		}
		settle()
		return packageRound(ctx, t, p, o.concurrency)
	}
	for _, t := range targets {
		p, err := packages(prefix+"-warmup", 4*o.concurrency)
		if err != nil {
			return nil, err
		}
		if _, _, err := packageRound(ctx, t, p, o.concurrency); err != nil {
			return nil, err
		}
	}
	pkgPush := &row{name: fmt.Sprintf("%d packages push (c=%d)", o.packages, o.concurrency), unit: "packages/s"}
	pkgPull := &row{name: fmt.Sprintf("%d packages pull (c=%d)", o.packages, o.concurrency), unit: "packages/s"}
	if err := measure(ctx, targets, o.packageRuns, pkgs, pkgPush, pkgPull); err != nil {
		return nil, err
	}
	return []*row{pkgPush, pkgPull}, nil
}

// measure runs r runs times on each target, alternating which goes first,
// and records its throughputs in push and pull.
func measure(ctx context.Context, targets [2]*target, runs int, r round, push, pull *row) error {
	for rep := range runs {
		for _, i := range runOrder(rep) {
			p, q, err := r(ctx, targets[i], rep)
			if err != nil {
				return err
			}
			push.samples[i] = append(push.samples[i], p)
			pull.samples[i] = append(pull.samples[i], q)
			logf("%s, run %d/%d, %s: %.1f %s", push.name, rep+1, runs, targets[i].name, p, push.unit)
			logf("%s, run %d/%d, %s: %.1f %s", pull.name, rep+1, runs, targets[i].name, q, pull.unit)
		}
	}
	return nil
}

// runOrder is the order of the targets (0 berth, 1 upstream) in run rep:
// ABBAAB...
func runOrder(rep int) [2]int {
	if rep%2 == 1 {
		return [2]int{1, 0}
	}
	return [2]int{0, 1}
}

// settle flushes dirty pages to disk and collects the harness's garbage, so
// that the next run does not pay for what the one before left behind.
func settle() {
	syscall.Sync()
	runtime.GC()
}

// printTable writes the header, one line per row and the target line; with
// verbose, every row's samples follow.
func printTable(w io.Writer, header string, targets [2]*target, rows []*row, verbose bool) {
	fmt.Fprintln(w, header)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintf(tw, "row\t%s (median)\t%s (median)\t%s/%s\n", targets[0].name, targets[1].name, targets[0].name, targets[1].name)
	misses := 0
	for _, r := range rows {
		b, u := median(r.samples[0]), median(r.samples[1])
		ratio := formatRatio(b, u)
		if !meetsTarget(b, u) {
			ratio += "  MISS"
			misses++
		}
		fmt.Fprintf(tw, "%s\t%.1f %s\t%.1f %s\t%s\n", r.name, b, r.unit, u, r.unit, ratio)
	}
	tw.Flush()
	fmt.Fprintf(w, "target: %s >= %.2fx %s on every row", targets[0].name, float64(targetPercent)/100, targets[1].name)
	if misses > 0 {
		fmt.Fprintf(w, " (%d of %d rows MISS)\n", misses, len(rows))
	} else {
		fmt.Fprintln(w, " (met)")
	}
	if !verbose {
		return
	}
	fmt.Fprintln(w, "\nsamples, in run order:")
	for _, r := range rows {
		for i, t := range targets {
			fmt.Fprintf(tw, "%s\t%s\t%s %s\n", r.name, t.name, formatSamples(r.samples[i]), r.unit)
		}
	}
	tw.Flush()
}

// median is the median of xs, 0 for none. It does not reorder xs.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// formatRatio prints berth/upstream with two decimals, e.g. "0.98x"; "-"
// when upstream is 0.
func formatRatio(berth, upstream float64) string {
	if upstream == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", berth/upstream)
}

// meetsTarget reports whether berth/upstream, rounded to two decimals as
// formatRatio prints it, is at least targetPercent/100, so that the verdict
// agrees with the printed number.
func meetsTarget(berth, upstream float64) bool {
	return upstream > 0 && math.Round(berth/upstream*100) >= targetPercent
}

func formatSamples(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.1f", x)
	}
	return strings.Join(s, " ")
}

// logf reports progress on stderr; the table goes to stdout.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}
