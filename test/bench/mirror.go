package main

// The mirror benchmarks (go run ./test/bench -mirror, make bench-mirror):
// every package of one berth, with its cosign signatures, copied into a
// fresh empty berth by berth mirror (export + import through an archive, and
// sync registry to registry), by regctl and by oras, one after another on
// this machine. See docs/benchmarks.md for what each row measures.

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/berth-registry/berth/signing/signingtest"
)

const (
	// The targets: the berth copies at least mirrorSpeedup times faster than
	// the faster of regctl and oras; a sync with nothing new within
	// noopSyncLimit; the archive at most archiveOverhead times the unique
	// content of the source.
	mirrorSpeedup   = 2.0
	noopSyncLimit   = time.Second
	archiveOverhead = 1.02
	// The source: the catalog corpus of mirrorSeed, fillConcurrency packages
	// pushed at a time, one version in referrerEvery signed as an OCI
	// referrer and the others under cosign's .sig tag.
	mirrorSeed         = 1
	fillConcurrency    = 4
	referrerEvery      = 5
	mirrorIndexTimeout = 10 * time.Minute
	// rssSampleEvery is how often a command's VmHWM is read.
	rssSampleEvery = 10 * time.Millisecond
)

// The rows, in table order.
const (
	rowExportImport = "berth mirror export + import"
	rowExport       = "  of which export"
	rowImport       = "  of which import"
	rowSync         = "berth mirror sync (first, full)"
	rowNoopSync     = "berth mirror sync again, nothing new"
	rowRegctl       = "regctl repo copy --referrers, per repository"
	rowOras         = "oras cp -r, per version"
	rowArchive      = "archive size / unique source content"
)

// mirrorOptions are the flags of the mirror benchmarks.
type mirrorOptions struct {
	enabled        bool
	packages, runs int
	keep           bool
	// imagesMiB is the size of the images of the images rows (0: none);
	// imagesOnly runs those rows alone.
	imagesMiB  int
	imagesOnly bool
}

func registerMirrorFlags(o *mirrorOptions) {
	flag.BoolVar(&o.enabled, "mirror", false, "run the mirror benchmarks (berth mirror against regctl and oras) instead of the registry comparison")
	flag.IntVar(&o.packages, "mirror-packages", 500, "mirror: packages in the source, from the catalog corpus (1 to 10 versions each, about 5)")
	flag.IntVar(&o.imagesMiB, "mirror-images-mib", 1024, "mirror: MiB of generated images of the 20 OLM packages of the images rows (0: no images rows)")
	flag.BoolVar(&o.imagesOnly, "mirror-images-only", false, "mirror: run only the images rows")
	flag.IntVar(&o.runs, "mirror-runs", 3, "mirror: runs of every contender, in alternating order; the table shows medians")
	flag.BoolVar(&o.keep, "mirror-keep", false, "mirror: keep the temporary directory (data, archives, server logs) and print its path")
}

// mirrorEnv is what the contenders share.
type mirrorEnv struct {
	o                   mirrorOptions
	root                string
	berth, regctl, oras string   // binaries
	env                 []string // of every command: HOME and the tools' settings under root
	src                 *catServer
	set                 *sourceSet
	selection           string // the selection file
	// archive is the last archive's size, exported the bytes its export reported.
	archive, exported int64
	registry          string // distribution's registry binary, for the images rows' stand-ins
	goVersion         string
	images            *imagesEnv
}

// runMirror fills a source berth, copies it with every contender into fresh
// berths, and prints the table. A contender that fails makes its rows
// ERROR; the run then ends in an error, after the table.
func runMirror(ctx context.Context, o mirrorOptions) error {
	if o.packages < 1 || o.runs < 1 || o.imagesMiB < 0 || (o.imagesOnly && o.imagesMiB == 0) {
		return errors.New("-mirror-packages and -mirror-runs must be at least 1, and -mirror-images-mib positive with -mirror-images-only (0 for no images rows)")
	}
	began := time.Now()
	e, goVersion, err := setUpMirror(ctx, o)
	if e != nil && !o.keep {
		defer os.RemoveAll(e.root)
	}
	if err != nil {
		return err
	}
	defer e.src.stop()
	e.goVersion = goVersion
	failed := 0
	if !o.imagesOnly {
		if failed, err = e.runPackages(ctx); err != nil {
			return err
		}
	}
	if o.imagesMiB > 0 {
		n, err := e.runImages(ctx)
		if err != nil {
			return err
		}
		failed += n
	}
	logf("done in %s", time.Since(began).Round(time.Second))
	if failed > 0 {
		return fmt.Errorf("%d rows failed (ERROR); run with -mirror-keep to keep the server logs", failed)
	}
	return nil
}

// runPackages fills the source with signed packages, copies them with
// every contender and prints the table. It returns how many rows are ERROR.
func (e *mirrorEnv) runPackages(ctx context.Context) (int, error) {
	o := e.o
	keys, err := signingtest.WriteKeyPair(filepath.Join(e.root, "keys"), "berth-bench")
	if err != nil {
		return 0, err
	}
	if e.set, err = fillSource(ctx, e.src, keys.Signer, o.packages); err != nil {
		return 0, err
	}
	e.selection = filepath.Join(e.root, "selection.yaml")
	if err := os.WriteFile(e.selection, []byte(selectionYAML(e.set.namespaces)), 0o644); err != nil {
		return 0, err
	}

	rows := newMirrorRows()
	contenders := []contender{
		{name: "export-import", rows: []string{rowExportImport, rowExport, rowImport}, digestTags: true, run: e.exportImport},
		{name: "sync", rows: []string{rowSync, rowNoopSync}, digestTags: true, run: e.sync},
		{name: "regctl", rows: []string{rowRegctl}, digestTags: true, run: e.regctlCopy},
		{name: "oras", rows: []string{rowOras}, run: e.orasCopy},
	}
	if _, err := e.command(ctx, e.root, e.berth, "mirror", "export", "--help"); err != nil {
		msg := "berth mirror not available: " + firstLine(err.Error())
		logf("%s; skipping its rows", msg)
		for _, name := range []string{rowExportImport, rowExport, rowImport, rowSync, rowNoopSync, rowArchive} {
			rows.get(name).result, rows.get(name).detail = "SKIPPED", msg
			msg = "berth mirror not available"
		}
		contenders = contenders[2:]
	}
	if err := e.runAll(ctx, contenders, rows); err != nil {
		return 0, err
	}
	if e.archive > 0 && rows.get(rowExportImport).result != "ERROR" {
		r, ratio := rows.get(rowArchive), float64(e.archive)/float64(e.set.uniqueBytes)
		r.value, r.result = fmt.Sprintf("%.3fx", ratio), verdict(ratio <= archiveOverhead)
		r.detail = fmt.Sprintf("archive of the last run %s; its export reported %s", formatBytes(int(e.archive)), formatBytes(int(e.exported)))
	}
	header := fmt.Sprintf("mirror: %s packages, %s versions in %d namespaces (corpus seed %d), signed: %s cosign .sig tags, %s OCI referrers; "+
		"%s in %s unique blobs and manifests; medians of %d runs; %s",
		thousands(o.packages), thousands(e.set.versions), len(e.set.namespaces), mirrorSeed, thousands(e.set.digestTags), thousands(e.set.nReferred),
		formatBytes(int(e.set.uniqueBytes)), thousands(e.set.uniqueCount), o.runs, e.tools())
	return printMirrorTable(os.Stdout, header, rows), nil
}

// tools names regctl's and oras's versions and the machine.
func (e *mirrorEnv) tools() string {
	return fmt.Sprintf("regctl %s, oras %s; machine: %d cores, %s/%s, %s",
		toolVersion(e.regctl, "github.com/regclient/regclient"), toolVersion(e.oras, "oras.land/oras"),
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, e.goVersion)
}

// runAll runs every contender o.runs times, in alternating order.
func (e *mirrorEnv) runAll(ctx context.Context, contenders []contender, rows mirrorRows) error {
	for run := range e.o.runs {
		order := slices.Clone(contenders)
		if run%2 == 1 {
			slices.Reverse(order)
		}
		for _, c := range order {
			if err := e.runContender(ctx, run, c, rows); err != nil {
				return err // interrupted, or the source is gone
			}
		}
	}
	return nil
}

// setUpMirror makes the temporary directory, builds berth, finds regctl
// and oras (go tool -n, which builds the versions go.mod pins) and starts
// the source berth. It returns the environment as soon as it has a
// directory, so that the caller can remove it.
func setUpMirror(ctx context.Context, o mirrorOptions) (*mirrorEnv, string, error) {
	modRoot, err := moduleRoot(ctx)
	if err != nil {
		return nil, "", err
	}
	root, err := os.MkdirTemp("", "berth-bench-mirror-")
	if err != nil {
		return nil, "", err
	}
	if o.keep {
		logf("keeping %s", root)
	}
	e := &mirrorEnv{o: o, root: root, env: toolEnv(os.Environ(), filepath.Join(root, "home"))}
	for _, d := range []string{"bin", "home", "keys", "source"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			return e, "", err
		}
	}
	logf("building berth, regctl, oras and registry")
	bin, goVersion, err := buildBerth(ctx, modRoot, filepath.Join(root, "bin"))
	if err != nil {
		return e, "", err
	}
	e.berth = bin
	for name, path := range map[string]*string{"regctl": &e.regctl, "oras": &e.oras, "registry": &e.registry} {
		cmd := exec.CommandContext(ctx, "go", "tool", "-n", name)
		cmd.Dir = modRoot
		out, err := cmd.Output()
		if err != nil {
			return e, "", fmt.Errorf("go tool -n %s: %w", name, err)
		}
		*path = strings.TrimSpace(string(out))
	}
	if e.src, _, err = startCatalogServer(ctx, e.berth, filepath.Join(root, "source"), filepath.Join(root, "source", "data")); err != nil {
		return e, "", err
	}
	// regctl speaks HTTPS unless told otherwise, host by host.
	if _, err := e.command(ctx, root, e.regctl, "registry", "set", "--tls", "disabled", e.src.addr); err != nil {
		e.src.stop()
		return e, "", err
	}
	return e, goVersion, nil
}

// toolVersion is the version of module in the binary bin.
func toolVersion(bin, module string) string {
	if info, err := buildinfo.ReadFile(bin); err == nil && moduleVersion(info, module) != "" {
		return moduleVersion(info, module)
	}
	return "(unknown version)"
}

// toolEnv is serverEnv(environ) with HOME, and the files regctl, oras and
// berth keep settings and credentials in, under home, so that nothing of
// the caller's is read or written.
func toolEnv(environ []string, home string) []string {
	var env []string
	for _, kv := range serverEnv(environ) {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains([]string{"HOME", "DOCKER_CONFIG", "XDG_CONFIG_HOME"}, name) && !strings.HasPrefix(name, "REGCTL_") && !strings.HasPrefix(name, "ORAS_") {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"DOCKER_CONFIG="+filepath.Join(home, ".docker"), "REGCTL_CONFIG="+filepath.Join(home, "regctl.json"))
}

// selectionYAML is a selection file choosing every package of namespaces.
func selectionYAML(namespaces []string) string {
	var b strings.Builder
	b.WriteString("packages:\n")
	for _, ns := range namespaces {
		fmt.Fprintf(&b, "  - namespace: %s\n", ns)
	}
	return b.String()
}

// The contenders.

// contender is one way of copying the source into an empty berth: run
// copies into dst, working in dir, and returns a sample for each of rows.
// digestTags says the copy must carry cosign's .sig tags; name names the
// run's directory. check, when set, checks the copy instead of the
// packages' check.
type contender struct {
	name       string
	rows       []string
	digestTags bool
	run        func(ctx context.Context, dst *catServer, dir string) ([]sample, error)
	check      func(ctx context.Context, dst *catServer) error
}

// sample is one run's time of one row, and the highest peak RSS of its
// processes.
type sample struct {
	row    string
	took   time.Duration
	rssKiB int64
}

// runContender starts a fresh destination berth, runs c into it, checks
// that the destination holds what c must copy, and records the samples, or
// the failure on c's rows. It returns an error only when the run cannot go on.
func (e *mirrorEnv) runContender(ctx context.Context, run int, c contender, rows mirrorRows) error {
	dir := filepath.Join(e.root, fmt.Sprintf("run%d-%s", run+1, c.name))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if !e.o.keep {
		defer os.RemoveAll(dir)
	}
	dst, _, err := startCatalogServer(ctx, e.berth, dir, filepath.Join(dir, "data"))
	if err != nil {
		return err
	}
	defer dst.stop()
	settle()
	samples, err := c.run(ctx, dst, dir)
	if err == nil && c.check != nil {
		err = c.check(ctx, dst)
	} else if err == nil {
		var got copied
		if got, err = checkCopy(ctx, newTarget("destination", dst.addr), e.set); err == nil {
			err = got.complete(e.set, c.digestTags)
		}
		if !c.digestTags {
			rows.get(c.rows[0]).note = fmt.Sprintf("cosign .sig tags copied: %s of %s", thousands(got.digestTags), thousands(e.set.digestTags))
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	select {
	case <-e.src.exited:
		return fmt.Errorf("the source berth exited: %v\n%s", e.src.waitErr, e.src.logTail())
	default:
	}
	if err != nil {
		logf("run %d/%d, %s: %v", run+1, e.o.runs, c.name, err)
		for _, name := range c.rows {
			if r := rows.get(name); r.result != "ERROR" {
				r.result, r.detail = "ERROR", firstLine(err.Error())
			}
		}
		return nil
	}
	for _, s := range samples {
		logf("run %d/%d, %s: %s, peak RSS %s", run+1, e.o.runs, strings.TrimSpace(s.row), formatDuration(s.took), formatKiB(s.rssKiB))
		r := rows.get(s.row)
		r.seconds = append(r.seconds, s.took.Seconds())
		r.rssKiB = max(r.rssKiB, s.rssKiB)
	}
	return nil
}

// exportImport exports the selection into an archive and imports it into
// dst. The corpus's packages name public images that a loopback benchmark
// cannot reach: these rows carry the packages (--images=false), as sync,
// regctl and oras do; the images rows carry images.
func (e *mirrorEnv) exportImport(ctx context.Context, dst *catServer, dir string) ([]sample, error) {
	var exp, imp procResult
	var err error
	exp, imp, e.archive, e.exported, err = e.carry(ctx, dir, filepath.Join(dir, "mirror.tar"), dst.addr,
		[]string{"--source", e.src.addr, "--selection", e.selection, "--images=false"}, nil)
	if err != nil {
		return nil, err
	}
	return []sample{
		{rowExportImport, exp.took + imp.took, max(exp.rssKiB, imp.rssKiB)},
		{rowExport, exp.took, exp.rssKiB},
		{rowImport, imp.took, imp.rssKiB},
	}, nil
}

// carry runs berth mirror export with exportArgs into archive, then
// berth mirror import of it into dst with importArgs, and returns both
// runs, the archive's size and the bytes the export reported.
func (e *mirrorEnv) carry(ctx context.Context, dir, archive, dst string, exportArgs, importArgs []string) (exp, imp procResult, size, exported int64, err error) {
	exp, sum, err := e.berthMirror(ctx, dir, append(append([]string{"export"}, exportArgs...), "-o", archive, "--format", "json")...)
	if err != nil {
		return exp, imp, 0, 0, err
	}
	if imp, _, err = e.berthMirror(ctx, dir, append([]string{"import", archive, dst, "--format", "json"}, importArgs...)...); err != nil {
		return exp, imp, 0, 0, err
	}
	fi, err := os.Stat(archive)
	if err != nil {
		return exp, imp, 0, 0, err
	}
	return exp, imp, fi.Size(), sum.Bytes, nil
}

// sync syncs the source into dst, then again, when there is nothing new.
func (e *mirrorEnv) sync(ctx context.Context, dst *catServer, dir string) ([]sample, error) {
	args := []string{"sync", e.src.addr, dst.addr, "--state", filepath.Join(dir, "sync-state.json"), "--selection", e.selection, "--format", "json"}
	first, _, err := e.berthMirror(ctx, dir, args...)
	if err != nil {
		return nil, err
	}
	again, sum, err := e.berthMirror(ctx, dir, args...)
	if err == nil && sum.Versions+sum.Blobs+sum.Manifests > 0 {
		err = fmt.Errorf("the second sync, with nothing new, copied %d versions, %d manifests, %d blobs", sum.Versions, sum.Manifests, sum.Blobs)
	}
	return []sample{{rowSync, first.took, first.rssKiB}, {rowNoopSync, again.took, again.rssKiB}}, err
}

// mirrorSummary is what berth mirror export, import and sync print with
// --format json, as far as the harness reads it.
type mirrorSummary struct {
	Versions, Blobs, Manifests int
	Bytes                      int64
	Quarantined, Failed        []any
}

// berthMirror runs berth mirror args and reads its summary; a version it
// quarantined or failed to copy is an error.
func (e *mirrorEnv) berthMirror(ctx context.Context, dir string, args ...string) (procResult, mirrorSummary, error) {
	var sum mirrorSummary
	res, err := e.command(ctx, dir, e.berth, append([]string{"mirror"}, args...)...)
	if err != nil {
		return res, sum, err
	}
	if err = json.Unmarshal(res.stdout, &sum); err == nil && len(sum.Quarantined)+len(sum.Failed) > 0 {
		err = fmt.Errorf("%d versions quarantined, %d failed", len(sum.Quarantined), len(sum.Failed))
	}
	if err != nil {
		return res, sum, fmt.Errorf("berth mirror %s: %w: %s", args[0], err, bytes.TrimSpace(res.stdout))
	}
	return res, sum, nil
}

// regctlCopy runs regctl repo copy --referrers for each repository, which
// copies every tag, cosign's .sig tags among them, with regctl's default
// of 2 images at a time. (regctl image copy --referrers --digest-tags for
// each version took twice as long.)
func (e *mirrorEnv) regctlCopy(ctx context.Context, dst *catServer, dir string) ([]sample, error) {
	if _, err := e.command(ctx, dir, e.regctl, "registry", "set", "--tls", "disabled", dst.addr); err != nil {
		return nil, err
	}
	var commands [][]string
	for _, repo := range e.set.repos {
		commands = append(commands, []string{"repo", "copy", "--referrers", e.src.addr + "/" + repo, dst.addr + "/" + repo})
	}
	return e.sequence(ctx, dir, rowRegctl, e.regctl, commands)
}

// orasCopy runs oras cp -r for each version, which copies its referrers but
// not cosign's .sig tags.
func (e *mirrorEnv) orasCopy(ctx context.Context, dst *catServer, dir string) ([]sample, error) {
	var commands [][]string
	for _, repo := range e.set.repos {
		for _, tag := range e.set.tags[repo] {
			if !isDigestTag(tag) {
				ref := "/" + repo + ":" + tag
				commands = append(commands, []string{"cp", "-r", "--from-plain-http", "--to-plain-http", "--no-tty", e.src.addr + ref, dst.addr + ref})
			}
		}
	}
	return e.sequence(ctx, dir, rowOras, e.oras, commands)
}

// sequence runs bin with each of commands, one after another, and returns
// one sample of their total time and highest peak RSS.
func (e *mirrorEnv) sequence(ctx context.Context, dir, row, bin string, commands [][]string) ([]sample, error) {
	return e.parallel(ctx, dir, row, bin, commands, 1)
}

// parallel runs bin with each of commands, n at a time, and returns one
// sample of their total time and highest peak RSS; it stops at the first
// that fails.
func (e *mirrorEnv) parallel(ctx context.Context, dir, row, bin string, commands [][]string, n int) ([]sample, error) {
	s := sample{row: row}
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(n)
	rss := make([]int64, len(commands))
	for i, args := range commands {
		g.Go(func() error {
			res, err := e.command(gctx, dir, bin, args...)
			rss[i] = res.rssKiB
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	s.took = time.Since(start)
	s.rssKiB = slices.Max(append(rss, 0))
	return []sample{s}, nil
}

// procResult is a finished command: how long it ran, its peak resident set
// in KiB and its standard output.
type procResult struct {
	took   time.Duration
	rssKiB int64
	stdout []byte
}

// command runs bin args in dir with the tools' environment. A failure
// carries the command line and the end of its standard error.
//
// The peak resident set is VmHWM, read every rssSampleEvery while the
// command runs. getrusage's ru_maxrss would not do: execve records the peak
// of the memory it replaces, which, as Go starts a command, is the parent's,
// so every command would report the harness's own peak.
func (e *mirrorEnv) command(ctx context.Context, dir, bin string, args ...string) (procResult, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, e.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	var peak int64
	err := cmd.Start()
	if err == nil {
		exited, sampled := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(sampled)
			tick := time.NewTicker(rssSampleEvery)
			defer tick.Stop()
			for {
				if m, err := memory(cmd.Process.Pid); err == nil {
					peak = max(peak, m.hwm>>10)
				}
				select {
				case <-exited:
					return
				case <-tick.C:
				}
			}
		}()
		err = cmd.Wait()
		close(exited)
		<-sampled
	}
	res := procResult{took: time.Since(start), rssKiB: peak, stdout: stdout.Bytes()}
	if err != nil {
		msg := bytes.TrimSpace(stderr.Bytes())
		return res, fmt.Errorf("%s %s: %w: %s", filepath.Base(bin), strings.Join(args, " "), err, msg[max(0, len(msg)-2<<10):])
	}
	return res, nil
}

// The table.

// mirrorRow is one row of the table: its times over the runs and the
// highest peak RSS of its processes, or a value that is not a time; what
// it is compared with; and a result and detail when it has no times
// (SKIPPED, ERROR) or they are not times.
type mirrorRow struct {
	name    string
	seconds []float64
	rssKiB  int64
	// baseline marks the regctl and oras rows, the faster of which the
	// others are compared with. The target is speedup times faster than the
	// baseline, at most limit, or a target of a row that is not a time.
	baseline              bool
	speedup               float64
	limit                 time.Duration
	target                string
	value, result, detail string
	note                  string // added to the detail
}

// mirrorRows are the rows in table order.
type mirrorRows []*mirrorRow

func newMirrorRows() mirrorRows {
	return mirrorRows{
		{name: rowExportImport, speedup: mirrorSpeedup},
		{name: rowExport},
		{name: rowImport},
		{name: rowSync, speedup: mirrorSpeedup},
		{name: rowNoopSync, limit: noopSyncLimit},
		{name: rowRegctl, baseline: true},
		{name: rowOras, baseline: true},
		{name: rowArchive, target: fmt.Sprintf("<= %.2fx", archiveOverhead), value: "-", detail: "from an export"},
	}
}

func (rs mirrorRows) get(name string) *mirrorRow {
	for _, r := range rs {
		if r.name == name {
			return r
		}
	}
	panic("no mirror row " + name)
}

// baseline is the median of the faster of the regctl and oras rows that
// did not fail; 0 when both failed.
func (rs mirrorRows) baseline() float64 {
	best := 0.0
	for _, r := range rs {
		if m := median(r.seconds); r.baseline && r.result == "" && m > 0 && (best == 0 || m < best) {
			best = m
		}
	}
	return best
}

// printMirrorTable writes the header, one line per row (median seconds, how
// many times faster than the baseline, peak RSS, the verdict on the row's
// target) and a summary, and returns how many rows are ERROR.
func printMirrorTable(w io.Writer, header string, rows mirrorRows) int {
	base := rows.baseline()
	fmt.Fprintln(w, header)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "row\tmedian\tvs fastest of regctl/oras\tpeak RSS\ttarget\tresult\tdetail")
	misses, errs, targets := 0, 0, 0
	for _, r := range rows {
		value, ratio, rss, target, result, detail := r.value, "-", "-", r.target, r.result, r.detail
		if r.speedup > 0 {
			target = fmt.Sprintf(">= %.2fx", r.speedup)
		} else if r.limit > 0 {
			target = "<= " + formatDuration(r.limit)
		}
		if m := median(r.seconds); result == "" && m > 0 {
			value, rss = fmt.Sprintf("%.2f s", m), formatKiB(r.rssKiB)
			if base > 0 && r.limit == 0 {
				ratio = fmt.Sprintf("%.2fx", base/m)
			}
			if r.speedup > 0 && base > 0 {
				result = verdict(base/m >= r.speedup)
			} else if r.limit > 0 {
				result = verdict(m <= r.limit.Seconds())
			}
		}
		if r.note != "" && result != "ERROR" {
			detail = strings.TrimPrefix(detail+"; "+r.note, "; ")
		}
		if target != "" {
			targets++
		}
		switch result {
		case "MISS":
			misses++
		case "ERROR":
			errs++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.name, dash(value), ratio, rss, dash(target), dash(result), detail)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d of %d rows with a target MISS, %d ERROR\n", misses, targets, errs)
	return errs
}

// formatKiB prints a size in KiB as MiB.
func formatKiB(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
