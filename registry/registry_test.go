package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"

	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/storage"
)

// newTestRegistry serves a registry on in-memory storage. Namespaces named
// "scratch" allow overwrites.
func newTestRegistry(t *testing.T) *httptest.Server {
	t.Helper()
	reg, err := New(context.Background(), Options{
		Storage:        &storage.Config{Driver: "inmemory"},
		HTTPSecret:     "test",
		AllowOverwrite: func(ns string) bool { return ns == "scratch" },
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(reg)
	t.Cleanup(func() { srv.Close(); reg.Close() })
	return srv
}

// pushBlob uploads b (POST, then PUT with the digest) and returns its descriptor.
func pushBlob(t *testing.T, base, repo, mediaType string, b []byte) ocispec.Descriptor {
	t.Helper()
	d := digest.FromBytes(b)
	resp, err := http.Post(fmt.Sprintf("%s/v2/%s/blobs/uploads/", base, repo), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("blob upload start: %s", resp.Status)
	}
	loc, err := resp.Location()
	if err != nil {
		t.Fatal(err)
	}
	q := loc.Query()
	q.Set("digest", d.String())
	loc.RawQuery = q.Encode()
	req, _ := http.NewRequest(http.MethodPut, loc.String(), bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("blob upload: %s", resp.Status)
	}
	return ocispec.Descriptor{MediaType: mediaType, Digest: d, Size: int64(len(b))}
}

// Kinds of manifest the tests push.
const (
	image     = "image"
	berthPkg  = "berth package"
	helmChart = "helm chart"
)

// manifest builds an image manifest of the given kind whose layer holds
// content, uploading its blobs. Packages are berth packages (artifact type
// and config) and Helm charts (config media type, as helm push writes them).
func manifest(t *testing.T, base, repo, content, kind string) []byte {
	t.Helper()
	m := ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest}
	m.SchemaVersion = 2
	switch kind {
	case berthPkg:
		m.ArtifactType = pkgformat.ArtifactType
		m.Config = pushBlob(t, base, repo, pkgformat.ConfigMediaType, []byte(`{"name":"x"}`))
		m.Layers = []ocispec.Descriptor{pushBlob(t, base, repo, pkgformat.ContentMediaType, []byte(content))}
	case helmChart:
		m.Config = pushBlob(t, base, repo, pkgformat.HelmConfigMediaType, []byte(`{"name":"x","version":"1.0.0"}`))
		m.Layers = []ocispec.Descriptor{pushBlob(t, base, repo, "application/vnd.cncf.helm.chart.content.v1.tar+gzip", []byte(content))}
	default:
		m.Config = pushBlob(t, base, repo, ocispec.MediaTypeImageConfig, []byte(`{}`))
		m.Layers = []ocispec.Descriptor{pushBlob(t, base, repo, ocispec.MediaTypeImageLayer, []byte(content))}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type ociErrors struct {
	Errors []struct{ Code, Message string } `json:"errors"`
}

// putManifest PUTs a manifest and returns the status and the OCI error body.
func putManifest(t *testing.T, base, repo, ref string, body []byte) (int, ociErrors) {
	t.Helper()
	status, e, err := tryPutManifest(base, repo, ref, body)
	if err != nil {
		t.Fatal(err)
	}
	return status, e
}

// tryPutManifest is putManifest for goroutines other than the test's, which
// must not call t.Fatal: it returns the failure to send the request instead.
func tryPutManifest(base, repo, ref string, body []byte) (int, ociErrors, error) {
	req, _ := http.NewRequest(http.MethodPut, fmt.Sprintf("%s/v2/%s/manifests/%s", base, repo, ref), bytes.NewReader(body))
	req.Header.Set("Content-Type", ocispec.MediaTypeImageManifest)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, ociErrors{}, err
	}
	defer resp.Body.Close()
	var e ociErrors
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e, nil
}

// tagDigest returns the digest a tag points at.
func tagDigest(t *testing.T, base, repo, tag string) digest.Digest {
	t.Helper()
	req, _ := http.NewRequest(http.MethodHead, fmt.Sprintf("%s/v2/%s/manifests/%s", base, repo, tag), nil)
	req.Header.Set("Accept", ocispec.MediaTypeImageManifest)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HEAD %s:%s: %s", repo, tag, resp.Status)
	}
	return digest.Digest(resp.Header.Get("Docker-Content-Digest"))
}

func TestTagImmutability(t *testing.T) {
	for _, tc := range []struct {
		name             string
		repo             string
		first, second    string
		sameContent      bool
		wantStatus       int
		wantSecondTagged bool
	}{
		{name: "package re-pushed with the same digest", repo: "kudo/kafka", first: berthPkg, second: berthPkg, sameContent: true, wantStatus: http.StatusCreated, wantSecondTagged: true},
		{name: "package version re-pointed to another package", repo: "kudo/kafka", first: berthPkg, second: berthPkg, wantStatus: http.StatusForbidden},
		{name: "package version re-pointed to a non-package", repo: "kudo/kafka", first: berthPkg, second: image, wantStatus: http.StatusForbidden},
		{name: "helm chart version re-pointed to another chart", repo: "charts/nginx", first: helmChart, second: helmChart, wantStatus: http.StatusForbidden},
		{name: "helm chart re-pushed with the same digest", repo: "charts/nginx", first: helmChart, second: helmChart, sameContent: true, wantStatus: http.StatusCreated, wantSecondTagged: true},
		{name: "non-package tag re-pointed to a package", repo: "kudo/kafka", first: image, second: berthPkg, wantStatus: http.StatusCreated, wantSecondTagged: true},
		{name: "non-package tags stay mutable", repo: "library/app", first: image, second: image, wantStatus: http.StatusCreated, wantSecondTagged: true},
		{name: "namespace that allows overwrites", repo: "scratch/kafka", first: berthPkg, second: berthPkg, wantStatus: http.StatusCreated, wantSecondTagged: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := newTestRegistry(t).URL
			first := manifest(t, base, tc.repo, "first", tc.first)
			secondContent := "second"
			if tc.sameContent {
				secondContent = "first"
			}
			second := manifest(t, base, tc.repo, secondContent, tc.second)

			if status, e := putManifest(t, base, tc.repo, "1.0.0", first); status != http.StatusCreated {
				t.Fatalf("first push: %d %v", status, e)
			}
			status, e := putManifest(t, base, tc.repo, "1.0.0", second)
			if status != tc.wantStatus {
				t.Fatalf("second push: status %d, want %d (%v)", status, tc.wantStatus, e)
			}
			want := digest.FromBytes(first)
			if tc.wantSecondTagged {
				want = digest.FromBytes(second)
			}
			if got := tagDigest(t, base, tc.repo, "1.0.0"); got != want {
				t.Errorf("tag points at %s, want %s", got, want)
			}
			if status != http.StatusForbidden {
				return
			}
			if len(e.Errors) != 1 || e.Errors[0].Code != "DENIED" {
				t.Fatalf("errors %+v, want one DENIED", e.Errors)
			}
			ns, _, _ := strings.Cut(tc.repo, "/")
			wantMsg := fmt.Sprintf("%s:1.0.0 already exists with digest %s; package versions are immutable, refusing to re-point it to %s (delete the version first, or allow overwrites for namespace %q)",
				tc.repo, digest.FromBytes(first), digest.FromBytes(second), ns)
			if msg := e.Errors[0].Message; msg != wantMsg {
				t.Errorf("message %q, want %q", msg, wantMsg)
			}
		})
	}
}

func TestConcurrentPushesToOneVersionHaveOneWinner(t *testing.T) {
	base := newTestRegistry(t).URL
	const pushers, rounds = 16, 10
	bodies := make([][]byte, pushers)
	for i := range bodies {
		bodies[i] = manifest(t, base, "kudo/race", fmt.Sprintf("content-%d", i), berthPkg)
	}
	for round := range rounds {
		tag := fmt.Sprintf("1.0.%d", round)
		statuses := make([]int, pushers)
		start := make(chan struct{})
		var g errgroup.Group
		for i := range bodies {
			g.Go(func() (err error) {
				<-start
				statuses[i], _, err = tryPutManifest(base, "kudo/race", tag, bodies[i])
				return err
			})
		}
		close(start)
		if err := g.Wait(); err != nil {
			t.Fatalf("%s: %v", tag, err)
		}
		winner := -1
		for i, s := range statuses {
			switch s {
			case http.StatusCreated:
				if winner >= 0 {
					t.Fatalf("%s: pushes %d and %d both succeeded", tag, winner, i)
				}
				winner = i
			case http.StatusForbidden:
			default:
				t.Fatalf("%s: push %d: unexpected status %d", tag, i, s)
			}
		}
		if winner < 0 {
			t.Fatalf("%s: no push succeeded", tag)
		}
		if got := tagDigest(t, base, "kudo/race", tag); got != digest.FromBytes(bodies[winner]) {
			t.Fatalf("%s points at %s, want the winner's %s", tag, got, digest.FromBytes(bodies[winner]))
		}
	}
}

func TestDeletedVersionCanBePushedAgain(t *testing.T) {
	base := newTestRegistry(t).URL
	first := manifest(t, base, "kudo/kafka", "first", berthPkg)
	second := manifest(t, base, "kudo/kafka", "second", berthPkg)
	if status, _ := putManifest(t, base, "kudo/kafka", "1.0.0", first); status != http.StatusCreated {
		t.Fatal("first push failed")
	}
	req, _ := http.NewRequest(http.MethodDelete, base+"/v2/kudo/kafka/manifests/"+digest.FromBytes(first).String(), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delete: %s", resp.Status)
	}
	if status, e := putManifest(t, base, "kudo/kafka", "1.0.0", second); status != http.StatusCreated {
		t.Fatalf("push after delete: %d %v", status, e)
	}
}

func TestCosignSignatureTagsStayMutable(t *testing.T) {
	base := newTestRegistry(t).URL
	pkg := manifest(t, base, "stable/kafka", "pkg", berthPkg)
	if status, _ := putManifest(t, base, "stable/kafka", "1.0.0", pkg); status != http.StatusCreated {
		t.Fatal("package push failed")
	}
	sigTag := "sha256-" + digest.FromBytes(pkg).Encoded() + ".sig"
	for i := range 3 {
		sig := manifest(t, base, "stable/kafka", fmt.Sprintf("signature-%d", i), image)
		if status, e := putManifest(t, base, "stable/kafka", sigTag, sig); status != http.StatusCreated {
			t.Fatalf("signature %d: %d %v", i, status, e)
		}
		if got := tagDigest(t, base, "stable/kafka", sigTag); got != digest.FromBytes(sig) {
			t.Fatalf("signature tag not re-pointed: %s", got)
		}
	}
}

func TestManifestPath(t *testing.T) {
	for _, tc := range []struct{ path, repo, ref string }{
		{"/v2/kudo/kafka/manifests/1.0.0", "kudo/kafka", "1.0.0"},
		{"/v2/a/b/c/manifests/sha256:abc", "a/b/c", "sha256:abc"},
		{"/v2/manifests/manifests/x", "manifests", "x"},
		{"/v2/kudo/kafka/blobs/sha256:abc", "", ""},
		{"/v2/", "", ""},
		{"/other/a/manifests/x", "", ""},
	} {
		repo, ref, ok := manifestPath(tc.path)
		if ok != (tc.repo != "") || repo != tc.repo || ref != tc.ref {
			t.Errorf("manifestPath(%q) = %q, %q, %v", tc.path, repo, ref, ok)
		}
	}
}

func TestLoadOrCreateSecret(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sub", "http-secret")
	s1, err := LoadOrCreateSecret(file)
	if err != nil || len(s1) != 64 {
		t.Fatalf("created %q, %v", s1, err)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret file mode: %v %v", fi, err)
	}
	s2, err := LoadOrCreateSecret(file)
	if err != nil || s2 != s1 {
		t.Fatalf("reloaded %q, %v; want %q", s2, err, s1)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	if _, err := LoadOrCreateSecret(empty); err == nil || !strings.Contains(err.Error(), "empty secret") {
		t.Fatalf("empty secret file: %v", err)
	}
}

func TestNewReportsBadStorage(t *testing.T) {
	_, err := New(context.Background(), Options{Storage: &storage.Config{Driver: "s3", S3: storage.S3{Bucket: "b", Region: "no-such-region-1"}}})
	if err == nil || !strings.Contains(err.Error(), "storage s3") {
		t.Fatalf("error %v, want one naming the storage", err)
	}
}

func TestReadyChecksStorage(t *testing.T) {
	root := filepath.Join(t.TempDir(), "file")
	os.WriteFile(root, nil, 0o600)
	reg, err := New(context.Background(), Options{
		Storage: &storage.Config{Driver: "filesystem", Filesystem: storage.Filesystem{RootDirectory: filepath.Join(root, "sub")}},
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if err := reg.Ready(context.Background(), time.Second); err == nil {
		t.Fatal("storage below a regular file reported ready")
	}
}

// TestCatalogPagination checks that /v2/_catalog serves pages of up to
// 1000 repositories and refuses larger ones, as distribution configured
// from a file does.
func TestCatalogPagination(t *testing.T) {
	srv := newTestRegistry(t)
	for _, repo := range []string{"a/one", "b/two", "c/three"} {
		if code, e := putManifest(t, srv.URL, repo, "v1", manifest(t, srv.URL, repo, repo, "image")); code != http.StatusCreated {
			t.Fatalf("push %s: %d %v", repo, code, e)
		}
	}
	for _, tc := range []struct {
		query string
		code  int
		want  string
	}{
		{"?n=2", http.StatusOK, `{"repositories":["a/one","b/two"]}`},
		{"?n=1000", http.StatusOK, `{"repositories":["a/one","b/two","c/three"]}`},
		{"?n=1001", http.StatusBadRequest, `{"errors":[{"code":"PAGINATION_NUMBER_INVALID","message":"query parameter \"n\" must be a number of results from 0 to 1000","detail":{"parameter":"n"}}]}`},
	} {
		resp, err := http.Get(srv.URL + "/v2/_catalog" + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || strings.TrimSpace(string(b)) != tc.want {
			t.Errorf("_catalog%s = %d %s, want %d %s", tc.query, resp.StatusCode, b, tc.code, tc.want)
		}
	}
}
