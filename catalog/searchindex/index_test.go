package searchindex

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/pkgformat"
)

// randomDoc returns a document of one of few namespaces and names, with words
// from a vocabulary of a few thousand, so that documents are replaced and
// terms come and go.
func randomDoc(r *rand.Rand) *Doc {
	word := func() string { return fmt.Sprintf("w%d", r.IntN(3000)) }
	var desc []string
	for range 1 + r.IntN(12) {
		desc = append(desc, word())
	}
	return testDoc(fmt.Sprintf("ns%d", r.IntN(3)), fmt.Sprintf("p%d", r.IntN(60)), described(strings.Join(desc, " ")),
		func(d *Doc) {
			d.Summary.Format = []pkgformat.Format{pkgformat.Helm, pkgformat.OLM, pkgformat.KUDO}[r.IntN(3)]
			d.Summary.Keywords = []string{word()}
			d.Summary.Updated = baseTime.Add(time.Duration(r.IntN(5)) * time.Hour)
			d.Summary.Verified = r.IntN(2) == 0
			d.Channels = []string{[]string{"stable", "fast"}[r.IntN(2)]}
			d.Provides = []catalog.APIFilter{{Group: "g" + word(), Kind: "K" + word()}}
			d.Kube = []KubeRange{{Min: fmt.Sprint(r.IntN(3))}}
			for range r.IntN(3) {
				d.Images = append(d.Images, catalog.ImageRef{Repository: fmt.Sprintf("quay.io/org/i%d", r.IntN(20)), Tag: fmt.Sprint(r.IntN(3))})
			}
		})
}

// randomQueries are queries over randomDoc documents.
func randomQueries(r *rand.Rand) []catalog.Query {
	yes := true
	var qs []catalog.Query
	for i := range 300 {
		q := catalog.Query{Access: all, Limit: catalog.MaxLimit}
		switch i % 6 {
		case 0:
			q.Text = fmt.Sprintf("w%d", r.IntN(3000))
		case 1:
			q.Text = fmt.Sprintf("w%d", r.IntN(30)) // a prefix of many
		case 2:
			q.Text = fmt.Sprintf("w%d w%d", r.IntN(3000), r.IntN(300))
		case 3:
			q.Text = fmt.Sprintf("p%d", r.IntN(60))
		}
		switch i % 5 {
		case 0:
			q.Format = pkgformat.OLM
		case 1:
			q.Channel, q.Verified = "fast", &yes
		case 2:
			q.KubeVersion = "1"
		case 3:
			q.Access = catalog.NamespaceAccess("ns1")
		case 4:
			q.Image = catalog.ImageRef{Repository: fmt.Sprintf("quay.io/org/i%d", r.IntN(20))}
			if i%2 == 0 {
				q.Image.Tag = "1"
			}
		}
		q.Sort = []catalog.Sort{catalog.SortRelevance, catalog.SortName, catalog.SortUpdated}[i%3]
		qs = append(qs, q)
	}
	return qs
}

// TestIncrementalEqualsRebuilt applies random Sets and Removes to an index
// and checks that it answers as one built from the final documents alone, in
// one Set.
func TestIncrementalEqualsRebuilt(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	ix := New()
	final := map[docKey]*Doc{}
	for i := range 5000 {
		switch d := randomDoc(r); i % 8 {
		case 3, 7:
			ix.Remove(d.Summary.Namespace, d.Summary.Name)
			delete(final, docKey{d.Summary.Namespace, d.Summary.Name})
		case 5:
			// A batch, in which a package may come twice: the last wins.
			batch := []*Doc{d, randomDoc(r), randomDoc(r)}
			batch = append(batch, testDoc(d.Summary.Namespace, d.Summary.Name, described("again")))
			ix.Set(batch...)
			for _, d := range batch {
				final[docKey{d.Summary.Namespace, d.Summary.Name}] = d
			}
		default:
			ix.Set(d)
			final[docKey{d.Summary.Namespace, d.Summary.Name}] = d
		}
	}
	checkInvariants(t, ix)
	if len(ix.termIDs) <= maxPending {
		t.Fatalf("%d terms: the dictionary was never merged", len(ix.termIDs))
	}
	rebuilt := New()
	rebuilt.Set(slices.Collect(maps.Values(final))...)
	checkInvariants(t, rebuilt)
	if ix.Len() != rebuilt.Len() {
		t.Fatalf("Len = %d, rebuilt %d", ix.Len(), rebuilt.Len())
	}
	nonEmpty := 0
	for _, q := range randomQueries(r) {
		got, want := search(t, ix, q), search(t, rebuilt, q)
		if g, w := jsonOf(t, got), jsonOf(t, want); g != w {
			t.Errorf("%+v:\n got %.300s\nwant %.300s", q, g, w)
		}
		if want.Total > 0 {
			nonEmpty++
		}
	}
	if nonEmpty < 100 {
		t.Errorf("only %d queries matched something", nonEmpty)
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestConcurrentReaders runs searches while a writer flips documents between
// two states; a search sees each document entirely in one state or the other.
func TestConcurrentReaders(t *testing.T) {
	ix := New()
	state := func(i int, odd bool) *Doc {
		word, format := "even", pkgformat.Helm
		if odd {
			word, format = "odd", pkgformat.OLM
		}
		return testDoc("a", fmt.Sprintf("p%d", i), described(word+" state"), func(d *Doc) { d.Summary.Format = format })
	}
	for i := range 50 {
		ix.Set(state(i, false))
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				for _, tc := range []struct {
					text   string
					format pkgformat.Format
				}{{"even", pkgformat.Helm}, {"odd", pkgformat.OLM}} {
					res, err := ix.Search(catalog.Query{Text: tc.text, Access: all, Limit: catalog.MaxLimit})
					if err != nil {
						t.Error(err)
						return
					}
					if n := res.Facets.Format[string(tc.format)]; n != res.Total || len(res.Packages) != res.Total {
						t.Errorf("%q: total %d, %d packages, facets %v", tc.text, res.Total, len(res.Packages), res.Facets.Format)
						return
					}
					for _, p := range res.Packages {
						if p.Format != tc.format || !strings.HasPrefix(p.Description, tc.text) {
							t.Errorf("%q found %s: %s, %q, a document half updated", tc.text, p.Name, p.Format, p.Description)
							return
						}
					}
				}
			}
		})
	}
	r := rand.New(rand.NewPCG(1, 1))
	for n := range 3000 {
		i := r.IntN(60)
		if i >= 50 {
			ix.Remove("a", fmt.Sprintf("p%d", i-10))
			continue
		}
		ix.Set(state(i, n%2 == 1))
	}
	close(done)
	wg.Wait()
	checkInvariants(t, ix)
}

func TestSortRange(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 3))
	byDoc := func(a, b *match) int { return cmp.Compare(a.doc, b.doc) }
	for _, n := range []int{0, 1, 5, 13, 100, 1000, 5000} {
		for _, order := range []string{"random", "sorted", "reversed"} {
			ms := make([]match, n)
			for i := range ms {
				ms[i].doc = int32(i)
			}
			switch order {
			case "random":
				r.Shuffle(n, func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
			case "reversed":
				slices.Reverse(ms)
			}
			for range 5 {
				lo := r.IntN(n + 1)
				hi := lo + r.IntN(n-lo+1)
				sortRange(ms, lo, hi, byDoc)
				for i := lo; i < hi; i++ {
					if ms[i].doc != int32(i) {
						t.Fatalf("n %d, %s, [%d, %d): position %d holds %d", n, order, lo, hi, i, ms[i].doc)
					}
				}
			}
		}
	}
}
