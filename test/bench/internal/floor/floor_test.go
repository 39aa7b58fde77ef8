package floor

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

func TestHandler(t *testing.T) {
	dir := t.TempDir()
	store, err := NewStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	blob := []byte("some blob content")
	manifest := []byte(`{"schemaVersion":2}`)
	blobDigest, manifestDigest := digest.FromBytes(blob), digest.FromBytes(manifest)
	if err := store.PutBlob(blobDigest, blob); err != nil {
		t.Fatal(err)
	}
	if err := store.PutManifest("bench/run-1/pkg-0001", "1.0.0", manifestDigest, manifest); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	srv := httptest.NewServer(Handler(root))
	defer srv.Close()

	for _, tc := range []struct {
		method, path string
		status       int
		mediaType    string
		content      []byte
	}{
		{"GET", "/v2/", http.StatusOK, "", nil},
		{"HEAD", "/v2/bench/run-1/pkg-0001/manifests/1.0.0", http.StatusOK, ocispec.MediaTypeImageManifest, manifest},
		{"GET", "/v2/bench/run-1/pkg-0001/manifests/1.0.0", http.StatusOK, ocispec.MediaTypeImageManifest, manifest},
		{"GET", "/v2/bench/run-1/pkg-0001/manifests/" + manifestDigest.String(), http.StatusOK, ocispec.MediaTypeImageManifest, manifest},
		{"GET", "/v2/bench/run-1/pkg-0001/blobs/" + blobDigest.String(), http.StatusOK, "application/octet-stream", blob},
		{"HEAD", "/v2/bench/blob/blobs/" + blobDigest.String(), http.StatusOK, "application/octet-stream", blob},
		{"GET", "/v2/bench/run-1/pkg-0001/manifests/2.0.0", http.StatusNotFound, "", nil},
		{"GET", "/v2/bench/run-1/pkg-0002/manifests/1.0.0", http.StatusNotFound, "", nil},
		{"GET", "/v2/bench/run-1/pkg-0001/blobs/" + digest.FromString("other").String(), http.StatusNotFound, "", nil},
		{"GET", "/v2/bench/run-1/pkg-0001/blobs/sha256:..", http.StatusNotFound, "", nil},
		{"GET", "/v2/bench/../../manifests/1.0.0", http.StatusNotFound, "", nil},
		{"GET", "/v2/Bench/manifests/1.0.0", http.StatusNotFound, "", nil},
		{"GET", "/v2/bench/run-1/pkg-0001/tags/list", http.StatusNotFound, "", nil},
		{"PUT", "/v2/bench/run-1/pkg-0001/manifests/1.0.0", http.StatusMethodNotAllowed, "", nil},
	} {
		req, err := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: %s, want %d", tc.method, tc.path, resp.Status, tc.status)
			continue
		}
		if tc.content == nil {
			continue
		}
		h := resp.Header
		if got := h.Get("Content-Type"); got != tc.mediaType {
			t.Errorf("%s %s: Content-Type %q, want %q", tc.method, tc.path, got, tc.mediaType)
		}
		if got := h.Get("Content-Length"); got != strconv.Itoa(len(tc.content)) {
			t.Errorf("%s %s: Content-Length %q, want %d", tc.method, tc.path, got, len(tc.content))
		}
		if got := h.Get("Docker-Content-Digest"); got != digest.FromBytes(tc.content).String() {
			t.Errorf("%s %s: Docker-Content-Digest %q, want %s", tc.method, tc.path, got, digest.FromBytes(tc.content))
		}
		want := tc.content
		if tc.method == "HEAD" {
			want = nil
		}
		if string(body) != string(want) {
			t.Errorf("%s %s: body %q, want %q", tc.method, tc.path, body, want)
		}
	}
}
