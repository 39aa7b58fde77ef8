package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"

	"github.com/berth-registry/berth/client/registrytest"
	"github.com/berth-registry/berth/pkgformat"
)

// chartFiles is a tiny Helm chart.
func chartFiles(name, version string) []pkgformat.File {
	return []pkgformat.File{
		{Path: "Chart.yaml", Mode: 0o644, Data: []byte("apiVersion: v2\nname: " + name + "\nversion: " + version + "\ndescription: A test chart\n")},
		{Path: "templates/configmap.yaml", Mode: 0o644, Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n")},
	}
}

// testArtifact builds the package artifact of a tiny Helm chart.
func testArtifact(t *testing.T, name, version string) *pkgformat.Artifact {
	t.Helper()
	pkg, err := pkgformat.New(chartFiles(name, version), pkgformat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	art, err := pkg.Artifact()
	if err != nil {
		t.Fatal(err)
	}
	return art
}

// newTestClient returns a client with no credentials unless opts has some.
func newTestClient(t *testing.T, opts Options) *Client {
	t.Helper()
	if opts.Credentials == nil {
		opts.Credentials = credentials.NewMemoryStore()
	}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustParse(t *testing.T, s string) Reference {
	t.Helper()
	ref, err := ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func TestPushPullInspect(t *testing.T) {
	ctx := context.Background()
	host := registrytest.New(t, nil)
	c := newTestClient(t, Options{})
	art := testArtifact(t, "demo", "1.0.0+build.1")

	ref := mustParse(t, host+"/charts/demo")
	desc, err := c.Push(ctx, ref, art)
	if err != nil {
		t.Fatalf("Push: %v", err)
	}
	if desc.Digest != art.ManifestDesc.Digest {
		t.Fatalf("Push returned %s, want %s", desc.Digest, art.ManifestDesc.Digest)
	}
	// The same bytes again are accepted.
	if _, err := c.Push(ctx, mustParse(t, host+"/charts/demo:1.0.0_build.1"), art); err != nil {
		t.Fatalf("second Push: %v", err)
	}

	for _, s := range []string{host + "/charts/demo:1.0.0_build.1", host + "/charts/demo@" + desc.Digest.String()} {
		pkg, err := c.Pull(ctx, mustParse(t, s))
		if err != nil {
			t.Fatalf("Pull %s: %v", s, err)
		}
		if !bytes.Equal(pkg.Content, art.Content) {
			t.Errorf("Pull %s: content differs from the pushed layer", s)
		}
		if pkg.ManifestDesc.Digest != desc.Digest || pkg.Reference.Digest != desc.Digest {
			t.Errorf("Pull %s: digest %s (reference %s), want %s", s, pkg.ManifestDesc.Digest, pkg.Reference, desc.Digest)
		}
		if md := pkg.Metadata; md.Name != "demo" || md.Version != "1.0.0+build.1" || md.Format != pkgformat.Helm {
			t.Errorf("Pull %s: metadata %s %s %s", s, md.Name, md.Version, md.Format)
		}
		if pkg.ContentDesc.MediaType != pkgformat.ContentMediaType || pkg.ConfigDesc.MediaType != pkgformat.ConfigMediaType {
			t.Errorf("Pull %s: media types %s, %s", s, pkg.ConfigDesc.MediaType, pkg.ContentDesc.MediaType)
		}
	}

	pkg, err := c.Inspect(ctx, mustParse(t, host+"/charts/demo:1.0.0_build.1"))
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if pkg.Content != nil || pkg.Metadata.Name != "demo" || pkg.ManifestDesc.Digest != desc.Digest {
		t.Errorf("Inspect: content %d bytes, name %q, digest %s", len(pkg.Content), pkg.Metadata.Name, pkg.ManifestDesc.Digest)
	}
}

func TestPushErrors(t *testing.T) {
	ctx := context.Background()
	host := registrytest.New(t, nil)
	c := newTestClient(t, Options{})
	art := testArtifact(t, "demo", "1.0.0")

	_, err := c.Push(ctx, mustParse(t, host+"/charts/demo@"+art.ManifestDesc.Digest.String()), art)
	if !errors.Is(err, ErrInvalidReference) {
		t.Errorf("Push by digest: %v, want ErrInvalidReference", err)
	}
	_, err = c.Push(ctx, mustParse(t, host+"/charts/demo"), nil)
	if err == nil {
		t.Error("Push of a nil artifact succeeded")
	}
}

func TestPullErrors(t *testing.T) {
	ctx := context.Background()
	host := registrytest.New(t, nil)
	c := newTestClient(t, Options{})
	if _, err := c.Push(ctx, mustParse(t, host+"/charts/demo"), testArtifact(t, "demo", "1.0.0")); err != nil {
		t.Fatal(err)
	}
	layer := blob{ocispec.MediaTypeImageLayerGzip, []byte("not really a layer")}
	image := pushRaw(t, host, "library/app", "1.0", "", blob{ocispec.MediaTypeImageConfig, []byte(`{"architecture":"amd64","os":"linux"}`)}, layer)
	unknown := pushRaw(t, host, "library/blob", "1.0", "application/vnd.example.thing", blob{ocispec.MediaTypeEmptyJSON, []byte("{}")}, layer)

	tests := []struct {
		ref  string
		want error
		msg  string
	}{
		{host + "/charts/demo:9.9.9", ErrNotFound, "pull " + host + "/charts/demo:9.9.9: not found"},
		{host + "/charts/nothing:1.0.0", ErrNotFound, "not found"},
		{host + "/charts/demo", ErrInvalidReference, "give a version"},
		{host + "/library/app:1.0", ErrNotPackage, "not a berth package: it is a container image"},
		{host + "/library/app@" + image.String(), ErrNotPackage, "(not a package: artifact of type application/vnd.oci.image.config.v1+json)"},
		{host + "/library/blob:1.0", ErrNotPackage, "(not a package: artifact of type application/vnd.example.thing)"},
		{host + "/library/blob@" + unknown.String(), ErrNotPackage, "empty config"},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			for name, get := range map[string]func(context.Context, Reference) (*Package, error){"pull": c.Pull, "inspect": c.Inspect} {
				_, err := get(ctx, mustParse(t, tt.ref))
				if !errors.Is(err, tt.want) {
					t.Fatalf("%s: error %v, want %v", name, err, tt.want)
				}
				if name == "pull" && !strings.Contains(err.Error(), tt.msg) {
					t.Errorf("%s: error %q does not contain %q", name, err, tt.msg)
				}
			}
		})
	}
}

// blob is a blob to push, with its media type.
type blob struct {
	mediaType string
	data      []byte
}

// desc describes b.
func (b blob) desc() ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: b.mediaType, Digest: digest.FromBytes(b.data), Size: int64(len(b.data))}
}

// pushRaw pushes a manifest the way other tools (oras, helm, docker) do and
// returns its digest.
func pushRaw(t *testing.T, host, repository, tag, artifactType string, config blob, layers ...blob) digest.Digest {
	t.Helper()
	ctx := context.Background()
	repo := &remote.Repository{Reference: registry.Reference{Registry: host, Repository: repository}, PlainHTTP: true}
	m := ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: artifactType,
		Config:       config.desc(),
	}
	for _, l := range layers {
		m.Layers = append(m.Layers, l.desc())
	}
	for _, b := range append([]blob{config}, layers...) {
		if err := repo.Push(ctx, b.desc(), bytes.NewReader(b.data)); err != nil {
			t.Fatal(err)
		}
	}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	desc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(data), Size: int64(len(data))}
	if err := repo.PushReference(ctx, desc, bytes.NewReader(data), tag); err != nil {
		t.Fatal(err)
	}
	return desc.Digest
}

// tarball returns the gzipped tar of files.
func tarball(t *testing.T, files []pkgformat.File) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := pkgformat.WriteArchive(&buf, files); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestPullForeignPackages(t *testing.T) {
	// Packages that berth did not push: plain `oras push` with the empty
	// config, and `helm push`. Their metadata comes from the content (or the
	// Helm config), names and versions from the reference where the content
	// has none.
	ctx := context.Background()
	host := registrytest.New(t, nil)
	empty := blob{ocispec.MediaTypeEmptyJSON, []byte("{}")}

	chart := tarball(t, chartFiles("demo", "2.0.0"))
	pushRaw(t, host, "charts/demo", "2.0.0", pkgformat.ArtifactType, empty, blob{pkgformat.ContentMediaType, chart})

	manifests := []pkgformat.File{{Path: "manifests/cm.yaml", Mode: 0o644, Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n")}}
	pushRaw(t, host, "apps/web", "0.1.0", pkgformat.ArtifactType, empty, blob{pkgformat.ContentMediaType, tarball(t, manifests)})

	var helmFiles []pkgformat.File
	for _, f := range chartFiles("hello", "0.3.0") {
		f.Path = "hello/" + f.Path // helm package puts the chart in a folder
		helmFiles = append(helmFiles, f)
	}
	helmConfig := blob{pkgformat.HelmConfigMediaType, []byte(`{"apiVersion":"v2","name":"hello","version":"0.3.0","description":"Hello"}`)}
	pushRaw(t, host, "charts/hello", "0.3.0", "", helmConfig,
		blob{pkgformat.HelmChartContentMediaType, tarball(t, helmFiles)},
		blob{"application/vnd.cncf.helm.chart.provenance.v1.prov", []byte("provenance")})

	c := newTestClient(t, Options{})
	tests := []struct {
		ref, name, version string
		format             pkgformat.Format
	}{
		{host + "/charts/demo:2.0.0", "demo", "2.0.0", pkgformat.Helm},
		{host + "/apps/web:0.1.0", "web", "0.1.0", pkgformat.Plain},
		{host + "/charts/hello:0.3.0", "hello", "0.3.0", pkgformat.Helm},
	}
	for _, tt := range tests {
		for op, get := range map[string]func(context.Context, Reference) (*Package, error){"pull": c.Pull, "inspect": c.Inspect} {
			pkg, err := get(ctx, mustParse(t, tt.ref))
			if err != nil {
				t.Errorf("%s %s: %v", op, tt.ref, err)
				continue
			}
			if md := pkg.Metadata; md.Name != tt.name || md.Version != tt.version || md.Format != tt.format {
				t.Errorf("%s %s: metadata %s %s %s", op, tt.ref, md.Name, md.Version, md.Format)
			}
		}
	}
}

func TestPullDigestMismatch(t *testing.T) {
	ctx := context.Background()
	art := testArtifact(t, "demo", "1.0.0")
	tampered := art.ContentDesc.Digest.String()
	host := registrytest.New(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/blobs/"+tampered) {
				next.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			body := rec.Body.Bytes()
			body[len(body)/2] ^= 0xff // same length, same headers, different bytes
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(body)
		})
	})
	c := newTestClient(t, Options{})
	ref := mustParse(t, host+"/charts/demo:1.0.0")
	if _, err := c.Push(ctx, ref, art); err != nil {
		t.Fatal(err)
	}
	_, err := c.Pull(ctx, ref)
	if !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("Pull of a tampered blob: %v, want ErrDigestMismatch", err)
	}
	if !strings.Contains(err.Error(), "content "+tampered) {
		t.Errorf("error %q does not name the content blob", err)
	}
	// Inspect derives the metadata from the content, so it notices too.
	if _, err := c.Inspect(ctx, ref); !errors.Is(err, ErrDigestMismatch) {
		t.Errorf("Inspect of a tampered blob: %v, want ErrDigestMismatch", err)
	}
}

func TestPushDenied(t *testing.T) {
	// The registry refuses to overwrite a version; its message must reach the user.
	const msg = "version 1.0.0 of charts/demo already exists with digest sha256:0123; versions are immutable"
	host := registrytest.New(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/") {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusForbidden)
				json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": "DENIED", "message": msg}}})
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	c := newTestClient(t, Options{})
	_, err := c.Push(context.Background(), mustParse(t, host+"/charts/demo"), testArtifact(t, "demo", "1.0.0"))
	if !errors.Is(err, ErrDenied) {
		t.Fatalf("Push: %v, want ErrDenied", err)
	}
	want := "push " + host + "/charts/demo:1.0.0: denied: " + msg + " (DENIED, HTTP 403)"
	if err.Error() != want {
		t.Errorf("error\n%q, want\n%q", err, want)
	}
}

func TestCredentials(t *testing.T) {
	// The registry wants basic auth; the client takes it from the store.
	host := registrytest.New(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if user, pass, ok := r.BasicAuth(); !ok || user != "alice" || pass != "secret" {
				w.Header().Set("WWW-Authenticate", `Basic realm="berth"`)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				w.Write([]byte(`{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`))
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	ctx := context.Background()
	ref := mustParse(t, host+"/charts/demo")
	art := testArtifact(t, "demo", "1.0.0")

	_, err := newTestClient(t, Options{}).Push(ctx, ref, art)
	if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "none are stored for "+host) {
		t.Fatalf("Push without credentials: %v, want ErrUnauthorized", err)
	}
	wrong := credentials.NewMemoryStore()
	if err := wrong.Put(ctx, host, auth.Credential{Username: "alice", Password: "guess"}); err != nil {
		t.Fatal(err)
	}
	_, err = newTestClient(t, Options{Credentials: wrong}).Pull(ctx, mustParse(t, host+"/charts/demo:1.0.0"))
	if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "authentication required (UNAUTHORIZED, HTTP 401)") {
		t.Fatalf("Pull with wrong credentials: %v, want ErrUnauthorized with the registry's message", err)
	}
	store := credentials.NewMemoryStore()
	if err := store.Put(ctx, host, auth.Credential{Username: "alice", Password: "secret"}); err != nil {
		t.Fatal(err)
	}
	c := newTestClient(t, Options{Credentials: store})
	if _, err := c.Push(ctx, ref, art); err != nil {
		t.Fatalf("Push with credentials: %v", err)
	}
	if _, err := c.Pull(ctx, mustParse(t, host+"/charts/demo:1.0.0")); err != nil {
		t.Fatalf("Pull with credentials: %v", err)
	}
}

func TestProgress(t *testing.T) {
	ctx := context.Background()
	host := registrytest.New(t, nil)
	art := testArtifact(t, "demo", "1.0.0")
	ref := mustParse(t, host+"/charts/demo:1.0.0")

	var mu sync.Mutex
	last := map[string]Progress{}
	var calls atomic.Int64
	record := func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		calls.Add(1)
		last[p.Op+" "+p.Descriptor.Digest.String()] = p
	}

	// Small blobs report nothing by default.
	c := newTestClient(t, Options{Progress: record})
	if _, err := c.Push(ctx, ref, art); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("%d progress reports for blobs under the default threshold", n)
	}

	// With a threshold below the content size, the content reports up to its size.
	c = newTestClient(t, Options{Progress: record, ProgressThreshold: art.ContentDesc.Size})
	if _, err := c.Pull(ctx, ref); err != nil {
		t.Fatal(err)
	}
	p, ok := last["pull "+art.ContentDesc.Digest.String()]
	if !ok || p.Done != art.ContentDesc.Size {
		t.Fatalf("pull progress of the content: %+v (reported: %v), want done = %d", p, ok, art.ContentDesc.Size)
	}
	if _, ok := last["pull "+art.ConfigDesc.Digest.String()]; ok && art.ConfigDesc.Size < art.ContentDesc.Size {
		t.Error("progress reported for the config, which is under the threshold")
	}
}
