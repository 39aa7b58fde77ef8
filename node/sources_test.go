package node

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/config"
)

// TestNodeSources starts berth serve with a tracked source: the leader
// (this node, alone) publishes its version, signed with the provenance key
// the node created in its data directory.
func TestNodeSources(t *testing.T) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	chart := "apiVersion: v2\nname: hello\nversion: 0.3.0\n"
	if err := tw.WriteHeader(&tar.Header{Name: "hello/Chart.yaml", Mode: 0o644, Size: int64(len(chart)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(chart)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		w.Write(buf.Bytes())
	}))
	defer srv.Close()

	data := t.TempDir()
	n := start(t, testConfig(t, data, func(c *config.Config) {
		c.Sources.AllowPrivate = true
		c.Namespaces = []config.Namespace{{Name: "team", Sources: []config.Source{{Package: "hello", Kind: "http", URL: srv.URL + "/hello.tgz", Dir: "hello"}}}}
		// The policy names the public key berth creates on this first start.
		c.Trust.Policies = []config.TrustPolicy{{Repositories: []string{"team/*"}, Keys: []string{filepath.Join(data, "provenance.pub")},
			Require: true, RequireSource: []string{"http://127.0.0.1:*/*"}}}
	}))
	body := n.waitFor(t, "/api/v1/packages/team/hello")
	if !strings.Contains(body, `"0.3.0"`) {
		t.Errorf("catalog entry %s, want version 0.3.0", body)
	}
	for _, f := range []string{"provenance.key", "provenance.pub", "sources.db"} {
		if _, err := os.Stat(filepath.Join(data, f)); err != nil {
			t.Errorf("data directory: %v", err)
		}
	}
	pub, err := os.ReadFile(filepath.Join(data, "provenance.pub"))
	if err != nil || !bytes.Equal(pub, n.sources.PublicKey()) {
		t.Errorf("provenance.pub %q (%v), want the tracker's public key %q", pub, err, n.sources.PublicKey())
	}
	// The catalog's API and the change feed see the tracker: its status,
	// its key, and the source event of the version it published.
	// The leader saves its checks' states every half second.
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := n.get(t, "/api/v1/sources")
		if code == http.StatusOK && strings.Contains(body, `"package":"hello"`) && strings.Contains(body, `"version":"0.3.0"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /api/v1/sources: %d %s, want the version published", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := n.get(t, "/api/v1/sources/key"); code != http.StatusOK || body != string(pub) {
		t.Errorf("GET /api/v1/sources/key: %d %q", code, body)
	}
	if code, body := n.get(t, "/api/v1/changes"); code != http.StatusOK || !strings.Contains(body, `"action":"source"`) || !strings.Contains(body, `"status":"published"`) {
		t.Errorf("GET /api/v1/changes: %d %s, want the source event", code, body)
	}
	families, err := n.metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range families {
		found = found || f.GetName() == "berth_sources_checks_total"
	}
	if !found {
		t.Error("no berth_sources_checks_total among the node's metrics")
	}
}
