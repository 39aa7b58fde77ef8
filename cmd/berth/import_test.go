package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/client/registrytest"
	"github.com/berth-registry/berth/pkgsource"
	"github.com/berth-registry/berth/signing"
	"github.com/berth-registry/berth/signing/signingtest"
)

// fakeSource is what the fake fetcher serves for one URL.
type fakeSource struct {
	files    map[string]string
	resolved pkgsource.Resolved
	err      error
}

// fakeFetcher serves sources by URL and records what it was asked.
type fakeFetcher struct {
	sources map[string]fakeSource
	specs   []pkgsource.Spec
	limits  pkgsource.Limits
}

// useFakeFetcher makes f the fetcher of berth import for the test.
func useFakeFetcher(t *testing.T, f *fakeFetcher) {
	t.Helper()
	old := fetchSources
	fetchSources = fetcherFunc(f.compose)
	t.Cleanup(func() { fetchSources = old })
}

// compose writes each spec's files into dir/<Destination>.
func (f *fakeFetcher) compose(_ context.Context, specs []pkgsource.Spec, dir string, l pkgsource.Limits) ([]pkgsource.Resolved, error) {
	f.specs, f.limits = specs, l
	var resolved []pkgsource.Resolved
	for _, s := range specs {
		src, ok := f.sources[s.URL]
		if !ok {
			return nil, errors.New(s.URL + ": not found")
		}
		if src.err != nil {
			return nil, src.err
		}
		for p, data := range src.files {
			full := filepath.Join(dir, s.Destination, p)
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				return nil, err
			}
			if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
				return nil, err
			}
		}
		r := src.resolved
		r.Kind, r.URL, r.Dir = s.Kind, s.URL, s.Dir
		resolved = append(resolved, r)
	}
	return resolved, nil
}

const (
	chartURL   = "https://git.example.com/demo.git"
	widgetsURL = "https://downloads.example.com/widgets-0.1.0.tgz"
	crdsURL    = "https://downloads.example.com/crds.tgz"
	appURL     = "https://git.example.com/app.git"
)

// newFakeFetcher serves a Helm chart from a git repository, and two
// halves of a plain-manifest package from a tarball and a git repository.
func newFakeFetcher() *fakeFetcher {
	return &fakeFetcher{sources: map[string]fakeSource{
		chartURL: {files: map[string]string{
			"Chart.yaml":               "apiVersion: v2\nname: demo\nversion: 1.0.0\ndescription: A test chart\nsources: [https://example.com/demo]\n",
			"templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n",
		}, resolved: pkgsource.Resolved{Ref: "refs/tags/v1.0.0", Revision: "4b825dc642cb6eb9a060e54bf8d69288fbee4904"}},
		widgetsURL: {files: map[string]string{
			"manifests/deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: widgets\n",
		}, resolved: pkgsource.Resolved{Revision: `"etag-7"`}},
		crdsURL: {files: map[string]string{
			"widget.yaml": "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\n",
		}, resolved: pkgsource.Resolved{Revision: `"etag-7"`}},
		appURL: {files: map[string]string{
			"deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: widgets\n",
		}, resolved: pkgsource.Resolved{Ref: "refs/heads/main", Revision: "0123456789abcdef0123456789abcdef01234567"}},
		"https://git.example.com/empty.git": {resolved: pkgsource.Resolved{Revision: "feedface"}},
		"https://git.example.com/down.git":  {err: errors.New("git https://git.example.com/down.git: repository not found")},
	}}
}

// inspectManifest returns the manifest annotations of ref.
func inspectManifest(t *testing.T, ref string) map[string]string {
	t.Helper()
	c, err := client.New(client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := client.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := c.Inspect(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return pkg.Manifest.Annotations
}

func TestImportGit(t *testing.T) {
	setup(t)
	host := registrytest.New(t, nil)
	f := newFakeFetcher()
	useFakeFetcher(t, f)
	t.Setenv(sourceUsernameEnv, "")
	t.Setenv(sourcePasswordEnv, "")
	withStdin(t, "s3cret-token\n")

	code, stdout, stderr := berth(t, "import", "git", chartURL, "--ref", "v1.0.0", "--dir", "charts/demo", host+"/charts/demo",
		"-u", "ci", "--password-stdin", "--max-bytes", "1MiB", "--max-files", "50", "--allow-host", "*.example.com", "--allow-private")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 3 || lines[0] != "Fetched git "+chartURL+" refs/tags/v1.0.0 dir charts/demo at 4b825dc642cb6eb9a060e54bf8d69288fbee4904" ||
		lines[1] != "Pushed "+host+"/charts/demo:1.0.0" || !strings.HasPrefix(lines[2], "Digest: sha256:") {
		t.Errorf("stdout:\n%s", stdout)
	}
	if strings.Contains(stdout+stderr, "s3cret") {
		t.Error("the password was printed")
	}
	want := []pkgsource.Spec{{Kind: pkgsource.Git, URL: chartURL, Ref: "v1.0.0", Dir: "charts/demo", Credentials: pkgsource.Credentials{Username: "ci", Password: "s3cret-token"}}}
	if !reflect.DeepEqual(f.specs, want) {
		t.Errorf("specs %+v, want %+v", f.specs, want)
	}
	if l := f.limits; l.MaxBytes != 1<<20 || l.MaxFiles != 50 || !reflect.DeepEqual(l.AllowHosts, []string{"*.example.com"}) || !l.AllowPrivate || l.Timeout != 0 {
		t.Errorf("limits %+v", l)
	}

	a := inspectManifest(t, host+"/charts/demo:1.0.0")
	if a[ocispec.AnnotationSource] != chartURL || a[ocispec.AnnotationRevision] != "4b825dc642cb6eb9a060e54bf8d69288fbee4904" || a[ocispec.AnnotationTitle] != "demo" {
		t.Errorf("manifest annotations: %v", a)
	}
	var built []pkgsource.Built
	if err := json.Unmarshal([]byte(a[pkgsource.AnnotationSources]), &built); err != nil || len(built) != 1 || built[0].Ref != "refs/tags/v1.0.0" || built[0].Dir != "charts/demo" {
		t.Errorf("%s = %s (%v)", pkgsource.AnnotationSources, a[pkgsource.AnnotationSources], err)
	}

	// The same source from the environment's credentials, as JSON.
	t.Setenv(sourceUsernameEnv, "robot")
	t.Setenv(sourcePasswordEnv, "env-secret")
	out := mustBerth(t, "import", "git", chartURL, host+"/mirror/demo:1.0.0", "--format", "json")
	var res struct {
		Sources                     []map[string]string
		Reference, Digest, SignedBy string
		Size                        int64
	}
	decode(t, out, &res)
	if len(res.Sources) != 1 || !reflect.DeepEqual(res.Sources[0], map[string]string{"kind": "git", "url": chartURL, "ref": "refs/tags/v1.0.0", "revision": "4b825dc642cb6eb9a060e54bf8d69288fbee4904"}) ||
		res.Reference != host+"/mirror/demo:1.0.0" || !strings.HasPrefix(res.Digest, "sha256:") || res.Size == 0 || res.SignedBy != "" {
		t.Errorf("json output:\n%s", out)
	}
	if strings.Contains(out, "env-secret") || f.specs[0].Credentials != (pkgsource.Credentials{Username: "robot", Password: "env-secret"}) {
		t.Errorf("credentials from the environment: %+v", f.specs[0].Credentials)
	}
}

func TestImportHTTPAndImage(t *testing.T) {
	setup(t)
	host := registrytest.New(t, nil)
	f := newFakeFetcher()
	f.sources["quay.io/example/demo-chart:1.0.0"] = fakeSource{files: f.sources[chartURL].files, resolved: pkgsource.Resolved{Revision: "sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"}}
	useFakeFetcher(t, f)
	// A package manifest in the temp dir does not make the fetched content
	// one of its version folders.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	writeFiles(t, tmp, map[string]string{"widgets.package.yaml": "packageName: widgets\nchannels: []\n"})

	// A plain-manifest package takes its name and version from REF.
	out := mustBerth(t, "import", "http", widgetsURL, "--dir", "widgets", host+"/team/widgets:0.1.0")
	if !strings.HasPrefix(out, "Fetched http "+widgetsURL+` dir widgets at "etag-7"`+"\nPushed "+host+"/team/widgets:0.1.0\n") {
		t.Errorf("stdout:\n%s", out)
	}
	if a := inspectManifest(t, host+"/team/widgets:0.1.0"); a[ocispec.AnnotationRevision] != `"etag-7"` {
		t.Errorf("annotations %v", a)
	}
	out = mustBerth(t, "import", "image", "quay.io/example/demo-chart:1.0.0", host+"/charts/demo")
	if !strings.HasPrefix(out, "Fetched image quay.io/example/demo-chart:1.0.0 at sha256:4f53") || f.specs[0].Kind != pkgsource.Image {
		t.Errorf("stdout:\n%s", out)
	}
}

func TestImportSources(t *testing.T) {
	dir := setup(t)
	host := registrytest.New(t, nil)
	f := newFakeFetcher()
	useFakeFetcher(t, f)
	file := filepath.Join(dir, "sources.yaml")
	writeFiles(t, dir, map[string]string{"sources.yaml": `sources:
- kind: http
  url: ` + crdsURL + `
  destination: manifests/crds
- kind: git
  url: ` + appURL + `
  ref: main
  dir: deploy
  destination: manifests/app
`})
	out := mustBerth(t, "import", "sources", file, host+"/team/widgets:0.2.0")
	want := "Fetched http " + crdsURL + ` at "etag-7" into manifests/crds` + "\n" +
		"Fetched git " + appURL + " refs/heads/main dir deploy at 0123456789abcdef0123456789abcdef01234567 into manifests/app\n" +
		"Pushed " + host + "/team/widgets:0.2.0\n"
	if !strings.HasPrefix(out, want) {
		t.Errorf("stdout:\n%s\nwant it to start with:\n%s", out, want)
	}
	a := inspectManifest(t, host+"/team/widgets:0.2.0")
	if _, ok := a[ocispec.AnnotationRevision]; ok {
		t.Errorf("two sources have no single revision: %v", a)
	}
	var built []pkgsource.Built
	if err := json.Unmarshal([]byte(a[pkgsource.AnnotationSources]), &built); err != nil || len(built) != 2 ||
		built[0].Destination != "manifests/crds" || built[1].Revision != "0123456789abcdef0123456789abcdef01234567" {
		t.Errorf("%s = %s (%v)", pkgsource.AnnotationSources, a[pkgsource.AnnotationSources], err)
	}

	var res struct{ Sources []pkgsource.Built }
	decode(t, mustBerth(t, "import", "sources", file, host+"/team/widgets:0.2.0", "--format", "json"), &res)
	if !reflect.DeepEqual(res.Sources, built) {
		t.Errorf("json sources %+v, want %+v", res.Sources, built)
	}
}

func TestImportErrors(t *testing.T) {
	dir := setup(t)
	var pushes atomic.Int32
	host := registrytest.New(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPut || r.Method == http.MethodPost || r.Method == http.MethodPatch {
				pushes.Add(1)
			}
			next.ServeHTTP(w, r)
		})
	})
	useFakeFetcher(t, newFakeFetcher())
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Setenv(sourceUsernameEnv, "")
	t.Setenv(sourcePasswordEnv, "")
	sources := func(name, body string) string {
		writeFiles(t, dir, map[string]string{name: body})
		return filepath.Join(dir, name)
	}
	two := "sources:\n- kind: git\n  url: " + chartURL + "\n- kind: image\n  url: quay.io/example/x:1\n  destination: extra\n"

	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		stdin string
		want  string
	}{
		{"no kind", []string{"import", chartURL, host + "/charts/demo"}, nil, "", `unknown command "` + chartURL + `" for "berth import"`},
		{"bad kind", []string{"import", "svn", chartURL, host + "/charts/demo"}, nil, "", `unknown command "svn" for "berth import"`},
		{"nothing", []string{"import"}, nil, "", "import from where? want berth import git|http|image|sources"},
		{"missing REF", []string{"import", "git", chartURL}, nil, "", "accepts 2 arg(s), received 1"},
		{"missing URL", []string{"import", "image"}, nil, "", "accepts 2 arg(s), received 0"},
		{"bad REF", []string{"import", "git", chartURL, "charts/demo"}, nil, "", `invalid reference "charts/demo"`},
		{"REF without name", []string{"import", "git", chartURL, host + "/charts"}, nil, "", "missing namespace"},
		{"REF with digest", []string{"import", "git", chartURL, host + "/charts/demo@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}, nil, "", "has a digest"},
		{"upper-case namespace", []string{"import", "git", chartURL, host + "/Charts/demo"}, nil, "", `namespace "Charts" must be lower case`},
		{"not a URL", []string{"import", "git", "git.example.com/demo", host + "/charts/demo"}, nil, "", `import from git git.example.com/demo: url: "git.example.com/demo" is not an http(s) URL`},
		{"credentials in URL", []string{"import", "http", "https://bob:hunter2@example.com/x.tgz", host + "/charts/demo"}, nil, "", `url: "https://bob:xxxxx@example.com/x.tgz" holds credentials`},
		{"dir out of the source", []string{"import", "git", chartURL, "--dir", "../etc", host + "/charts/demo"}, nil, "", `dir: "../etc" must stay inside the directory`},
		{"wrong name", []string{"import", "git", chartURL, host + "/charts/other"}, nil, "", `package imported from git ` + chartURL + ` is named "demo" but REF`},
		{"wrong version", []string{"import", "git", chartURL, host + "/charts/demo:2.0.0"}, nil, "", `has version "1.0.0" but REF`},
		{"--name contradicts REF", []string{"import", "git", chartURL, host + "/charts/demo", "--name", "x"}, nil, "", `--name "x" contradicts the name "demo"`},
		{"fetch fails", []string{"import", "git", "https://git.example.com/down.git", host + "/charts/demo"}, nil, "", "import from git https://git.example.com/down.git: git https://git.example.com/down.git: repository not found"},
		{"build fails", []string{"import", "git", "https://git.example.com/empty.git", host + "/charts/demo"}, nil, "", "import from git https://git.example.com/empty.git: fetched content: package root: no package format recognised: expected operator.yaml (KUDO), Chart.yaml (Helm)"},
		{"bad --max-bytes", []string{"import", "git", chartURL, host + "/charts/demo", "--max-bytes", "lots"}, nil, "", `--max-bytes: want a size such as 256MiB or 1GiB (got "lots")`},
		{"bad --max-files", []string{"import", "git", chartURL, host + "/charts/demo", "--max-files", "-1"}, nil, "", "--max-files: want a positive number"},
		{"--password-stdin without user", []string{"import", "git", chartURL, host + "/charts/demo", "--password-stdin"}, nil, "hunter2", "--password-stdin needs --username"},
		{"empty password", []string{"import", "git", chartURL, host + "/charts/demo", "-u", "ci", "--password-stdin"}, nil, "\n", "--password-stdin: empty password"},
		{"password without user", []string{"import", "git", chartURL, host + "/charts/demo"}, map[string]string{sourcePasswordEnv: "hunter2"}, "", "needs a user name"},
		{"credentials for two hosts", []string{"import", "sources", sources("two.yaml", two), host + "/charts/demo", "-u", "ci"}, map[string]string{sourcePasswordEnv: "hunter2"}, "",
			"the sources are on 2 hosts (git.example.com, quay.io): the credentials would go to all of them"},
		{"no file", []string{"import", "sources", filepath.Join(dir, "missing.yaml"), host + "/charts/demo"}, nil, "", "no such file or directory"},
		{"no sources", []string{"import", "sources", sources("empty.yaml", "sources: []\n"), host + "/charts/demo"}, nil, "", "empty.yaml: no sources: want sources:"},
		{"unknown top-level key", []string{"import", "sources", sources("top.yaml", "source:\n- kind: git\n"), host + "/charts/demo"}, nil, "", "top.yaml: yaml: unmarshal errors:\n  line 1: field source not found"},
		{"bad kind in a file", []string{"import", "sources", sources("kind.yaml", "sources:\n- kind: svn\n  url: https://svn.example.com/x\n"), host + "/charts/demo"}, nil, "",
			`kind.yaml: sources[0]: kind: "svn" is not a kind of source: want git, http or image`},
		{"missing kind", []string{"import", "sources", sources("nokind.yaml", "sources:\n- url: https://x.example.com/a.tgz\n"), host + "/charts/demo"}, nil, "",
			"nokind.yaml: sources[0]: kind: missing: want git, http or image"},
		{"missing url", []string{"import", "sources", sources("nourl.yaml", two+"- kind: http\n"), host + "/charts/demo"}, nil, "",
			"nourl.yaml: sources[2]: url: missing: want the tarball's URL"},
		{"unknown key", []string{"import", "sources", sources("key.yaml", two+"- kind: http\n  url: "+crdsURL+"\n  branch: main\n"), host + "/charts/demo"}, nil, "",
			"key.yaml: sources[2]: branch: unknown key (line 9): want kind, url, ref, dir, destination"},
		{"ref on http", []string{"import", "sources", sources("ref.yaml", "sources:\n- kind: http\n  url: "+crdsURL+"\n  ref: v1\n"), host + "/charts/demo"}, nil, "",
			"ref.yaml: sources[0]: ref: only a git source has a ref"},
		{"dir on image", []string{"import", "sources", sources("dir.yaml", "sources:\n- kind: image\n  url: quay.io/x/y:1\n  dir: a\n"), host + "/charts/demo"}, nil, "",
			"dir.yaml: sources[0]: dir: an image source has no directory"},
		{"absolute destination", []string{"import", "sources", sources("dest.yaml", "sources:\n- kind: git\n  url: "+chartURL+"\n  destination: /etc\n"), host + "/charts/demo"}, nil, "",
			`dest.yaml: sources[0]: destination: "/etc" must be a relative slash-separated path`},
		{"list value", []string{"import", "sources", sources("list.yaml", "sources:\n- kind: git\n  url: [a, b]\n"), host + "/charts/demo"}, nil, "",
			"list.yaml: sources[0]: url: want a string (line 3)"},
		{"entry not a mapping", []string{"import", "sources", sources("scalar.yaml", "sources:\n- git\n"), host + "/charts/demo"}, nil, "",
			"scalar.yaml: sources[0]: line 2: want a mapping of kind, url, ref, dir, destination"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			withStdin(t, tt.stdin)
			code, stdout, stderr := berth(t, tt.args...)
			if code != 1 || stdout != "" {
				t.Errorf("exit %d, stdout %q", code, stdout)
			}
			if !strings.HasPrefix(stderr, "Error: ") || !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr %q does not contain %q", stderr, tt.want)
			}
			if strings.Contains(stderr, "hunter2") {
				t.Error("a password was printed")
			}
		})
	}
	if n := pushes.Load(); n != 0 {
		t.Errorf("%d uploads to the registry after failed imports, want none", n)
	}
	if entries, err := os.ReadDir(tmp); err != nil || len(entries) != 0 {
		t.Errorf("temporary files left behind: %v %v", entries, err)
	}
}

func TestImportSigned(t *testing.T) {
	setup(t)
	t.Setenv(signing.PasswordEnv, testPassword)
	key := signingtest.NewKeyPair(t, testPassword)
	host := signingRegistry(t, key.PublicFile)
	useFakeFetcher(t, newFakeFetcher())

	// A namespace whose trust policy requires signatures refuses an
	// unsigned import, and takes one signed between its push and its tag.
	wantFail(t, "Error: push "+host+"/stable/demo:1.0.0: denied: stable/demo:1.0.0: ", "import", "git", chartURL, host+"/stable/demo")
	var res importResult
	decode(t, mustBerth(t, "import", "git", chartURL, host+"/stable/demo", "--key", key.PrivateFile, "--format", "json"), &res)
	if res.SignedBy != key.Key.ID || res.Reference != host+"/stable/demo:1.0.0" || len(res.Sources) != 1 {
		t.Errorf("import --key json: %+v", res)
	}
	mustBerth(t, "verify", host+"/stable/demo:1.0.0", "--key", key.PublicFile)

	// It attests the provenance: the source, and berth import as the builder.
	var ver verifyResult
	decode(t, mustBerth(t, "verify", host+"/stable/demo:1.0.0", "--key", key.PublicFile, "--require-source", "https://git.example.com/*", "--format", "json"), &ver)
	if len(ver.Attestations) != 1 || !ver.Attestations[0].Verified || ver.Attestations[0].PredicateType != signing.PredicateSLSAProvenance ||
		fmt.Sprint(ver.Attestations[0].Sources) != "["+chartURL+"]" {
		t.Errorf("verify of an import --key: %+v", ver.Attestations)
	}
	text := mustBerth(t, "verify", host+"/stable/demo:1.0.0", "--key", key.PublicFile)
	if !strings.Contains(text, "built from:\n  "+chartURL+"\n") {
		t.Errorf("verify text does not list the source:\n%s", text)
	}
	wantFail(t, "Error: verify "+host+"/stable/demo:1.0.0: "+res.Digest+" is not verified: provenance names source "+chartURL+
		", not allowed by the trust policy for stable/demo (requireSource: https://github.com/org/*)",
		"verify", host+"/stable/demo:1.0.0", "--key", key.PublicFile, "--require-source", "https://github.com/org/*")
	wantFail(t, "Error: --require-source[0]: want a glob over source URLs", "verify", host+"/stable/demo:1.0.0", "--key", key.PublicFile, "--require-source", "github.com/*")
}
