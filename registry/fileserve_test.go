package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/storage"
)

// newFilesystemRegistry is a registry on the filesystem driver under a
// temporary directory, served by a test server.
func newFilesystemRegistry(t *testing.T) (*Registry, *httptest.Server) {
	t.Helper()
	reg, err := New(context.Background(), Options{
		Storage:    &storage.Config{Driver: "filesystem", Filesystem: storage.Filesystem{RootDirectory: t.TempDir()}},
		HTTPSecret: "test",
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(reg)
	t.Cleanup(func() { srv.Close(); reg.Close() })
	return reg, srv
}

// TestFileServerAnswersAsDistributionDoes sends a table of reads, good and
// bad, both to the registry and to distribution alone on the same storage:
// every answer (status, body and the headers clients read) must be the same,
// and the rows marked served must be answered from the files.
func TestFileServerAnswersAsDistributionDoes(t *testing.T) {
	reg, srv := newFilesystemRegistry(t)
	if reg.files == nil {
		t.Fatal("a filesystem registry has no file server")
	}
	plain := &Registry{app: reg.app, guard: reg.guard, driver: reg.driver, log: reg.log}

	img := manifest(t, srv.URL, "a/one", "layer bytes of a/one", "image")
	if code, e := putManifest(t, srv.URL, "a/one", "v1", img); code != http.StatusCreated {
		t.Fatalf("push a/one:v1: %d %v", code, e)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(img, &m); err != nil {
		t.Fatal(err)
	}
	config, layer, imgDigest := m.Config.Digest, m.Layers[0].Digest, digest.FromBytes(img)

	index, _ := json.Marshal(ocispec.Index{
		Versioned: m.Versioned, MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageManifest, Digest: imgDigest, Size: int64(len(img))}},
	})
	putRaw(t, srv.URL, "a/one", "idx", ocispec.MediaTypeImageIndex, index)
	// An OCI manifest that does not name its media type: distribution's to answer.
	untyped := bytes.Replace(img, []byte(`"mediaType":"application/vnd.oci.image.manifest.v1+json",`), nil, 1)
	putRaw(t, srv.URL, "a/one", "untyped", ocispec.MediaTypeImageManifest, untyped)
	deleted := manifest(t, srv.URL, "a/one", "deleted layer", "image")
	putRaw(t, srv.URL, "a/one", "gone", ocispec.MediaTypeImageManifest, deleted)
	del, _ := http.NewRequest(http.MethodDelete, srv.URL+"/v2/a/one/manifests/"+digest.FromBytes(deleted).String(), nil)
	if resp, err := http.DefaultClient.Do(del); err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delete: %v %v", resp, err)
	}
	putRaw(t, srv.URL, "b/two", "v1", ocispec.MediaTypeImageManifest, manifest(t, srv.URL, "b/two", "layer bytes of b/two", "image"))

	oci := http.Header{"Accept": {ocispec.MediaTypeImageManifest + ", " + ocispec.MediaTypeImageIndex}}
	for _, tc := range []struct {
		name, method, path string
		header             http.Header
		served             bool
	}{
		{"blob", "GET", "/v2/a/one/blobs/" + config.String(), nil, true},
		{"blob HEAD", "HEAD", "/v2/a/one/blobs/" + layer.String(), nil, true},
		{"blob range", "GET", "/v2/a/one/blobs/" + layer.String(), http.Header{"Range": {"bytes=2-7"}}, true},
		{"blob bad range", "GET", "/v2/a/one/blobs/" + layer.String(), http.Header{"Range": {"bytes=900-"}}, true},
		{"blob not modified", "GET", "/v2/a/one/blobs/" + layer.String(), http.Header{"If-None-Match": {`"` + layer.String() + `"`}}, true},
		{"blob of another repository", "GET", "/v2/b/two/blobs/" + layer.String(), nil, false},
		{"blob unknown", "GET", "/v2/a/one/blobs/" + digest.FromString("nothing").String(), nil, false},
		{"blob sha512", "GET", "/v2/a/one/blobs/" + digest.SHA512.FromString("x").String(), nil, false},
		{"blob digest malformed", "GET", "/v2/a/one/blobs/sha256:xyz", nil, false},
		{"blob digest without algorithm", "GET", "/v2/a/one/blobs/" + layer.Encoded(), nil, false},
		{"manifest as blob", "GET", "/v2/a/one/blobs/" + imgDigest.String(), nil, false},
		{"manifest by tag", "GET", "/v2/a/one/manifests/v1", oci, true},
		{"manifest by digest HEAD", "HEAD", "/v2/a/one/manifests/" + imgDigest.String(), oci, true},
		{"index by tag", "GET", "/v2/a/one/manifests/idx", oci, true},
		{"manifest not accepted", "GET", "/v2/a/one/manifests/v1", http.Header{"Accept": {"application/json"}}, false},
		{"manifest without Accept", "GET", "/v2/a/one/manifests/v1", nil, false},
		{"manifest without media type", "GET", "/v2/a/one/manifests/untyped", oci, false},
		{"manifest not modified", "GET", "/v2/a/one/manifests/v1", http.Header{"If-None-Match": {imgDigest.String()}, "Accept": oci["Accept"]}, false},
		{"manifest deleted", "GET", "/v2/a/one/manifests/" + digest.FromBytes(deleted).String(), oci, false},
		{"manifest tag of deleted", "GET", "/v2/a/one/manifests/gone", oci, false},
		{"manifest of another repository", "GET", "/v2/b/two/manifests/" + imgDigest.String(), oci, false},
		{"blob as manifest", "GET", "/v2/a/one/manifests/" + config.String(), oci, false},
		{"tag unknown", "GET", "/v2/a/one/manifests/v2", oci, false},
		{"tag malformed", "GET", "/v2/a/one/manifests/-v1", oci, false},
		{"name upper case", "GET", "/v2/A/one/manifests/v1", oci, false},
		{"name with dot-dot", "GET", "/v2/a/../a/one/manifests/v1", oci, false},
		{"name escaping the root", "GET", "/v2/../../etc/blobs/" + config.String(), nil, false},
		{"name empty component", "GET", "/v2/a//one/blobs/" + config.String(), nil, false},
		{"reference with slash", "GET", "/v2/a/one/manifests/v1/x", oci, false},
		{"upload status", "GET", "/v2/a/one/blobs/uploads/0d6a3a6e-5d46-4a3c-9d1f-0d9f3b1c8f7e", nil, false},
		{"tags list", "GET", "/v2/a/one/tags/list", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			newReq := func() *http.Request {
				req := httptest.NewRequest(tc.method, "http://registry.test"+tc.path, nil)
				req.URL.Path = tc.path // as sent, not cleaned
				for k, v := range tc.header {
					req.Header[k] = v
				}
				return req
			}
			if served := reg.files.serve(httptest.NewRecorder(), newReq()); served != tc.served {
				t.Errorf("answered from the files: %v, want %v", served, tc.served)
			}
			got, want := httptest.NewRecorder(), httptest.NewRecorder()
			reg.ServeHTTP(got, newReq())
			plain.ServeHTTP(want, newReq())
			if got.Code != want.Code || got.Body.String() != want.Body.String() {
				t.Errorf("answer %d %q, distribution's %d %q", got.Code, got.Body, want.Code, want.Body)
			}
			for _, h := range []string{"Content-Type", "Content-Length", "Content-Range", "Docker-Content-Digest", "Etag", "Cache-Control", "Docker-Distribution-API-Version"} {
				if g, w := got.Header().Values(h), want.Header().Values(h); strings.Join(g, ",") != strings.Join(w, ",") {
					t.Errorf("%s: %q, distribution's %q", h, g, w)
				}
			}
		})
	}
}

// putRaw PUTs body as a manifest of mediaType under tag, expecting 201.
func putRaw(t *testing.T, base, repo, tag, mediaType string, body []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, base+"/v2/"+repo+"/manifests/"+tag, bytes.NewReader(body))
	req.Header.Set("Content-Type", mediaType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("PUT %s:%s: %s %s", repo, tag, resp.Status, b)
	}
}

// TestNamesAndTagsFollowTheReferenceGrammar checks validName and validTag
// against the distribution reference package's own expressions.
func TestNamesAndTagsFollowTheReferenceGrammar(t *testing.T) {
	name := regexp.MustCompile(`^` + reference.NameRegexp.String() + `$`)
	tag := regexp.MustCompile(`^` + reference.TagRegexp.String() + `$`)
	for _, s := range []string{
		"a", "a/b", "a0/b-c", "a.b/c_d", "a__b", "a___b", "a--b", "a-.b", "a._b", "a_", "_a", "-a", "a.", ".a",
		"A", "a/B", "a//b", "/a", "a/", "a/../b", "..", "a..b", "a b", "a:b", "a@b", "é", "a/-b", "a/b-",
		strings.Repeat("a", 255), strings.Repeat("a", 256), strings.Repeat("ab/", 85) + "c",
	} {
		want := name.MatchString(s) && len(s) <= reference.NameTotalLengthMax
		if got := validName(s); got != want {
			t.Errorf("validName(%q) = %v, want %v", s, got, want)
		}
	}
	for _, s := range []string{
		"v1", "V1.0", "_x", "1.0.0-rc.1", "a_b", "x" + strings.Repeat("y", 127), "x" + strings.Repeat("y", 128),
		"", "-v1", ".v1", "v1/x", "v1:x", "v 1", "v1+x", "é",
	} {
		if got, want := validTag(s), tag.MatchString(s); got != want {
			t.Errorf("validTag(%q) = %v, want %v", s, got, want)
		}
	}
}

// sha256Digest, which parses by hand, accepts exactly what digest.Parse
// accepts as a sha256 digest.
func TestSHA256DigestAgreesWithDigestParse(t *testing.T) {
	hex := strings.Repeat("0123456789abcdef", 4)
	for _, s := range []string{
		"sha256:" + hex, "sha256:" + strings.ToUpper(hex), "sha256:" + hex[1:], "sha256:" + hex + "0", "sha256:" + hex[:63] + "g",
		"sha256:", "sha256", "SHA256:" + hex, "sha512:" + hex + hex, "sha384:" + hex[:48] + hex[:48], "sha256+b64:" + hex,
		" sha256:" + hex, "sha256:" + hex + " ", "sha256::" + hex[1:], "", hex,
	} {
		d, err := digest.Parse(s)
		want := err == nil && d.Algorithm() == digest.SHA256
		got, ok := sha256Digest(s)
		if ok != want || ok && got != d {
			t.Errorf("sha256Digest(%q) = %q, %v; digest.Parse says sha256: %v", s, got, ok, want)
		}
	}
}
