package main

// The catalog benchmarks (go run ./test/bench -catalog, make bench-catalog):
// berth serve with a catalog of ~100,000 package versions. See
// docs/benchmarks.md for what each row measures.

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"sigs.k8s.io/yaml"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/internal/kudoindex"
	"github.com/berth-registry/berth/pkgformat"
)

// Targets of the catalog benchmarks (issue 3).
const (
	restartTarget    = 2 * time.Second
	rssTargetMiB     = 200
	searchP99Target  = 5 * time.Millisecond
	pageP99Target    = 20 * time.Millisecond
	indexRatioTarget = 100
	searchableTarget = 100 * time.Millisecond
)

const (
	// rebuildTimeout bounds the full rebuild; rebuildPoll is how often the
	// harness asks for the status meanwhile.
	rebuildTimeout = 30 * time.Minute
	rebuildPoll    = 100 * time.Millisecond
	// startPoll is how often /readyz and the search are tried after a start.
	startPoll = 2 * time.Millisecond
	// freshNamespace holds the packages pushed by the time-to-searchable row.
	freshNamespace = "fresh"
	// searchableTimeout is how long one pushed package may take to show up
	// before the row fails.
	searchableTimeout = 30 * time.Second
)

// catalogOptions are the flags of the catalog benchmarks.
type catalogOptions struct {
	enabled         bool
	versions        int
	seed            uint64
	fixtures        string
	loadWorkers     int
	loadFsync       bool
	requests        int
	warmup          int
	pushes          int
	pushConcurrency int
	afterWrite      int
	keep            bool
}

// registerCatalogFlags declares the flags of the catalog benchmarks.
func registerCatalogFlags(o *catalogOptions) {
	flag.BoolVar(&o.enabled, "catalog", false, "run the catalog benchmarks instead of the registry comparison")
	flag.IntVar(&o.versions, "catalog-versions", 100_000, "catalog: generated package versions (about 5 per package), besides the fixtures")
	flag.Uint64Var(&o.seed, "catalog-seed", 1, "catalog: seed of the generated corpus")
	flag.StringVar(&o.fixtures, "catalog-fixtures", "", "catalog: fixtures directory loaded besides the corpus (default <module>/../shared/fixtures; \"none\" for none)")
	flag.IntVar(&o.loadWorkers, "catalog-load-workers", 2*runtime.NumCPU(), "catalog: packages built and written to the registry storage at a time")
	flag.BoolVar(&o.loadFsync, "catalog-load-fsync", false, "catalog: load through berth's registry, syncing every file and directory as a push does (slower)")
	flag.IntVar(&o.requests, "catalog-requests", 4000, "catalog: timed requests per search query and concurrency")
	flag.IntVar(&o.warmup, "catalog-warmup", 300, "catalog: untimed requests per search query first")
	flag.IntVar(&o.pushes, "catalog-pushes", 1000, "catalog: pushes timed until searchable")
	flag.IntVar(&o.pushConcurrency, "catalog-push-concurrency", 4, "catalog: pushes at a time in the time-to-searchable row")
	flag.IntVar(&o.afterWrite, "catalog-after-write", 200, "catalog: pushes, one at a time, each followed by the first search after a write")
	flag.BoolVar(&o.keep, "catalog-keep", false, "catalog: keep the temporary directory (data, server log) and print its path")
}

func (o *catalogOptions) validate() error {
	for _, f := range []struct {
		name  string
		value int
	}{
		{"catalog-versions", o.versions}, {"catalog-load-workers", o.loadWorkers}, {"catalog-requests", o.requests},
		{"catalog-pushes", o.pushes}, {"catalog-push-concurrency", o.pushConcurrency},
	} {
		if f.value < 1 {
			return fmt.Errorf("-%s must be at least 1", f.name)
		}
	}
	if o.warmup < 0 || o.afterWrite < 0 {
		return errors.New("-catalog-warmup and -catalog-after-write must not be negative")
	}
	return nil
}

// runCatalog runs the catalog benchmarks and prints their table.
func runCatalog(ctx context.Context, o catalogOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	began := time.Now()
	modRoot, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	if o.fixtures == "" {
		o.fixtures = filepath.Join(modRoot, "..", "shared", "fixtures")
	}
	if o.fixtures == "none" {
		o.fixtures = ""
	}

	logf("building berth")
	ws, cleanup, err := newWorkspace(ctx, modRoot, "berth-bench-catalog-", o.keep)
	if err != nil {
		return err
	}
	defer cleanup()
	serverDir, dataDir, bin, goVersion := ws.serverDir, ws.dataDir, ws.bin, ws.goVersion

	c := newCorpus(o.seed, o.versions)
	term, termDF := c.midFrequencyTerm(0.02)
	q := searchQueries{
		term:      term,
		prefix:    prefixOf(c.commonTech()),
		namespace: c.largestNamespace(),
	}
	logf("corpus: %d versions in %d packages (seed %d); term %q in %d package descriptions", c.versions, len(c.packages), o.seed, term, termDF)

	var rows []catRow
	loaded, err := loadCorpus(ctx, dataDir, c, o)
	if err != nil {
		return err
	}
	rows = append(rows, catRow{
		name:   fmt.Sprintf("load %s versions into registry storage (in process, %d workers)", thousands(loaded.versions), o.loadWorkers),
		value:  formatDuration(loaded.took),
		detail: fmt.Sprintf("%s versions/s; %s packages; %d MiB of blobs", thousands(int(float64(loaded.versions)/loaded.took.Seconds())), thousands(loaded.packages), loaded.bytes>>20),
	})
	logf("syncing the loaded data to disk")
	settle()

	// Full rebuild: no catalog.db.
	logf("starting berth serve on the loaded data, without a catalog (full rebuild)")
	srv, times, err := startCatalogServer(ctx, bin, serverDir, dataDir)
	if err != nil {
		return err
	}
	defer func() {
		if srv != nil {
			srv.mem.close()
			stop(srv.server)
		}
	}()
	st, rebuilt, err := waitReconciled(ctx, srv, rebuildTimeout, func(st *apiv1.Status) {
		logf("rebuild: %s versions indexed after %s", thousands(st.Versions), formatDuration(time.Since(times.started)))
	})
	if err != nil {
		return err
	}
	rebuild := rebuilt.Sub(times.started)
	rebuildRow := catRow{
		name:  "full rebuild: start with no catalog.db until the first reconciliation is done",
		value: formatDuration(rebuild),
		detail: fmt.Sprintf("%s versions/s; reconciliation %s: %s indexed, %d failed; catalog holds %s versions in %s packages, %d unindexed; %s",
			thousands(int(float64(st.Reconcile.Indexed)/rebuild.Seconds())), formatDuration(reconcileTook(st.Reconcile)),
			thousands(st.Reconcile.Indexed), st.Reconcile.Failed, thousands(st.Versions), thousands(st.Packages), st.Unindexed,
			cpuDetail(srv.cmd.Process.Pid, st.Reconcile.Indexed)),
	}
	if st.Versions != loaded.versions || st.Unindexed != 0 || st.Reconcile.Failed != 0 {
		rebuildRow.result = "INCOMPLETE"
		logf("the catalog holds %d versions (%d unindexed) of the %d loaded; see %s", st.Versions, st.Unindexed, loaded.versions, filepath.Join(serverDir, "server.log"))
	}
	rows = append(rows, rebuildRow)
	rows = append(rows, rssRow("RSS after the rebuild", srv))

	// Restart with the store intact.
	logf("restarting berth serve with the catalog intact")
	if err := srv.stop(); err != nil {
		return err
	}
	srv, times, err = startCatalogServer(ctx, bin, serverDir, dataDir)
	if err != nil {
		return err
	}
	search := newSearcher(srv.addr)
	answered, err := pollUntil(ctx, srv.server, 30*time.Second, startPoll, func() (bool, error) {
		res, _, err := search.query(ctx, q.termPath())
		return err == nil && res.Total > 0, nil
	})
	if err != nil {
		return fmt.Errorf("search after restart: %w", err)
	}
	rows = append(rows,
		limitRow("restart: SIGTERM, start again until /readyz answers 200", times.ready.Sub(times.started), restartTarget, ""),
		limitRow("restart: until the search API answers", answered.Sub(times.started), restartTarget, ""))
	st, _, err = waitReconciled(ctx, srv, rebuildTimeout, nil)
	if err != nil {
		return err
	}
	startup := catRow{
		name:   "restart: the start-up reconciliation (background)",
		value:  formatDuration(reconcileTook(st.Reconcile)),
		target: "0 versions read",
		result: "met",
		detail: fmt.Sprintf("%d indexed, %d removed, %d failed (tag -> digest compared for %s tags)", st.Reconcile.Indexed, st.Reconcile.Removed, st.Reconcile.Failed, thousands(st.Versions)),
	}
	if st.Reconcile.Indexed != 0 || st.Reconcile.Failed != 0 {
		startup.result = "MISS"
	}
	rows = append(rows, startup)

	// Search latency.
	searchRows, termMedian, err := measureSearches(ctx, search, q, o)
	if err != nil {
		return err
	}
	rows = append(rows, searchRows...)
	pageRows, err := measurePages(ctx, search, q, c.largestPackage(), o)
	if err != nil {
		return err
	}
	rows = append(rows, pageRows...)
	rows = append(rows, rssRow("RSS after the searches (this process: since the restart)", srv))

	// The legacy index.
	indexRow, err := measureIndex(ctx, search, termMedian)
	if err != nil {
		return err
	}
	rows = append(rows, indexRow)

	// Time to searchable.
	ttsRows, err := measureSearchable(ctx, srv, search, q, o)
	if err != nil {
		return err
	}
	rows = append(rows, ttsRows...)
	rows = append(rows, rssRow("RSS at the end (after index.yaml and the pushes)", srv))
	if st, err := search.status(ctx); err == nil {
		logf("catalog at the end: %d versions, %d packages; %d reconciliations since the restart", st.Versions, st.Packages, st.Reconcile.Runs)
	}

	header := fmt.Sprintf("catalog: %s versions (%s generated, seed %d; %s fixtures) in %s packages; machine: %d cores, %s/%s, %s",
		thousands(loaded.versions), thousands(c.versions), o.seed, thousands(loaded.versions-c.versions), thousands(loaded.packages),
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, goVersion)
	printCatalogTable(os.Stdout, header, rows)
	logf("done in %s", time.Since(began).Round(time.Second))
	return nil
}

// workspace is the temporary directory of one benchmark run: root, and in
// it bin/ with the berth binary built for the run, and berth/, the server's
// directory, whose data/ is its data directory.
type workspace struct {
	root, serverDir, dataDir string
	bin, goVersion           string
}

// newWorkspace makes a workspace under a new temporary directory named
// after prefix, with the extra directories given (relative to root), and
// builds berth into it. cleanup removes it, unless keep is set, which logs
// its path instead.
func newWorkspace(ctx context.Context, modRoot, prefix string, keep bool, extra ...string) (w *workspace, cleanup func(), err error) {
	root, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, nil, err
	}
	cleanup = func() { os.RemoveAll(root) }
	if keep {
		logf("keeping %s", root)
		cleanup = func() {}
	}
	w = &workspace{root: root, serverDir: filepath.Join(root, "berth")}
	w.dataDir = filepath.Join(w.serverDir, "data")
	for _, d := range append([]string{"bin", "berth"}, extra...) {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			cleanup()
			return nil, nil, err
		}
	}
	if w.bin, w.goVersion, err = buildBerth(ctx, modRoot, filepath.Join(root, "bin")); err != nil {
		cleanup()
		return nil, nil, err
	}
	return w, cleanup, nil
}

// buildBerth compiles berth into dir and returns its path and Go version.
func buildBerth(ctx context.Context, modRoot, dir string) (string, string, error) {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(filepath.Separator), "./cmd/berth")
	cmd.Dir = modRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	bin := filepath.Join(dir, "berth")
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return "", "", err
	}
	return bin, info.GoVersion, nil
}

// The server.

// catServer is a berth serve process of the catalog benchmarks, with a
// sampler of its memory.
type catServer struct {
	*server
	mem *memWatch
}

// stop stops the server and its sampler.
func (s *catServer) stop() error {
	s.mem.close()
	return s.server.stop()
}

// memSampleEvery is how often a server's private memory is sampled.
const memSampleEvery = 50 * time.Millisecond

// memWatch samples a process's memory until closed and keeps the peak of its
// private memory (RssAnon), which /proc reports only as it is now.
type memWatch struct {
	pid      int
	peakAnon atomic.Int64
	stopped  chan struct{}
	done     chan struct{}
}

func watchMemory(pid int) *memWatch {
	w := &memWatch{pid: pid, stopped: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(memSampleEvery)
		defer t.Stop()
		for {
			w.sample()
			select {
			case <-w.stopped:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *memWatch) sample() {
	if m, err := memory(w.pid); err == nil && m.anon > w.peakAnon.Load() {
		w.peakAnon.Store(m.anon)
	}
}

// peak is the highest private memory seen, sampling once more first.
func (w *memWatch) peak() int64 {
	w.sample()
	return w.peakAnon.Load()
}

func (w *memWatch) close() {
	select {
	case <-w.stopped:
	default:
		close(w.stopped)
	}
	<-w.done
}

// startTimes are the moments of a start: the process started, /readyz answered 200.
type startTimes struct{ started, ready time.Time }

// startCatalogServer runs berth serve --data dataDir, and args after those,
// with its log appended to dir/server.log, and waits for /readyz, polling
// every startPoll.
func startCatalogServer(ctx context.Context, bin, dir, dataDir string, args ...string) (*catServer, startTimes, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, startTimes{}, err
	}
	logFile, err := os.OpenFile(filepath.Join(dir, "server.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, startTimes{}, err
	}
	defer logFile.Close() // the child has its own copy
	cmd := exec.Command(bin, append([]string{"serve", "--addr", addr, "--data", dataDir}, args...)...)
	cmd.Dir = dir
	cmd.Env = serverEnv(os.Environ())
	cmd.Stdout, cmd.Stderr = logFile, logFile
	var times startTimes
	times.started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, times, fmt.Errorf("start berth: %w", err)
	}
	s := &server{name: "berth", addr: addr, dir: dir, cmd: cmd, exited: make(chan struct{})}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	mem := watchMemory(cmd.Process.Pid)
	hc := &http.Client{Timeout: time.Second, Transport: loopbackTransport(addr)}
	defer hc.CloseIdleConnections()
	times.ready, err = pollUntil(ctx, s, readyTimeout, startPoll, func() (bool, error) {
		resp, err := hc.Get("http://" + addr + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		mem.close()
		s.stop()
		return nil, times, fmt.Errorf("berth: %w\n%s", err, s.logTail())
	}
	return &catServer{server: s, mem: mem}, times, nil
}

// pollUntil calls fn every interval until it reports true, and returns the
// moment it did. It gives up when fn fails, s exits, ctx ends or timeout passes.
func pollUntil(ctx context.Context, s *server, timeout, interval time.Duration, fn func() (bool, error)) (time.Time, error) {
	deadline := time.After(timeout)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		ok, err := fn()
		if err != nil {
			return time.Time{}, err
		}
		if ok {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-s.exited:
			return time.Time{}, fmt.Errorf("berth exited: %v\n%s", s.waitErr, s.logTail())
		case <-deadline:
			return time.Time{}, fmt.Errorf("gave up after %s", timeout)
		case <-tick.C:
		}
	}
}

// waitReconciled polls /api/v1/status until the first reconciliation of the
// server's process has finished, calling progress every 10 s meanwhile. It
// returns the status and when the harness saw it.
func waitReconciled(ctx context.Context, s *catServer, timeout time.Duration, progress func(*apiv1.Status)) (*apiv1.Status, time.Time, error) {
	sr := newSearcher(s.addr)
	var st *apiv1.Status
	lastProgress := time.Now()
	at, err := pollUntil(ctx, s.server, timeout, rebuildPoll, func() (bool, error) {
		var err error
		if st, err = sr.status(ctx); err != nil {
			return false, nil // busy; try again
		}
		if progress != nil && time.Since(lastProgress) >= 10*time.Second {
			progress(st)
			lastProgress = time.Now()
		}
		return st.Reconcile.Runs > 0 && st.Reconcile.Finished != nil, nil
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("waiting for the reconciliation: %w", err)
	}
	if st.Reconcile.Error != "" {
		return nil, time.Time{}, fmt.Errorf("the reconciliation failed: %s", st.Reconcile.Error)
	}
	// The status counts what the store holds before it reports the
	// reconciliation, so the answer that first shows it finished can miss
	// its last writes; ask again for the counts.
	again, err := sr.status(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	again.Reconcile = st.Reconcile
	return again, at, nil
}

func reconcileTook(r apiv1.ReconcileStatus) time.Duration {
	if r.Started == nil || r.Finished == nil {
		return 0
	}
	return r.Finished.Sub(*r.Started)
}

// procMemory is a process's memory as /proc/<pid>/status reports it, in bytes.
type procMemory struct {
	rss, hwm int64 // VmRSS, and VmHWM: the peak resident set
	// anon and file split rss: RssAnon is private memory (heaps, stacks),
	// RssFile pages of mapped files (the binary, and the catalog database
	// when SQLite maps it), which the kernel can drop and read again.
	anon, file int64
}

// memory reads the memory of process pid.
func memory(pid int) (procMemory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procMemory{}, err
	}
	return parseProcStatus(b)
}

// parseProcStatus reads the text of /proc/<pid>/status.
func parseProcStatus(b []byte) (procMemory, error) {
	var m procMemory
	fields := map[string]*int64{"VmRSS": &m.rss, "VmHWM": &m.hwm, "RssAnon": &m.anon, "RssFile": &m.file}
	for line := range strings.SplitSeq(string(b), "\n") {
		key, value, _ := strings.Cut(line, ":")
		field, ok := fields[key]
		if !ok {
			continue
		}
		kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return procMemory{}, fmt.Errorf("%s: %w", key, err)
		}
		*field = kib << 10
	}
	if m.rss == 0 || m.hwm == 0 {
		return procMemory{}, errors.New("no VmRSS or VmHWM")
	}
	return m, nil
}

// cpuDetail says how much CPU time process pid has used, and per version
// when versions > 0: unlike the wall time, a machine busy with other work
// does not inflate it.
func cpuDetail(pid, versions int) string {
	cpu, err := processCPU(pid)
	if err != nil {
		return fmt.Sprintf("CPU time unknown: %v", err)
	}
	if versions == 0 {
		return fmt.Sprintf("berth's CPU time %s", formatDuration(cpu))
	}
	return fmt.Sprintf("berth's CPU time %s, %.2f ms per version", formatDuration(cpu), float64(cpu.Microseconds())/1000/float64(versions))
}

// rssRow reports the server's resident memory now and at its peak; the
// verdict is on the peak, VmHWM.
func rssRow(name string, s *catServer) catRow {
	row := catRow{name: name + ": VmRSS", target: fmt.Sprintf("peak <= %d MiB", rssTargetMiB)}
	m, err := memory(s.cmd.Process.Pid)
	if err != nil {
		row.value, row.result, row.detail = "-", "ERROR", err.Error()
		return row
	}
	row.value = fmt.Sprintf("%d MiB", m.rss>>20)
	row.detail = fmt.Sprintf("peak (VmHWM) %d MiB; private (RssAnon) now %d MiB, peak %d MiB; mapped files (RssFile) now %d MiB",
		m.hwm>>20, m.anon>>20, s.mem.peak()>>20, m.file>>20)
	row.result = verdict(m.hwm <= rssTargetMiB<<20)
	return row
}

// Search.

// searchQueries are the queries of the search rows.
type searchQueries struct {
	term      string // a mid-frequency description word
	prefix    string // the start of the tech most names are about
	namespace string // the namespace with the most packages
}

func (q searchQueries) termPath() string { return "/api/v1/packages?q=" + url.QueryEscape(q.term) }

// list is every search row's label and request path.
func (q searchQueries) list() [][2]string {
	return [][2]string{
		{"term q=" + q.term, q.termPath()},
		{"prefix q=" + q.prefix, "/api/v1/packages?q=" + url.QueryEscape(q.prefix)},
		{"filtered q=" + q.term + "&format=olm&namespace=" + q.namespace,
			"/api/v1/packages?" + url.Values{"q": {q.term}, "format": {"olm"}, "namespace": {q.namespace}}.Encode()},
		{"facets (no q) limit=20", "/api/v1/packages?limit=20"},
	}
}

// prefixOf is the first four letters of a name part (three when it has only four).
func prefixOf(part string) string {
	if len(part) > 4 {
		return part[:4]
	}
	if len(part) == 4 {
		return part[:3]
	}
	return part
}

// searcher sends the catalog API requests.
type searcher struct {
	base string
	hc   *http.Client
}

func newSearcher(addr string) *searcher {
	return &searcher{base: "http://" + addr, hc: &http.Client{Timeout: 30 * time.Second, Transport: loopbackTransport(addr)}}
}

// get sends GET path and reads the whole answer; it fails on any status but 200.
func (s *searcher) get(ctx context.Context, path string) ([]byte, error) {
	body, _, err := s.getWithHeader(ctx, path)
	return body, err
}

// getWithHeader is get that also returns the answer's header.
func (s *searcher) getWithHeader(ctx context.Context, path string) ([]byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+path, nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, bytes.TrimSpace(body))
	}
	return body, resp.Header, nil
}

// query sends a search and decodes its answer; took is the request's time
// until the body was read, without decoding.
func (s *searcher) query(ctx context.Context, path string) (*apiv1.SearchResponse, time.Duration, error) {
	start := time.Now()
	body, err := s.get(ctx, path)
	took := time.Since(start)
	if err != nil {
		return nil, took, err
	}
	var res apiv1.SearchResponse
	if err := json.Unmarshal(body, &res); err != nil {
		return nil, took, fmt.Errorf("GET %s: %w", path, err)
	}
	return &res, took, nil
}

func (s *searcher) status(ctx context.Context) (*apiv1.Status, error) {
	body, err := s.get(ctx, "/api/v1/status")
	if err != nil {
		return nil, err
	}
	var st apiv1.Status
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	return &st, nil
}

// timeRequests sends n GET path, concurrency at a time, and returns each
// one's time until its body was read.
func (s *searcher) timeRequests(ctx context.Context, path string, n, concurrency int) ([]time.Duration, error) {
	out := make([]time.Duration, n)
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for range concurrency {
		g.Go(func() error {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return nil
				}
				start := time.Now()
				if _, err := s.get(gctx, path); err != nil {
					return err
				}
				out[i] = time.Since(start)
			}
		})
	}
	return out, g.Wait()
}

// measureSearches times every search query at concurrency 1 and 4 and
// returns the rows and the median of the term query at concurrency 1.
func measureSearches(ctx context.Context, s *searcher, q searchQueries, o catalogOptions) ([]catRow, time.Duration, error) {
	queries := q.list()
	totals := make([]int, len(queries))
	for i, qu := range queries {
		res, _, err := s.query(ctx, qu[1])
		if err != nil {
			return nil, 0, err
		}
		totals[i] = res.Total
		logf("search %s: %d matches, %d on the page", qu[0], res.Total, len(res.Packages))
		if _, err := s.timeRequests(ctx, qu[1], o.warmup, 1); err != nil {
			return nil, 0, err
		}
	}
	var rows []catRow
	var termMedian time.Duration
	for _, concurrency := range []int{1, 4} {
		for i, qu := range queries {
			settle()
			lat, err := s.timeRequests(ctx, qu[1], o.requests, concurrency)
			if err != nil {
				return nil, 0, err
			}
			p50, p99 := percentile(lat, 0.50), percentile(lat, 0.99)
			if i == 0 && concurrency == 1 {
				termMedian = p50
			}
			logf("search %s, c=%d: p50 %s, p99 %s", qu[0], concurrency, formatDuration(p50), formatDuration(p99))
			rows = append(rows, catRow{
				name:   fmt.Sprintf("search %s, c=%d", qu[0], concurrency),
				value:  formatDuration(p50),
				p99:    formatDuration(p99),
				target: "p99 <= " + formatDuration(searchP99Target),
				result: verdict(p99 <= searchP99Target),
				detail: fmt.Sprintf("%s matches; %s requests", thousands(totals[i]), thousands(o.requests)),
			})
		}
	}
	return rows, termMedian, nil
}

// measurePages times the web UI's search page (words, and a facet) and
// the package page of the package with the most versions, at concurrency 1
// and 4. The target is on the server's time, which each page reports in its
// Server-Timing header (from its handler's start to its rendering); the
// whole exchange over loopback, which shares the cores with the server, is
// in the detail.
func measurePages(ctx context.Context, s *searcher, q searchQueries, big *pkgSpec, o catalogOptions) ([]catRow, error) {
	pages := [][2]string{
		{"search page, words", "/?q=" + url.QueryEscape(q.term)},
		{"search page, format facet", "/?format=olm&namespace=" + url.QueryEscape(q.namespace)},
		{fmt.Sprintf("package page, %d versions", big.versions), "/ui/packages/" + big.namespace + "/" + big.name},
	}
	var rows []catRow
	for _, pg := range pages {
		body, err := s.get(ctx, pg[1])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pg[0], err)
		}
		if !bytes.Contains(body, []byte("<html")) {
			return nil, fmt.Errorf("%s: GET %s is not an HTML page: %.200s", pg[0], pg[1], body)
		}
		if _, _, err := s.timePages(ctx, pg[1], o.warmup, 1); err != nil {
			return nil, err
		}
		for _, concurrency := range []int{1, 4} {
			settle()
			server, total, err := s.timePages(ctx, pg[1], o.requests, concurrency)
			if err != nil {
				return nil, err
			}
			p50, p99 := percentile(server, 0.50), percentile(server, 0.99)
			logf("%s, c=%d: server p50 %s, p99 %s; exchange p50 %s, p99 %s", pg[0], concurrency, formatDuration(p50), formatDuration(p99),
				formatDuration(percentile(total, 0.50)), formatDuration(percentile(total, 0.99)))
			rows = append(rows, catRow{
				name:   fmt.Sprintf("UI %s, c=%d (server)", pg[0], concurrency),
				value:  formatDuration(p50),
				p99:    formatDuration(p99),
				target: "p99 <= " + formatDuration(pageP99Target),
				result: verdict(p99 <= pageP99Target),
				detail: fmt.Sprintf("whole exchange p50 %s, p99 %s; %d KiB page; %s requests", formatDuration(percentile(total, 0.50)),
					formatDuration(percentile(total, 0.99)), len(body)>>10, thousands(o.requests)),
			})
		}
	}
	return rows, nil
}

// timePages sends GET path n times, concurrency at a time, and returns the
// time each took the server (its Server-Timing page;dur=) and the whole
// exchange.
func (s *searcher) timePages(ctx context.Context, path string, n, concurrency int) (server, total []time.Duration, err error) {
	server, total = make([]time.Duration, n), make([]time.Duration, n)
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for range concurrency {
		g.Go(func() error {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return nil
				}
				start := time.Now()
				_, hdr, err := s.getWithHeader(gctx, path)
				if err != nil {
					return err
				}
				total[i] = time.Since(start)
				ms, ok := strings.CutPrefix(hdr.Get("Server-Timing"), "page;dur=")
				f, perr := strconv.ParseFloat(ms, 64)
				if !ok || perr != nil {
					return fmt.Errorf("GET %s: Server-Timing %q, want page;dur=MILLISECONDS", path, hdr.Get("Server-Timing"))
				}
				server[i] = time.Duration(f * float64(time.Millisecond))
			}
		})
	}
	return server, total, g.Wait()
}

// The legacy index.

// indexParse is what parsing an index cost.
type indexParse struct {
	took      time.Duration
	allocated uint64 // bytes allocated during the parse
	retained  uint64 // heap the parsed index holds
	entries   int    // package versions
}

// parseIndex parses an index.yaml as KUDO's client does, with sigs.k8s.io/yaml.
func parseIndex(body []byte) (indexParse, error) {
	var before, after, kept runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	var idx kudoindex.IndexFile
	err := yaml.Unmarshal(body, &idx)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	if err != nil {
		return indexParse{}, fmt.Errorf("parse index.yaml: %w", err)
	}
	runtime.GC()
	runtime.ReadMemStats(&kept)
	p := indexParse{took: took, allocated: after.TotalAlloc - before.TotalAlloc}
	if kept.HeapAlloc > before.HeapAlloc {
		p.retained = kept.HeapAlloc - before.HeapAlloc
	}
	for _, versions := range idx.Entries {
		p.entries += len(versions)
	}
	runtime.KeepAlive(&idx)
	return p, nil
}

// measureIndex downloads /index.yaml and parses it, and compares the whole
// with one search.
func measureIndex(ctx context.Context, s *searcher, searchMedian time.Duration) (catRow, error) {
	logf("GET /index.yaml")
	settle()
	start := time.Now()
	body, err := s.get(ctx, "/index.yaml")
	download := time.Since(start)
	if err != nil {
		return catRow{}, err
	}
	logf("parsing %d MiB of index.yaml", len(body)>>20)
	p, err := parseIndex(body)
	if err != nil {
		return catRow{}, err
	}
	total := download + p.took
	ratio := float64(total) / float64(searchMedian)
	return catRow{
		name:   "index.yaml: GET + parse with sigs.k8s.io/yaml (KUDO's IndexFile)",
		value:  formatDuration(total),
		target: fmt.Sprintf(">= %dx one search", indexRatioTarget),
		result: verdict(ratio >= indexRatioTarget),
		detail: fmt.Sprintf("%sx the term search p50; %s versions, %d MiB; GET %s, parse %s allocating %d MiB (%d MiB kept)",
			thousands(int(ratio)), thousands(p.entries), len(body)>>20, formatDuration(download), formatDuration(p.took),
			p.allocated>>20, p.retained>>20),
	}, nil
}

// Time to searchable.

// changeWatcher follows the change feed and tells waiters when a version
// they wait for has been indexed.
type changeWatcher struct {
	mu      sync.Mutex
	seen    map[string]time.Time
	waiting map[string]chan time.Time
}

func newChangeWatcher() *changeWatcher {
	return &changeWatcher{seen: map[string]time.Time{}, waiting: map[string]chan time.Time{}}
}

func changeKey(namespace, name, tag string) string { return namespace + "/" + name + ":" + tag }

// wait returns a channel that receives the moment the feed showed the
// version indexed; at once if it already has.
func (w *changeWatcher) wait(key string) <-chan time.Time {
	ch := make(chan time.Time, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if at, ok := w.seen[key]; ok {
		ch <- at
		return ch
	}
	w.waiting[key] = ch
	return ch
}

func (w *changeWatcher) saw(key string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.waiting[key]; ok {
		ch <- at
		delete(w.waiting, key)
		return
	}
	w.seen[key] = at
}

// follow polls GET /api/v1/changes from since until ctx ends: at once while
// there are changes, every millisecond when there are none.
func (w *changeWatcher) follow(ctx context.Context, s *searcher, since int64) error {
	for ctx.Err() == nil {
		body, err := s.get(ctx, fmt.Sprintf("/api/v1/changes?since=%d&limit=500", since))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		at := time.Now()
		var c apiv1.Changes
		if err := json.Unmarshal(body, &c); err != nil {
			return fmt.Errorf("changes: %w", err)
		}
		for _, ch := range c.Changes {
			if ch.Action == apiv1.ActionPut && ch.Status == apiv1.StatusIndexed {
				w.saw(changeKey(ch.Namespace, ch.Name, ch.Version), at)
			}
		}
		since = c.Next
		if len(c.Changes) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// measureSearchable pushes fresh packages with berth's client and times each
// from Push returning to the package being found by a search for its name:
// the change feed says when it was indexed, then one search (repeated every
// millisecond until it finds it) confirms it. Then it pushes more, one at a
// time, and after each, once indexed, times the first term search and the
// first facet listing: the first searches after a write, which find nothing
// the store may cache about the whole catalog still valid.
func measureSearchable(ctx context.Context, srv *catServer, s *searcher, q searchQueries, o catalogOptions) ([]catRow, error) {
	specs := freshPackages(o.seed, o.pushes+o.afterWrite, freshNamespace)
	arts := make([]*pkgformat.Artifact, len(specs))
	tags := make([]string, len(specs))
	for i := range specs {
		pkgs, err := specs[i].build()
		if err != nil {
			return nil, err
		}
		if arts[i], err = pkgs[0].Artifact(); err != nil {
			return nil, err
		}
		tags[i] = pkgformat.Tag(pkgs[0].Metadata.Version)
	}
	cl, err := pushClient(srv.addr)
	if err != nil {
		return nil, err
	}
	st, err := s.status(ctx)
	if err != nil {
		return nil, err
	}
	watcher := newChangeWatcher()
	feedCtx, stopFeed := context.WithCancel(ctx)
	feedDone := make(chan error, 1)
	go func() { feedDone <- watcher.follow(feedCtx, newSearcher(srv.addr), st.Seq) }()
	defer func() {
		stopFeed()
		<-feedDone
	}()

	// push pushes package i and waits until the change feed shows it
	// indexed; it returns when Push returned and how long after that the
	// feed showed it (0 when it already had).
	push := func(ctx context.Context, i int) (time.Time, time.Duration, error) {
		p := &specs[i]
		key := changeKey(p.namespace, p.name, tags[i])
		seen := watcher.wait(key)
		ref := client.Reference{Registry: srv.addr, Namespace: p.namespace, Name: p.name, Tag: tags[i]}
		if _, err := cl.Push(ctx, ref, arts[i]); err != nil {
			return time.Time{}, 0, err
		}
		pushed := time.Now()
		select {
		case at := <-seen:
			return pushed, max(0, at.Sub(pushed)), nil
		case err := <-feedDone:
			return time.Time{}, 0, fmt.Errorf("change feed: %v", err)
		case <-time.After(searchableTimeout):
			return time.Time{}, 0, fmt.Errorf("%s did not show up in the change feed within %s", key, searchableTimeout)
		case <-ctx.Done():
			return time.Time{}, 0, ctx.Err()
		}
	}

	logf("pushing %d packages, %d at a time, each timed until searchable", o.pushes, o.pushConcurrency)
	settle()
	searchable := make([]time.Duration, o.pushes)
	indexed := make([]time.Duration, o.pushes)
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for range o.pushConcurrency {
		g.Go(func() error {
			for {
				i := int(next.Add(1)) - 1
				if i >= o.pushes {
					return nil
				}
				pushed, took, err := push(gctx, i)
				if err != nil {
					return err
				}
				indexed[i] = took
				p := &specs[i]
				path := "/api/v1/packages?" + url.Values{"q": {p.name}, "namespace": {p.namespace}, "limit": {"5"}}.Encode()
				found, err := pollUntil(gctx, srv.server, searchableTimeout, time.Millisecond, func() (bool, error) {
					res, _, err := s.query(gctx, path)
					if err != nil {
						return false, err
					}
					return slices.ContainsFunc(res.Packages, func(ps apiv1.PackageSummary) bool {
						return ps.Namespace == p.namespace && ps.Name == p.name && ps.Version == tags[i]
					}), nil
				})
				if err != nil {
					return fmt.Errorf("search for %s/%s: %w", p.namespace, p.name, err)
				}
				searchable[i] = found.Sub(pushed)
			}
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	p50, p99 := percentile(searchable, 0.50), percentile(searchable, 0.99)
	rows := []catRow{
		{
			name:   fmt.Sprintf("time to searchable: %d pushes (berth client), c=%d", o.pushes, o.pushConcurrency),
			value:  formatDuration(p50),
			p99:    formatDuration(p99),
			target: "p99 <= " + formatDuration(searchableTarget),
			result: verdict(p99 <= searchableTarget),
			detail: fmt.Sprintf("from Push returning to a search for the name finding it; max %s", formatDuration(slices.Max(searchable))),
		},
		{
			name:   "  of which: until the change feed shows it indexed",
			value:  formatDuration(percentile(indexed, 0.50)),
			p99:    formatDuration(percentile(indexed, 0.99)),
			detail: "feed polled every 1 ms; 0 when it was there as Push returned",
		},
	}
	if o.afterWrite == 0 {
		return rows, nil
	}

	logf("pushing %d packages one at a time, each followed by a term search and a facet listing", o.afterWrite)
	queries := q.list()
	term, facets := make([]time.Duration, o.afterWrite), make([]time.Duration, o.afterWrite)
	for j := range o.afterWrite {
		if _, _, err := push(ctx, o.pushes+j); err != nil {
			return nil, err
		}
		for _, m := range []struct {
			path string
			out  []time.Duration
		}{{queries[0][1], term}, {queries[3][1], facets}} {
			_, took, err := s.query(ctx, m.path)
			if err != nil {
				return nil, err
			}
			m.out[j] = took
		}
	}
	for _, m := range []struct {
		label string
		lat   []time.Duration
	}{{queries[0][0], term}, {queries[3][0], facets}} {
		p99 := percentile(m.lat, 0.99)
		rows = append(rows, catRow{
			name:   fmt.Sprintf("search %s, first after a write, c=1", m.label),
			value:  formatDuration(percentile(m.lat, 0.50)),
			p99:    formatDuration(p99),
			target: "p99 <= " + formatDuration(searchP99Target),
			result: verdict(p99 <= searchP99Target),
			detail: fmt.Sprintf("%d pushes one at a time, each searched once", o.afterWrite),
		})
	}
	return rows, nil
}

// pushClient is berth's client for the server on addr: plain HTTP, no
// credentials, loopback only.
func pushClient(addr string) (*client.Client, error) {
	plain := true
	return client.New(client.Options{
		PlainHTTP:   &plain,
		Credentials: credentials.NewMemoryStore(),
		HTTPClient:  &http.Client{Transport: loopbackTransport(addr)},
	})
}

// The table.

// catRow is one line of the catalog table. Single measurements put their
// value in value and leave p99 empty.
type catRow struct {
	name       string
	value, p99 string
	target     string
	result     string // met, MISS, or empty when the row has no target
	detail     string
}

// limitRow is a row of one duration that must not exceed limit.
func limitRow(name string, d, limit time.Duration, detail string) catRow {
	return catRow{name: name, value: formatDuration(d), target: "<= " + formatDuration(limit), result: verdict(d <= limit), detail: detail}
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISS"
}

// printCatalogTable writes the header, the rows and a summary line.
func printCatalogTable(w io.Writer, header string, rows []catRow) {
	fmt.Fprintln(w, header)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "row\tp50 / value\tp99\ttarget\tresult\tdetail")
	misses, targets := 0, 0
	for _, r := range rows {
		if r.target != "" || r.result != "" { // a row that failed may have no target
			targets++
		}
		if r.result != "" && r.result != "met" {
			misses++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.name, dash(r.value), dash(r.p99), dash(r.target), dash(r.result), r.detail)
	}
	tw.Flush()
	if misses > 0 {
		fmt.Fprintf(w, "%d of %d rows with a target MISS (or are INCOMPLETE/ERROR)\n", misses, targets)
	} else {
		fmt.Fprintf(w, "all %d rows with a target met\n", targets)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// percentile is the nearest-rank p-quantile of ds (0 < p <= 1), 0 for none.
// It does not reorder ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// formatDuration prints milliseconds below a second, seconds below ten
// minutes, minutes and seconds above.
func formatDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	case d < 10*time.Minute:
		return fmt.Sprintf("%.2f s", d.Seconds())
	default:
		return d.Round(time.Second).String()
	}
}

// thousands prints n with commas: 100,527.
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
