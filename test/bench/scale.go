package main

// The scale-out benchmarks (go run ./test/bench -scale, make bench-scale):
// the catalog on PostgreSQL against SQLite, berth with one and two replicas
// on PostgreSQL and S3 (versitygw), and two with auth behind a round-robin
// reverse proxy, against the upstream registry on the same S3, and online
// garbage collection. docs/benchmarks.md says what each
// row measures.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/postgres"
	"github.com/berth-registry/berth/catalog/sqlite"
	"github.com/berth-registry/berth/internal/pgtest"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/storage"
)

// scaleOptions are the flags of the scale-out benchmarks.
type scaleOptions struct {
	enabled    bool
	versions   int
	gcVersions int
	packages   int
	runs       int
	searches   int
	versitygw  string
	// only names the one table to run ("" for all).
	only string
	// countS3 puts a counting proxy in front of versitygw (s3Counter).
	countS3 bool
	// gcProfile, when set, is where the collections' CPU profile goes.
	gcProfile string
	// gcStorages are the storages the garbage collection table runs on.
	gcStorages string
}

// scaleTables are the tables -scale-only may name.
var scaleTables = []string{"stores", "replicas", "gc"}

func registerScaleFlags(o *scaleOptions) {
	flag.BoolVar(&o.enabled, "scale", false, "run the scale-out benchmarks: PostgreSQL against SQLite, replicas on S3, garbage collection")
	flag.IntVar(&o.versions, "scale-versions", 100000, "package versions in the catalog store rows")
	flag.IntVar(&o.gcVersions, "gc-versions", 10000, "package versions stored before the garbage collection row deletes half")
	flag.IntVar(&o.packages, "scale-packages", 300, "packages pushed and pulled per run of the replica rows")
	flag.IntVar(&o.runs, "scale-runs", 3, "runs per server of the replica rows")
	flag.IntVar(&o.searches, "scale-searches", 2000, "searches timed per store")
	flag.StringVar(&o.versitygw, "versitygw", "bin/versitygw", "the versitygw binary the replica and garbage collection rows run S3 on (make tools builds it)")
	flag.StringVar(&o.only, "scale-only", "", "run one table of -scale: "+strings.Join(scaleTables, ", "))
	flag.StringVar(&o.gcStorages, "gc-storages", "filesystem,s3", "the storages the garbage collection table runs on: filesystem, s3 or both, comma-separated")
	flag.StringVar(&o.gcProfile, "gc-cpuprofile", "", "write the CPU profile of the first collection of each storage to this file, suffixed -filesystem and -s3")
	flag.BoolVar(&o.countS3, "scale-count-s3", false, "replica rows: count the S3 requests of every server's pushes and pulls, through a proxy in front of versitygw (which costs time of its own), log them by kind, and measure the CPU time the servers and versitygw spend per push")
}

// wants reports whether the table of the scale-out benchmarks is to run.
func (o scaleOptions) wants(table string) bool { return o.only == "" || o.only == table }

func runScale(ctx context.Context, o scaleOptions) error {
	for _, f := range []struct {
		name  string
		value int
	}{{"scale-versions", o.versions}, {"gc-versions", o.gcVersions}, {"scale-packages", o.packages}, {"scale-runs", o.runs}, {"scale-searches", o.searches}} {
		if f.value < 1 {
			return fmt.Errorf("-%s must be at least 1", f.name)
		}
	}
	if o.only != "" && !slices.Contains(scaleTables, o.only) {
		return fmt.Errorf("-scale-only %q: want one of %s", o.only, strings.Join(scaleTables, ", "))
	}
	cluster, err := pgtest.Start()
	if err != nil {
		return fmt.Errorf("PostgreSQL: %w", err)
	}
	defer cluster.Stop()
	root, err := os.MkdirTemp("", "berth-bench-scale-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)

	if o.wants("stores") {
		logf("catalog stores: %d versions on SQLite and on PostgreSQL", o.versions)
		stores, err := storeRows(ctx, cluster, root, o)
		if err != nil {
			return err
		}
		printCatalogTable(os.Stdout, fmt.Sprintf("\ncatalog stores at %s versions (SQLite | PostgreSQL)", thousands(o.versions)), stores)
	}
	if o.wants("replicas") {
		logf("replicas: %d packages at c=8, %d runs, on versitygw", o.packages, o.runs)
		replicas, err := replicaRows(ctx, cluster, root, o)
		if err != nil {
			return err
		}
		printCatalogTable(os.Stdout, "\npackage push and pull on PostgreSQL + S3 (versitygw), c=8, medians", replicas)
	}
	if o.wants("gc") {
		return runGC(ctx, root, o)
	}
	return nil
}

// synthEntries returns n indexed versions, five per package, over ten
// namespaces, with descriptions drawn from the benchmark vocabulary.
func synthEntries(n int, seed uint64) []*catalog.Entry {
	r := rand.New(rand.NewPCG(seed, 17))
	out := make([]*catalog.Entry, 0, n)
	now := time.Now()
	for i := 0; len(out) < n; i++ {
		name := fmt.Sprintf("%s-%s-%d", techs[r.IntN(len(techs))], nouns[r.IntN(len(nouns))], i)
		words := make([]string, 8)
		for j := range words {
			words[j] = keywordList[r.IntN(len(keywordList))]
		}
		for v := 0; v < 5 && len(out) < n; v++ {
			out = append(out, &catalog.Entry{
				Namespace: fmt.Sprintf("ns%d", i%10), Name: name, Tag: fmt.Sprintf("1.%d.0", v),
				Digest: fmt.Sprintf("sha256:%064x", uint64(i)*8+uint64(v)), Status: apiv1.StatusIndexed, Indexed: now,
				Metadata: &pkgformat.Metadata{
					SchemaVersion: pkgformat.MetadataSchemaVersion, Name: name, Version: fmt.Sprintf("1.%d.0", v),
					Format: pkgformat.Helm, Description: strings.Join(words, " "), Keywords: words[:3],
					Channels: []pkgformat.Channel{{Name: "stable"}},
				},
			})
		}
	}
	return out
}

// storeKind opens one kind of store, again and again on the same data.
type storeKind struct {
	name string
	open func(ctx context.Context) (catalog.Store, error)
	// second, when set, opens another replica's store on the same data.
	second func(ctx context.Context) (catalog.Store, error)
}

func storeRows(ctx context.Context, cluster *pgtest.Cluster, root string, o scaleOptions) ([]catRow, error) {
	dsn, drop, err := cluster.CreateDatabase(ctx)
	if err != nil {
		return nil, err
	}
	defer drop()
	file := filepath.Join(root, "catalog.db")
	openPG := func(ctx context.Context) (catalog.Store, error) { return postgres.Open(ctx, dsn, postgres.Options{}) }
	kinds := []storeKind{
		{name: "SQLite", open: func(ctx context.Context) (catalog.Store, error) { return sqlite.Open(ctx, file) }},
		{name: "PostgreSQL", open: openPG, second: openPG},
	}
	entries := synthEntries(o.versions, 7)
	queries := []string{"kafka", "operator", "postgres backup", "ha", "cluster monitoring", "red", "zz-no-match"}
	results := map[string]map[string]string{}
	var order []string
	add := func(kind, row, value string) {
		if results[row] == nil {
			results[row] = map[string]string{}
			order = append(order, row)
		}
		results[row][kind] = value
	}
	for _, k := range kinds {
		s, err := k.open(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k.name, err)
		}
		start := time.Now()
		var next atomic.Int64
		g, gctx := errgroup.WithContext(ctx)
		for range 8 {
			g.Go(func() error {
				for i := next.Add(1) - 1; i < int64(len(entries)); i = next.Add(1) - 1 {
					if _, err := s.Put(gctx, entries[i]); err != nil {
						return err
					}
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			s.Close()
			return nil, fmt.Errorf("%s: load: %w", k.name, err)
		}
		took := time.Since(start)
		add(k.name, "load (8 writers)", fmt.Sprintf("%.0f versions/s", float64(len(entries))/took.Seconds()))

		var lat []time.Duration
		for i := range o.searches {
			q := catalog.Query{Text: queries[i%len(queries)], Access: catalog.Access{All: true}}
			t0 := time.Now()
			if _, err := s.Search(ctx, q); err != nil {
				s.Close()
				return nil, fmt.Errorf("%s: search: %w", k.name, err)
			}
			lat = append(lat, time.Since(t0))
		}
		add(k.name, "search p50", formatDuration(percentile(lat, 0.5)))
		add(k.name, "search p99", formatDuration(percentile(lat, 0.99)))

		if k.second != nil {
			other, err := k.second(ctx)
			if err != nil {
				s.Close()
				return nil, err
			}
			var lags []time.Duration
			for i := range 200 {
				e := synthEntries(1, uint64(1000+i))[0]
				e.Namespace, e.Name = "fresh", fmt.Sprintf("fresh-%d", i)
				t0 := time.Now()
				if _, err := s.Put(ctx, e); err != nil {
					return nil, err
				}
				for {
					res, err := other.Search(ctx, catalog.Query{Namespace: "fresh", Text: e.Name, Access: catalog.Access{All: true}})
					if err != nil {
						return nil, err
					}
					if res.Total > 0 {
						break
					}
					if time.Since(t0) > 10*time.Second {
						return nil, fmt.Errorf("%s: %s not searchable on the other replica after 10s", k.name, e.Name)
					}
					time.Sleep(100 * time.Microsecond)
				}
				lags = append(lags, time.Since(t0))
			}
			other.Close()
			add(k.name, "searchable on the other replica p50", formatDuration(percentile(lags, 0.5)))
			add(k.name, "searchable on the other replica p99", formatDuration(percentile(lags, 0.99)))
		} else {
			add(k.name, "searchable on the other replica p50", "one process")
			add(k.name, "searchable on the other replica p99", "one process")
		}
		if err := s.Close(); err != nil {
			return nil, err
		}
		start = time.Now()
		s, err = k.open(ctx)
		if err != nil {
			return nil, err
		}
		add(k.name, "restart (open + index)", formatDuration(time.Since(start)))
		s.Close()
	}
	var rows []catRow
	for _, r := range order {
		row := catRow{name: r, value: results[r]["SQLite"] + " | " + results[r]["PostgreSQL"]}
		switch r {
		case "search p99":
			row.target, row.result = "<= "+formatDuration(searchP99Target), verdict(parseMs(results[r]["PostgreSQL"]) <= searchP99Target)
		case "searchable on the other replica p99":
			row.target, row.result = "<= 1.00 s", verdict(parseMs(results[r]["PostgreSQL"]) <= time.Second)
		case "restart (open + index)":
			row.target, row.result = "<= "+formatDuration(restartTarget), verdict(parseMs(results[r]["PostgreSQL"]) <= restartTarget)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// parseMs reads back a duration formatDuration printed.
func parseMs(s string) time.Duration {
	var v float64
	var unit string
	if _, err := fmt.Sscanf(s, "%f %s", &v, &unit); err != nil {
		return time.Hour
	}
	if unit == "s" {
		return time.Duration(v * float64(time.Second))
	}
	return time.Duration(v * float64(time.Millisecond))
}

// replicaRows pushes and pulls packages through berth with one replica,
// with two (each package through one, round-robin by repository), with two
// with auth behind a round-robin reverse proxy (every request, of a push
// too, to either replica; the client logs in through the token flow), and
// through the upstream registry, each on its own bucket of one versitygw,
// the berths on one PostgreSQL database each.
func replicaRows(ctx context.Context, cluster *pgtest.Cluster, root string, o scaleOptions) ([]catRow, error) {
	bins, err := build(ctx, filepath.Join(root, "bin"))
	if err != nil {
		return nil, err
	}
	gwBin, err := filepath.Abs(o.versitygw)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(gwBin); err != nil {
		return nil, fmt.Errorf("-versitygw: %w (make tools builds bin/versitygw)", err)
	}
	gw, err := startS3(ctx, gwBin, filepath.Join(root, "s3"), o.countS3)
	if err != nil {
		return nil, err
	}
	defer gw.stop()

	htpasswd, password, err := writeBenchUser(root)
	if err != nil {
		return nil, err
	}
	// setup starts a topology for run: its servers, and the target the
	// workload goes through; stop stops what it started besides the servers.
	type setup struct {
		name  string
		start func(run int) (servers []*server, t *target, stop func(), err error)
	}
	// berths starts n replicas on one database and one bucket, with the
	// auth section auth ("" for none) and a shared token key.
	berths := func(n int, tag, auth string) func(run int) ([]*server, error) {
		return func(run int) ([]*server, error) {
			dsn, _, err := cluster.CreateDatabase(ctx)
			if err != nil {
				return nil, err
			}
			bucket, err := gw.bucket(fmt.Sprintf("berth%d%s-%d", n, tag, run))
			if err != nil {
				return nil, err
			}
			var out []*server
			for i := range n {
				dir := filepath.Join(root, fmt.Sprintf("berth%d%s-%d-%d", n, tag, run, i))
				s, err := startBerthOnS3(ctx, bins.berth, dir, gw, bucket, dsn, filepath.Join(root, "http-secret"), auth)
				if err != nil {
					stopAll(out)
					return nil, err
				}
				out = append(out, s)
			}
			return out, nil
		}
	}
	// direct: each repository through one replica, by its name.
	direct := func(name string, n int) func(run int) ([]*server, *target, func(), error) {
		return func(run int) ([]*server, *target, func(), error) {
			servers, err := berths(n, "", "")(run)
			if err != nil {
				return nil, nil, nil, err
			}
			var also []string
			for _, s := range servers[1:] {
				also = append(also, s.addr)
			}
			return servers, newTarget(name, servers[0].addr, also...), func() {}, nil
		}
	}
	const proxied = "berth, 2 replicas + auth, round-robin proxy"
	setups := []setup{
		{"berth, 1 replica", direct("berth, 1 replica", 1)},
		{"berth, 2 replicas", direct("berth, 2 replicas", 2)},
		{proxied, func(run int) ([]*server, *target, func(), error) {
			servers, err := berths(2, "auth", authSection(htpasswd, filepath.Join(root, fmt.Sprintf("token-key-%d.pem", run))))(run)
			if err != nil {
				return nil, nil, nil, err
			}
			proxy := roundRobin(servers)
			return servers, newLoginTarget(proxied, strings.TrimPrefix(proxy.URL, "http://"), benchUser, password), proxy.Close, nil
		}},
		{"upstream registry", func(run int) ([]*server, *target, func(), error) {
			bucket, err := gw.bucket(fmt.Sprintf("upstream-%d", run))
			if err != nil {
				return nil, nil, nil, err
			}
			s, err := startUpstreamOnS3(ctx, bins.upstream, filepath.Join(root, fmt.Sprintf("upstream-%d", run)), gw, bucket)
			if err != nil {
				return nil, nil, nil, err
			}
			return []*server{s}, newTarget("upstream registry", s.addr), func() {}, nil
		}},
	}
	push, pull := map[string][]float64{}, map[string][]float64{}
	// s3Push and s3Pull are the S3 requests counted per package, by setup.
	s3Push, s3Pull := map[string][]float64{}, map[string][]float64{}
	// cpuPush is the CPU time the servers and versitygw spent per package
	// pushed, in ms, by setup.
	cpuPush := map[string][]float64{}
	for run := range o.runs {
		for _, st := range setups {
			servers, t, stopMore, err := st.start(run)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", st.name, err)
			}
			pkgs, err := newPackages(rand.NewChaCha8([32]byte{byte(run), 3}), packageSet{prefix: "scale", count: o.packages, repos: 30, contentSize: 50 << 10})
			var ps, pl float64
			var pushed, pulled s3Counts
			var pushCPU time.Duration
			pids := []int{gw.cmd.Process.Pid}
			for _, s := range servers {
				pids = append(pids, s.cmd.Process.Pid)
			}
			if err == nil {
				repos := t.repositories(pkgs)
				gw.counter.take()
				cpu := cpuOf(pids...)
				ps, err = timeEach(ctx, t, pkgs, 8, func(ctx context.Context, p *pkg) error {
					return pushPackage(ctx, repos[p.repo], p)
				})
				pushed = gw.counter.take()
				pushCPU = cpuOf(pids...) - cpu
			}
			if err == nil {
				pl, err = pullRound(ctx, t, pkgs, 8)
				pulled = gw.counter.take()
			}
			stopMore()
			stopAll(servers)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", st.name, err)
			}
			push[st.name] = append(push[st.name], ps)
			pull[st.name] = append(pull[st.name], pl)
			logf("run %d %s: push %.1f, pull %.1f packages/s", run+1, st.name, ps, pl)
			if o.countS3 {
				s3Push[st.name] = append(s3Push[st.name], float64(pushed.total())/float64(len(pkgs)))
				s3Pull[st.name] = append(s3Pull[st.name], float64(pulled.total())/float64(len(pkgs)))
				cpuPush[st.name] = append(cpuPush[st.name], float64(pushCPU.Milliseconds())/float64(len(pkgs)))
				logf("run %d %s: S3 requests per push %s", run+1, st.name, pushed.perPackage(len(pkgs)))
				logf("run %d %s: S3 requests per pull %s", run+1, st.name, pulled.perPackage(len(pkgs)))
			}
		}
	}
	var rows []catRow
	// detail compares name's median in m with upstream's, and the proxied
	// replicas' with two replicas' without auth.
	detail := func(m map[string][]float64, name string) string {
		d := formatRatio(median(m[name]), median(m["upstream registry"])) + " of upstream"
		if name == proxied {
			d += "; " + formatRatio(median(m[name]), median(m["berth, 2 replicas"])) + " of 2 replicas without auth"
		}
		return d + "; runs " + formatSamples(m[name])
	}
	// requests reads the S3 requests counted per package, with -scale-count-s3.
	requests := func(m map[string][]float64, name string, withCPU bool) string {
		if !o.countS3 {
			return ""
		}
		d := fmt.Sprintf("; %.1f S3 requests per package", median(m[name]))
		if withCPU {
			d += fmt.Sprintf(", %.1f ms CPU of servers and versitygw (%s of upstream's)", median(cpuPush[name]), formatRatio(median(cpuPush[name]), median(cpuPush["upstream registry"])))
		}
		return d
	}
	for _, st := range setups {
		rows = append(rows,
			catRow{name: st.name + ": push", value: fmt.Sprintf("%.1f packages/s", median(push[st.name])), detail: detail(push, st.name) + requests(s3Push, st.name, true)},
			catRow{name: st.name + ": pull", value: fmt.Sprintf("%.1f packages/s", median(pull[st.name])), detail: detail(pull, st.name) + requests(s3Pull, st.name, false)})
	}
	return rows, nil
}

// roundRobin is a reverse proxy in front of servers that sends each
// request, /v2/ and the token endpoint alike, to the next server in turn,
// as a load balancer without session affinity does. It keeps the Host the
// client asked for, so that the token realm and upload locations the
// servers answer with name the proxy.
func roundRobin(servers []*server) *httptest.Server {
	var next atomic.Uint64
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.addr
	}
	return httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: "http", Host: addrs[(next.Add(1)-1)%uint64(len(addrs))]})
			r.Out.Host = r.In.Host
		},
		Transport: loopbackTransport(addrs...),
	})
}

func stopAll(servers []*server) {
	for _, s := range servers {
		s.stop()
	}
}

// s3Server is a versitygw on loopback with its posix backend under dir.
type s3Server struct {
	addr, dir, accessKey, secretFile string
	cmd                              *exec.Cmd
	// counter, when set, is the proxy the servers reach versitygw through.
	counter *s3Counter
}

// endpoint is the address the servers reach S3 at: the counting proxy's
// when there is one.
func (gw *s3Server) endpoint() string {
	if gw.counter != nil {
		return gw.counter.addr()
	}
	return gw.addr
}

// startS3 starts versitygw under dir, behind a counting proxy with count.
func startS3(ctx context.Context, bin, dir string, count bool) (*s3Server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	gw := &s3Server{addr: addr, dir: filepath.Join(dir, "posix"), accessKey: "bench", secretFile: filepath.Join(dir, "secret")}
	if err := os.MkdirAll(gw.dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(gw.secretFile, []byte("bench-secret"), 0o600); err != nil {
		return nil, err
	}
	gw.cmd = exec.CommandContext(ctx, bin, "--port", addr, "--quiet", "posix", gw.dir)
	gw.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+gw.accessKey, "ROOT_SECRET_ACCESS_KEY=bench-secret")
	if err := gw.cmd.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
			if count {
				gw.counter = newS3Counter(addr)
			}
			return gw, nil
		}
		if time.Now().After(deadline) {
			gw.stop()
			return nil, fmt.Errorf("versitygw did not answer within 30s: %w", err)
		}
	}
}

func (gw *s3Server) stop() {
	if gw.counter != nil {
		gw.counter.srv.Close()
	}
	_ = gw.cmd.Process.Kill()
	_ = gw.cmd.Wait()
}

// bucket creates a bucket: a folder of the posix backend.
func (gw *s3Server) bucket(name string) (string, error) {
	return name, os.Mkdir(filepath.Join(gw.dir, name), 0o755)
}

// startBerthOnS3 runs berth on the bucket of gw and the catalog database
// dsn, with the HTTP secret file secret and the configuration's auth
// section auth ("" for none).
func startBerthOnS3(ctx context.Context, bin, dir string, gw *s3Server, bucket, dsn, secret, auth string) (*server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	config := filepath.Join(dir, "berth.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, `addr: %s
data: %s
log:
  level: warn
storage:
  driver: s3
  disableRedirect: true
  s3:
    bucket: %s
    region: us-east-1
    regionEndpoint: http://%s
    accessKey: %s
    secretKeyFile: %s
    forcePathStyle: true
registry:
  httpSecretFile: %s
catalog:
  database: %s
%s`, addr, filepath.Join(dir, "data"), bucket, gw.endpoint(), gw.accessKey, gw.secretFile, secret, dsn, auth), 0o600); err != nil {
		return nil, err
	}
	return start(ctx, "berth", addr, dir, "/readyz", bin, "serve", "--config", config)
}

func startUpstreamOnS3(ctx context.Context, bin, dir string, gw *s3Server, bucket string) (*server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	secret, err := os.ReadFile(gw.secretFile)
	if err != nil {
		return nil, err
	}
	config := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(config, fmt.Appendf(nil, `version: 0.1
log:
  level: warn
storage:
  s3:
    bucket: %s
    region: us-east-1
    regionendpoint: http://%s
    accesskey: %s
    secretkey: %s
    forcepathstyle: true
  delete:
    enabled: true
  cache:
    blobdescriptor: inmemory
  redirect:
    disable: true
http:
  addr: %s
  draintimeout: 5s
`, bucket, gw.endpoint(), gw.accessKey, secret, addr), 0o600); err != nil {
		return nil, err
	}
	return start(ctx, "upstream", addr, dir, "/v2/", bin, "serve", config)
}

// runGC prints the garbage collection table of the filesystem, then of
// S3 (versitygw).
func runGC(ctx context.Context, root string, o scaleOptions) error {
	storages := strings.Split(o.gcStorages, ",")
	for _, st := range storages {
		if st != "filesystem" && st != "s3" {
			return fmt.Errorf("-gc-storages: %q is neither filesystem nor s3", st)
		}
	}
	if slices.Contains(storages, "filesystem") {
		fsDir := filepath.Join(root, "gc")
		fsStorage := &storage.Config{Driver: "filesystem", Filesystem: storage.Filesystem{RootDirectory: fsDir}}
		logf("garbage collection: %d versions, half deleted, on the filesystem", o.gcVersions)
		rows, err := gcRows(ctx, "filesystem", fsStorage, fsDir, o)
		if err != nil {
			return err
		}
		printCatalogTable(os.Stdout, fmt.Sprintf("\ngarbage collection of %s versions after deleting half (filesystem)", thousands(o.gcVersions)), rows)
	}
	if !slices.Contains(storages, "s3") {
		return nil
	}
	gwBin, err := filepath.Abs(o.versitygw)
	if err != nil {
		return err
	}
	if _, err := os.Stat(gwBin); err != nil {
		return fmt.Errorf("-versitygw: %w (make tools builds bin/versitygw)", err)
	}
	gw, err := startS3(ctx, gwBin, filepath.Join(root, "gc-s3"), false)
	if err != nil {
		return err
	}
	defer gw.stop()
	bucket, err := gw.bucket("berth-gc")
	if err != nil {
		return err
	}
	s3Storage := &storage.Config{Driver: "s3", DisableRedirect: true, S3: storage.S3{Bucket: bucket, Region: "us-east-1",
		RegionEndpoint: "http://" + gw.addr, AccessKey: gw.accessKey, SecretKeyFile: gw.secretFile, ForcePathStyle: true}}
	logf("garbage collection: %d versions, half deleted, on S3 (versitygw)", o.gcVersions)
	rows, err := gcRows(ctx, "s3", s3Storage, filepath.Join(gw.dir, bucket), o)
	if err != nil {
		return err
	}
	printCatalogTable(os.Stdout, fmt.Sprintf("\ngarbage collection of %s versions after deleting half (S3, versitygw)", thousands(o.gcVersions)), rows)
	return nil
}

// gcRows stores gcVersions packages in an in-process registry on st, whose
// files are under dir (the filesystem's root, or the bucket's folder of
// versitygw's posix backend), deletes half of them, ages every file past
// the grace period and collects: the time of each phase and what was
// reclaimed. With o.gcProfile set, the first collection's CPU profile goes
// to o.gcProfile-<name>.
func gcRows(ctx context.Context, name string, st *storage.Config, dir string, o scaleOptions) ([]catRow, error) {
	reg, err := registry.New(ctx, registry.Options{
		Storage:    st,
		HTTPSecret: "bench",
		Logger:     slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, err
	}
	defer reg.Close()
	srv := httptest.NewServer(reg)
	defer srv.Close()
	t := newTarget("berth", strings.TrimPrefix(srv.URL, "http://"))
	pkgs, err := newPackages(rand.NewChaCha8([32]byte{5}), packageSet{prefix: "gc", count: o.gcVersions, repos: o.gcVersions / 10, contentSize: 4 << 10})
	if err != nil {
		return nil, err
	}
	if _, err := timeEach(ctx, t, pkgs, 8, func(ctx context.Context, p *pkg) error {
		return pushPackage(ctx, t.repository(p.repo), p)
	}); err != nil {
		return nil, err
	}
	var want int64
	for i := 0; i < len(pkgs); i += 2 {
		p := &pkgs[i]
		req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, srv.URL+"/v2/"+p.repo+"/manifests/"+p.manifestDesc.Digest.String(), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return nil, fmt.Errorf("delete %s@%s: %s", p.repo, p.manifestDesc.Digest, resp.Status)
		}
		want += p.configDesc.Size + p.contentDesc.Size + p.manifestDesc.Size
	}
	then := time.Now().Add(-2 * time.Hour)
	if err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, then, then)
	}); err != nil {
		return nil, err
	}
	stop, err := startProfile(o.gcProfile, name)
	if err != nil {
		return nil, err
	}
	rep, err := reg.CollectGarbage(ctx, registry.GCOptions{Grace: time.Hour})
	stop()
	if err != nil {
		return nil, err
	}
	again, err := reg.CollectGarbage(ctx, registry.GCOptions{Grace: time.Hour})
	if err != nil {
		return nil, err
	}
	if again.Blobs != 0 || again.Manifests != 0 {
		return nil, errors.New("a second collection found more to delete")
	}
	return []catRow{
		{name: "mark (pushes go on)", value: formatDuration(rep.Mark)},
		{name: "sweep (manifest pushes wait)", value: formatDuration(rep.Sweep),
			detail: fmt.Sprintf("%d manifests and %d blobs deleted", rep.Manifests, rep.Blobs)},
		{name: "bytes reclaimed", value: fmt.Sprintf("%d", rep.Bytes), target: fmt.Sprintf("= %d", want), result: verdict(rep.Bytes == want),
			detail: "the deleted versions' manifests, configs and content"},
		{name: "second collection, nothing to delete", value: formatDuration(again.Mark + again.Sweep)},
	}, nil
}

// startProfile starts a CPU profile into file-name, when file is set, and
// returns the function that ends it.
func startProfile(file, name string) (func(), error) {
	if file == "" {
		return func() {}, nil
	}
	f, err := os.Create(file + "-" + name)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
