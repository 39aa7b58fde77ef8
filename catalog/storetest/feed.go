package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
)

func testChanges(t *testing.T, h *harness) {
	if cs := h.changes(0, 100); len(cs) != 0 {
		t.Fatalf("changes of an empty store: %+v", cs)
	}
	h.put(pkg("a", "p", "1.0.0"), pkg("a", "p", "2.0.0"))
	if _, err := h.store.Put(h.ctx, pkg("a", "p", "2.0.0")); err != nil { // no-op
		t.Fatal(err)
	}
	h.put(pkg("a", "p", "2.0.0", withDigest(digestOf("rebuilt"))), unindexed("b", "img", "latest", apiv1.StatusIgnored, "image"))
	h.del("a", "p", "1.0.0")
	h.del("a", "p", "1.0.0") // absent: no change
	want := []string{
		"put a/p:1.0.0 " + digestOf("a", "p", "1.0.0") + " indexed",
		"put a/p:2.0.0 " + digestOf("a", "p", "2.0.0") + " indexed",
		"put a/p:2.0.0 " + digestOf("rebuilt") + " indexed",
		"put b/img:latest " + digestOf("b", "img", "latest", apiv1.StatusIgnored) + " ignored",
		"delete a/p:1.0.0 " + digestOf("a", "p", "1.0.0") + " indexed",
	}
	cs := h.changes(0, 100)
	checkChanges(t, cs, want)
	// The numbers count every change from 1 without a gap: the feed of a
	// caller who may pull everything is numbered as the store numbers it
	// (catalog.Catalog.Changes).
	for i, c := range cs {
		if c.Seq != int64(i+1) {
			t.Errorf("change %d has seq %d, want %d", i, c.Seq, i+1)
		}
	}

	// Paging: since is exclusive, limit is honoured, and the pages join up.
	var paged []apiv1.Change
	for since := int64(0); ; {
		page := h.changes(since, 2)
		if len(page) > 2 {
			t.Fatalf("Changes(%d, 2) returned %d changes", since, len(page))
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		since = page[len(page)-1].Seq
	}
	if !slices.Equal(seqs(paged), seqs(cs)) {
		t.Errorf("paged seqs %v, want %v", seqs(paged), seqs(cs))
	}
	if rest := h.changes(cs[2].Seq, 100); !slices.Equal(seqs(rest), seqs(cs[3:])) {
		t.Errorf("Changes(since the 3rd) = %v, want %v", seqs(rest), seqs(cs[3:]))
	}
	if st := h.stats(); st.Seq != cs[len(cs)-1].Seq {
		t.Errorf("Stats.Seq = %d, want the last change's %d", st.Seq, cs[len(cs)-1].Seq)
	}

	// The feed survives a restart, and numbering goes on after it.
	h.restart()
	checkChanges(t, h.changes(0, 100), want)
	h.put(pkg("a", "q", "1.0.0"))
	after := h.changes(cs[len(cs)-1].Seq, 100)
	if len(after) != 1 || after[0].Seq != cs[len(cs)-1].Seq+1 || after[0].Name != "q" {
		t.Errorf("change after restart = %+v, want a/q with seq %d", after, cs[len(cs)-1].Seq+1)
	}
}

// testSourceEvents interleaves events of tracked sources with version
// changes: they are numbered in the one feed, keep their status and reason,
// change no version, and survive a restart.
func testSourceEvents(t *testing.T, h *harness) {
	h.put(pkg("a", "p", "1.0.0"))
	events := []apiv1.Change{
		{Namespace: "a", Name: "p", Version: "1.0.0", Digest: digestOf("a", "p", "1.0.0"), Status: apiv1.SourcePublished},
		{Namespace: "a", Name: "p", Status: apiv1.SourceFailed, Reason: apiv1.SourceReasonRefused},
	}
	for _, ev := range events {
		if err := h.store.AppendSourceEvent(h.ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	h.put(pkg("a", "p", "2.0.0"))
	want := []string{
		"put a/p:1.0.0 " + digestOf("a", "p", "1.0.0") + " indexed ",
		"source a/p:1.0.0 " + digestOf("a", "p", "1.0.0") + " published ",
		"source a/p: " + " failed refused",
		"put a/p:2.0.0 " + digestOf("a", "p", "2.0.0") + " indexed ",
	}
	check := func(when string) {
		t.Helper()
		cs := h.changes(0, 100)
		var got []string
		for i, c := range cs {
			got = append(got, fmt.Sprintf("%s %s/%s:%s %s %s %s", c.Action, c.Namespace, c.Name, c.Version, c.Digest, c.Status, c.Reason))
			if c.Seq != int64(i+1) || c.Time.IsZero() {
				t.Errorf("%s: change %d has seq %d and time %v, want seq %d and a time", when, i, c.Seq, c.Time, i+1)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: changes =\n%v\nwant\n%v", when, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if st := h.stats(); st.Seq != 4 || st.Versions != 2 {
			t.Errorf("%s: Stats = %+v, want seq 4 and 2 versions", when, st)
		}
	}
	check("after the events")
	h.restart()
	check("after a restart")
}

// CheckMigratedFeed checks a store whose schema was brought up to date from
// before source events, with one put change in its feed: that change reads
// back without a reason, and a source event appended is numbered after it.
func CheckMigratedFeed(t *testing.T, s catalog.Store) {
	t.Helper()
	ctx := context.Background()
	if err := s.AppendSourceEvent(ctx, apiv1.Change{Namespace: "a", Name: "p", Status: apiv1.SourceFailed, Reason: apiv1.SourceReasonFetch}); err != nil {
		t.Fatal(err)
	}
	cs, err := s.Changes(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].Action != apiv1.ActionPut || cs[0].Reason != "" ||
		cs[1].Seq != 2 || cs[1].Action != apiv1.ActionSource || cs[1].Reason != apiv1.SourceReasonFetch {
		t.Errorf("changes after the migration: %+v", cs)
	}
}

// checkChanges fails unless cs are the changes want describes, with strictly
// increasing seqs and times set.
func checkChanges(t *testing.T, cs []apiv1.Change, want []string) {
	t.Helper()
	var got []string
	for i, c := range cs {
		got = append(got, fmt.Sprintf("%s %s/%s:%s %s %s", c.Action, c.Namespace, c.Name, c.Version, c.Digest, c.Status))
		if i > 0 && c.Seq <= cs[i-1].Seq {
			t.Errorf("seq %d follows %d", c.Seq, cs[i-1].Seq)
		}
		if c.Time.IsZero() {
			t.Errorf("change %d has no time", c.Seq)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("changes =\n%v\nwant\n%v", got, want)
	}
}

func seqs(cs []apiv1.Change) []int64 {
	out := make([]int64, len(cs))
	for i, c := range cs {
		out[i] = c.Seq
	}
	return out
}

func testReopen(t *testing.T, h *harness) {
	full := fullEntry()
	h.put(full, unindexed("a", "img", "latest", apiv1.StatusIgnored, "image"))
	h.put(filterFixtures()...)
	queries := []catalog.Query{
		{Access: all},
		{Text: "kafka", Access: all},
		{Channel: "fast", Access: all},
	}
	var before []string
	for _, q := range queries {
		before = append(before, jsonString(t, h.search(q)))
	}
	stats := h.stats()
	h.restart()
	got, err := h.store.Entry(h.ctx, full.Namespace, full.Name, full.Tag)
	if err != nil {
		t.Fatal(err)
	}
	checkEntry(t, got, full, true)
	for i, q := range queries {
		if after := jsonString(t, h.search(q)); after != before[i] {
			t.Errorf("Search %+v after restart =\n%s\nbefore\n%s", q, after, before[i])
		}
	}
	if st := h.stats(); st != stats {
		t.Errorf("Stats after restart = %+v, before %+v", st, stats)
	}
}

func testCanceled(t *testing.T, h *harness) {
	ctx, cancel := context.WithCancel(h.ctx)
	cancel()
	if _, err := h.store.Put(ctx, pkg("a", "p", "1.0.0")); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with a canceled context: %v", err)
	}
	if _, err := h.store.Search(ctx, catalog.Query{Access: all}); !errors.Is(err, context.Canceled) {
		t.Errorf("Search with a canceled context: %v", err)
	}
	if err := h.store.Walk(ctx, all, "", func(*catalog.Entry) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Walk with a canceled context: %v", err)
	}
	if st := h.stats(); st.Versions != 0 || st.Seq != 0 {
		t.Errorf("a canceled Put was recorded: %+v", st)
	}
}
