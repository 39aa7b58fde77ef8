package deploy

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/berth-registry/berth/internal/pgtest"
)

const dashboard = "grafana/berth.json"

// targetLabels are the labels Prometheus adds to every series it scrapes.
var targetLabels = map[string]bool{"job": true, "instance": true}

// TestDashboardMetrics checks every query of the Grafana dashboard against
// what a real berth serves at /metrics: each metric it names, each label it
// matches or groups by, and each label value it matches exactly. The berth
// binary runs with auth on, and is pushed to, pulled from and refused a
// login, so that the series of labelled metrics exist.
func TestDashboardMetrics(t *testing.T) {
	queries := dashboardQueries(t)
	used := map[string]bool{}
	for _, q := range queries {
		for _, m := range q.metrics {
			used[m] = true
		}
	}
	s := startBerth(t)
	s.exercise(t)
	var got scrape
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		got = s.scrape(t)
		missing := false
		for m := range used {
			if got[m] == nil {
				missing = true
			}
		}
		if !missing || time.Now().After(deadline) {
			break
		}
	}

	for _, m := range slices.Sorted(maps.Keys(used)) {
		if got[m] == nil {
			t.Errorf("the dashboard queries %s, which berth does not serve", m)
		}
	}
	for _, q := range queries {
		labels := map[string]bool{}
		for _, m := range q.metrics {
			for l := range got[m] {
				labels[l] = true
			}
		}
		for _, sel := range q.selectors {
			for _, mt := range sel.matchers {
				values, ok := got[sel.metric][mt.label]
				switch {
				case got[sel.metric] == nil || targetLabels[mt.label]:
				case !ok:
					t.Errorf("%s: %s has no label %s", q.expr, sel.metric, mt.label)
				case mt.op == "=" && !values[mt.value]:
					t.Errorf("%s: %s has no series with %s=%q (seen: %v)", q.expr, sel.metric, mt.label, mt.value, slices.Sorted(maps.Keys(values)))
				}
			}
		}
		for _, l := range q.grouping {
			if !labels[l] && !targetLabels[l] {
				t.Errorf("%s: groups by %s, a label none of its metrics has", q.expr, l)
			}
		}
	}
}

// query is one PromQL expression of the dashboard, taken apart.
type query struct {
	expr      string
	metrics   []string
	selectors []selectorExpr
	grouping  []string // labels of by, without, on, ignoring, group_left and group_right
}

type selectorExpr struct {
	metric   string
	matchers []matcher
}

type matcher struct{ label, op, value string }

var (
	// The PromQL the dashboard writes: Grafana's variables ($job,
	// ${datasource}), selectors with matchers of double-quoted strings, range
	// selectors, grouping clauses, and names of metrics and functions.
	grafanaVar    = regexp.MustCompile(`\$\{[^}]*\}|\$\w+`)
	selectorRE    = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}`)
	matcherRE     = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"`)
	matchersRE    = regexp.MustCompile(`\{[^}]*\}`)
	rangeRE       = regexp.MustCompile(`\[[^\]]*\]`)
	groupingRE    = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	nameRE        = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	labelValuesRE = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)`)
	keywords      = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true}
)

// parseQuery takes a PromQL expression apart.
func parseQuery(expr string) query {
	q := query{expr: expr}
	for _, m := range selectorRE.FindAllStringSubmatch(expr, -1) {
		sel := selectorExpr{metric: m[1]}
		for _, mt := range matcherRE.FindAllStringSubmatch(m[2], -1) {
			sel.matchers = append(sel.matchers, matcher{mt[1], mt[2], mt[3]})
		}
		q.selectors = append(q.selectors, sel)
	}
	rest := matchersRE.ReplaceAllString(expr, " ")
	rest = rangeRE.ReplaceAllString(rest, " ")
	for _, g := range groupingRE.FindAllStringSubmatch(rest, -1) {
		for l := range strings.SplitSeq(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				q.grouping = append(q.grouping, l)
			}
		}
	}
	rest = groupingRE.ReplaceAllString(rest, " ")
	for _, m := range nameRE.FindAllStringSubmatch(rest, -1) {
		name := strings.TrimSpace(strings.TrimSuffix(m[0], "("))
		if m[1] == "" && !keywords[name] && !slices.Contains(q.metrics, name) { // a name before "(" calls a function
			q.metrics = append(q.metrics, name)
		}
	}
	return q
}

// dashboardQueries reads the dashboard and returns its panels' queries and
// those of its query variables (label_values(metric, label)). Every
// Prometheus data source it names must be the ${datasource} variable.
func dashboardQueries(t *testing.T) []query {
	t.Helper()
	b, err := os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", dashboard, err)
	}
	var queries []query
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if expr, ok := v["expr"].(string); ok {
				queries = append(queries, parseQuery(grafanaVar.ReplaceAllString(expr, "x")))
			}
			if ds, ok := v["datasource"].(map[string]any); ok && ds["type"] == "prometheus" && ds["uid"] != "${datasource}" {
				t.Errorf("a data source %v that is not ${datasource}", ds)
			}
			if v["type"] == "query" {
				def, _ := v["definition"].(string)
				m := labelValuesRE.FindStringSubmatch(def)
				if m == nil {
					t.Errorf("variable %v: want a query label_values(metric, label), got %q", v["name"], def)
				} else {
					queries = append(queries, query{expr: def, metrics: []string{m[1]}})
				}
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(doc)
	if len(queries) == 0 {
		t.Fatalf("%s has no queries", dashboard)
	}
	return queries
}

// scrape is what /metrics served: for each series name, its labels and the
// values each took.
type scrape map[string]map[string]map[string]bool

// parseExposition reads Prometheus' text exposition format.
func parseExposition(t *testing.T, b []byte) scrape {
	t.Helper()
	out := scrape{}
	for line := range strings.SplitSeq(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end < 0 {
			t.Fatalf("/metrics: bad line %q", line)
		}
		name := line[:end]
		labels := out[name]
		if labels == nil {
			labels = map[string]map[string]bool{}
			out[name] = labels
		}
		if line[end] != '{' {
			continue
		}
		// label="value", ... } with \\, \" and \n escaped in values
		rest := line[end+1:]
		for {
			rest = strings.TrimLeft(rest, ", ")
			if strings.HasPrefix(rest, "}") {
				break
			}
			label, after, ok := strings.Cut(rest, `="`)
			if !ok {
				t.Fatalf("/metrics: bad labels in %q", line)
			}
			var value strings.Builder
			i := 0
			for ; i < len(after) && after[i] != '"'; i++ {
				if after[i] == '\\' && i+1 < len(after) {
					i++
				}
				value.WriteByte(after[i])
			}
			if i == len(after) {
				t.Fatalf("/metrics: unterminated label value in %q", line)
			}
			if labels[label] == nil {
				labels[label] = map[string]bool{}
			}
			labels[label][value.String()] = true
			rest = after[i+1:]
		}
	}
	return out
}

// berthServer is a running berth serve with auth on.
type berthServer struct {
	bin, addr, dir string
	user, password string
}

// startBerth builds berth and starts `berth serve` on a free loopback port,
// with an htpasswd user who may do anything and /metrics open; it stops the
// server when the test ends.
func startBerth(t *testing.T) *berthServer {
	t.Helper()
	s := &berthServer{dir: t.TempDir(), user: "admin", password: "dashboard-test-password"}
	s.bin = filepath.Join(s.dir, "berth")
	if out, err := exec.Command("go", "build", "-o", s.bin, "github.com/berth-registry/berth/cmd/berth").CombinedOutput(); err != nil {
		t.Fatalf("building berth: %v\n%s", err, out)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(s.password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	htpasswd := filepath.Join(s.dir, "htpasswd")
	if err := os.WriteFile(htpasswd, fmt.Appendf(nil, "%s:%s\n", s.user, hash), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(s.dir, "berth.yaml")
	// On PostgreSQL, as replicas run, so that the leadership's metric is
	// served, and collecting garbage every second, so that its metrics are.
	doc := fmt.Sprintf(`addr: 127.0.0.1:0
data: %q
catalog:
  database: %q
gc:
  interval: 1s
auth:
  htpasswd: %q
  audit: %q
  metrics: open
  rules:
    - {subjects: ["user:%s"], repositories: ["*/*"], actions: [admin]}
`, filepath.Join(s.dir, "data"), pgtest.Database(t), htpasswd, filepath.Join(s.dir, "audit.log"), s.user)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(s.bin, "serve", "--config", cfg)
	cmd.Env = s.env()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer // written by the reader until done is closed
	addr, done := make(chan string, 1), make(chan struct{})
	serving := regexp.MustCompile(`msg="berth serving" addr=(\S+)`)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if m := serving.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("berth serve did not stop within 30s of SIGTERM")
		}
		if t.Failed() {
			t.Logf("berth serve's log:\n%s", log.String())
		}
	})
	select {
	case s.addr = <-addr:
	case <-done:
		t.Fatalf("berth serve exited before serving:\n%s", log.String())
	case <-time.After(time.Minute):
		t.Fatal("berth serve did not start within a minute")
	}
	return s
}

// env is the environment of berth commands: a home and Docker config of the
// test's own.
func (s *berthServer) env() []string {
	return append(os.Environ(), "HOME="+s.dir, "DOCKER_CONFIG="+filepath.Join(s.dir, "docker"))
}

// exercise makes berth serve record what the dashboard shows: it pushes an
// OLM package (indexed by the catalog, published in a catalog image), pulls
// one of its versions, and fails a login.
func (s *berthServer) exercise(t *testing.T) {
	t.Helper()
	auth := base64.StdEncoding.EncodeToString([]byte(s.user + ":" + s.password))
	docker, err := json.Marshal(map[string]any{"auths": map[string]any{s.addr: map[string]string{"auth": auth}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(s.dir, "docker"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.dir, "docker", "config.json"), docker, 0o600); err != nil {
		t.Fatal(err)
	}
	etcd := filepath.Join("..", "..", "shared", "fixtures", "olm-community", "etcd")
	for _, args := range [][]string{
		{"push", etcd, s.addr + "/olm"},
		{"pull", s.addr + "/olm/etcd:0.9.4", "-o", filepath.Join(s.dir, "pulled")},
	} {
		cmd := exec.Command(s.bin, args...)
		cmd.Env = s.env()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("berth %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	req, err := http.NewRequest(http.MethodGet, "http://"+s.addr+"/auth/token?service=berth&scope=repository:olm/etcd:pull", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(s.user, "not-the-password")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a login with a wrong password: %s, want 401", resp.Status)
	}
}

// scrape reads /metrics.
func (s *berthServer) scrape(t *testing.T) scrape {
	t.Helper()
	resp, err := http.Get("http://" + s.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s\n%s", resp.Status, b)
	}
	return parseExposition(t, b)
}
