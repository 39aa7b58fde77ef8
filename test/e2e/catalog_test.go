package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/httpapi/openapitest"
	"github.com/berth-registry/berth/internal/kudoindex"
)

// pushFixtures pushes kudo/kafka (two versions) and the OLM etcd package to s
// and waits until the catalog has every version.
func pushFixtures(t *testing.T, s *server) {
	t.Helper()
	for _, v := range []string{"2.5.1-1.3.2", "2.5.0-1.3.1"} {
		if r := berth(t, "", "push", kudoFixture(t, "kafka", v), s.addr+"/kudo/kafka"); r.code != 0 {
			t.Fatalf("push kafka %s: %s", v, r.stderr)
		}
	}
	if r := berth(t, "", "push", filepath.Join(fixtures, "olm-community", "etcd"), s.addr+"/community"); r.code != 0 {
		t.Fatalf("push etcd: %s", r.stderr)
	}
	waitUntil(t, s, "every version indexed", func() bool {
		var st apiv1.Status
		return getJSON(t, s, "/api/v1/status", &st) == http.StatusOK && st.Versions == 8
	})
}

// TestCatalogAPIConformsToOpenAPI drives every endpoint of a real berth serve,
// successes and errors, and validates each exchange against the OpenAPI
// document the server itself publishes.
func TestCatalogAPIConformsToOpenAPI(t *testing.T) {
	s := startServer(t, "")
	pushFixtures(t, s)
	code, doc := s.get(t, "/api/v1/openapi.yaml")
	if code != http.StatusOK || !strings.Contains(doc, "openapi: 3") {
		t.Fatalf("openapi.yaml: %d", code)
	}
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/api/v1/packages", 200},
		{"GET", "/api/v1/packages?q=kafka&format=kudo&limit=1", 200},
		{"GET", "/api/v1/packages?q=etcd&channel=alpha&provides=EtcdCluster&kubeVersion=1.20", 200},
		{"GET", "/api/v1/packages?sort=updated&verified=false", 200},
		{"GET", "/api/v1/packages/kudo/kafka", 200},
		{"GET", "/api/v1/packages/kudo/kafka/versions/2.5.1_1.3.2", 200},
		{"GET", "/api/v1/packages/kudo/kafka/versions/2.5.1_1.3.2/files/operator.yaml", 200},
		{"GET", "/api/v1/packages/community/etcd/channels/alpha/graph", 200},
		{"GET", "/api/v1/packages/community/etcd/upgrades?from=0.9.2", 200},
		{"GET", "/api/v1/changes?since=0", 200},
		{"GET", "/api/v1/artifacts", 200},
		{"GET", "/api/v1/status", 200},
		{"GET", "/api/v1/packages?format=rpm", 400},
		{"GET", "/api/v1/packages?limit=0", 400},
		{"GET", "/api/v1/packages?cursor=garbage", 400},
		{"GET", "/api/v1/packages?kubeVersion=latest", 400},
		{"GET", "/api/v1/packages?colour=red", 400},
		{"GET", "/api/v1/packages/kudo/nosuch", 404},
		{"GET", "/api/v1/packages/kudo/kafka/versions/9.9.9", 404},
		{"GET", "/api/v1/packages/kudo/kafka/versions/2.5.1_1.3.2/files/no/such.yaml", 404},
		{"GET", "/api/v1/packages/community/etcd/channels/nosuch/graph", 404},
		{"GET", "/api/v1/packages/community/etcd/upgrades", 400},
		{"GET", "/api/v1/changes?since=-1", 400},
		{"POST", "/api/v1/packages", 405},
		{"DELETE", "/api/v1/packages/community/etcd", 200},
		{"DELETE", "/api/v1/packages/community/etcd", 404},
	} {
		req, _ := http.NewRequest(tc.method, s.url()+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		namesNoServerPath(t, s, tc.method+" "+tc.path, body)
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s = %d, want %d: %s", tc.method, tc.path, resp.StatusCode, tc.status, body)
			continue
		}
		openapitest.Validate(t, req, resp.StatusCode, resp.Header, body)
	}
	// The DELETE reached the registry: etcd's repository is gone there too.
	const gone = `{"errors":[{"code":"NAME_UNKNOWN","message":"repository name not known to registry","detail":{"name":"community/etcd"}}]}`
	if code, body := s.get(t, "/v2/community/etcd/tags/list"); code != http.StatusNotFound || strings.TrimSpace(body) != gone {
		t.Errorf("etcd in the registry after its DELETE: %d %s, want 404 %s", code, body, gone)
	}
}

// TestLegacyIndexDownloadsWork reads /kudo/index.yaml as a KUDO client does
// and downloads a package from the URL it gives: the bytes hash to the
// digest the index states.
func TestLegacyIndexDownloadsWork(t *testing.T) {
	s := startServer(t, "")
	pushFixtures(t, s)
	code, body := s.get(t, "/kudo/index.yaml")
	if code != http.StatusOK {
		t.Fatalf("index.yaml: %d %s", code, body)
	}
	var idx kudoindex.IndexFile
	if err := yaml.Unmarshal([]byte(body), &idx); err != nil {
		t.Fatal(err)
	}
	kafka := idx.Entries["kafka"]
	if idx.APIVersion != "v1" || len(kafka) != 2 || kafka[0].OperatorVersion != "1.3.2" || kafka[0].AppVersion != "2.5.1" {
		t.Fatalf("index: %+v", idx)
	}
	resp, err := http.Get(kafka[0].URLs[0])
	if err != nil {
		t.Fatal(err)
	}
	tgz, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	sum := sha256.Sum256(tgz)
	if resp.StatusCode != http.StatusOK || hex.EncodeToString(sum[:]) != kafka[0].Digest {
		t.Errorf("download %s: %d, sha256 %x, index says %s", kafka[0].URLs[0], resp.StatusCode, sum, kafka[0].Digest)
	}
}

// TestCLISearchShowUpgrades runs berth search, show and upgrades against a
// real server.
func TestCLISearchShowUpgrades(t *testing.T) {
	s := startServer(t, "")
	pushFixtures(t, s)
	r := berth(t, "", "search", "kafka", "--server", s.addr)
	if r.code != 0 || !strings.Contains(r.stdout, "kudo/kafka") || !strings.Contains(r.stdout, "2.5.1_1.3.2") {
		t.Errorf("search: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = berth(t, "", "search", "--type", "olm", "--provides", "EtcdCluster", "--server", s.addr, "--format", "json")
	var res apiv1.SearchResponse
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || len(res.Packages) != 1 || res.Packages[0].Name != "etcd" {
		t.Errorf("search --format json: %v %s %s", err, r.stdout, r.stderr)
	}
	r = berth(t, "", "show", "kudo/kafka:2.5.1_1.3.2", "--server", s.addr)
	if r.code != 0 || !strings.Contains(r.stdout, "operator.yaml") {
		t.Errorf("show version: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = berth(t, "", "upgrades", "community/etcd", "--from", "0.9.2", "--channel", "singlenamespace-alpha", "--server", s.addr, "--format", "json")
	var up apiv1.Upgrades
	if err := json.Unmarshal([]byte(r.stdout), &up); err != nil || up.Head != "0.9.4" || strings.Join(up.Path, " ") != "0.9.4" {
		t.Errorf("upgrades: %v %+v %s", err, up, r.stderr)
	}
	r = run(t, "", berthBin, "show", "kudo/nosuch", "--server", s.addr)
	if r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("show unknown: %d %s", r.code, r.stderr)
	}
}

// TestHelmPushedChartIsIndexed packages and pushes a chart with the real helm
// CLI and finds it in the catalog, format helm, with its files.
func TestHelmPushedChartIsIndexed(t *testing.T) {
	requireTool(t, "the helm CLI", helmBin)
	s := startServer(t, "")
	dir := t.TempDir()
	chart := filepath.Join(dir, "webapp")
	files := map[string]string{
		"Chart.yaml":             "apiVersion: v2\nname: webapp\nversion: 0.3.1\nappVersion: \"2.0\"\ndescription: A small web application chart\nkeywords: [web, demo]\n",
		"values.yaml":            "replicaCount: 2\n",
		"templates/service.yaml": "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ .Release.Name }}\n",
	}
	for name, content := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(chart, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(chart, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"HELM_CACHE_HOME=" + filepath.Join(dir, "cache"), "HELM_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"HELM_DATA_HOME=" + filepath.Join(dir, "data"), "HOME=" + dir}
	if r := runEnv(t, env, helmBin, "package", chart, "-d", dir); r.code != 0 {
		t.Fatalf("helm package: %s", r.stderr)
	}
	if r := runEnv(t, env, helmBin, "push", filepath.Join(dir, "webapp-0.3.1.tgz"), "oci://"+s.addr+"/charts", "--plain-http"); r.code != 0 {
		t.Fatalf("helm push: %s", r.stderr)
	}
	var v apiv1.Version
	waitUntil(t, s, "the chart to be indexed", func() bool {
		return getJSON(t, s, "/api/v1/packages/charts/webapp/versions/0.3.1", &v) == http.StatusOK
	})
	if v.PullReference != s.addr+"/charts/webapp@"+v.Digest {
		t.Errorf("pull reference %q", v.PullReference)
	}
	if v.Format != "helm" || v.Metadata.Description != "A small web application chart" || v.Metadata.AppVersion != "2.0" {
		t.Errorf("chart version: %+v", v)
	}
	var res apiv1.SearchResponse
	if getJSON(t, s, "/api/v1/packages?q=web&format=helm", &res); len(res.Packages) != 1 || res.Packages[0].Name != "webapp" {
		t.Errorf("search: %+v", res)
	}
	if code, body := s.get(t, "/api/v1/packages/charts/webapp/versions/0.3.1/files/values.yaml"); code != http.StatusOK || body != files["values.yaml"] {
		t.Errorf("values.yaml: %d %q", code, body)
	}
}

// TestCatalogRestartAndRebuild restarts berth serve with its catalog intact —
// the start-up reconciliation reads no package and the change feed carries on
// — and then with the catalog deleted, which rebuilds it from the registry.
func TestCatalogRestartAndRebuild(t *testing.T) {
	data := t.TempDir()
	s := startServer(t, data)
	pushFixtures(t, s)
	var before apiv1.Status
	getJSON(t, s, "/api/v1/status", &before)
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}

	s = startServer(t, data)
	waitReconciled(t, s, 1)
	var st apiv1.Status
	getJSON(t, s, "/api/v1/status", &st)
	if st.Versions != 8 || st.Reconcile.Indexed != 0 || st.Seq != before.Seq {
		t.Errorf("restart: %+v, want 8 versions, nothing re-indexed, seq %d", st, before.Seq)
	}
	if r := berth(t, "", "push", kudoFixture(t, "cowsay", "0.2.0"), s.addr+"/kudo/cowsay"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	var ch apiv1.Changes
	waitUntil(t, s, "a new change", func() bool {
		return getJSON(t, s, "/api/v1/changes?since="+strconv.FormatInt(before.Seq, 10), &ch) == http.StatusOK && len(ch.Changes) == 1
	})
	if ch.Changes[0].Seq <= before.Seq || ch.Changes[0].Name != "cowsay" {
		t.Errorf("change after restart: %+v (last seq before: %d)", ch.Changes[0], before.Seq)
	}
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}

	for _, f := range []string{"catalog.db", "catalog.db-wal", "catalog.db-shm"} {
		if err := os.Remove(filepath.Join(data, f)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	s = startServer(t, data)
	waitReconciled(t, s, 1)
	getJSON(t, s, "/api/v1/status", &st)
	if st.Versions != 9 || st.Reconcile.Indexed != 9 {
		t.Errorf("rebuild: %+v, want all 9 versions indexed", st)
	}
}
