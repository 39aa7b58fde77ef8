package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-registry/berth/catalog/apiv1"
)

// TestSplitCatalogFollowsUpstreamRegistry runs `berth serve catalog` against
// distribution's own registry binary, which sends its notification webhooks
// to the catalog's /events: a package pushed after the catalog's start-up
// reconciliation is searchable through the events alone, and a deletion
// follows the same way.
func TestSplitCatalogFollowsUpstreamRegistry(t *testing.T) {
	regAddr, cat := startSplit(t)

	r := berth(t, "", "push", kudoFixture(t, "kafka", "2.5.1-1.3.2"), regAddr+"/kudo/kafka", "--format", "json")
	if r.code != 0 {
		t.Fatalf("push: %s", r.stderr)
	}
	pushed := digestOf(t, r.stdout)
	var found apiv1.SearchResponse
	waitUntil(t, cat, "kafka to be searchable", func() bool {
		return getJSON(t, cat, "/api/v1/packages?q=kafka", &found) == http.StatusOK && len(found.Packages) == 1
	})
	if p := found.Packages[0]; p.Namespace != "kudo" || p.Name != "kafka" || p.Digest != pushed {
		t.Errorf("found %+v, want kudo/kafka at %s", p, pushed)
	}
	var st apiv1.Status
	getJSON(t, cat, "/api/v1/status", &st)
	if st.Reconcile.Runs != 1 {
		t.Errorf("indexed by a reconciliation (%d runs), not by the event", st.Reconcile.Runs)
	}

	req, _ := http.NewRequest(http.MethodDelete, "http://"+regAddr+"/v2/kudo/kafka/manifests/"+pushed, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delete: %v %v", resp, err)
	}
	waitUntil(t, cat, "kafka to be gone", func() bool {
		var p apiv1.Package
		return getJSON(t, cat, "/api/v1/packages/kudo/kafka", &p) == http.StatusOK && len(p.Versions) == 0 ||
			getJSON(t, cat, "/api/v1/packages/kudo/kafka", &p) == http.StatusNotFound
	})
}

// startSplit starts distribution's registry binary, sending its
// notifications to a `berth serve catalog` started with the extra args, and
// waits until the catalog's start-up reconciliation is done.
func startSplit(t *testing.T, args ...string) (string, *server) {
	t.Helper()
	catAddr := freeAddr(t)
	reg := startUpstreamRegistry(t, fmt.Sprintf(`notifications:
  endpoints:
    - name: berth
      url: http://%s/events
      timeout: 2s
      threshold: 10
      backoff: 100ms
`, catAddr))
	regAddr, dir := reg.addr, reg.data

	cat := startProcess(t, "", append([]string{"serve", "catalog", "--addr", catAddr, "--data", filepath.Join(dir, "catalog"),
		"--registry", "http://" + regAddr}, args...)...)
	waitReconciled(t, cat, 1)
	return regAddr, cat
}

// TestSplitCatalogVerifiesSignatures: following a registry without the
// referrers API, the catalog verifies cosign's tag-scheme signatures and
// the referrer signatures cosign stores under the referrers tag schema.
func TestSplitCatalogVerifiesSignatures(t *testing.T) {
	kp := cosignKeyPair(t)
	regAddr, cat := startSplit(t, "--config", trustConfig(t, policy("*/kafka", kp.pub, false)))
	for _, tc := range []struct {
		repo string
		args []string
		kind string
	}{
		{"tagged/kafka", nil, "tag"},
		{"referred/kafka", []string{"--registry-referrers-mode=oci-1-1"}, "referrer"},
	} {
		d := digestOf(t, berth(t, "", "push", kudoFixture(t, "kafka", "2.5.1-1.3.2"), regAddr+"/"+tc.repo, "--format", "json").stdout)
		waitUntil(t, cat, tc.repo+" to be indexed", func() bool {
			_, code := versionDoc(t, cat, tc.repo, "2.5.1_1.3.2")
			return code == http.StatusOK
		})
		args := append([]string{"sign", "--key", kp.key, "--tlog-upload=false", "--yes"}, tc.args...)
		if r := runEnv(t, []string{"COSIGN_EXPERIMENTAL=1"}, cosignBin, append(args, regAddr+"/"+tc.repo+"@"+d)...); r.code != 0 {
			t.Fatalf("cosign sign %v: %s", tc.args, r.stderr)
		}
		v := waitVerified(t, cat, tc.repo, "2.5.1_1.3.2", true, nil)
		if len(v.Signatures) != 1 || v.Signatures[0].Kind != tc.kind || v.Signatures[0].KeyID != kp.id {
			t.Errorf("%s: signatures %+v, want one %s signature by %s", tc.repo, v.Signatures, tc.kind, kp.id)
		}
	}
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startUpstreamRegistry starts distribution's registry binary on a free
// loopback port, with filesystem storage under a new temp dir (its data)
// and extra appended to its configuration, and stops it when the test ends.
func startUpstreamRegistry(t *testing.T, extra string) *server {
	t.Helper()
	requireTool(t, "distribution's registry", registryBin)
	addr, dir := freeAddr(t), t.TempDir()
	cfg := fmt.Sprintf(`version: 0.1
log: {level: warn}
storage:
  filesystem: {rootdirectory: %s}
  delete: {enabled: true}
http: {addr: %s, secret: test}
`, filepath.Join(dir, "registry"), addr) + extra
	cfgFile := filepath.Join(dir, "registry.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := exec.Command(registryBin, "serve", cfgFile)
	if err := reg.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Process.Kill(); reg.Wait() })
	waitHTTP(t, "http://"+addr+"/v2/")
	return &server{addr: addr, data: dir, done: make(chan struct{})}
}

// waitHTTP waits until url answers 200.
func waitHTTP(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer within 30s: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitUntil polls cond for up to 30 seconds.
func waitUntil(t *testing.T, s *server, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s\n%s", what, s.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
