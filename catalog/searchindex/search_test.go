package searchindex

import (
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/pkgformat"
)

var (
	all      = catalog.Access{All: true}
	baseTime = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
)

// testDoc returns the document of a helm package namespace/name described
// as "A package.", changed by each mod.
func testDoc(namespace, name string, mods ...func(*Doc)) *Doc {
	d := &Doc{Summary: apiv1.PackageSummary{
		Namespace: namespace, Name: name, Version: "1.0.0", Format: pkgformat.Helm,
		Description: "A package.", Digest: "sha256:0", Updated: baseTime,
	}}
	for _, mod := range mods {
		mod(d)
	}
	return d
}

func described(text string) func(*Doc) {
	return func(d *Doc) { d.Summary.Description = text }
}

// names returns the namespace/name of each package of res, in order.
func names(res *catalog.SearchResult) []string {
	var out []string
	for _, p := range res.Packages {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

// search runs q with access to everything unless q says otherwise.
func search(t *testing.T, ix *Index, q catalog.Query) *catalog.SearchResult {
	t.Helper()
	if !q.Access.All && q.Access.Pull == nil {
		q.Access = all
	}
	res, err := ix.Search(q)
	if err != nil {
		t.Fatalf("Search %+v: %v", q, err)
	}
	if res.Facets.Format == nil || res.Facets.Namespace == nil || res.Packages == nil {
		t.Fatalf("Search %+v: nil facets or packages: %+v", q, res)
	}
	return res
}

func newIndex(docs ...*Doc) *Index {
	ix := New()
	for _, d := range docs {
		ix.Set(d)
	}
	return ix
}

func TestPrefixExpansion(t *testing.T) {
	ix := newIndex(
		testDoc("a", "one", described("kafka streams")),
		testDoc("a", "two", described("kafkaconnect sinks")),
		testDoc("a", "three", described("kaf")),
		testDoc("a", "four", described("apache kafka")),
	)
	for _, tc := range []struct {
		text string
		want []string
	}{
		// The last word is a prefix.
		{"kaf", []string{"a/four", "a/one", "a/three", "a/two"}},
		{"kafka", []string{"a/four", "a/one", "a/two"}},
		{"kafkac", []string{"a/two"}},
		{"kafkaconnectors", nil},
		// The others match whole words only.
		{"kaf streams", nil},
		{"kafka streams", []string{"a/one"}},
		{"kafka s", []string{"a/one"}},
		{"apache kaf", []string{"a/four"}},
		// Every word must match.
		{"kafka sinks", nil},
		{"apache streams", nil},
	} {
		res := search(t, ix, catalog.Query{Text: tc.text, Sort: catalog.SortName})
		if got := names(res); !slices.Equal(got, tc.want) || res.Total != len(tc.want) {
			t.Errorf("%q: %v (total %d), want %v", tc.text, got, res.Total, tc.want)
		}
	}
}

func TestRelevance(t *testing.T) {
	ix := newIndex(
		// The same length (5 tokens); zephyr in a field of each weight.
		testDoc("a", "p1", func(d *Doc) { d.Summary.DisplayName = "Zephyr tool" }),
		testDoc("a", "p2", func(d *Doc) { d.Summary.Keywords = []string{"zephyr", "tool"} }),
		testDoc("a", "p3", func(d *Doc) { d.APIs = "Zephyr tool" }),
		testDoc("a", "p4", described("A zephyr tool package.")),
		testDoc("a", "p5", func(d *Doc) { d.Maintainers = "Zephyr Tool" }),
		// Twice in the description, in a longer document.
		testDoc("a", "p6", described("A zephyr package, zephyr and more words to make it long.")),
		// Once in the description, in a much longer one.
		testDoc("a", "p7", described("A zephyr package"+strings.Repeat(" with words", 20))),
		// The name comes first, then prefixes of it, whatever the text says.
		testDoc("a", "zephyr", described("Nothing.")),
		testDoc("b", "zephyr", described("Nothing.")),
		testDoc("a", "zephyr-tools", described("Nothing.")),
		testDoc("a", "zephyrus", described("Zephyrus zephyrus zephyrus.")),
	)
	res := search(t, ix, catalog.Query{Text: "zephyr", Limit: 100})
	want := []string{"a/zephyr", "b/zephyr", "a/zephyrus", "a/zephyr-tools", "a/p1", "a/p2", "a/p3", "a/p6", "a/p4", "a/p5", "a/p7"}
	if got := names(res); !slices.Equal(got, want) {
		t.Errorf("zephyr: %v\nwant %v", got, want)
	}
	// A rarer word weighs more: "rare" is in one document, "zephyr" in
	// every one, so rare once beats zephyr twice.
	ix.Set(testDoc("c", "q1", described("rare zephyr")))
	ix.Set(testDoc("c", "q2", described("zephyr zephyr")))
	res = search(t, ix, catalog.Query{Text: "zephyr rar", Namespace: "c"})
	if got := names(res); !slices.Equal(got, []string{"c/q1"}) {
		t.Errorf("zephyr rar: %v, want c/q1", got)
	}
	if s1, s2 := scoreOf(ix, "c/q1", "rare"), scoreOf(ix, "c/q2", "zephyr"); s1 <= s2 {
		t.Errorf("BM25 of a rare word once %v <= of a common word twice %v", s1, s2)
	}
}

// scoreOf returns the BM25 of the package ns/name for text.
func scoreOf(ix *Index, pkg, text string) float64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	s := ix.getScratch()
	ix.fullText(queryTokens(text), true, s)
	ns, name, _ := strings.Cut(pkg, "/")
	return s.score[ix.ids[docKey{ns, name}]]
}

func TestFilters(t *testing.T) {
	kube := func(v string) string {
		k, ok := catalog.KubeVersionKey(v)
		if !ok {
			t.Fatalf("KubeVersionKey(%q)", v)
		}
		return k
	}
	ix := newIndex(
		testDoc("a", "alpha", func(d *Doc) {
			d.Channels = []string{"stable", "fast", "stable"}
			d.Provides = []catalog.APIFilter{{Group: "Alpha.Example.IO", Kind: "AlphaCluster"}}
			d.Kube = []KubeRange{{Min: kube("1.20")}, {Min: kube("1.20")}}
			d.Summary.Verified = true
		}),
		testDoc("a", "beta", func(d *Doc) {
			d.Summary.Format = pkgformat.OLM
			d.Channels = []string{"beta"}
			d.Provides = []catalog.APIFilter{{Group: "alpha.example.io", Kind: "Other"}, {Group: "beta.example.io", Kind: "AlphaCluster"}}
			d.Kube = []KubeRange{{Max: kube("1.19")}, {Min: kube("1.25"), Max: kube("1.26")}}
		}),
		testDoc("b", "gamma", func(d *Doc) { d.Kube = []KubeRange{{}} }),
	)
	yes, no := true, false
	for _, tc := range []struct {
		name string
		q    catalog.Query
		want []string
	}{
		{"none", catalog.Query{}, []string{"a/alpha", "a/beta", "b/gamma"}},
		{"namespace", catalog.Query{Namespace: "b"}, []string{"b/gamma"}},
		{"unknown namespace", catalog.Query{Namespace: "c"}, nil},
		{"format", catalog.Query{Format: pkgformat.OLM}, []string{"a/beta"}},
		{"unknown format", catalog.Query{Format: pkgformat.KUDO}, nil},
		{"channel", catalog.Query{Channel: "fast"}, []string{"a/alpha"}},
		{"channel is case-sensitive", catalog.Query{Channel: "Fast"}, nil},
		{"kind, any case", catalog.Query{Provides: catalog.APIFilter{Kind: "alphacluster"}}, []string{"a/alpha", "a/beta"}},
		{"group", catalog.Query{Provides: catalog.APIFilter{Group: "ALPHA.example.io"}}, []string{"a/alpha", "a/beta"}},
		{"group and kind of one API", catalog.Query{Provides: catalog.APIFilter{Group: "alpha.example.io", Kind: "AlphaCluster"}}, []string{"a/alpha"}},
		{"group and kind of two APIs", catalog.Query{Provides: catalog.APIFilter{Group: "alpha.example.io", Kind: "Nothing"}}, nil},
		{"a channel name is no kind", catalog.Query{Provides: catalog.APIFilter{Kind: "stable"}}, nil},
		{"kube at a minimum", catalog.Query{KubeVersion: kube("1.20")}, []string{"a/alpha", "b/gamma"}},
		{"kube in the range of one version", catalog.Query{KubeVersion: kube("1.26")}, []string{"a/alpha", "a/beta", "b/gamma"}},
		{"kube in a gap", catalog.Query{KubeVersion: kube("1.22")}, []string{"a/alpha", "b/gamma"}},
		{"kube below every minimum", catalog.Query{KubeVersion: kube("1.10")}, []string{"a/beta", "b/gamma"}},
		{"verified", catalog.Query{Verified: &yes}, []string{"a/alpha"}},
		{"unverified", catalog.Query{Verified: &no}, []string{"a/beta", "b/gamma"}},
		{"access", catalog.Query{Access: catalog.NamespaceAccess("b", "zz")}, []string{"b/gamma"}},
		{"no access", catalog.Query{Access: catalog.NamespaceAccess()}, nil},
		{"access and namespace", catalog.Query{Namespace: "a", Access: catalog.NamespaceAccess("b")}, nil},
		{"access per package", catalog.Query{Access: catalog.Access{Pull: func(_, name string) bool { return name != "alpha" }}}, []string{"a/beta", "b/gamma"}},
		{"access per package and namespace", catalog.Query{Access: catalog.Access{
			Namespace: func(ns string) catalog.Coverage {
				if ns == "a" {
					return catalog.CoversSome
				}
				return catalog.CoversNone
			},
			Pull: func(_, name string) bool { return name == "alpha" },
		}}, []string{"a/alpha"}},
		{"text and filters", catalog.Query{Text: "alpha", Channel: "stable", Format: pkgformat.Helm}, []string{"a/alpha"}},
	} {
		res := search(t, ix, tc.q)
		if got := names(res); !slices.Equal(got, tc.want) || res.Total != len(tc.want) {
			t.Errorf("%s: %v (total %d), want %v", tc.name, got, res.Total, tc.want)
		}
	}
}

func TestSetReplacesAndRemove(t *testing.T) {
	ix := newIndex(testDoc("a", "p", described("first words")), testDoc("a", "q", described("first")))
	ix.Set(testDoc("a", "p", described("second words"), func(d *Doc) { d.Summary.Format = pkgformat.OLM }))
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"first", []string{"a/q"}},
		{"second", []string{"a/p"}},
		{"words", []string{"a/p"}},
	} {
		if got := names(search(t, ix, catalog.Query{Text: tc.text})); !slices.Equal(got, tc.want) {
			t.Errorf("after replacing a/p, %q: %v, want %v", tc.text, got, tc.want)
		}
	}
	if res := search(t, ix, catalog.Query{}); !maps.Equal(res.Facets.Format, map[string]int{"helm": 1, "olm": 1}) {
		t.Errorf("facets after replacing a/p: %v", res.Facets.Format)
	}
	ix.Remove("a", "p")
	ix.Remove("a", "p")    // absent: nothing happens
	ix.Remove("zz", "nil") // never there
	if ix.Len() != 1 {
		t.Errorf("Len = %d after removing a/p, want 1", ix.Len())
	}
	for _, text := range []string{"second", "words", "p"} {
		if res := search(t, ix, catalog.Query{Text: text}); res.Total != 0 {
			t.Errorf("%q after Remove: %v", text, names(res))
		}
	}
	checkInvariants(t, ix)
	if _, ok := ix.termIDs["second"]; ok {
		t.Error("the term of a removed document is still in the dictionary")
	}
	// The freed slot is reused, and the document is whole again.
	ix.Set(testDoc("b", "p", described("third")))
	if got := names(search(t, ix, catalog.Query{Text: "third"})); !slices.Equal(got, []string{"b/p"}) {
		t.Errorf("third: %v", got)
	}
	if len(ix.docs) != 2 {
		t.Errorf("%d document slots for 2 documents", len(ix.docs))
	}
	checkInvariants(t, ix)
}

func TestSummaries(t *testing.T) {
	created := baseTime.Add(-time.Hour)
	d := testDoc("a", "p", func(d *Doc) {
		d.Summary.Keywords = []string{"k1", "k2"}
		d.Summary.Channels = []string{}
		d.Summary.Created = &created
	})
	ix := newIndex(d)
	// The index copied what it keeps.
	d.Summary.Keywords[0] = "changed"
	created = created.Add(time.Hour)
	res := search(t, ix, catalog.Query{})
	p := res.Packages[0]
	if !slices.Equal(p.Keywords, []string{"k1", "k2"}) || p.Channels != nil || !p.Created.Equal(baseTime.Add(-time.Hour)) {
		t.Errorf("summary = %+v", p)
	}
	// Callers get copies.
	p.Keywords[0] = "mine"
	*p.Created = time.Time{}
	if p := search(t, ix, catalog.Query{}).Packages[0]; p.Keywords[0] != "k1" || p.Created.IsZero() {
		t.Errorf("a caller changed the index: %+v", p)
	}
}

func TestSortsAndPages(t *testing.T) {
	var docs []*Doc
	for i := range 200 {
		ns := []string{"a", "b", "c"}[i%3]
		name := strings.Repeat("x", 1+i%7) + "-" + string(rune('a'+i%26))
		docs = append(docs, testDoc(ns, name, described(strings.Repeat("word ", 1+i%5)+"tail"), func(d *Doc) {
			d.Summary.Updated = baseTime.Add(time.Duration(i%11) * time.Hour)
		}))
	}
	ix := newIndex(docs...)
	for _, q := range []catalog.Query{
		{}, {Sort: catalog.SortUpdated}, {Sort: catalog.SortName},
		{Text: "word"}, {Text: "word", Sort: catalog.SortUpdated}, {Text: "xx"}, {Text: "xxx word"},
	} {
		q.Limit = catalog.MaxLimit
		whole := names(search(t, ix, q))
		if len(whole) == 0 {
			t.Fatalf("%+v matches nothing", q)
		}
		for _, size := range []int{1, 7, 50} {
			var got []string
			for q.Offset = 0; q.Offset < len(whole)+size; q.Offset += size {
				q.Limit = size
				got = append(got, names(search(t, ix, q))...)
			}
			if !slices.Equal(got, whole) {
				t.Errorf("%+v in pages of %d: %d packages, want the %d of one page, in order", q, size, len(got), len(whole))
			}
			q.Offset = 0
		}
	}
	if res := search(t, ix, catalog.Query{Offset: 1 << 62}); res.Total != 200 || len(res.Packages) != 0 {
		t.Errorf("huge offset: total %d, %d packages", res.Total, len(res.Packages))
	}
	if res := search(t, ix, catalog.Query{}); len(res.Packages) != catalog.DefaultLimit {
		t.Errorf("Limit 0: %d packages, want %d", len(res.Packages), catalog.DefaultLimit)
	}
	for i := range catalog.MaxLimit + 1 {
		ix.Set(testDoc("d", strconv.Itoa(i)))
	}
	if res := search(t, ix, catalog.Query{Limit: catalog.MaxLimit + 1}); len(res.Packages) != catalog.MaxLimit {
		t.Errorf("Limit %d: %d packages, want %d", catalog.MaxLimit+1, len(res.Packages), catalog.MaxLimit)
	}
	for _, q := range []catalog.Query{{Limit: -1}, {Offset: -1}, {Sort: "popularity"}} {
		if _, err := ix.Search(q); !errors.Is(err, catalog.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", q, err)
		}
	}
}

func TestHostileText(t *testing.T) {
	ix := newIndex(testDoc("a", "kafka", described("Streams events.")), testDoc("a", "near", described("NEAR and OR")))
	for _, text := range []string{
		`"`, `*`, `NEAR(kafka events, 2)`, `-kafka`, `kafka OR`, `name:kafka`, `{name}: kafka`, `%_\`,
		"\x00", "kaf\x00ka", "\xff\xfe\xfd", "\u202e\u200bkafka", "\u0301\u0301", strings.Repeat("k", 100000),
		strings.Repeat("kafka ", 5000), strings.Repeat("(", 1000) + "kafka", strings.Repeat("\xff", 1000),
	} {
		for _, sort := range []catalog.Sort{catalog.SortRelevance, catalog.SortName, catalog.SortUpdated} {
			if _, err := ix.Search(catalog.Query{Text: text, Sort: sort, Access: all}); err != nil {
				t.Errorf("Search %.20q: %v", text, err)
			}
		}
	}
}

// FuzzSearch checks that no text makes Search fail or return what does not
// match it by name or by every word.
func FuzzSearch(f *testing.F) {
	for _, s := range []string{"kafka", "kaf ka", `"a" AND b*`, "\x00\xff", "ÉTÉ ete", "日本", "a-b_c"} {
		f.Add(s)
	}
	ix := newIndex(
		testDoc("a", "kafka", described("Streams events été.")),
		testDoc("a", "a-b_c", described("日本語 words")),
		testDoc("b", "other", described("kafka streams and more")),
	)
	f.Fuzz(func(t *testing.T, text string) {
		res, err := ix.Search(catalog.Query{Text: text, Access: all})
		if err != nil {
			t.Fatal(err)
		}
		if res.Total < len(res.Packages) || res.Total > 3 {
			t.Fatalf("%q: total %d, %d packages", text, res.Total, len(res.Packages))
		}
	})
}

// checkInvariants fails unless the postings, the dictionary, the name orders
// and the documents of ix agree.
func checkInvariants(t *testing.T, ix *Index) {
	t.Helper()
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var tokens int64
	live := 0
	for id, d := range ix.docs {
		h := ix.hot[id]
		if !h.live {
			continue
		}
		live++
		tokens += int64(h.length)
		if ix.nameOrder[h.rank] != int32(id) {
			t.Errorf("document %d has rank %d, where nameOrder holds %d", id, h.rank, ix.nameOrder[h.rank])
		}
		for _, tid := range d.terms {
			if !slices.ContainsFunc(ix.terms[tid].postings, func(p posting) bool { return p.doc == int32(id) }) {
				t.Errorf("document %d lists term %q, which has no posting for it", id, ix.terms[tid].text)
			}
		}
		for _, im := range d.images {
			if !slices.Contains(ix.imageDocs[im.repository], int32(id)) {
				t.Errorf("document %d runs image repository %q, which does not list it", id, ix.images.names[im.repository])
			}
		}
	}
	for repo, docs := range ix.imageDocs {
		for _, id := range docs {
			if !ix.hot[id].live || !slices.ContainsFunc(ix.docs[id].images, func(im imageID) bool { return im.repository == repo }) {
				t.Errorf("image repository %q lists document %d, which does not run it", ix.images.names[repo], id)
			}
		}
		if len(slices.Compact(slices.Sorted(slices.Values(docs)))) != len(docs) {
			t.Errorf("image repository %q lists a document twice: %v", ix.images.names[repo], docs)
		}
	}
	if live != ix.live || live != len(ix.ids) || live != len(ix.byName) || live != len(ix.nameOrder) || tokens != ix.total {
		t.Errorf("%d live documents, live %d, %d ids, %d by name, %d in name order; %d tokens, total %d",
			live, ix.live, len(ix.ids), len(ix.byName), len(ix.nameOrder), tokens, ix.total)
	}
	if !slices.IsSortedFunc(ix.byName, ix.compareByName) || !slices.IsSortedFunc(ix.nameOrder, ix.compareName) {
		t.Error("byName or nameOrder is not ordered")
	}
	dict := slices.Concat(ix.dict, ix.pending)
	if len(dict) != len(ix.termIDs) || len(ix.added) != 0 {
		t.Errorf("dictionary of %d terms (%d added), %d term ids", len(dict), len(ix.added), len(ix.termIDs))
	}
	if !slices.IsSortedFunc(ix.dict, ix.compareTerm) || !slices.IsSortedFunc(ix.pending, ix.compareTerm) {
		t.Error("dictionary not ordered")
	}
	for text, tid := range ix.termIDs {
		tm := ix.terms[tid]
		if tm.text != text || len(tm.postings) == 0 || !slices.Contains(dict, tid) {
			t.Errorf("term %q: id %d holds %q with %d postings", text, tid, tm.text, len(tm.postings))
		}
		for _, p := range tm.postings {
			if !ix.hot[p.doc].live || !slices.Contains(ix.docs[p.doc].terms, tid) {
				t.Errorf("term %q: posting of document %d, which does not list it", text, p.doc)
			}
		}
	}
}

func TestVerifiedFacet(t *testing.T) {
	verified := func(d *Doc) { d.Summary.Verified = true }
	ix := newIndex(
		testDoc("a", "alpha", verified),
		testDoc("a", "beta"),
		testDoc("b", "gamma", verified, described("gamma rays")),
	)
	no := false
	for _, tc := range []struct {
		name string
		q    catalog.Query
		want int
	}{
		{"by name", catalog.Query{}, 2},
		{"by text", catalog.Query{Text: "package"}, 1},
		{"by update", catalog.Query{Sort: catalog.SortUpdated}, 2},
		{"filtered", catalog.Query{Namespace: "a"}, 1},
		{"unverified only", catalog.Query{Verified: &no}, 0},
		{"on a later page", catalog.Query{Offset: 2, Limit: 1}, 2},
		{"no access", catalog.Query{Access: catalog.NamespaceAccess()}, 0},
	} {
		if got := search(t, ix, tc.q).Facets.Verified; got != tc.want {
			t.Errorf("%s: verified facet %d, want %d", tc.name, got, tc.want)
		}
	}
}
