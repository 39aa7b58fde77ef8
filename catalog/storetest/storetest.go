// Package storetest is the conformance suite of catalog.Store: every
// implementation (SQLite, PostgreSQL) joins it with one line in its tests,
//
//	func TestStore(t *testing.T) { storetest.Run(t, open) }
//
// and so answers searches, keeps the change feed and survives restarts the
// same way. The suite only uses the catalog.Store interface.
package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/pkgformat"
)

// Opener opens a new, empty store for one test, and returns with it a function
// that opens that same store again (the same file, the same database) once the
// suite has closed it, as a restart would. The suite closes every store it is
// given.
type Opener func(t *testing.T) (store catalog.Store, reopen func(t *testing.T) catalog.Store)

// Run runs the whole suite against the stores open returns.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h *harness)
	}{
		{"RoundTrip", testRoundTrip},
		{"InvalidPut", testInvalidPut},
		{"NoopPut", testNoopPut},
		{"Repoint", testRepoint},
		{"Delete", testDelete},
		{"Unindexed", testUnindexed},
		{"NotFound", testNotFound},
		{"Walk", testWalk},
		{"Stats", testStats},
		{"LatestVersion", testLatestVersion},
		{"Ranking", testRanking},
		{"RankingFields", testRankingFields},
		{"Filters", testFilters},
		{"Sorts", testSorts},
		{"FacetsAndTotal", testFacetsAndTotal},
		{"Pagination", testPagination},
		{"Access", testAccess},
		{"HostileText", testHostileText},
		{"Changes", testChanges},
		{"SourceEvents", testSourceEvents},
		{"Reopen", testReopen},
		{"Canceled", testCanceled},
		{"ConcurrentPuts", testConcurrentPuts},
		{"OrderIndependence", testOrderIndependence},
		{"SignaturesRoundTrip", testSignaturesRoundTrip},
		{"SignaturesVerdict", testSignaturesVerdict},
		{"SignaturesSharedDigest", testSignaturesSharedDigest},
		{"SignaturesFollowVersions", testSignaturesFollowVersions},
		{"SignaturesNoChanges", testSignaturesNoChanges},
		{"SignaturesInvalid", testSignaturesInvalid},
		{"SignaturesReopen", testSignaturesReopen},
		{"SignaturesConcurrent", testSignaturesConcurrent},
		{"ImageSearch", testImageSearch},
		{"ImageMirrors", testImageMirrors},
		{"ImageMirrorsConcurrent", testImageMirrorsConcurrent},
		{"Summaries", testSummaries},
		{"Reindex", testReindex},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newHarness(t, open))
		})
	}
}

// harness is one test's store, closed when the test ends.
type harness struct {
	t      *testing.T
	ctx    context.Context
	open   Opener
	store  catalog.Store
	reopen func(t *testing.T) catalog.Store
	closed bool
}

func newHarness(t *testing.T, open Opener) *harness {
	h := &harness{t: t, ctx: context.Background(), open: open}
	h.store, h.reopen = open(t)
	t.Cleanup(func() {
		if !h.closed {
			if err := h.store.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}
	})
	return h
}

// fresh returns another empty store, closed when the test ends.
func (h *harness) fresh() catalog.Store {
	h.t.Helper()
	s, _ := h.open(h.t)
	h.t.Cleanup(func() { s.Close() })
	return s
}

// restart closes the store and opens it again.
func (h *harness) restart() {
	h.t.Helper()
	if err := h.store.Close(); err != nil {
		h.t.Fatalf("Close: %v", err)
	}
	h.closed = true
	h.store = h.reopen(h.t)
	h.closed = false
}

func (h *harness) put(entries ...*catalog.Entry) {
	h.t.Helper()
	putAll(h.t, h.store, entries...)
}

func putAll(t *testing.T, s catalog.Store, entries ...*catalog.Entry) {
	t.Helper()
	for _, e := range entries {
		changed, err := s.Put(context.Background(), e)
		if err != nil {
			t.Fatalf("Put %s/%s:%s: %v", e.Namespace, e.Name, e.Tag, err)
		}
		if !changed {
			t.Fatalf("Put %s/%s:%s: changed = false for a new digest", e.Namespace, e.Name, e.Tag)
		}
	}
}

func (h *harness) del(namespace, name, tag string) bool {
	h.t.Helper()
	changed, err := h.store.Delete(h.ctx, namespace, name, tag)
	if err != nil {
		h.t.Fatalf("Delete %s/%s:%s: %v", namespace, name, tag, err)
	}
	return changed
}

func (h *harness) search(q catalog.Query) *catalog.SearchResult {
	h.t.Helper()
	return search(h.t, h.store, q)
}

func search(t *testing.T, s catalog.Store, q catalog.Query) *catalog.SearchResult {
	t.Helper()
	res, err := s.Search(context.Background(), q)
	if err != nil {
		t.Fatalf("Search %+v: %v", q, err)
	}
	if res.Facets.Format == nil || res.Facets.Namespace == nil {
		t.Fatalf("Search %+v: facets %+v: both maps must be set, empty rather than nil", q, res.Facets)
	}
	return res
}

func (h *harness) changes(since int64, limit int) []apiv1.Change {
	h.t.Helper()
	cs, err := h.store.Changes(h.ctx, since, limit)
	if err != nil {
		h.t.Fatalf("Changes(%d, %d): %v", since, limit, err)
	}
	return cs
}

func (h *harness) stats() apiv1.Status {
	h.t.Helper()
	st, err := h.store.Stats(h.ctx)
	if err != nil {
		h.t.Fatalf("Stats: %v", err)
	}
	return st
}

// all is the access of a caller who may pull everything.
var all = catalog.Access{All: true}

// baseTime is when fixtures are indexed, unless they say otherwise.
var baseTime = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)

// digestOf returns a well-formed digest unique to parts.
func digestOf(parts ...any) string {
	sum := sha256.Sum256(fmt.Append(nil, parts...))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// pkg returns an indexed entry of namespace/name:tag, helm, with a
// description, read by this berth's indexing, changed by each mod.
func pkg(namespace, name, tag string, mods ...func(*catalog.Entry)) *catalog.Entry {
	e := &catalog.Entry{
		Namespace: namespace, Name: name, Tag: tag,
		Digest:  digestOf(namespace, name, tag),
		Status:  apiv1.StatusIndexed,
		Indexed: baseTime, IndexVersion: catalog.IndexVersion,
		Metadata: &pkgformat.Metadata{
			SchemaVersion: pkgformat.MetadataSchemaVersion, Name: name, Version: tag, Format: pkgformat.Helm,
			Description: "A package.", Files: []pkgformat.FileInfo{{Path: "Chart.yaml", Size: 100}},
		},
		Content: apiv1.Content{Digest: digestOf("content", namespace, name, tag), Size: 1024, MediaType: pkgformat.ContentMediaType},
		Files:   []catalog.FileEntry{{Path: "Chart.yaml", Size: 100, Offset: 512}},
	}
	for _, mod := range mods {
		mod(e)
	}
	return e
}

// unindexed returns an entry of namespace/name:tag with status (invalid or
// ignored) and reason.
func unindexed(namespace, name, tag, status, reason string) *catalog.Entry {
	return &catalog.Entry{
		Namespace: namespace, Name: name, Tag: tag, Digest: digestOf(namespace, name, tag, status),
		Status: status, Reason: reason, Indexed: baseTime,
	}
}

func withFormat(f pkgformat.Format) func(*catalog.Entry) {
	return func(e *catalog.Entry) { e.Metadata.Format = f }
}

func withDescription(d string) func(*catalog.Entry) {
	return func(e *catalog.Entry) { e.Metadata.Description = d }
}

func withDigest(d string) func(*catalog.Entry) {
	return func(e *catalog.Entry) { e.Digest = d }
}

func withIndexed(t time.Time) func(*catalog.Entry) {
	return func(e *catalog.Entry) { e.Indexed = t }
}

func withVerified(v bool) func(*catalog.Entry) {
	return func(e *catalog.Entry) { e.Verified = v }
}

func withChannels(names ...string) func(*catalog.Entry) {
	return func(e *catalog.Entry) {
		for _, n := range names {
			e.Metadata.Channels = append(e.Metadata.Channels, pkgformat.Channel{Name: n})
		}
	}
}

func withAPI(group, kind string) func(*catalog.Entry) {
	return func(e *catalog.Entry) {
		e.Metadata.ProvidedAPIs = append(e.Metadata.ProvidedAPIs, pkgformat.API{Group: group, Version: "v1", Kind: kind})
	}
}

func withKube(minimum, maximum string) func(*catalog.Entry) {
	return func(e *catalog.Entry) { e.Metadata.MinKubeVersion, e.Metadata.MaxKubeVersion = minimum, maximum }
}

// names returns the "namespace/name" of each summary, in order.
func names(ps []apiv1.PackageSummary) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Namespace + "/" + p.Name
	}
	return out
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// jsonString encodes v, for comparing documents field by field.
func jsonString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// parallel runs fn(i) for i in [0, n) on n goroutines and waits for them.
func parallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { fn(i) })
	}
	wg.Wait()
}
