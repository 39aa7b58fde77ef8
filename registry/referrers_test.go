package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/distribution/distribution/v3"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/storage"
)

// newRegistry builds a registry on opts, with in-memory storage unless
// opts names one, and closes it when the test ends.
func newRegistry(tb testing.TB, opts Options) *Registry {
	tb.Helper()
	if opts.Storage == nil {
		opts.Storage = &storage.Config{Driver: "inmemory"}
	}
	opts.HTTPSecret = "test"
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	reg, err := New(context.Background(), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { reg.Close() })
	return reg
}

// onDisk is filesystem storage under dir.
func onDisk(dir string) *storage.Config {
	return &storage.Config{Driver: "filesystem", Filesystem: storage.Filesystem{RootDirectory: dir}}
}

// do serves one request in-process and returns the response.
func do(h http.Handler, method, target, contentType string, body []byte) *http.Response {
	req := httptest.NewRequest(method, target, bytes.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Result()
}

// putBlob uploads b (POST, then PUT with the digest) and returns its descriptor.
func putBlob(tb testing.TB, h http.Handler, repo, mediaType string, b []byte) ocispec.Descriptor {
	tb.Helper()
	d := digest.FromBytes(b)
	resp := do(h, http.MethodPost, fmt.Sprintf("/v2/%s/blobs/uploads/", repo), "", nil)
	loc, err := resp.Location()
	if resp.StatusCode != http.StatusAccepted || err != nil {
		tb.Fatalf("blob upload start: %s %v", resp.Status, err)
	}
	q := loc.Query()
	q.Set("digest", d.String())
	loc.RawQuery = q.Encode()
	if resp := do(h, http.MethodPut, loc.RequestURI(), "application/octet-stream", b); resp.StatusCode != http.StatusCreated {
		tb.Fatalf("blob upload: %s", resp.Status)
	}
	return ocispec.Descriptor{MediaType: mediaType, Digest: d, Size: int64(len(b))}
}

// putJSON PUTs manifest v (an image manifest or index) under ref and returns
// its body and the response.
func putJSON(tb testing.TB, h http.Handler, repo, ref string, v any) ([]byte, *http.Response) {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	mediaType := ocispec.MediaTypeImageManifest
	if _, ok := v.(ocispec.Index); ok {
		mediaType = ocispec.MediaTypeImageIndex
	}
	if ref == "" {
		ref = digest.FromBytes(b).String()
	}
	return b, do(h, http.MethodPut, fmt.Sprintf("/v2/%s/manifests/%s", repo, ref), mediaType, b)
}

// mustPut is putJSON that requires a 201.
func mustPut(tb testing.TB, h http.Handler, repo, ref string, v any) ocispec.Descriptor {
	tb.Helper()
	b, resp := putJSON(tb, h, repo, ref, v)
	if resp.StatusCode != http.StatusCreated {
		body, _ := io.ReadAll(resp.Body)
		tb.Fatalf("PUT %s:%s: %s %s", repo, ref, resp.Status, body)
	}
	mediaType := ocispec.MediaTypeImageManifest
	if _, ok := v.(ocispec.Index); ok {
		mediaType = ocispec.MediaTypeImageIndex
	}
	return ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(b), Size: int64(len(b))}
}

// blobs are the config and layer every test manifest of a repository shares.
type blobs struct{ config, emptyConfig, layer ocispec.Descriptor }

func pushBlobs(tb testing.TB, h http.Handler, repo string) blobs {
	return blobs{
		config:      putBlob(tb, h, repo, ocispec.MediaTypeImageConfig, []byte(`{}`)),
		emptyConfig: putBlob(tb, h, repo, ocispec.MediaTypeEmptyJSON, []byte(`{}`)),
		layer:       putBlob(tb, h, repo, ocispec.MediaTypeImageLayer, []byte("layer")),
	}
}

// image is an image manifest; subject, artifactType and config media type
// are set when not empty.
func (b blobs) image(subject *ocispec.Descriptor, artifactType, configMediaType string, annotations map[string]string) ocispec.Manifest {
	config := b.config
	if artifactType != "" {
		config = b.emptyConfig
	}
	if configMediaType != "" {
		config.MediaType = configMediaType
	}
	return ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: artifactType,
		Config:       config,
		Layers:       []ocispec.Descriptor{b.layer},
		Subject:      subject,
		Annotations:  annotations,
	}
}

// listReferrers GETs the referrers of subject and decodes the index.
func listReferrers(tb testing.TB, h http.Handler, repo, subject, query string) (*http.Response, ocispec.Index, []byte) {
	tb.Helper()
	resp := do(h, http.MethodGet, fmt.Sprintf("/v2/%s/referrers/%s%s", repo, subject, query), "", nil)
	body, _ := io.ReadAll(resp.Body)
	var idx ocispec.Index
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &idx); err != nil {
			tb.Fatalf("referrers body %s: %v", body, err)
		}
	}
	return resp, idx, body
}

func digests(descs []ocispec.Descriptor) []digest.Digest {
	ds := make([]digest.Digest, len(descs))
	for i, d := range descs {
		ds[i] = d.Digest
	}
	return ds
}

// sorted returns ds ordered as the referrers API orders them.
func sorted(ds ...digest.Digest) []digest.Digest {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds
}

func TestReferrersAPI(t *testing.T) {
	reg := newRegistry(t, Options{})
	const repo = "apps/web"
	b := pushBlobs(t, reg, repo)

	subjectBody, resp := putJSON(t, reg, repo, "1.0", b.image(nil, "", "", nil))
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("OCI-Subject") != "" {
		t.Fatalf("subject push: %s, OCI-Subject %q", resp.Status, resp.Header.Get("OCI-Subject"))
	}
	subject := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(subjectBody), Size: int64(len(subjectBody))}

	const (
		sigType    = "application/vnd.dev.cosign.artifact.sig.v1+json"
		sbomType   = "application/spdx+json"
		legacyType = "application/vnd.example.legacy.config.v1+json"
		bundleType = "application/vnd.example.bundle.v1"
	)
	sigNote := map[string]string{"org.opencontainers.image.created": "2026-01-01T00:00:00Z"}
	pushes := []struct {
		name     string
		ref      string
		manifest any
		want     ocispec.Descriptor // artifact type and annotations the listing shows
	}{
		{"signature by digest", "", b.image(&subject, sigType, "", sigNote), ocispec.Descriptor{ArtifactType: sigType, Annotations: sigNote}},
		{"sbom by tag", "sbom", b.image(&subject, sbomType, "", nil), ocispec.Descriptor{ArtifactType: sbomType}},
		{"no artifactType: the config media type counts", "", b.image(&subject, "", legacyType, nil), ocispec.Descriptor{ArtifactType: legacyType}},
		{"image index", "", ocispec.Index{
			Versioned:    specs.Versioned{SchemaVersion: 2},
			MediaType:    ocispec.MediaTypeImageIndex,
			ArtifactType: bundleType,
			Manifests:    []ocispec.Descriptor{subject},
			Subject:      &subject,
		}, ocispec.Descriptor{ArtifactType: bundleType}},
	}
	want := map[digest.Digest]ocispec.Descriptor{}
	byType := map[string]digest.Digest{}
	for _, p := range pushes {
		body, resp := putJSON(t, reg, repo, p.ref, p.manifest)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("%s: %s", p.name, resp.Status)
		}
		if got := resp.Header.Get("OCI-Subject"); got != subject.Digest.String() {
			t.Errorf("%s: OCI-Subject %q, want %s", p.name, got, subject.Digest)
		}
		d := p.want
		d.Digest, d.Size = digest.FromBytes(body), int64(len(body))
		d.MediaType = ocispec.MediaTypeImageManifest
		if _, ok := p.manifest.(ocispec.Index); ok {
			d.MediaType = ocispec.MediaTypeImageIndex
		}
		want[d.Digest] = d
		byType[d.ArtifactType] = d.Digest
	}
	all := slices.Sorted(maps.Keys(want))

	for _, tc := range []struct {
		name        string
		repo, ref   string
		filter      string
		wantStatus  int
		want        []digest.Digest
		wantFilters string
		wantCode    string
	}{
		{name: "all referrers", repo: repo, ref: subject.Digest.String(), wantStatus: 200, want: all},
		{name: "by artifactType", repo: repo, ref: subject.Digest.String(), filter: sigType, wantStatus: 200, want: []digest.Digest{byType[sigType]}, wantFilters: "artifactType"},
		{name: "by config media type", repo: repo, ref: subject.Digest.String(), filter: legacyType, wantStatus: 200, want: []digest.Digest{byType[legacyType]}, wantFilters: "artifactType"},
		{name: "index by artifactType", repo: repo, ref: subject.Digest.String(), filter: bundleType, wantStatus: 200, want: []digest.Digest{byType[bundleType]}, wantFilters: "artifactType"},
		{name: "no referrer of that type", repo: repo, ref: subject.Digest.String(), filter: "application/none", wantStatus: 200, want: []digest.Digest{}, wantFilters: "artifactType"},
		{name: "unknown subject", repo: repo, ref: digest.FromString("none").String(), wantStatus: 200, want: []digest.Digest{}},
		{name: "unknown repository", repo: "no/such/repo", ref: subject.Digest.String(), wantStatus: 200, want: []digest.Digest{}},
		{name: "malformed digest", repo: repo, ref: "sha256:nothex", wantStatus: 400, wantCode: "DIGEST_INVALID"},
		{name: "unknown algorithm", repo: repo, ref: "md5:d41d8cd98f00b204e9800998ecf8427e", wantStatus: 400, wantCode: "DIGEST_INVALID"},
		{name: "invalid repository name", repo: "Apps/Web", ref: subject.Digest.String(), wantStatus: 400, wantCode: "NAME_INVALID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			query := ""
			if tc.filter != "" {
				query = "?artifactType=" + url.QueryEscape(tc.filter)
			}
			resp, idx, body := listReferrers(t, reg, tc.repo, tc.ref, query)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %s, want %d: %s", resp.Status, tc.wantStatus, body)
			}
			if tc.wantCode != "" {
				var e ociErrors
				if err := json.Unmarshal(body, &e); err != nil || len(e.Errors) != 1 || e.Errors[0].Code != tc.wantCode || e.Errors[0].Message == "" {
					t.Fatalf("error body %s, want one %s with a message", body, tc.wantCode)
				}
				return
			}
			if ct := resp.Header.Get("Content-Type"); ct != ocispec.MediaTypeImageIndex {
				t.Errorf("Content-Type %q", ct)
			}
			if got := resp.Header.Get("OCI-Filters-Applied"); got != tc.wantFilters {
				t.Errorf("OCI-Filters-Applied %q, want %q", got, tc.wantFilters)
			}
			if idx.SchemaVersion != 2 || idx.MediaType != ocispec.MediaTypeImageIndex {
				t.Errorf("index schemaVersion %d mediaType %q", idx.SchemaVersion, idx.MediaType)
			}
			if len(tc.want) == 0 && !bytes.Contains(body, []byte(`"manifests":[]`)) {
				t.Errorf("empty listing %s has no empty manifests array", body)
			}
			if got := digests(idx.Manifests); !slices.Equal(got, tc.want) {
				t.Fatalf("referrers %v, want %v", got, tc.want)
			}
			for _, d := range idx.Manifests {
				w := want[d.Digest]
				if d.MediaType != w.MediaType || d.Size != w.Size || d.ArtifactType != w.ArtifactType || !maps.Equal(d.Annotations, w.Annotations) {
					t.Errorf("descriptor %+v, want %+v", d, w)
				}
			}
			if tc.repo != repo || tc.wantStatus != 200 {
				return
			}
			inProcess, err := reg.Referrers(context.Background(), tc.repo, digest.Digest(tc.ref), tc.filter)
			if err != nil || !slices.Equal(digests(inProcess), tc.want) {
				t.Errorf("Referrers = %v, %v; want %v", digests(inProcess), err, tc.want)
			}
		})
	}

	for _, tc := range []struct {
		repo    string
		subject digest.Digest
	}{{"Apps/Web", subject.Digest}, {repo, "sha256:nothex"}} {
		if _, err := reg.Referrers(context.Background(), tc.repo, tc.subject, ""); !errors.Is(err, ErrInvalid) {
			t.Errorf("Referrers(%q, %q): %v, want ErrInvalid", tc.repo, tc.subject, err)
		}
	}
}

// TestOCISubjectHeaderThroughServer checks the OCI-Subject header over a real
// HTTP connection, where the response writer is the server's own.
func TestOCISubjectHeaderThroughServer(t *testing.T) {
	srv := newTestRegistry(t)
	subjectBody := manifest(t, srv.URL, "apps/api", "subject", image)
	if status, e := putManifest(t, srv.URL, "apps/api", "1.0", subjectBody); status != http.StatusCreated {
		t.Fatalf("subject push: %d %v", status, e)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(manifest(t, srv.URL, "apps/api", "signature", image), &m); err != nil {
		t.Fatal(err)
	}
	m.Subject = &ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(subjectBody), Size: int64(len(subjectBody))}
	body, _ := json.Marshal(m)
	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/v2/apps/api/manifests/"+digest.FromBytes(body).String(), bytes.NewReader(body))
	req.Header.Set("Content-Type", ocispec.MediaTypeImageManifest)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("OCI-Subject") != m.Subject.Digest.String() {
		t.Fatalf("PUT: %s, OCI-Subject %q, want %s", resp.Status, resp.Header.Get("OCI-Subject"), m.Subject.Digest)
	}
}

func TestReferrerWithMalformedSubjectIsRefused(t *testing.T) {
	reg := newRegistry(t, Options{})
	b := pushBlobs(t, reg, "apps/web")
	m := b.image(&ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: "sha256:nothex", Size: 1}, "application/x", "", nil)
	_, resp := putJSON(t, reg, "apps/web", "", m)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("PUT: %s, want 400", resp.Status)
	}
}

// recorder collects a registry's events.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) add(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// take returns the events so far and forgets them.
func (r *recorder) take() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.events
	r.events = nil
	return e
}

func TestReferrerEvents(t *testing.T) {
	var rec recorder
	reg := newRegistry(t, Options{OnEvent: rec.add})
	const repo = "apps/web"
	b := pushBlobs(t, reg, repo)
	subject := mustPut(t, reg, repo, "1.0", b.image(nil, "", "", nil))
	plainByDigest := mustPut(t, reg, repo, "", b.image(nil, "", "", map[string]string{"n": "1"}))
	if ev := rec.take(); len(ev) != 1 || ev[0].Tag != "1.0" || ev[0].Subject != "" {
		t.Fatalf("events of pushes without subject: %+v", ev)
	}

	sig := mustPut(t, reg, repo, "", b.image(&subject, "application/x.sig", "", nil))
	sbom := mustPut(t, reg, repo, "sbom", b.image(&subject, "application/x.sbom", "", nil))
	s := subject.Digest.String()
	want := []Event{
		{Action: EventPush, Repository: repo, Digest: sig.Digest.String(), MediaType: ocispec.MediaTypeImageManifest, Subject: s},
		{Action: EventPush, Repository: repo, Digest: sbom.Digest.String(), MediaType: ocispec.MediaTypeImageManifest, Subject: s},
		{Action: EventPush, Repository: repo, Tag: "sbom", Digest: sbom.Digest.String(), MediaType: ocispec.MediaTypeImageManifest},
	}
	if got := rec.take(); !slices.Equal(got, want) {
		t.Fatalf("push events\n got %+v\nwant %+v", got, want)
	}

	if resp := do(reg, http.MethodDelete, "/v2/"+repo+"/manifests/"+sig.Digest.String(), "", nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delete: %s", resp.Status)
	}
	if resp := do(reg, http.MethodDelete, "/v2/"+repo+"/manifests/"+plainByDigest.Digest.String(), "", nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delete: %s", resp.Status)
	}
	want = []Event{
		{Action: EventDelete, Repository: repo, Digest: sig.Digest.String(), Subject: s},
		{Action: EventDelete, Repository: repo, Digest: plainByDigest.Digest.String()},
	}
	if got := rec.take(); !slices.Equal(got, want) {
		t.Fatalf("delete events\n got %+v\nwant %+v", got, want)
	}
}

// TestReferrersFollowDeletesAndRestarts checks the index on disk: deleted
// referrers leave it, a new registry on the same directory lists the same,
// an entry whose manifest is gone is skipped, and a removed repository
// takes its index with it.
func TestReferrersFollowDeletesAndRestarts(t *testing.T) {
	dir := t.TempDir()
	const repo = "apps/web"
	reg := newRegistry(t, Options{Storage: onDisk(dir)})
	b := pushBlobs(t, reg, repo)
	subject := mustPut(t, reg, repo, "1.0", b.image(nil, "", "", nil))
	var refs []digest.Digest
	for i := range 3 {
		refs = append(refs, mustPut(t, reg, repo, "", b.image(&subject, "application/x.sig", "", map[string]string{"i": fmt.Sprint(i)})).Digest)
	}
	list := func(reg *Registry) []digest.Digest {
		t.Helper()
		resp, idx, body := listReferrers(t, reg, repo, subject.Digest.String(), "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("list: %s %s", resp.Status, body)
		}
		return digests(idx.Manifests)
	}
	if got := list(reg); !slices.Equal(got, sorted(refs...)) {
		t.Fatalf("listing %v, want %v", got, sorted(refs...))
	}

	if resp := do(reg, http.MethodDelete, "/v2/"+repo+"/manifests/"+refs[0].String(), "", nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delete: %s", resp.Status)
	}
	refs = refs[1:]
	if got := list(reg); !slices.Equal(got, sorted(refs...)) {
		t.Fatalf("after delete %v, want %v", got, sorted(refs...))
	}

	restarted := newRegistry(t, Options{Storage: onDisk(dir)})
	if got := list(restarted); !slices.Equal(got, sorted(refs...)) {
		t.Fatalf("after restart %v, want %v", got, sorted(refs...))
	}

	// A delete that stopped between its two steps: the manifest is gone,
	// its index entry is not. A registry that reads the entry skips it.
	link := filepath.Join(dir, filepath.FromSlash(manifestLinkPath(repo, refs[0])))
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if got := list(newRegistry(t, Options{Storage: onDisk(dir)})); !slices.Equal(got, refs[1:]) {
		t.Fatalf("with a stale entry %v, want %v", got, refs[1:])
	}

	// Removing the repository removes its index; a repository pushed again
	// under the same name starts with no referrers.
	named, _ := reference.WithName(repo)
	if err := reg.Namespace().(distribution.RepositoryRemover).Remove(context.Background(), named); err != nil {
		t.Fatal(err)
	}
	if got := list(reg); len(got) != 0 {
		t.Fatalf("after removing the repository: %v", got)
	}
	b = pushBlobs(t, reg, repo)
	if again := mustPut(t, reg, repo, "1.0", b.image(nil, "", "", nil)); again.Digest != subject.Digest {
		t.Fatalf("subject pushed again as %s", again.Digest)
	}
	fresh := mustPut(t, reg, repo, "", b.image(&subject, "application/x.sig", "", map[string]string{"i": "new"}))
	for _, r := range []*Registry{reg, restarted} {
		if got := list(r); !slices.Equal(got, []digest.Digest{fresh.Digest}) {
			t.Fatalf("recreated repository: %v, want %v", got, fresh.Digest)
		}
	}
}

// pushReferrers pushes n small image manifests referring to subject, with
// concurrency, and returns their digests.
func pushReferrers(tb testing.TB, h http.Handler, repo string, b blobs, subject ocispec.Descriptor, n int) []digest.Digest {
	tb.Helper()
	out := make([]digest.Digest, n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				m := b.image(&subject, "application/x.sig", "", map[string]string{"n": fmt.Sprint(i)})
				body, _ := json.Marshal(m)
				resp := do(h, http.MethodPut, fmt.Sprintf("/v2/%s/manifests/%s", repo, digest.FromBytes(body)), ocispec.MediaTypeImageManifest, body)
				if resp.StatusCode != http.StatusCreated {
					tb.Errorf("referrer %d: %s", i, resp.Status)
				}
				out[i] = digest.FromBytes(body)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// TestThousandsOfReferrers lists 5,000 referrers, from the cache and then
// read back from storage (in memory, to keep the pushes quick; the
// filesystem is measured by BenchmarkReferrers).
func TestThousandsOfReferrers(t *testing.T) {
	reg := newRegistry(t, Options{})
	const repo, n = "apps/web", 5000
	b := pushBlobs(t, reg, repo)
	subject := mustPut(t, reg, repo, "1.0", b.image(nil, "", "", nil))
	want := sorted(pushReferrers(t, reg, repo, b, subject, n)...)
	for _, cache := range []string{"warm", "cold"} {
		if cache == "cold" {
			reg.guard.referrers.cache = newDescriptorCache(referrerCacheEntries)
		}
		resp, idx, _ := listReferrers(t, reg, repo, subject.Digest.String(), "")
		if resp.StatusCode != http.StatusOK || !slices.Equal(digests(idx.Manifests), want) {
			t.Fatalf("%s: listed %d referrers (%s), want all %d in digest order", cache, len(idx.Manifests), resp.Status, n)
		}
	}
}

func TestAdmitTag(t *testing.T) {
	type call struct {
		repo, tag string
		dgst      digest.Digest
	}
	var calls []call
	refusal := "kudo/kafka:1.0.0 is not signed by a trusted key"
	reg := newRegistry(t, Options{AdmitTag: func(_ context.Context, push TagPush) error {
		calls = append(calls, call{push.Repo, push.Tag, push.Digest})
		if push.Digest != digest.FromBytes(push.Payload) || push.MediaType != ocispec.MediaTypeImageManifest {
			t.Errorf("AdmitTag of %s:%s: digest %s of a %s payload of %d bytes", push.Repo, push.Tag, push.Digest, push.MediaType, len(push.Payload))
		}
		if push.Tag == "1.0.0" {
			return errors.New(refusal)
		}
		return nil
	}})
	srv := httptest.NewServer(reg)
	t.Cleanup(srv.Close)
	pkg := manifest(t, srv.URL, "kudo/kafka", "pkg", berthPkg)
	chart := manifest(t, srv.URL, "charts/nginx", "chart", helmChart)
	img := manifest(t, srv.URL, "kudo/kafka", "img", image)
	sig := manifest(t, srv.URL, "kudo/kafka", "sig", image)
	sigTag := "sha256-" + digest.FromBytes(pkg).Encoded() + ".sig"

	for _, tc := range []struct {
		name       string
		repo, ref  string
		body       []byte
		wantStatus int
		wantCall   bool
	}{
		{"package refused by tag", "kudo/kafka", "1.0.0", pkg, http.StatusForbidden, true},
		{"same package by digest", "kudo/kafka", digest.FromBytes(pkg).String(), pkg, http.StatusCreated, false},
		{"package admitted by tag", "kudo/kafka", "1.0.1", pkg, http.StatusCreated, true},
		{"helm chart admitted by tag", "charts/nginx", "1.0.0-chart", chart, http.StatusCreated, true},
		{"image by tag", "kudo/kafka", "latest", img, http.StatusCreated, false},
		{"cosign signature tag", "kudo/kafka", sigTag, sig, http.StatusCreated, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls = nil
			status, e := putManifest(t, srv.URL, tc.repo, tc.ref, tc.body)
			if status != tc.wantStatus {
				t.Fatalf("status %d, want %d (%v)", status, tc.wantStatus, e)
			}
			wantCalls := []call(nil)
			if tc.wantCall {
				wantCalls = []call{{tc.repo, tc.ref, digest.FromBytes(tc.body)}}
			}
			if !slices.Equal(calls, wantCalls) {
				t.Fatalf("AdmitTag calls %v, want %v", calls, wantCalls)
			}
			if status == http.StatusForbidden {
				if len(e.Errors) != 1 || e.Errors[0].Code != "DENIED" || e.Errors[0].Message != refusal {
					t.Fatalf("errors %+v, want one DENIED with message %q", e.Errors, refusal)
				}
				return
			}
			if !strings.Contains(tc.ref, ":") && tagDigest(t, srv.URL, tc.repo, tc.ref) != digest.FromBytes(tc.body) {
				t.Fatalf("%s:%s not tagged", tc.repo, tc.ref)
			}
		})
	}
	if resp, err := http.Get(srv.URL + "/v2/kudo/kafka/manifests/1.0.0"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("refused tag exists: %v %v", resp.Status, err)
	}
}

// TestCosignSignatureTagWithSubject checks that a signature pushed, as
// cosign does, under the tag sha256-<hex>.sig and re-pointed on every new
// signature, is a referrer of the signed package as well.
func TestCosignSignatureTagWithSubject(t *testing.T) {
	reg := newRegistry(t, Options{})
	const repo = "stable/kafka"
	b := pushBlobs(t, reg, repo)
	pkg := mustPut(t, reg, repo, "1.0.0", b.image(nil, "", "", nil))
	sigTag := "sha256-" + pkg.Digest.Encoded() + ".sig"
	var sigs []digest.Digest
	for i := range 2 {
		body, resp := putJSON(t, reg, repo, sigTag, b.image(&pkg, "application/vnd.dev.cosign.artifact.sig.v1+json", "", map[string]string{"i": fmt.Sprint(i)}))
		if resp.StatusCode != http.StatusCreated || resp.Header.Get("OCI-Subject") != pkg.Digest.String() {
			t.Fatalf("signature %d: %s, OCI-Subject %q", i, resp.Status, resp.Header.Get("OCI-Subject"))
		}
		sigs = append(sigs, digest.FromBytes(body))
	}
	req := httptest.NewRequest(http.MethodHead, "/v2/"+repo+"/manifests/"+sigTag, nil)
	req.Header.Set("Accept", ocispec.MediaTypeImageManifest)
	w := httptest.NewRecorder()
	reg.ServeHTTP(w, req)
	if got := digest.Digest(w.Header().Get("Docker-Content-Digest")); got != sigs[1] {
		t.Fatalf("%s names %s, want the last signature %s", sigTag, got, sigs[1])
	}
	if got, err := reg.Referrers(context.Background(), repo, pkg.Digest, ""); err != nil || !slices.Equal(digests(got), sorted(sigs...)) {
		t.Fatalf("referrers %v, %v; want both signatures %v", digests(got), err, sorted(sigs...))
	}
}

func TestReferrersPath(t *testing.T) {
	for _, tc := range []struct{ path, repo, ref string }{
		{"/v2/apps/web/referrers/sha256:abc", "apps/web", "sha256:abc"},
		{"/v2/a/b/c/referrers/sha256:abc", "a/b/c", "sha256:abc"},
		{"/v2/referrers/referrers/x", "referrers", "x"},
		{"/v2/referrers/sha256:abc", "", ""},
		{"/v2/apps/web/manifests/sha256:abc", "", ""},
		{"/v2/apps/referrers/manifests/x", "", ""},
		{"/other/a/referrers/x", "", ""},
	} {
		repo, ref, ok := referrersPath(tc.path)
		if ok != (tc.repo != "") || repo != tc.repo || ref != tc.ref {
			t.Errorf("referrersPath(%q) = %q, %q, %v", tc.path, repo, ref, ok)
		}
	}
}

func TestDescriptorCacheIsBounded(t *testing.T) {
	c := newDescriptorCache(3)
	for i := range 10 {
		d := digest.FromString(fmt.Sprint(i))
		c.put(referrerKey{"r", "s", d}, referrerEntry{json: []byte(d)})
	}
	if len(c.entries) != 3 {
		t.Fatalf("%d entries, limit 3", len(c.entries))
	}
}

// BenchmarkReferrers measures GET /v2/<repo>/referrers/<digest> through
// Registry.ServeHTTP on filesystem storage, for subjects with 1, 100 and
// 5000 referrers: warm (descriptors cached; one directory listing per
// request) and cold (cache emptied before each request: every file read).
func BenchmarkReferrers(b *testing.B) {
	for _, n := range []int{1, 100, 5000} {
		reg := newRegistry(b, Options{Storage: onDisk(b.TempDir())})
		const repo = "bench/app"
		blobs := pushBlobs(b, reg, repo)
		subject := mustPut(b, reg, repo, "1.0", blobs.image(nil, "", "", nil))
		pushReferrers(b, reg, repo, blobs, subject, n)
		target := fmt.Sprintf("/v2/%s/referrers/%s", repo, subject.Digest)
		get := func(b *testing.B) {
			w := httptest.NewRecorder()
			reg.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
			if w.Code != http.StatusOK {
				b.Fatalf("GET: %d", w.Code)
			}
		}
		b.Run(fmt.Sprintf("referrers=%d/warm", n), func(b *testing.B) {
			for b.Loop() {
				get(b)
			}
		})
		b.Run(fmt.Sprintf("referrers=%d/cold", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				reg.guard.referrers.cache = newDescriptorCache(referrerCacheEntries)
				b.StartTimer()
				get(b)
			}
		})
	}
}
