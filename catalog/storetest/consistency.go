package storetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/pkgformat"
)

func testConcurrentPuts(t *testing.T, h *harness) {
	const writers, each = 6, 20
	done := make(chan struct{})
	searchErr := make(chan error, 1)
	// Searches run alongside the writes; they must never fail.
	go func() {
		defer close(searchErr)
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := h.store.Search(h.ctx, catalog.Query{Text: "p", Access: all}); err != nil {
				searchErr <- err
				return
			}
		}
	}()
	parallel(writers, func(w int) {
		for i := range each {
			e := pkg(fmt.Sprintf("ns%d", w), fmt.Sprintf("p%d", i%5), fmt.Sprintf("1.%d.0", i))
			if changed, err := h.store.Put(h.ctx, e); err != nil || !changed {
				t.Errorf("Put %s/%s:%s = %v, %v", e.Namespace, e.Name, e.Tag, changed, err)
			}
		}
	})
	close(done)
	if err := <-searchErr; err != nil {
		t.Errorf("Search during writes: %v", err)
	}
	st := h.stats()
	if st.Versions != writers*each || st.Packages != writers*5 {
		t.Errorf("Stats = %+v, want %d versions of %d packages", st, writers*each, writers*5)
	}
	cs := h.changes(0, catalog.MaxLimit)
	if len(cs) != writers*each || st.Seq != cs[len(cs)-1].Seq {
		t.Errorf("%d changes (last seq %d, Stats.Seq %d), want %d", len(cs), cs[len(cs)-1].Seq, st.Seq, writers*each)
	}
	for i := 1; i < len(cs); i++ {
		if cs[i].Seq <= cs[i-1].Seq {
			t.Fatalf("seq %d follows %d", cs[i].Seq, cs[i-1].Seq)
		}
	}
}

// testOrderIndependence applies the same writes in several orders to fresh
// stores: whatever the order, searches and counts agree.
func testOrderIndependence(t *testing.T, h *harness) {
	var keep, drop []*catalog.Entry
	for i := range 12 {
		ns := []string{"a", "b"}[i%2]
		name := fmt.Sprintf("pkg%d", i)
		f := []pkgformat.Format{pkgformat.Helm, pkgformat.OLM, pkgformat.KUDO}[i%3]
		for j, tag := range []string{"1.0.0", "1.2.0", "2.0.0-rc.1", "0.9.0"} {
			e := pkg(ns, name, tag, withFormat(f), withChannels([]string{"stable", "fast"}[j%2]),
				withDescription(fmt.Sprintf("%s %s release of a thing for word%d", name, tag, i%4)),
				withAPI(name+".example.io", "Kind"+tag[:1]), withVerified(tag == "1.2.0"))
			if (i+j)%3 == 0 {
				drop = append(drop, e)
			} else {
				keep = append(keep, e)
			}
		}
		keep = append(keep, unindexed(ns, name, "broken", apiv1.StatusInvalid, "bad"))
	}
	yes := true
	queries := []catalog.Query{
		{Limit: catalog.MaxLimit},
		{Text: "pkg", Limit: catalog.MaxLimit},
		{Text: "release word1", Limit: catalog.MaxLimit},
		{Sort: catalog.SortUpdated, Limit: catalog.MaxLimit},
		{Format: pkgformat.OLM, Channel: "fast", Limit: catalog.MaxLimit},
		{Provides: catalog.APIFilter{Kind: "kind1"}, Verified: &yes, Limit: catalog.MaxLimit},
	}
	var want []string
	var wantStats apiv1.Status
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 4 {
		s := h.fresh()
		puts := slices.Concat(keep, drop)
		r.Shuffle(len(puts), func(i, j int) { puts[i], puts[j] = puts[j], puts[i] })
		// Each delete happens at a random point after its put.
		dels := map[int][]*catalog.Entry{}
		for _, d := range drop {
			at := slices.Index(puts, d)
			at += r.IntN(len(puts) - at)
			dels[at] = append(dels[at], d)
		}
		for i, e := range puts {
			putAll(t, s, e)
			for _, d := range dels[i] {
				if changed, err := s.Delete(h.ctx, d.Namespace, d.Name, d.Tag); err != nil || !changed {
					t.Fatalf("Delete %s/%s:%s = %v, %v", d.Namespace, d.Name, d.Tag, changed, err)
				}
			}
		}
		var got []string
		for _, q := range queries {
			q.Access = all
			res := search(t, s, q)
			if res.Total == 0 {
				t.Fatalf("%+v matches nothing: the check would prove nothing", q)
			}
			got = append(got, jsonString(t, res))
		}
		st, err := s.Stats(h.ctx)
		if err != nil {
			t.Fatal(err)
		}
		st.Seq = 0
		if round == 0 {
			want, wantStats = got, st
			if st.Versions != len(keep)-12 || st.Unindexed != 12 {
				t.Fatalf("Stats = %+v, want %d versions, 12 unindexed", st, len(keep)-12)
			}
			continue
		}
		for i := range queries {
			if got[i] != want[i] {
				t.Errorf("round %d, %+v:\n%s\nfirst round:\n%s", round, queries[i], got[i], want[i])
			}
		}
		if st != wantStats {
			t.Errorf("round %d: Stats = %+v, first round %+v", round, st, wantStats)
		}
	}
}
