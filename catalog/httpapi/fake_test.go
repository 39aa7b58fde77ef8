package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/httpapi"
	"github.com/berth-registry/berth/catalog/httpapi/openapitest"
	"github.com/berth-registry/berth/permissions"
	"github.com/berth-registry/berth/pkgformat"
)

// fakeCatalog implements httpapi.Catalog with canned documents, for the tests
// of the HTTP layer only: parameter parsing, error mapping, paging, the index
// and events. It records every call.
type fakeCatalog struct {
	mu       sync.Mutex
	calls    []string
	queries  []catalog.Query
	accesses []catalog.Access
	ingested []catalog.Event

	// err, when set, is what every method returns.
	err error
	// entries are what Walk delivers, sorted by namespace and name.
	entries []*catalog.Entry
	seq     int64
	// total is the number of search matches; Search pages over it.
	total int
	// artifacts is the number of unindexed tags.
	artifacts int
	files     map[string]string // "ns/name/version/path" → content
	// fileReader, when set, replaces the content of every file.
	fileReader func() (io.ReadCloser, int64)
	changes    []apiv1.Change
	// onWalk is called after each entry Walk delivers; its error ends the walk.
	onWalk func(i int) error
}

var _ httpapi.Catalog = (*fakeCatalog)(nil)

var (
	t0    = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	tMeta = time.Date(2020, 2, 3, 4, 5, 6, 0, time.UTC)
)

func (f *fakeCatalog) record(call string, access *catalog.Access) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	if access != nil {
		f.accesses = append(f.accesses, *access)
	}
	return f.err
}

func (f *fakeCatalog) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func notFound(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, catalog.ErrNotFound)...)
}

func (f *fakeCatalog) Search(_ context.Context, q catalog.Query) (*catalog.SearchResult, error) {
	if err := f.record("Search", &q.Access); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.queries = append(f.queries, q)
	f.mu.Unlock()
	res := &catalog.SearchResult{Total: f.total}
	for i := q.Offset; i < f.total && i < q.Offset+q.Limit; i++ {
		res.Packages = append(res.Packages, apiv1.PackageSummary{
			Namespace: "kudo", Name: fmt.Sprintf("pkg%03d", i), Version: "1.0.0", Format: pkgformat.KUDO,
			Digest: "sha256:" + strings.Repeat("a", 64), Updated: t0, Created: &tMeta,
		})
	}
	if f.total > 0 {
		res.Facets = apiv1.Facets{Format: map[string]int{"kudo": f.total}, Namespace: map[string]int{"kudo": f.total}}
	}
	return res, nil
}

func (f *fakeCatalog) Package(_ context.Context, access catalog.Access, ns, name string) (*apiv1.Package, error) {
	if err := f.record("Package", &access); err != nil {
		return nil, err
	}
	if ns != "kudo" || name != "kafka" || !access.Allows(ns, name) {
		return nil, notFound("package %s/%s", ns, name)
	}
	return &apiv1.Package{
		Namespace: ns, Name: name, Format: pkgformat.KUDO, LatestVersion: "2.5.1_1.3.2",
		Maintainers: []pkgformat.Maintainer{{Name: "Kafka team", Email: "kafka@example.com"}},
		Versions:    []apiv1.VersionSummary{{Version: "2.5.1_1.3.2", Digest: "sha256:" + strings.Repeat("b", 64), Indexed: t0}},
		Channels:    []apiv1.Channel{{Name: "stable", Head: "2.5.1_1.3.2"}}, // Versions nil: written []
	}, nil
}

func (f *fakeCatalog) Version(_ context.Context, access catalog.Access, ns, name, version string) (*apiv1.Version, error) {
	if err := f.record("Version", &access); err != nil {
		return nil, err
	}
	if ns != "kudo" || name != "kafka" || version != "2.5.1_1.3.2" {
		return nil, notFound("version %s/%s %s", ns, name, version)
	}
	perms := &pkgformat.Permissions{Cluster: []pkgformat.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}}}}
	return &apiv1.Version{
		Namespace: ns, Name: name, Version: version, Digest: "sha256:" + strings.Repeat("b", 64),
		Format: pkgformat.KUDO, PullReference: "kudo/kafka@sha256:" + strings.Repeat("b", 64),
		Content: apiv1.Content{Digest: "sha256:" + strings.Repeat("c", 64), Size: 1234, MediaType: pkgformat.ContentMediaType},
		Metadata: pkgformat.Metadata{
			SchemaVersion: 1, Name: name, Version: version, Format: pkgformat.KUDO,
			AppVersion: "2.5.1", OperatorVersion: "1.3.2", Created: &tMeta, Permissions: perms,
		},
		Permissions: perms,
		Indexed:     t0,
		// Files, Signatures and Attestations nil: written [].
	}, nil
}

func (f *fakeCatalog) Graph(_ context.Context, access catalog.Access, ns, name, channel string) (*apiv1.Graph, error) {
	if err := f.record("Graph", &access); err != nil {
		return nil, err
	}
	if channel != "stable" {
		return nil, notFound("channel %s", channel)
	}
	return &apiv1.Graph{Namespace: ns, Name: name, Channel: channel, Head: "2.5.1_1.3.2"}, nil
}

func (f *fakeCatalog) Upgrades(_ context.Context, access catalog.Access, ns, name, channel, from string) (*apiv1.Upgrades, error) {
	if err := f.record("Upgrades", &access); err != nil {
		return nil, err
	}
	return &apiv1.Upgrades{From: from, Channel: "stable", Head: "2.5.1_1.3.2", Next: []string{"2.5.1_1.3.2"}}, nil
}

func (f *fakeCatalog) Permissions(_ context.Context, access catalog.Access, ns, name, version, from string) (*apiv1.Permissions, error) {
	if err := f.record("Permissions", &access); err != nil {
		return nil, err
	}
	v, err := f.Version(context.Background(), access, ns, name, version)
	if err != nil {
		return nil, err
	}
	out := &apiv1.Permissions{Namespace: ns, Name: name, Version: version, Review: permissions.Of(v.Permissions), From: from}
	if from != "" {
		out.Change, err = permissions.Diff(nil, v.Permissions)
	}
	return out, err
}

func (f *fakeCatalog) Approve(_ context.Context, ns, name, version, fingerprint, by string) (*apiv1.Approval, error) {
	if err := f.record("Approve", nil); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(fingerprint, "sha256:") {
		return nil, fmt.Errorf("permissions %q: want sha256:…: %w", fingerprint, catalog.ErrInvalid)
	}
	return &apiv1.Approval{Namespace: ns, Name: name, Version: version, Permissions: fingerprint, By: by, At: t0}, nil
}

func (f *fakeCatalog) File(_ context.Context, access catalog.Access, ns, name, version, path string) (io.ReadCloser, int64, error) {
	if err := f.record("File", &access); err != nil {
		return nil, 0, err
	}
	if f.fileReader != nil {
		rc, size := f.fileReader()
		return rc, size, nil
	}
	content, ok := f.files[ns+"/"+name+"/"+version+"/"+path]
	if !ok {
		return nil, 0, notFound("file %s", path)
	}
	return io.NopCloser(strings.NewReader(content)), int64(len(content)), nil
}

func (f *fakeCatalog) DeletePackage(_ context.Context, ns, name string) ([]string, error) {
	if err := f.record("DeletePackage", nil); err != nil {
		return nil, err
	}
	if ns != "kudo" || name != "kafka" {
		return nil, notFound("package %s/%s", ns, name)
	}
	return []string{"2.5.1_1.3.2", "2.5.1_1.3.1"}, nil
}

// Changes numbers the changes access allows 1, 2, 3, ... as
// catalog.Catalog.Changes does.
func (f *fakeCatalog) Changes(_ context.Context, access catalog.Access, since int64, limit int) (*apiv1.Changes, error) {
	if err := f.record(fmt.Sprintf("Changes(%d,%d)", since, limit), &access); err != nil {
		return nil, err
	}
	c := &apiv1.Changes{Next: since}
	var n int64
	for _, ch := range f.changes {
		if !access.Allows(ch.Namespace, ch.Name) {
			continue
		}
		if n++; n > since && len(c.Changes) < limit {
			ch.Seq = n
			c.Changes = append(c.Changes, ch)
			c.Next = n
		}
	}
	return c, nil
}

// FeedHead is the catalog's seq for an access to everything, else the
// number of changes access allows.
func (f *fakeCatalog) FeedHead(_ context.Context, access catalog.Access) (int64, error) {
	if err := f.record("FeedHead", &access); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if access.All {
		return f.seq, nil
	}
	var n int64
	for _, ch := range f.changes {
		if access.Allows(ch.Namespace, ch.Name) {
			n++
		}
	}
	return n, nil
}

func (f *fakeCatalog) Unindexed(_ context.Context, access catalog.Access, limit, offset int) ([]apiv1.Artifact, error) {
	if err := f.record(fmt.Sprintf("Unindexed(%d,%d)", limit, offset), &access); err != nil {
		return nil, err
	}
	var list []apiv1.Artifact
	for i := offset; i < f.artifacts && i < offset+limit; i++ {
		list = append(list, apiv1.Artifact{
			Namespace: "kudo", Name: "images", Tag: fmt.Sprintf("t%03d", i), Digest: "sha256:" + strings.Repeat("d", 64),
			Status: apiv1.StatusIgnored, Reason: "not a package: a container image", Indexed: t0,
		})
	}
	return list, nil
}

func (f *fakeCatalog) Status(context.Context) (*apiv1.Status, error) {
	if err := f.record("Status", nil); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return &apiv1.Status{Packages: 3, Versions: 5, Seq: f.seq, Reconcile: apiv1.ReconcileStatus{Runs: 1, Finished: &t0}}, nil
}

func (f *fakeCatalog) Walk(ctx context.Context, access catalog.Access, ns string, fn func(*catalog.Entry) error) error {
	if err := f.record("Walk", &access); err != nil {
		return err
	}
	i := 0
	for _, e := range f.entries {
		if !access.Allows(e.Namespace, e.Name) || (ns != "" && e.Namespace != ns) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		c := *e // a store hands out entries it may reuse
		if err := fn(&c); err != nil {
			return err
		}
		if f.onWalk != nil {
			if err := f.onWalk(i); err != nil {
				return err
			}
		}
		i++
	}
	return nil
}

func (f *fakeCatalog) Ingest(_ context.Context, events []catalog.Event) error {
	if err := f.record("Ingest", nil); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ingested = append(f.ingested, events...)
	return nil
}

// fakeAuth is an Authorizer with fixed answers.
type fakeAuth struct {
	access     catalog.Access
	pullErr    error
	deleteErr  error
	approveErr error
	pushErr    error
}

func (a fakeAuth) Pullable(context.Context) (catalog.Access, error) { return a.access, a.pullErr }

func (a fakeAuth) MayDelete(context.Context, string, string) error { return a.deleteErr }

func (a fakeAuth) MayPush(context.Context, string, string) error { return a.pushErr }

func (a fakeAuth) MayApprove(context.Context, string, string) (string, error) {
	return "alice", a.approveErr
}

// response is what a test request got back.
type response struct {
	status int
	header http.Header
	body   []byte
}

// decode unmarshals the body into v.
func (r *response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// apiError returns the one error of an error document.
func (r *response) apiError(t *testing.T) apiv1.Error {
	t.Helper()
	var errs apiv1.Errors
	r.decode(t, &errs)
	if len(errs.Errors) != 1 {
		t.Fatalf("errors = %+v, want one", errs.Errors)
	}
	return errs.Errors[0]
}

// serve sends a request to h and checks the exchange against the OpenAPI
// document. header holds name, value pairs; the names Host and RemoteAddr
// set the request's fields of those names.
func serve(t *testing.T, h http.Handler, method, target string, body []byte, header ...string) *response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://berth.example"+target, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		switch header[i] {
		case "Host":
			req.Host = header[i+1]
		case "RemoteAddr":
			req.RemoteAddr = header[i+1]
		default:
			req.Header.Add(header[i], header[i+1])
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	res := rec.Result()
	openapitest.Validate(t, req, res.StatusCode, res.Header, rec.Body.Bytes())
	return &response{status: res.StatusCode, header: res.Header, body: rec.Body.Bytes()}
}

// newHandler returns the handler under test over f, logging into logs when
// it is not nil.
func newHandler(f *fakeCatalog, auth catalog.Authorizer, logs *bytes.Buffer) http.Handler {
	log := slog.New(slog.DiscardHandler)
	if logs != nil {
		log = slog.New(slog.NewTextHandler(logs, nil))
	}
	return httpapi.New(httpapi.Options{Catalog: f, Authorizer: auth, Logger: log, Events: true})
}

func (f *fakeCatalog) VersionImages(_ context.Context, access catalog.Access, ns, name, version, registry string) (*apiv1.VersionImages, error) {
	if err := f.record("VersionImages "+registry, &access); err != nil {
		return nil, err
	}
	if ns != "kudo" || name != "kafka" || version != "2.5.1_1.3.2" {
		return nil, notFound("version %s/%s %s", ns, name, version)
	}
	return &apiv1.VersionImages{Namespace: ns, Name: name, Version: version}, nil // Images nil: written []
}

func (f *fakeCatalog) Installable(_ context.Context, access catalog.Access, ns, name, version, registry string) (*apiv1.Installable, error) {
	if err := f.record("Installable "+registry, &access); err != nil {
		return nil, err
	}
	if ns != "kudo" || name != "kafka" || version != "2.5.1_1.3.2" {
		return nil, notFound("version %s/%s %s", ns, name, version)
	}
	return &apiv1.Installable{Namespace: ns, Name: name, Version: version, Installable: true}, nil
}

func (f *fakeCatalog) ImageMirrors(context.Context) ([]apiv1.ImageMirror, error) {
	if err := f.record("ImageMirrors", nil); err != nil {
		return nil, err
	}
	return nil, nil
}

func (f *fakeCatalog) SetImageMirrors(_ context.Context, ms []apiv1.ImageMirror) ([]apiv1.ImageMirror, error) {
	if err := f.record("SetImageMirrors", nil); err != nil {
		return nil, err
	}
	return ms, nil
}
