package main

// The tracked-sources benchmarks (go run ./test/bench -sources, make
// bench-sources): berth serve following git repositories served by git
// http-backend and tarballs served with ETags, all on loopback.
//
//   - push to searchable: a new tag pushed over smart HTTP to a repository
//     whose tags v* berth follows, then a GitHub webhook delivered at once,
//     timed from the push's end until the search lists the new version,
//     for -sources-tags tags one after another; p50 and p99, target p99 <=
//     2 s.
//   - polling: -sources-count unchanged sources (half git, each its own
//     repository, half http tarballs) checked every -sources-interval;
//     once each was built, berth's process CPU time (utime+stime from
//     /proc/<pid>/stat) over -sources-cycles intervals, divided by the
//     checks the servers answered per source (each check of a git source
//     is one ls-remote, of an http source one conditional GET answered
//     304): CPU-seconds per polling cycle, target <= 1; and the builds
//     berth counted meanwhile (berth_sources_builds_total), target 0.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/internal/gittest"
	"github.com/berth-registry/berth/pkgformat"
)

const (
	// sourcesNamespace holds the benchmark's packages.
	sourcesNamespace = "bench"
	// sourceSearchableTarget bounds the p99 from a pushed tag to its version in
	// the search.
	sourceSearchableTarget = 2 * time.Second
	// cycleCPUTarget bounds berth's CPU time per polling cycle.
	cycleCPUTarget = time.Second
	// sourcesWebhookSecret signs the webhooks the harness delivers.
	sourcesWebhookSecret = "bench-webhook-secret"
	// buildsMetric counts the versions berth built from sources.
	buildsMetric = "berth_sources_builds_total"
	// sourcesPoll is how often the harness looks for a new version;
	// sourcesTimeout how long one may take before the row fails.
	sourcesPoll    = 5 * time.Millisecond
	sourcesTimeout = time.Minute
	// firstBuildsTimeout bounds the first build of every polled source.
	firstBuildsTimeout = 30 * time.Minute
	// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times on Linux.
	clockTicks = 100
)

// sourcesOptions are the flags of the sources benchmarks.
type sourcesOptions struct {
	enabled  bool
	tags     int
	count    int
	interval time.Duration
	cycles   int
	keep     bool
}

func registerSourcesFlags(o *sourcesOptions) {
	flag.BoolVar(&o.enabled, "sources", false, "run the tracked-sources benchmarks instead of the registry comparison")
	flag.IntVar(&o.tags, "sources-tags", 50, "sources: tags pushed one after another, each timed until the search lists its version")
	flag.IntVar(&o.count, "sources-count", 1000, "sources: unchanged sources polled (half git, half http)")
	flag.DurationVar(&o.interval, "sources-interval", 10*time.Second, "sources: how often each polled source is checked (10s at least, berth's minimum)")
	flag.IntVar(&o.cycles, "sources-cycles", 3, "sources: polling cycles measured")
	flag.BoolVar(&o.keep, "sources-keep", false, "sources: keep the temporary directory (data, server log, repositories) and print its path")
}

func (o *sourcesOptions) validate() error {
	for _, f := range []struct {
		name  string
		value int
	}{{"sources-tags", o.tags}, {"sources-count", o.count}, {"sources-cycles", o.cycles}} {
		if f.value < 1 {
			return fmt.Errorf("-%s must be at least 1", f.name)
		}
	}
	if o.count < 2 {
		return errors.New("-sources-count must be at least 2: half git, half http")
	}
	if o.interval < 10*time.Second {
		return fmt.Errorf("-sources-interval must be at least 10s, berth's shortest (got %s)", o.interval)
	}
	return nil
}

// runSources builds berth, measures both rows, each on a berth of its
// own, and prints the table.
func runSources(ctx context.Context, o sourcesOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	if err := gittest.Available(); err != nil {
		return err
	}
	began := time.Now()
	modRoot, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	logf("building berth")
	ws, cleanup, err := newWorkspace(ctx, modRoot, "berth-bench-sources-", o.keep, "push", "poll")
	if err != nil {
		return err
	}
	defer cleanup()
	var rows []catRow
	row, err := measurePushToSearch(ctx, o, ws.bin, filepath.Join(ws.root, "push"))
	if err != nil {
		return fmt.Errorf("push to searchable: %w", err)
	}
	rows = append(rows, row)
	polled, err := measurePolling(ctx, o, ws.bin, filepath.Join(ws.root, "poll"))
	if err != nil {
		return fmt.Errorf("polling: %w", err)
	}
	rows = append(rows, polled...)
	header := fmt.Sprintf("sources: git http-backend and an ETag server on loopback; machine: %d cores, %s/%s, %s",
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, ws.goVersion)
	printCatalogTable(os.Stdout, header, rows)
	logf("done in %s", time.Since(began).Round(time.Second))
	return nil
}

// loopbackServer serves h on 127.0.0.1 and returns its base URL and a
// function that stops it.
func loopbackServer(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

// gitIn runs git in dir, returning its output or an error with it.
func gitIn(dir string, args ...string) (string, error) { return gittest.Output(dir, args...) }

// plainManifest is a plain package's ConfigMap holding value.
func plainManifest(value string) []byte {
	return fmt.Appendf(nil, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  value: %q\n", value)
}

// measurePushToSearch follows one repository's tags v* on a berth in dir,
// then pushes o.tags tags one after another, each followed by its webhook,
// and times each until the search lists its version.
func measurePushToSearch(ctx context.Context, o sourcesOptions, bin, dir string) (catRow, error) {
	gitRoot, work := filepath.Join(dir, "git"), filepath.Join(dir, "work")
	for _, d := range []string{gitRoot, work, filepath.Join(dir, "berth")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return catRow{}, err
		}
	}
	if _, err := gittest.InitBare(gitRoot, "app.git"); err != nil {
		return catRow{}, err
	}
	base, closeGit, err := loopbackServer(gittest.Handler(gitRoot, gittest.Options{}))
	if err != nil {
		return catRow{}, err
	}
	defer closeGit()
	repoURL := base + "/app.git"
	if _, err := gitIn(work, "init", "-q"); err != nil {
		return catRow{}, err
	}
	secretFile := filepath.Join(dir, "webhook-secret")
	if err := os.WriteFile(secretFile, []byte(sourcesWebhookSecret), 0o600); err != nil {
		return catRow{}, err
	}
	config := fmt.Sprintf(`sources:
  allowPrivate: true
  interval: 1h
namespaces:
  - name: %s
    sources:
      - {package: app, kind: git, url: %q, ref: "v*", dir: deploy, webhookSecretFile: %q}
`, sourcesNamespace, repoURL, secretFile)
	srv, err := startBerthConfig(ctx, "berth", bin, filepath.Join(dir, "berth"), config)
	if err != nil {
		return catRow{}, err
	}
	defer stop(srv)
	search := newSearcher(srv.addr)
	logf("push to searchable: berth on %s follows the tags v* of %s", srv.addr, repoURL)

	// tag commits a new content, tags it, pushes the tag, delivers the
	// webhook, and returns when the push ended and how long it took.
	tag := func(version string) (time.Time, time.Duration, error) {
		if err := os.MkdirAll(filepath.Join(work, "deploy", "manifests"), 0o755); err != nil {
			return time.Time{}, 0, err
		}
		if err := os.WriteFile(filepath.Join(work, "deploy", "manifests", "cm.yaml"), plainManifest(version), 0o644); err != nil {
			return time.Time{}, 0, err
		}
		for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", version}, {"tag", "v" + version}} {
			if _, err := gitIn(work, args...); err != nil {
				return time.Time{}, 0, err
			}
		}
		start := time.Now()
		if _, err := gitIn(work, "push", "-q", repoURL, "HEAD:refs/heads/main", "v"+version); err != nil {
			return time.Time{}, 0, err
		}
		pushed := time.Now()
		if err := deliverWebhook(ctx, search, repoURL, "refs/tags/v"+version); err != nil {
			return time.Time{}, 0, err
		}
		return pushed, pushed.Sub(start), nil
	}
	searchable := func(version string, since time.Time) (time.Duration, error) {
		path := "/api/v1/packages?" + url.Values{"q": {"app"}, "namespace": {sourcesNamespace}, "limit": {"5"}}.Encode()
		found, err := pollUntil(ctx, srv, sourcesTimeout, sourcesPoll, func() (bool, error) {
			res, _, err := search.query(ctx, path)
			if err != nil {
				return false, err
			}
			return slices.ContainsFunc(res.Packages, func(p apiv1.PackageSummary) bool {
				return p.Namespace == sourcesNamespace && p.Name == "app" && p.Version == version
			}), nil
		})
		if err != nil {
			return 0, fmt.Errorf("waiting for %s/app %s in the search: %w", sourcesNamespace, version, err)
		}
		return found.Sub(since), nil
	}

	// The first tag builds the package once, unmeasured.
	pushed, _, err := tag("0.0.1")
	if err != nil {
		return catRow{}, err
	}
	if _, err := searchable("0.0.1", pushed); err != nil {
		return catRow{}, err
	}
	latencies := make([]time.Duration, 0, o.tags)
	pushes := make([]time.Duration, 0, o.tags)
	for i := range o.tags {
		version := fmt.Sprintf("1.0.%d", i)
		pushed, push, err := tag(version)
		if err != nil {
			return catRow{}, err
		}
		took, err := searchable(version, pushed)
		if err != nil {
			return catRow{}, err
		}
		latencies, pushes = append(latencies, took), append(pushes, push)
	}
	p50, p99 := percentile(latencies, 0.50), percentile(latencies, 0.99)
	logf("push to searchable: p50 %s, p99 %s", formatDuration(p50), formatDuration(p99))
	return catRow{
		name:   fmt.Sprintf("git push of a tag + webhook -> searchable (%d tags)", o.tags),
		value:  formatDuration(p50),
		p99:    formatDuration(p99),
		target: "p99 <= " + formatDuration(sourceSearchableTarget),
		result: verdict(p99 <= sourceSearchableTarget),
		detail: fmt.Sprintf("max %s; git push itself p50 %s (not counted)", formatDuration(slices.Max(latencies)), formatDuration(percentile(pushes, 0.50))),
	}, nil
}

// deliverWebhook posts GitHub's push event of ref to the repository at
// repoURL, signed, to berth, and fails unless berth takes it (202).
func deliverWebhook(ctx context.Context, s *searcher, repoURL, ref string) error {
	body, err := json.Marshal(map[string]any{"ref": ref, "repository": map[string]string{"clone_url": repoURL}})
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, []byte(sourcesWebhookSecret))
	mac.Write(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/api/v1/sources/webhook", strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := s.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("POST /api/v1/sources/webhook: %s: %s", resp.Status, strings.TrimSpace(string(answer)))
	}
	return nil
}

// pollServers are the loopback servers the polled sources live on, and
// the checks they answered.
type pollServers struct {
	gitURL, httpURL string
	// lsRemotes counts the ref advertisements (GET info/refs) the git
	// server answered; notModified and fetched the tarball server's 304s
	// and 200s.
	lsRemotes, notModified, fetched atomic.Int64
	closers                         []func()
}

func (p *pollServers) close() {
	for _, c := range p.closers {
		c()
	}
}

// checks is how many checks the servers answered, in all.
func (p *pollServers) checks() int64 {
	return p.lsRemotes.Load() + p.notModified.Load() + p.fetched.Load()
}

// startPollServers makes n git repositories under dir, each a copy of one
// holding a plain package tagged v1.0.0, and m tarballs, each a Helm chart
// of its own name at 1.0.0, and serves both.
func startPollServers(dir string, n, m int) (*pollServers, error) {
	p := &pollServers{}
	gitRoot, work := filepath.Join(dir, "git"), filepath.Join(dir, "work")
	for _, d := range []string{gitRoot, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	template, err := gittest.InitBare(dir, "template.git")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(work, "deploy", "manifests"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(work, "deploy", "manifests", "cm.yaml"), plainManifest("polled"), 0o644); err != nil {
		return nil, err
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "polled"}, {"tag", "v1.0.0"}, {"push", "-q", template, "HEAD:refs/heads/main", "v1.0.0"}} {
		if _, err := gitIn(work, args...); err != nil {
			return nil, err
		}
	}
	for i := range n {
		if err := os.CopyFS(filepath.Join(gitRoot, fmt.Sprintf("g%04d.git", i)), os.DirFS(template)); err != nil {
			return nil, err
		}
	}
	gitURL, closeGit, err := loopbackServer(gittest.Handler(gitRoot, gittest.Options{OnRequest: func(r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/info/refs") {
			p.lsRemotes.Add(1)
		}
	}}))
	if err != nil {
		return nil, err
	}
	p.gitURL = gitURL
	p.closers = append(p.closers, closeGit)

	tarballs := make(map[string][]byte, m)
	for i := range m {
		name := fmt.Sprintf("h%04d", i)
		var buf strings.Builder
		files := []pkgformat.File{
			{Path: "Chart.yaml", Mode: 0o644, Data: fmt.Appendf(nil, "apiVersion: v2\nname: %s\nversion: 1.0.0\n", name)},
			{Path: "templates/cm.yaml", Mode: 0o644, Data: plainManifest(name)},
		}
		if err := pkgformat.WriteArchive(&buf, files); err != nil {
			return nil, err
		}
		tarballs["/"+name+".tgz"] = []byte(buf.String())
	}
	httpURL, closeHTTP, err := loopbackServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := tarballs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		sum := sha256.Sum256(body)
		etag := `"` + hex.EncodeToString(sum[:8]) + `"`
		w.Header().Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			p.notModified.Add(1)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		p.fetched.Add(1)
		w.Write(body)
	}))
	if err != nil {
		p.close()
		return nil, err
	}
	p.httpURL = httpURL
	p.closers = append(p.closers, closeHTTP)
	return p, nil
}

// measurePolling starts a berth in dir following o.count unchanged
// sources, waits until each was built, then measures o.cycles polling
// cycles.
func measurePolling(ctx context.Context, o sourcesOptions, bin, dir string) ([]catRow, error) {
	nGit := o.count / 2
	nHTTP := o.count - nGit
	logf("polling: making %d git repositories and %d tarballs", nGit, nHTTP)
	servers, err := startPollServers(dir, nGit, nHTTP)
	if err != nil {
		return nil, err
	}
	defer servers.close()
	if err := os.MkdirAll(filepath.Join(dir, "berth"), 0o755); err != nil {
		return nil, err
	}
	srv, err := startBerthConfig(ctx, "berth", bin, filepath.Join(dir, "berth"), pollingConfig(o.interval, servers.gitURL, servers.httpURL, nGit, nHTTP))
	if err != nil {
		return nil, err
	}
	defer stop(srv)
	search := newSearcher(srv.addr)
	logf("polling: berth on %s follows %d sources every %s; waiting for their first builds", srv.addr, o.count, o.interval)

	began := time.Now()
	lastLog := began
	_, err = pollUntil(ctx, srv, firstBuildsTimeout, time.Second, func() (bool, error) {
		built, failed, err := sourcesBuilt(ctx, search)
		if err != nil {
			return false, err
		}
		if time.Since(lastLog) >= 10*time.Second {
			logf("polling: %d of %d sources built, %d failed, after %s", built, o.count, failed, formatDuration(time.Since(began)))
			lastLog = time.Now()
		}
		if failed > 0 {
			return false, fmt.Errorf("%d sources failed to build (see GET /api/v1/sources)", failed)
		}
		return built == o.count, nil
	})
	if err != nil {
		return nil, err
	}
	logf("polling: all %d sources built in %s; letting a cycle pass", o.count, formatDuration(time.Since(began)))
	// A cycle passes so that the window starts between steady cycles.
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(o.interval):
	}

	builds0, err := metricSum(ctx, search, buildsMetric)
	if err != nil {
		return nil, err
	}
	cpu0, err := processCPU(srv.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	checks0, fetched0 := servers.checks(), servers.fetched.Load()
	window := time.Duration(o.cycles) * o.interval
	logf("polling: measuring %d cycles (%s)", o.cycles, window)
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(window):
	}
	cpu1, err := processCPU(srv.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	builds1, err := metricSum(ctx, search, buildsMetric)
	if err != nil {
		return nil, err
	}
	checks := servers.checks() - checks0
	fetched := servers.fetched.Load() - fetched0
	if checks == 0 {
		return nil, fmt.Errorf("no source was checked in %s: berth does not poll", window)
	}
	cycles := float64(checks) / float64(o.count)
	perCycle := time.Duration(float64(cpu1-cpu0) / cycles)
	builds := builds1 - builds0
	logf("polling: %d checks (%.2f cycles), %s of CPU, %.0f builds", checks, cycles, formatDuration(cpu1-cpu0), builds)
	return []catRow{
		{
			name:   fmt.Sprintf("CPU per polling cycle, %s unchanged sources (%d git, %d http)", thousands(o.count), nGit, nHTTP),
			value:  fmt.Sprintf("%.3f CPU-s", perCycle.Seconds()),
			target: fmt.Sprintf("<= %.0f CPU-s", cycleCPUTarget.Seconds()),
			result: verdict(perCycle <= cycleCPUTarget),
			detail: fmt.Sprintf("%s CPU over %s; %s checks answered (%.2f cycles), %d tarballs fetched whole", formatDuration(cpu1-cpu0), window, thousands(int(checks)), cycles, fetched),
		},
		{
			name:   "builds during the polling cycles",
			value:  strconv.FormatFloat(builds, 'f', 0, 64),
			target: "0",
			result: verdict(builds == 0),
			detail: fmt.Sprintf("%s went from %.0f to %.0f", buildsMetric, builds0, builds1),
		},
	}, nil
}

// pollingConfig is the configuration of the polling row: nGit git
// sources g0000... (the tags v* of <gitURL>/g0000.git...) and nHTTP http
// sources h0000... (<httpURL>/h0000.tgz...), checked every interval.
func pollingConfig(interval time.Duration, gitURL, httpURL string, nGit, nHTTP int) string {
	var config strings.Builder
	fmt.Fprintf(&config, "sources:\n  allowPrivate: true\n  interval: %s\nnamespaces:\n  - name: %s\n    sources:\n", interval, sourcesNamespace)
	for i := range nGit {
		fmt.Fprintf(&config, "      - {package: g%04d, kind: git, url: %q, ref: \"v*\", dir: deploy}\n", i, fmt.Sprintf("%s/g%04d.git", gitURL, i))
	}
	for i := range nHTTP {
		fmt.Fprintf(&config, "      - {package: h%04d, kind: http, url: %q}\n", i, fmt.Sprintf("%s/h%04d.tgz", httpURL, i))
	}
	return config.String()
}

// sourcesBuilt counts the sources GET /api/v1/sources says were built
// (a last published version) and those whose last check failed.
func sourcesBuilt(ctx context.Context, s *searcher) (built, failed int, err error) {
	body, err := s.get(ctx, "/api/v1/sources")
	if err != nil {
		return 0, 0, err
	}
	var list apiv1.Sources
	if err := json.Unmarshal(body, &list); err != nil {
		return 0, 0, fmt.Errorf("GET /api/v1/sources: %w", err)
	}
	for _, src := range list.Sources {
		switch {
		case src.LastError != nil:
			failed++
		case src.LastPublished != nil:
			built++
		}
	}
	return built, failed, nil
}

// metricSum is the sum of every series of the metric name in /metrics;
// an error when there is none.
func metricSum(ctx context.Context, s *searcher, name string) (float64, error) {
	body, err := s.get(ctx, "/metrics")
	if err != nil {
		return 0, err
	}
	sum, found := 0.0, false
	for line := range strings.SplitSeq(string(body), "\n") {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("/metrics: %q: %w", line, err)
		}
		sum, found = sum+v, true
	}
	if !found {
		return 0, fmt.Errorf("/metrics has no %s", name)
	}
	return sum, nil
}

// processCPU is the CPU time (user and system) process pid has used, from
// /proc/<pid>/stat.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcStat(string(b))
}

// parseProcStat reads utime and stime (fields 14 and 15) of a
// /proc/<pid>/stat line, after the command name in parentheses, which may
// hold spaces.
func parseProcStat(stat string) (time.Duration, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc stat %q: no command name", stat)
	}
	fields := strings.Fields(stat[end+1:])
	// fields[0] is field 3 (state): utime is field 14, stime field 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc stat %q: too few fields", stat)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat %q: %w", stat, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}
