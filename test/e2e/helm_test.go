package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/httpapi/openapitest"
	"github.com/berth-registry/berth/internal/helmindex"
	"github.com/berth-registry/berth/internal/kudoindex"
)

// TestHelmRepository uses berth as a classic Helm chart repository with the
// real helm CLI: a chart pushed with `helm push` to two namespaces is found
// by `helm repo add` and `helm search repo` in the repository of every
// namespace and of one, downloaded by `helm pull` (the bytes pushed, as the
// index's digest says, saved as <name>-<version>.tgz) and rendered by `helm
// template` from the repository. A berth package of format helm and a KUDO
// package beside it stay out of Helm's index, and KUDO's index still lists
// the KUDO package.
func TestHelmRepository(t *testing.T) {
	requireTool(t, "the helm CLI", helmBin)
	s := startServer(t, "")
	dir := t.TempDir()
	env := []string{"HELM_CACHE_HOME=" + filepath.Join(dir, "cache"), "HELM_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"HELM_DATA_HOME=" + filepath.Join(dir, "data"), "HOME=" + dir}
	helm := func(args ...string) result {
		t.Helper()
		r := runEnv(t, env, helmBin, args...)
		if r.code != 0 {
			t.Fatalf("helm %s: %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		return r
	}

	for _, name := range []string{"webapp", "packed"} {
		helm("create", filepath.Join(dir, name))
	}
	helm("package", filepath.Join(dir, "webapp"), "-d", dir)
	tgz := filepath.Join(dir, "webapp-0.1.0.tgz")
	for _, ns := range []string{"charts", "stable"} {
		helm("push", tgz, "oci://"+s.addr+"/"+ns, "--plain-http")
	}
	if r := berth(t, "", "push", filepath.Join(dir, "packed"), s.addr+"/charts/packed"); r.code != 0 {
		t.Fatalf("berth push packed: %s", r.stderr)
	}
	if r := berth(t, "", "push", kudoFixture(t, "kafka", "2.5.1-1.3.2"), s.addr+"/kudo/kafka"); r.code != 0 {
		t.Fatalf("berth push kafka: %s", r.stderr)
	}
	waitUntil(t, s, "every version indexed", func() bool {
		var st apiv1.Status
		return getJSON(t, s, "/api/v1/status", &st) == http.StatusOK && st.Versions == 4
	})

	helm("repo", "add", "berth", s.url()+"/api/helm")
	helm("repo", "add", "berth-charts", s.url()+"/api/helm/charts")
	// Every namespace's repository keys a name found in two namespaces by
	// namespace; one namespace's repository keys by name alone.
	for repo, want := range map[string][]string{
		"berth":        {"berth/charts/webapp", "berth/stable/webapp"},
		"berth-charts": {"berth-charts/webapp"},
	} {
		var found []struct {
			Name       string `json:"name"`
			Version    string `json:"version"`
			AppVersion string `json:"app_version"`
		}
		out := helm("search", "repo", repo+"/", "--output", "json").stdout
		if err := json.Unmarshal([]byte(out), &found); err != nil {
			t.Fatalf("helm search repo %s: %v\n%s", repo, err, out)
		}
		var names []string
		for _, f := range found {
			names = append(names, f.Name)
			if f.Version != "0.1.0" || f.AppVersion != "1.16.0" {
				t.Errorf("helm search repo %s: %+v, want webapp 0.1.0 (app 1.16.0)", repo, f)
			}
		}
		if !slices.Equal(names, want) {
			t.Errorf("helm search repo %s: %v, want %v", repo, names, want)
		}
	}

	want, err := os.ReadFile(tgz)
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for i, chart := range []string{"berth-charts/webapp", "berth/stable/webapp"} {
		pulled := filepath.Join(dir, "pulled", strconv.Itoa(i))
		if err := os.MkdirAll(pulled, 0o755); err != nil {
			t.Fatal(err)
		}
		helm("pull", chart, "--version", "0.1.0", "-d", pulled)
		if got, err = os.ReadFile(filepath.Join(pulled, "webapp-0.1.0.tgz")); err != nil || !bytes.Equal(got, want) {
			files, _ := os.ReadDir(pulled)
			t.Fatalf("helm pull %s: %v; it wrote %v, want webapp-0.1.0.tgz as pushed", chart, err, files)
		}
	}
	// What helm read, as the OpenAPI document describes it.
	bodies := map[string][]byte{}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, path := range []string{"/api/helm/index.yaml", "/api/helm/charts/index.yaml", "/api/helm/charts/webapp/webapp-0.1.0.tgz"} {
		req, _ := http.NewRequest("GET", s.url()+path, nil)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		openapitest.Validate(t, req, resp.StatusCode, resp.Header, body)
		bodies[path] = body
		if loc := resp.Header.Get("Location"); loc != "" {
			bodies[path] = []byte(loc)
		}
	}
	var idx helmindex.IndexFile
	if err := yaml.UnmarshalStrict(bodies["/api/helm/charts/index.yaml"], &idx); err != nil || len(idx.Entries["webapp"]) != 1 {
		t.Fatalf("Helm index: %v\n%s", err, bodies["/api/helm/charts/index.yaml"])
	}
	sum := sha256.Sum256(got)
	digest := hex.EncodeToString(sum[:])
	if digest != idx.Entries["webapp"][0].Digest {
		t.Errorf("helm pull: sha256 %s; the index says %s", digest, idx.Entries["webapp"][0].Digest)
	}
	if loc, want := string(bodies["/api/helm/charts/webapp/webapp-0.1.0.tgz"]), s.url()+"/v2/charts/webapp/blobs/sha256:"+digest; loc != want {
		t.Errorf("chart download redirects to %q, want %q", loc, want)
	}

	out := helm("template", "x", "berth/charts/webapp").stdout
	for _, s := range []string{"kind: Deployment", "name: x-webapp", "helm.sh/chart: webapp-0.1.0"} {
		if !strings.Contains(out, s) {
			t.Errorf("helm template: no %q in\n%s", s, out)
		}
	}

	code, body := s.get(t, "/kudo/index.yaml")
	var kudo kudoindex.IndexFile
	if err := yaml.Unmarshal([]byte(body), &kudo); code != http.StatusOK || err != nil || len(kudo.Entries["kafka"]) != 1 || kudo.Entries["kafka"][0].OperatorVersion != "1.3.2" {
		t.Errorf("KUDO index: %d %v\n%s", code, err, body)
	}
}
