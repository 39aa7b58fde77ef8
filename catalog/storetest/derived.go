package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/pkgformat"
)

// testSummaries: Summaries returns every entry of a repository, ordered by
// tag, without files, an indexed one with its metadata's catalog.Summary;
// Examples returns what Put recorded, with the index version.
func testSummaries(t *testing.T, h *harness) {
	full := fullEntry()
	full.Examples = map[string][]string{"kafka.example.io/KafkaCluster": {"{\n  \"kind\": \"KafkaCluster\"\n}"}}
	bad := unindexed("kudo", "kafka", "bad", apiv1.StatusInvalid, "no operator.yaml")
	h.put(full, bad)
	got, err := h.store.Summaries(h.ctx, "kudo", "kafka")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Tag != full.Tag || got[1].Tag != "bad" {
		t.Fatalf("Summaries = %d entries, want %s and bad", len(got), full.Tag)
	}
	want := *full
	want.Metadata = catalog.Summary(full.Metadata)
	checkEntry(t, got[0], &want, false)
	if got[0].Files != nil || got[1].Metadata != nil || got[1].Status != apiv1.StatusInvalid {
		t.Errorf("Summaries gave files %v, and the invalid tag metadata %v and status %s", got[0].Files, got[1].Metadata, got[1].Status)
	}
	if _, err := h.store.Summaries(h.ctx, "kudo", "nothing"); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("Summaries of an unknown package: %v, want ErrNotFound", err)
	}

	ex, v, err := h.store.Examples(h.ctx, "kudo", "kafka", full.Tag)
	if err != nil || v != catalog.IndexVersion || !reflect.DeepEqual(ex, full.Examples) {
		t.Errorf("Examples = %v, index version %d, %v; want %v, %d", ex, v, err, full.Examples, catalog.IndexVersion)
	}
	if ex, _, err := h.store.Examples(h.ctx, "kudo", "kafka", "bad"); err != nil || ex != nil {
		t.Errorf("Examples of the invalid tag = %v, %v; want none", ex, err)
	}
	if _, _, err := h.store.Examples(h.ctx, "kudo", "kafka", "9.9.9"); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("Examples of an unknown tag: %v, want ErrNotFound", err)
	}
}

// testReindex: the versions recorded with an older index version are
// listed a page at a time, counted by Stats, and replaced by Reindex only
// while their tag still records the digest read; they stay listed across a
// restart until then.
func testReindex(t *testing.T, h *harness) {
	old := func(e *catalog.Entry) { e.IndexVersion = 1 }
	h.put(pkg("a", "p", "1.0.0", old, withDescription("Old.")), pkg("a", "p", "2.0.0", old), pkg("b", "q", "1.0.0", old),
		pkg("b", "q", "2.0.0"), unindexed("c", "r", "bad", apiv1.StatusInvalid, "x"))
	stale := func(after catalog.TagDigest, limit int) []string {
		t.Helper()
		page, err := h.store.Stale(h.ctx, catalog.IndexVersion, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, td := range page {
			out = append(out, td.Namespace+"/"+td.Name+":"+td.Tag+"@"+td.Digest)
		}
		return out
	}
	at := func(ns, name, tag string) string { return ns + "/" + name + ":" + tag + "@" + digestOf(ns, name, tag) }
	if got, want := stale(catalog.TagDigest{}, 10), []string{at("a", "p", "1.0.0"), at("a", "p", "2.0.0"), at("b", "q", "1.0.0")}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Stale = %v, want %v", got, want)
	}
	if got, want := stale(catalog.TagDigest{Namespace: "a", Name: "p", Tag: "1.0.0"}, 1), []string{at("a", "p", "2.0.0")}; !reflect.DeepEqual(got, want) {
		t.Errorf("Stale after a/p:1.0.0, 1 = %v, want %v", got, want)
	}
	if st := h.stats(); st.Reindex.Pending != 3 {
		t.Errorf("Stats: %d pending, want 3", st.Reindex.Pending)
	}

	seq := h.stats().Seq
	again := pkg("a", "p", "1.0.0", withDescription("Read again."))
	again.Examples = map[string][]string{"g/K": {"{}"}}
	if changed, err := h.store.Reindex(h.ctx, again); err != nil || !changed {
		t.Fatalf("Reindex = %v, %v; want a change", changed, err)
	}
	e, err := h.store.Entry(h.ctx, "a", "p", "1.0.0")
	if err != nil || e.Metadata.Description != "Read again." {
		t.Fatalf("after Reindex: %+v, %v", e, err)
	}
	if ex, v, err := h.store.Examples(h.ctx, "a", "p", "1.0.0"); err != nil || v != catalog.IndexVersion || len(ex["g/K"]) != 1 {
		t.Errorf("Examples after Reindex = %v, %d, %v", ex, v, err)
	}
	if cs := h.changes(seq, 10); len(cs) != 1 || cs[0].Action != apiv1.ActionPut || cs[0].Version != "1.0.0" {
		t.Errorf("changes after Reindex = %+v, want one put of 1.0.0", cs)
	}

	// A tag re-pointed since it was listed, or gone, is left alone.
	for _, e := range []*catalog.Entry{pkg("a", "p", "2.0.0", withDigest(digestOf("other"))), pkg("a", "p", "3.0.0")} {
		if changed, err := h.store.Reindex(h.ctx, e); err != nil || changed {
			t.Errorf("Reindex of %s@%s = %v, %v; want no change", e.Tag, e.Digest, changed, err)
		}
	}
	// A version the current indexing finds invalid is recorded so.
	invalid := unindexed("b", "q", "1.0.0", apiv1.StatusInvalid, "no longer valid")
	invalid.Digest = digestOf("b", "q", "1.0.0")
	if changed, err := h.store.Reindex(h.ctx, invalid); err != nil || !changed {
		t.Errorf("Reindex of an invalid read = %v, %v; want a change", changed, err)
	}
	if e, err := h.store.Entry(h.ctx, "b", "q", "1.0.0"); err != nil || e.Status != apiv1.StatusInvalid {
		t.Errorf("b/q:1.0.0 after an invalid read: %+v, %v", e, err)
	}
	if _, err := h.store.Reindex(h.ctx, &catalog.Entry{Namespace: "a", Name: "p", Tag: "2.0.0", Status: "bogus"}); !errors.Is(err, catalog.ErrInvalid) {
		t.Errorf("Reindex of a bogus entry: %v, want ErrInvalid", err)
	}

	h.restart()
	if got, want := stale(catalog.TagDigest{}, 10), []string{at("a", "p", "2.0.0")}; !reflect.DeepEqual(got, want) {
		t.Errorf("Stale after a restart = %v, want %v", got, want)
	}
	if st := h.stats(); st.Reindex.Pending != 1 {
		t.Errorf("Stats after a restart: %d pending, want 1", st.Reindex.Pending)
	}
}

// MigratedMetadata is the metadata of the version CheckMigratedSummaries
// expects a store to hold, stored before version summaries: every field
// of catalog.Summary set, and some it leaves out. It holds no quote, so
// that tests may write it into SQL as it is.
func MigratedMetadata() pkgformat.Metadata {
	created := time.Date(2024, 2, 29, 23, 59, 58, 0, time.UTC)
	return pkgformat.Metadata{
		SchemaVersion: pkgformat.MetadataSchemaVersion, Name: "etcd", Version: "1.0.0", Format: pkgformat.OLM,
		AppVersion: "3.5", CSVName: "etcd.v1.0.0", DisplayName: "etcd", Description: "A key-value store.",
		Keywords: []string{"kv"}, Maintainers: []pkgformat.Maintainer{{Name: "Ada", Email: "ada@example.com"}},
		Channels:       []pkgformat.Channel{{Name: "stable", Replaces: "etcd.v0.9.0", Skips: []string{"etcd.v0.8.0"}, SkipRange: ">=0.1.0 <0.8.0"}},
		DefaultChannel: "stable",
		Permissions:    &pkgformat.Permissions{Cluster: []pkgformat.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}}}},
		Images:         []pkgformat.Image{{Reference: "quay.io/org/etcd:3.5", Found: []string{"csv"}}},
		Created:        &created, Readme: "# etcd", Files: []pkgformat.FileInfo{{Path: "manifests/etcd.clusterserviceversion.yaml", Size: 100}},
	}
}

// CheckMigratedSummaries checks a store whose schema was brought up to
// date from before version summaries, holding namespace/name:tag indexed
// with MigratedMetadata: its summary reads back as that metadata's
// catalog.Summary, and it was read with index version 1, so that the
// re-index lists it, Stats counts it, and it has no examples recorded.
func CheckMigratedSummaries(t *testing.T, s catalog.Store, namespace, name, tag string) {
	t.Helper()
	ctx := context.Background()
	md := MigratedMetadata()
	got, err := s.Summaries(ctx, namespace, name)
	if err != nil || len(got) != 1 {
		t.Fatalf("Summaries after the migration = %d entries, %v", len(got), err)
	}
	if want := catalog.Summary(&md); !reflect.DeepEqual(got[0].Metadata, want) {
		t.Errorf("summary after the migration = %+v, want %+v", got[0].Metadata, want)
	}
	ex, v, err := s.Examples(ctx, namespace, name, tag)
	if err != nil || v != 1 || ex != nil {
		t.Errorf("Examples after the migration = %v, index version %d, %v; want none, 1", ex, v, err)
	}
	stale, err := s.Stale(ctx, catalog.IndexVersion, catalog.TagDigest{}, 10)
	if err != nil || len(stale) != 1 || stale[0].Tag != tag {
		t.Errorf("Stale after the migration = %v, %v; want %s", stale, err, tag)
	}
	if st, err := s.Stats(ctx); err != nil || st.Reindex.Pending != 1 {
		t.Errorf("Stats after the migration: %+v, %v; want 1 pending", st.Reindex, err)
	}
}
