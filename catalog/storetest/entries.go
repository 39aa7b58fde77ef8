package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/pkgformat"
)

// fullEntry sets every field an entry can carry.
func fullEntry() *catalog.Entry {
	created := time.Date(2024, 2, 29, 23, 59, 58, 123456789, time.UTC)
	return &catalog.Entry{
		Namespace: "kudo", Name: "kafka", Tag: "2.5.1_1.3.2",
		Digest: digestOf("kafka"), Status: apiv1.StatusIndexed, IndexVersion: catalog.IndexVersion,
		Indexed: time.Date(2025, 1, 2, 3, 4, 5, 987654321, time.FixedZone("CET", 3600)),
		Metadata: &pkgformat.Metadata{
			SchemaVersion: pkgformat.MetadataSchemaVersion, Name: "kafka", Version: "2.5.1_1.3.2",
			Format: pkgformat.KUDO, AppVersion: "2.5.1", OperatorVersion: "1.3.2", CSVName: "kafka.v1.3.2",
			DisplayName: "Apache Kafka", Description: "Distributed streaming.", Keywords: []string{"kafka", "streaming"},
			Maintainers: []pkgformat.Maintainer{{Name: "Ada Lovelace", Email: "ada@example.com", URL: "https://example.com/ada"}},
			Links:       []pkgformat.Link{{Name: "home", URL: "https://kafka.apache.org"}},
			License:     "Apache-2.0", Vendor: "ACME",
			Icon:             &pkgformat.Icon{MediaType: "image/png", Digest: digestOf("icon"), Size: 42, Path: "icon.png"},
			Channels:         []pkgformat.Channel{{Name: "stable", Replaces: "kafka.v1.3.1", Skips: []string{"kafka.v1.3.0"}, SkipRange: ">=1.0.0 <1.3.0"}},
			DefaultChannel:   "stable",
			ProvidedAPIs:     []pkgformat.API{{Group: "kafka.example.io", Version: "v1", Kind: "KafkaCluster", Plural: "kafkaclusters"}},
			RequiredAPIs:     []pkgformat.API{{Group: "zookeeper.example.io", Version: "v1", Kind: "Zookeeper"}},
			RequiredPackages: []pkgformat.PackageRequirement{{Name: "zookeeper", VersionRange: ">=3.4"}},
			MinKubeVersion:   "1.20", MaxKubeVersion: "1.30.2",
			Permissions: &pkgformat.Permissions{
				Cluster:    []pkgformat.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list"}}},
				Namespaced: []pkgformat.PolicyRule{{Resources: []string{"pods"}, Verbs: []string{"*"}}},
			},
			RelatedImages: []string{"docker.io/bitnami/kafka:2.5.1"},
			Created:       &created, Source: "https://github.com/example/kafka", Readme: "# Kafka\n\nStreams.",
			Files: []pkgformat.FileInfo{{Path: "operator.yaml", Size: 300}, {Path: "templates/deploy.yaml", Size: 5000}},
		},
		Content:  apiv1.Content{Digest: digestOf("content"), Size: 6000, MediaType: pkgformat.ContentMediaType},
		Files:    []catalog.FileEntry{{Path: "operator.yaml", Size: 300, Offset: 512}, {Path: "templates/deploy.yaml", Size: 5000, Offset: 1536}},
		Verified: true,
	}
}

// checkEntry fails unless got records everything want holds; withFiles says
// whether Files were to be loaded.
func checkEntry(t *testing.T, got, want *catalog.Entry, withFiles bool) {
	t.Helper()
	if got.Namespace != want.Namespace || got.Name != want.Name || got.Tag != want.Tag || got.Digest != want.Digest ||
		got.Status != want.Status || got.Reason != want.Reason || got.Verified != want.Verified {
		t.Errorf("entry = %s/%s:%s %s %s %q verified=%v, want %s/%s:%s %s %s %q verified=%v",
			got.Namespace, got.Name, got.Tag, got.Digest, got.Status, got.Reason, got.Verified,
			want.Namespace, want.Name, want.Tag, want.Digest, want.Status, want.Reason, want.Verified)
	}
	if !got.Indexed.Equal(want.Indexed) {
		t.Errorf("%s: Indexed = %v, want %v", want.Tag, got.Indexed, want.Indexed)
	}
	if got.Content != want.Content {
		t.Errorf("%s: Content = %+v, want %+v", want.Tag, got.Content, want.Content)
	}
	if g, w := jsonString(t, got.Metadata), jsonString(t, want.Metadata); g != w {
		t.Errorf("%s: Metadata =\n%s\nwant\n%s", want.Tag, g, w)
	}
	switch {
	case withFiles && !reflect.DeepEqual(got.Files, want.Files):
		t.Errorf("%s: Files = %+v, want %+v", want.Tag, got.Files, want.Files)
	case !withFiles && got.Files != nil:
		t.Errorf("%s: Files = %+v, want them not loaded", want.Tag, got.Files)
	}
}

func testRoundTrip(t *testing.T, h *harness) {
	full := fullEntry()
	invalid := unindexed("kudo", "kafka", "broken", apiv1.StatusInvalid, "operator.yaml: missing name")
	invalid.Indexed = baseTime.Add(time.Hour)
	ignored := unindexed("kudo", "kafka", "sha256-abc.sig", apiv1.StatusIgnored, "a cosign signature")
	h.put(full, invalid, ignored)
	for _, want := range []*catalog.Entry{full, invalid, ignored} {
		got, err := h.store.Entry(h.ctx, want.Namespace, want.Name, want.Tag)
		if err != nil {
			t.Fatalf("Entry %s: %v", want.Tag, err)
		}
		checkEntry(t, got, want, true)
	}
	got, err := h.store.Entries(h.ctx, "kudo", "kafka")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("Entries = %d entries, want 3", len(got))
	}
	for _, want := range []*catalog.Entry{full, invalid, ignored} {
		i := slices.IndexFunc(got, func(e *catalog.Entry) bool { return e.Tag == want.Tag })
		if i < 0 {
			t.Fatalf("Entries lacks %s", want.Tag)
		}
		checkEntry(t, got[i], want, true)
	}
	// The summary of the package is its one indexed version.
	res := h.search(catalog.Query{Access: all})
	want := apiv1.PackageSummary{
		Namespace: "kudo", Name: "kafka", Version: full.Tag, Format: pkgformat.KUDO,
		DisplayName: "Apache Kafka", Description: "Distributed streaming.", AppVersion: "2.5.1",
		Keywords: []string{"kafka", "streaming"}, Channels: []string{"stable"}, Digest: full.Digest,
		Created: full.Metadata.Created, Updated: full.Indexed, Verified: true,
	}
	if len(res.Packages) != 1 {
		t.Fatalf("Search = %v, want kudo/kafka", names(res.Packages))
	}
	if g, w := jsonString(t, inUTC(res.Packages[0])), jsonString(t, inUTC(want)); g != w {
		t.Errorf("summary =\n%s\nwant\n%s", g, w)
	}
}

func testInvalidPut(t *testing.T, h *harness) {
	noMetadata := pkg("a", "p", "1.0.0")
	noMetadata.Metadata = nil
	for _, tc := range []struct {
		name string
		e    *catalog.Entry
	}{
		{"no namespace", pkg("", "p", "1.0.0")},
		{"no name", pkg("a", "", "1.0.0")},
		{"no tag", pkg("a", "p", "")},
		{"unknown status", unindexed("a", "p", "1.0.0", "weird", "")},
		{"indexed without metadata", noMetadata},
	} {
		changed, err := h.store.Put(h.ctx, tc.e)
		if !errors.Is(err, catalog.ErrInvalid) || changed {
			t.Errorf("%s: Put = %v, %v; want ErrInvalid", tc.name, changed, err)
		}
	}
	if st := h.stats(); st.Versions+st.Unindexed != 0 || st.Seq != 0 {
		t.Errorf("after refused Puts, Stats = %+v, want nothing recorded", st)
	}
}

func testNoopPut(t *testing.T, h *harness) {
	e := pkg("a", "p", "1.0.0")
	h.put(e)
	before := h.stats().Seq
	// Same digest and status: nothing changes, whatever else differs.
	again := pkg("a", "p", "1.0.0", withDescription("other words"))
	changed, err := h.store.Put(h.ctx, again)
	if err != nil || changed {
		t.Fatalf("Put of the same digest and status = %v, %v; want false, nil", changed, err)
	}
	if cs := h.changes(before, 100); len(cs) != 0 {
		t.Errorf("a no-op Put recorded changes %+v", cs)
	}
	if res := h.search(catalog.Query{Access: all}); res.Packages[0].Description != "A package." {
		t.Errorf("a no-op Put changed the description to %q", res.Packages[0].Description)
	}
	// Same digest, another status: a change.
	inv := unindexed("a", "p", "1.0.0", apiv1.StatusInvalid, "unreadable")
	inv.Digest = e.Digest
	changed, err = h.store.Put(h.ctx, inv)
	if err != nil || !changed {
		t.Fatalf("Put of another status = %v, %v; want true, nil", changed, err)
	}
	cs := h.changes(before, 100)
	if len(cs) != 1 || cs[0].Action != apiv1.ActionPut || cs[0].Status != apiv1.StatusInvalid {
		t.Errorf("changes = %+v, want one put of status invalid", cs)
	}
	if res := h.search(catalog.Query{Access: all}); res.Total != 0 {
		t.Errorf("a package whose only tag became invalid is still found: %v", names(res.Packages))
	}
}

func testRepoint(t *testing.T, h *harness) {
	h.put(pkg("a", "p", "1.0.0"), pkg("a", "p", "2.0.0", withDescription("first build")))
	before := h.stats().Seq
	newDigest := digestOf("rebuilt")
	h.put(pkg("a", "p", "2.0.0", withDigest(newDigest), withDescription("second build"), withFormat(pkgformat.OLM)))
	e, err := h.store.Entry(h.ctx, "a", "p", "2.0.0")
	if err != nil || e.Digest != newDigest || e.Metadata.Description != "second build" {
		t.Fatalf("Entry after re-point = %+v, %v; want digest %s", e, err, newDigest)
	}
	res := h.search(catalog.Query{Text: "second", Access: all})
	if len(res.Packages) != 1 || res.Packages[0].Digest != newDigest || res.Packages[0].Format != pkgformat.OLM {
		t.Errorf("Search after re-point = %+v, want the new digest, olm", res.Packages)
	}
	if res := h.search(catalog.Query{Text: "first", Access: all}); res.Total != 0 {
		t.Errorf("the old build's text still matches: %v", names(res.Packages))
	}
	cs := h.changes(before, 100)
	if len(cs) != 1 || cs[0].Action != apiv1.ActionPut || cs[0].Digest != newDigest || cs[0].Version != "2.0.0" {
		t.Errorf("changes = %+v, want one put of 2.0.0 at %s", cs, newDigest)
	}
}

func testDelete(t *testing.T, h *harness) {
	h.put(pkg("a", "p", "1.0.0", withDescription("older")), pkg("a", "p", "2.0.0", withDescription("newer")))
	before := h.stats().Seq
	if !h.del("a", "p", "2.0.0") {
		t.Fatal("Delete of a present tag = false")
	}
	if _, err := h.store.Entry(h.ctx, "a", "p", "2.0.0"); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("Entry of a deleted tag: %v, want ErrNotFound", err)
	}
	res := h.search(catalog.Query{Access: all})
	if len(res.Packages) != 1 || res.Packages[0].Version != "1.0.0" || res.Packages[0].Description != "older" {
		t.Errorf("after deleting the latest version, summary = %+v, want 1.0.0", res.Packages)
	}
	if h.del("a", "p", "2.0.0") || h.del("a", "nothing", "1.0.0") {
		t.Error("Delete of an absent tag = true")
	}
	cs := h.changes(before, 100)
	if len(cs) != 1 || cs[0].Action != apiv1.ActionDelete || cs[0].Version != "2.0.0" ||
		cs[0].Digest != digestOf("a", "p", "2.0.0") || cs[0].Status != apiv1.StatusIndexed {
		t.Errorf("changes = %+v, want one delete of 2.0.0 with its digest and status", cs)
	}
	h.del("a", "p", "1.0.0")
	if res := h.search(catalog.Query{Text: "p", Access: all}); res.Total != 0 || len(res.Packages) != 0 {
		t.Errorf("a package without versions is still found: %v", names(res.Packages))
	}
	if _, err := h.store.Entries(h.ctx, "a", "p"); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("Entries of a package without tags: %v, want ErrNotFound", err)
	}
}

func testUnindexed(t *testing.T, h *harness) {
	h.put(
		pkg("a", "mixed", "1.0.0"),
		unindexed("a", "mixed", "9.9.9", apiv1.StatusInvalid, "bad yaml"),
		unindexed("a", "image", "latest", apiv1.StatusIgnored, "a container image"),
		unindexed("b", "broken", "1.0.0", apiv1.StatusInvalid, "no operator.yaml"),
		unindexed("a", "image", "edge", apiv1.StatusIgnored, "a container image"),
	)
	// Tags holds every tag, of every status.
	tags, err := h.store.Tags(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, td := range tags {
		got = append(got, fmt.Sprintf("%s/%s:%s@%s", td.Namespace, td.Name, td.Tag, td.Digest))
	}
	want := []string{
		"a/mixed:1.0.0@" + digestOf("a", "mixed", "1.0.0"),
		"a/mixed:9.9.9@" + digestOf("a", "mixed", "9.9.9", apiv1.StatusInvalid),
		"a/image:latest@" + digestOf("a", "image", "latest", apiv1.StatusIgnored),
		"a/image:edge@" + digestOf("a", "image", "edge", apiv1.StatusIgnored),
		"b/broken:1.0.0@" + digestOf("b", "broken", "1.0.0", apiv1.StatusInvalid),
	}
	if !sameSet(got, want) {
		t.Errorf("Tags = %v, want %v", got, want)
	}
	// Unindexed lists the others in order, with their reason, page by page.
	un, err := h.store.Unindexed(h.ctx, all, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, a := range un {
		listed = append(listed, fmt.Sprintf("%s/%s:%s %s %s", a.Namespace, a.Name, a.Tag, a.Status, a.Reason))
		if a.Digest == "" || !a.Indexed.Equal(baseTime) {
			t.Errorf("artifact %+v lacks its digest or indexed time", a)
		}
	}
	wantListed := []string{
		"a/image:edge ignored a container image",
		"a/image:latest ignored a container image",
		"a/mixed:9.9.9 invalid bad yaml",
		"b/broken:1.0.0 invalid no operator.yaml",
	}
	if !slices.Equal(listed, wantListed) {
		t.Errorf("Unindexed =\n%s\nwant\n%s", strings.Join(listed, "\n"), strings.Join(wantListed, "\n"))
	}
	page, err := h.store.Unindexed(h.ctx, all, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 2 || page[0].Tag != "latest" || page[1].Tag != "9.9.9" {
		t.Errorf("Unindexed(limit 2, offset 1) = %+v, want a/image:latest, a/mixed:9.9.9", page)
	}
	// Only indexed versions make a package and its summary.
	res := h.search(catalog.Query{Access: all})
	if !slices.Equal(names(res.Packages), []string{"a/mixed"}) || res.Total != 1 {
		t.Errorf("Search = %v (total %d), want only a/mixed", names(res.Packages), res.Total)
	}
	if res.Packages[0].Version != "1.0.0" {
		t.Errorf("a/mixed summarised by %s, want its indexed 1.0.0 (9.9.9 is invalid)", res.Packages[0].Version)
	}
	for _, text := range []string{"image", "broken", "container"} {
		if res := h.search(catalog.Query{Text: text, Access: all}); res.Total != 0 {
			t.Errorf("Search %q found unindexed entries: %v", text, names(res.Packages))
		}
	}
	var walked []string
	if err := h.store.Walk(h.ctx, all, "", func(e *catalog.Entry) error {
		walked = append(walked, e.Namespace+"/"+e.Name+":"+e.Tag)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(walked, []string{"a/mixed:1.0.0"}) {
		t.Errorf("Walk = %v, want only the indexed a/mixed:1.0.0", walked)
	}
}

func testNotFound(t *testing.T, h *harness) {
	h.put(pkg("a", "p", "1.0.0"))
	_, err := h.store.Entry(h.ctx, "a", "p", "2.0.0")
	if !errors.Is(err, catalog.ErrNotFound) || !strings.Contains(err.Error(), "a/p") || !strings.Contains(err.Error(), "2.0.0") {
		t.Errorf("Entry of an unknown tag: %v, want ErrNotFound naming a/p and 2.0.0", err)
	}
	_, err = h.store.Entries(h.ctx, "a", "q")
	if !errors.Is(err, catalog.ErrNotFound) || !strings.Contains(err.Error(), "a/q") {
		t.Errorf("Entries of an unknown package: %v, want ErrNotFound naming a/q", err)
	}
	if _, err := h.store.Entry(h.ctx, "b", "p", "1.0.0"); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("Entry in another namespace: %v, want ErrNotFound", err)
	}
}

func testWalk(t *testing.T, h *harness) {
	// More than a few hundred entries, so that a store reading in batches
	// crosses batch boundaries.
	var want []string
	for i := range 30 {
		for _, ns := range []string{"b", "a"} {
			name := fmt.Sprintf("p%02d", i)
			for v := range 10 {
				e := pkg(ns, name, fmt.Sprintf("1.%d.0", v))
				h.put(e)
				want = append(want, ns+"/"+name+":"+e.Tag)
			}
		}
	}
	h.put(unindexed("a", "p00", "bad", apiv1.StatusInvalid, "x"))
	var got []string
	var prev string
	err := h.store.Walk(h.ctx, all, "", func(e *catalog.Entry) error {
		key := e.Namespace + "/" + e.Name
		if key < prev {
			t.Fatalf("Walk visited %s after %s: not ordered by namespace, name", key, prev)
		}
		prev = key
		if e.Files != nil {
			t.Fatalf("Walk loaded the Files of %s", key)
		}
		if e.Metadata == nil || e.Metadata.Name != e.Name || e.Digest == "" {
			t.Fatalf("Walk gave %s without its metadata or digest", key)
		}
		got = append(got, key+":"+e.Tag)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || !sameSet(got, want) {
		t.Errorf("Walk visited %d entries, want each of the %d indexed ones once", len(got), len(want))
	}
	var inB int
	if err := h.store.Walk(h.ctx, all, "b", func(e *catalog.Entry) error {
		if e.Namespace != "b" {
			t.Fatalf("Walk of namespace b visited %s", e.Namespace)
		}
		inB++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if inB != 300 {
		t.Errorf("Walk of namespace b visited %d entries, want 300", inB)
	}
	stop := errors.New("stop")
	n := 0
	err = h.store.Walk(h.ctx, all, "", func(*catalog.Entry) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	})
	if err != stop || n != 3 {
		t.Errorf("Walk whose fn fails at the 3rd entry = %v after %d calls, want that error after 3", err, n)
	}
}

func testStats(t *testing.T, h *harness) {
	if st := h.stats(); st != (apiv1.Status{}) {
		t.Errorf("Stats of an empty store = %+v, want zero", st)
	}
	h.put(pkg("a", "p", "1.0.0"), pkg("a", "p", "2.0.0"), pkg("b", "p", "1.0.0"),
		unindexed("a", "p", "bad", apiv1.StatusInvalid, "x"), unindexed("c", "img", "latest", apiv1.StatusIgnored, "y"))
	h.del("b", "p", "1.0.0")
	cs := h.changes(0, 100)
	want := apiv1.Status{Packages: 1, Versions: 2, Unindexed: 2, Seq: cs[len(cs)-1].Seq}
	if st := h.stats(); st != want {
		t.Errorf("Stats = %+v, want %+v", st, want)
	}
}

// inUTC returns p with its times in UTC, so that summaries compare by instant.
func inUTC(p apiv1.PackageSummary) apiv1.PackageSummary {
	p.Updated = p.Updated.UTC()
	if p.Created != nil {
		c := p.Created.UTC()
		p.Created = &c
	}
	return p
}
