package storetest

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/pkgformat"
)

func testLatestVersion(t *testing.T, h *harness) {
	for _, tc := range []struct {
		name   string
		tags   []string
		latest string
	}{
		{"semver not string order", []string{"1.0.0", "1.10.0", "1.9.0", "1.2.0"}, "1.10.0"},
		{"release after its pre-releases", []string{"2.0.0-rc.1", "2.0.0", "2.0.0-alpha", "1.5.0"}, "2.0.0"},
		{"pre-release above older releases", []string{"1.5.0", "2.0.0-rc.10", "2.0.0-rc.9", "2.0.0-beta"}, "2.0.0-rc.10"},
		{"kudo app and operator versions", []string{"2.5.1_1.3.2", "2.6.0_1.3.1", "2.5.1_1.3.3", "0.9.0_9.0.0"}, "2.6.0_1.3.1"},
		{"non-semver tags sort first", []string{"nightly", "0.1.0", "latest"}, "0.1.0"},
	} {
		// Every order of the Puts gives the same latest version.
		r := rand.New(rand.NewPCG(1, uint64(len(tc.name))))
		for round := range 4 {
			s := h.fresh()
			tags := slices.Clone(tc.tags)
			r.Shuffle(len(tags), func(i, j int) { tags[i], tags[j] = tags[j], tags[i] })
			for _, tag := range tags {
				putAll(t, s, pkg("a", "p", tag, withDescription("version "+tag)))
			}
			res := search(t, s, catalog.Query{Access: all})
			if len(res.Packages) != 1 || res.Packages[0].Version != tc.latest || res.Packages[0].Description != "version "+tc.latest {
				t.Errorf("%s, round %d (puts %v): summary = %+v, want version %s", tc.name, round, tags, res.Packages, tc.latest)
			}
		}
		if got := slices.MaxFunc(tc.tags, func(a, b string) int {
			return strings.Compare(catalog.VersionKey(a), catalog.VersionKey(b))
		}); got != tc.latest {
			t.Fatalf("%s: the test expects %s but VersionKey makes %s the latest", tc.name, tc.latest, got)
		}
	}
}

func testRanking(t *testing.T, h *harness) {
	h.put(
		// Full text alone would put "cache" first: "redis" is all over it.
		pkg("a", "cache", "1.0.0", withDescription("Redis redis redis: a redis cache, redis compatible."),
			func(e *catalog.Entry) {
				e.Metadata.DisplayName = "Redis Cache"
				e.Metadata.Keywords = []string{"redis", "cache"}
			}),
		pkg("a", "kv-store", "1.0.0", withDescription("A key-value store that speaks the redis protocol and runs on kubernetes.")),
		pkg("a", "redis-operator", "1.0.0", withDescription("Runs clusters.")),
		pkg("a", "redis", "1.0.0", withDescription("An in-memory store.")),
		// Same document elsewhere: the same score, so ordered by namespace.
		pkg("b", "redis", "1.0.0", withDescription("An in-memory store.")),
		// Name prefixes rank among themselves by relevance: the long
		// description of redisinsight dilutes its match.
		pkg("a", "redisinsight", "1.0.0", withDescription(strings.Repeat("A graphical user interface to browse keys and profile commands. ", 5))),
		pkg("a", "unrelated", "1.0.0", withDescription("Postgres.")),
		pkg("a", "operator-hub", "1.0.0", withDescription("Lists operators."), func(e *catalog.Entry) {
			e.Metadata.Maintainers = []pkgformat.Maintainer{{Name: "Grace Hopper"}}
			e.Metadata.ProvidedAPIs = []pkgformat.API{{Group: "hub.example.io", Version: "v1", Kind: "CatalogSource"}}
		}),
	)
	for _, tc := range []struct {
		text string
		want []string
	}{
		// exact name, then name prefix, then full text by relevance
		{"redis", []string{"a/redis", "b/redis", "a/redis-operator", "a/redisinsight", "a/cache", "a/kv-store"}},
		{"REDIS", []string{"a/redis", "b/redis", "a/redis-operator", "a/redisinsight", "a/cache", "a/kv-store"}},
		{"redisin", []string{"a/redisinsight"}},
		{"  redis-operator ", []string{"a/redis-operator"}},
		{"redis-op", []string{"a/redis-operator"}},
		// the last word is a prefix
		{"kv-st", []string{"a/kv-store"}},
		{"redis prot", []string{"a/kv-store"}},
		// every word must match
		{"redis protocol kubernetes", []string{"a/kv-store"}},
		{"redis postgres", nil},
		// maintainers, provided kinds and groups are full text too
		{"hopper", []string{"a/operator-hub"}},
		{"catalogsource", []string{"a/operator-hub"}},
		{"hub.example", []string{"a/operator-hub"}},
		{"nothing-like-this", nil},
	} {
		res := h.search(catalog.Query{Text: tc.text, Access: all})
		if got := names(res.Packages); !slices.Equal(got, tc.want) || res.Total != len(tc.want) {
			t.Errorf("Search %q = %v (total %d), want %v", tc.text, got, res.Total, tc.want)
		}
	}
}

// testRankingFields checks full-text relevance: a word weighs more in the
// display name than in keywords, there than in provided APIs, there than in
// the description, and less in a longer document.
func testRankingFields(t *testing.T, h *harness) {
	h.put(
		// Five tokens each (name, and "A package." unless replaced), but
		// for "long" and "api".
		pkg("a", "display", "1.0.0", func(e *catalog.Entry) { e.Metadata.DisplayName = "Zephyr tool" }),
		pkg("a", "keyword", "1.0.0", func(e *catalog.Entry) { e.Metadata.Keywords = []string{"zephyr", "tool"} }),
		pkg("a", "api", "1.0.0", withAPI("zephyr.example.io", "Gadget")),
		pkg("a", "text", "1.0.0", withDescription("A zephyr tool package.")),
		pkg("a", "long", "1.0.0", withDescription("A zephyr package"+strings.Repeat(" with words", 20))),
		pkg("b", "zephyr-tools", "1.0.0"),
		pkg("b", "unrelated", "1.0.0"),
	)
	want := []string{"b/zephyr-tools", "a/display", "a/keyword", "a/api", "a/text", "a/long"}
	res := h.search(catalog.Query{Text: "zephyr", Access: all})
	if got := names(res.Packages); !slices.Equal(got, want) {
		t.Errorf("zephyr: %v, want %v", got, want)
	}
}

// filterFixtures are packages that differ in everything the filters look at.
// Older versions differ from the latest, so that "some version" and "the
// latest version" filters give different answers.
func filterFixtures() []*catalog.Entry {
	return []*catalog.Entry{
		pkg("a", "alpha", "1.0.0", withChannels("stable"), withAPI("alpha.example.io", "AlphaCluster"),
			withKube("1.20", ""), withVerified(true)),
		pkg("a", "beta", "1.0.0", withFormat(pkgformat.OLM), withChannels("fast"), withAPI("beta.example.io", "BetaBackup"), withVerified(true)),
		pkg("a", "beta", "2.0.0", withFormat(pkgformat.OLM), withChannels("stable"), withKube("", "1.22")),
		pkg("b", "gamma", "1.0.0", withFormat(pkgformat.KUDO), withVerified(true)),
		pkg("b", "gamma", "1.1.0", withFormat(pkgformat.KUDO), withVerified(false)),
		pkg("b", "delta", "1.0.0", withFormat(pkgformat.Helm), withChannels("candidate")),
		pkg("b", "delta", "2.0.0", withFormat(pkgformat.Plain)),
		pkg("b", "epsilon", "1.0.0", withKube("banana", "v1.x"), withAPI("alpha.example.io", "Other")),
		pkg("c", "zeta", "1.0.0", withFormat(pkgformat.Plain), withKube("1.18.3", "1.21"), withAPI("zeta.example.io", "alphacluster")),
		unindexed("a", "omega", "1.0.0", apiv1.StatusInvalid, "not indexed: matches no filter"),
	}
}

func testFilters(t *testing.T, h *harness) {
	h.put(filterFixtures()...)
	kube := func(v string) string {
		k, ok := catalog.KubeVersionKey(v)
		if !ok {
			t.Fatalf("KubeVersionKey(%q) failed", v)
		}
		return k
	}
	yes, no := true, false
	for _, tc := range []struct {
		name string
		q    catalog.Query
		want []string
	}{
		{"none", catalog.Query{}, []string{"a/alpha", "a/beta", "b/delta", "b/epsilon", "b/gamma", "c/zeta"}},
		{"namespace", catalog.Query{Namespace: "a"}, []string{"a/alpha", "a/beta"}},
		{"unknown namespace", catalog.Query{Namespace: "zz"}, nil},
		{"format of the latest version", catalog.Query{Format: pkgformat.Helm}, []string{"a/alpha", "b/epsilon"}},
		{"format plain", catalog.Query{Format: pkgformat.Plain}, []string{"b/delta", "c/zeta"}},
		{"channel of an older version", catalog.Query{Channel: "fast"}, []string{"a/beta"}},
		{"channel of an older version only", catalog.Query{Channel: "candidate"}, []string{"b/delta"}},
		{"channel stable", catalog.Query{Channel: "stable"}, []string{"a/alpha", "a/beta"}},
		{"unknown channel", catalog.Query{Channel: "nightly"}, nil},
		{"provides kind, any case", catalog.Query{Provides: catalog.APIFilter{Kind: "ALPHACLUSTER"}}, []string{"a/alpha", "c/zeta"}},
		{"provides kind of an older version", catalog.Query{Provides: catalog.APIFilter{Kind: "BetaBackup"}}, []string{"a/beta"}},
		{"provides group", catalog.Query{Provides: catalog.APIFilter{Group: "Alpha.Example.IO"}}, []string{"a/alpha", "b/epsilon"}},
		{"provides group and kind of one API", catalog.Query{Provides: catalog.APIFilter{Group: "alpha.example.io", Kind: "AlphaCluster"}}, []string{"a/alpha"}},
		{"group and kind of different APIs", catalog.Query{Provides: catalog.APIFilter{Group: "zeta.example.io", Kind: "Other"}}, nil},
		{"kube below alpha's minimum", catalog.Query{KubeVersion: kube("1.19")}, []string{"a/beta", "b/delta", "b/epsilon", "b/gamma", "c/zeta"}},
		{"kube at a minimum", catalog.Query{KubeVersion: kube("1.20.0")}, []string{"a/alpha", "a/beta", "b/delta", "b/epsilon", "b/gamma", "c/zeta"}},
		{"kube at a maximum", catalog.Query{KubeVersion: kube("1.21.0")}, []string{"a/alpha", "a/beta", "b/delta", "b/epsilon", "b/gamma", "c/zeta"}},
		{"kube above zeta's maximum", catalog.Query{KubeVersion: kube("1.21.1")}, []string{"a/alpha", "a/beta", "b/delta", "b/epsilon", "b/gamma"}},
		{"kube below zeta's minimum", catalog.Query{KubeVersion: kube("1.18.2")}, []string{"a/beta", "b/delta", "b/epsilon", "b/gamma"}},
		{"kube: one version of beta admits it", catalog.Query{KubeVersion: kube("1.30")}, []string{"a/alpha", "a/beta", "b/delta", "b/epsilon", "b/gamma"}},
		{"verified latest", catalog.Query{Verified: &yes}, []string{"a/alpha"}},
		{"unverified latest", catalog.Query{Verified: &no}, []string{"a/beta", "b/delta", "b/epsilon", "b/gamma", "c/zeta"}},
		{"namespace and format", catalog.Query{Namespace: "b", Format: pkgformat.Helm}, []string{"b/epsilon"}},
		{"channel and provides", catalog.Query{Channel: "stable", Provides: catalog.APIFilter{Kind: "BetaBackup"}}, []string{"a/beta"}},
		{"format and verified", catalog.Query{Format: pkgformat.OLM, Verified: &yes}, nil},
		// epsilon provides an API of group alpha.example.io
		{"text and format", catalog.Query{Text: "alpha", Format: pkgformat.Helm}, []string{"a/alpha", "b/epsilon"}},
		{"text and other format", catalog.Query{Text: "alpha", Format: pkgformat.OLM}, nil},
		{"everything", catalog.Query{Text: "be", Namespace: "a", Format: pkgformat.OLM, Channel: "fast",
			Provides: catalog.APIFilter{Group: "beta.example.io"}, KubeVersion: kube("1.25"), Verified: &no}, []string{"a/beta"}},
	} {
		tc.q.Access = all
		for _, sort := range []catalog.Sort{catalog.SortName, catalog.SortRelevance, catalog.SortUpdated} {
			tc.q.Sort = sort
			res := h.search(tc.q)
			got := names(res.Packages)
			if !sameSet(got, tc.want) || res.Total != len(tc.want) {
				t.Errorf("%s (sort %s): Search = %v (total %d), want %v", tc.name, sort, got, res.Total, tc.want)
			}
		}
	}
}

func testSorts(t *testing.T, h *harness) {
	day := func(n int) time.Time { return baseTime.Add(time.Duration(n) * 24 * time.Hour) }
	h.put(
		pkg("b", "mango", "1.0.0", withIndexed(day(5))),
		pkg("a", "mango", "1.0.0", withIndexed(day(1))),
		pkg("a", "apple", "1.0.0", withIndexed(day(9))),
		// The latest version's indexed time counts, not the newest one's.
		pkg("a", "apple", "0.9.0", withIndexed(day(20))),
		pkg("a", "zucchini", "1.0.0", withIndexed(day(5))),
		pkg("a", "kiwi", "1.0.0", withIndexed(day(3))),
	)
	for _, tc := range []struct {
		sort catalog.Sort
		want []string
	}{
		{"", []string{"a/apple", "a/kiwi", "a/mango", "b/mango", "a/zucchini"}},
		{catalog.SortRelevance, []string{"a/apple", "a/kiwi", "a/mango", "b/mango", "a/zucchini"}},
		{catalog.SortName, []string{"a/apple", "a/kiwi", "a/mango", "b/mango", "a/zucchini"}},
		{catalog.SortUpdated, []string{"a/apple", "b/mango", "a/zucchini", "a/kiwi", "a/mango"}},
	} {
		res := h.search(catalog.Query{Sort: tc.sort, Access: all})
		if got := names(res.Packages); !slices.Equal(got, tc.want) {
			t.Errorf("sort %q: %v, want %v", tc.sort, got, tc.want)
		}
		if tc.sort == catalog.SortUpdated && !res.Packages[0].Updated.Equal(day(9)) {
			t.Errorf("a/apple updated %v, want its latest version's %v", res.Packages[0].Updated, day(9))
		}
	}
	// With text, name and updated order the matches alone.
	res := h.search(catalog.Query{Text: "mango", Sort: catalog.SortUpdated, Access: all})
	if got := names(res.Packages); !slices.Equal(got, []string{"b/mango", "a/mango"}) {
		t.Errorf("mango by updated: %v, want b/mango, a/mango", got)
	}
	_, err := h.store.Search(h.ctx, catalog.Query{Sort: "popularity", Access: all})
	if !errors.Is(err, catalog.ErrInvalid) {
		t.Errorf("unknown sort: %v, want ErrInvalid", err)
	}
}

// catalogOf25 puts 25 packages in three namespaces and three formats, and
// returns how many there are of each.
func catalogOf25(h *harness) (formats, namespaces map[string]int) {
	formats, namespaces = map[string]int{}, map[string]int{}
	fs := []pkgformat.Format{pkgformat.Helm, pkgformat.OLM, pkgformat.KUDO}
	for i := range 25 {
		ns := []string{"a", "b", "c"}[i%3]
		f := fs[i%7%3]
		h.put(pkg(ns, fmt.Sprintf("tool-%02d", i), "1.0.0", withFormat(f),
			withDescription(strings.Repeat("tool ", 1+i%4)+"for things"),
			withIndexed(baseTime.Add(time.Duration(i%5)*time.Hour))))
		formats[string(f)]++
		namespaces[ns]++
	}
	return formats, namespaces
}

func testFacetsAndTotal(t *testing.T, h *harness) {
	formats, namespaces := catalogOf25(h)
	h.put(unindexed("d", "nothing", "1.0.0", apiv1.StatusIgnored, "an image"))
	for _, q := range []catalog.Query{
		{Limit: 10},
		{Limit: 10, Offset: 20},
		{Limit: 10, Offset: 1000},
		{Text: "tool", Limit: 3},
		{Text: "tool", Limit: 3, Offset: 24},
		{Text: "things", Limit: 3, Sort: catalog.SortUpdated},
	} {
		q.Access = all
		res := h.search(q)
		if res.Total != 25 || !maps.Equal(res.Facets.Format, formats) || !maps.Equal(res.Facets.Namespace, namespaces) {
			t.Errorf("%+v: total %d, facets %+v; want 25, %v, %v", q, res.Total, res.Facets, formats, namespaces)
		}
		if want := max(0, min(q.Limit, 25-q.Offset)); len(res.Packages) != want {
			t.Errorf("%+v: %d packages on the page, want %d", q, len(res.Packages), want)
		}
	}
	// Facets count the filtered matches.
	res := h.search(catalog.Query{Namespace: "a", Access: all})
	if res.Total != namespaces["a"] || len(res.Facets.Namespace) != 1 || res.Facets.Namespace["a"] != namespaces["a"] {
		t.Errorf("namespace a: total %d, facets %+v", res.Total, res.Facets)
	}
	if n := res.Facets.Format["helm"] + res.Facets.Format["olm"] + res.Facets.Format["kudo"]; n != res.Total {
		t.Errorf("namespace a: format facets %v add up to %d, want %d", res.Facets.Format, n, res.Total)
	}
	// Limit 0 is the default page size.
	if res := h.search(catalog.Query{Access: all}); len(res.Packages) != catalog.DefaultLimit {
		t.Errorf("Limit 0 gave %d packages, want %d", len(res.Packages), catalog.DefaultLimit)
	}
	// No match: empty facets, not nil ones.
	res = h.search(catalog.Query{Text: "zzz", Access: all})
	if res.Total != 0 || len(res.Packages) != 0 || len(res.Facets.Format) != 0 || len(res.Facets.Namespace) != 0 {
		t.Errorf("no match: %+v", res)
	}
	for _, q := range []catalog.Query{{Limit: -1}, {Offset: -1}} {
		if _, err := h.store.Search(h.ctx, q); !errors.Is(err, catalog.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", q, err)
		}
	}
}

func testPagination(t *testing.T, h *harness) {
	catalogOf25(h)
	for _, base := range []catalog.Query{
		{},
		{Sort: catalog.SortUpdated},
		{Text: "tool"},
		{Text: "tool", Sort: catalog.SortName},
		{Text: "things", Sort: catalog.SortUpdated},
		{Namespace: "b"},
	} {
		base.Access = all
		whole := base
		whole.Limit = catalog.MaxLimit
		want := names(h.search(whole).Packages)
		for _, size := range []int{1, 3, 7, 25} {
			var got []string
			for offset := 0; ; offset += size {
				q := base
				q.Limit, q.Offset = size, offset
				res := h.search(q)
				if res.Total != len(want) {
					t.Fatalf("%+v: total %d, want %d", q, res.Total, len(want))
				}
				got = append(got, names(res.Packages)...)
				if len(res.Packages) < size {
					break
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("%+v by pages of %d: %v, want each of %v once, in order", base, size, got, want)
			}
		}
	}
}

func testAccess(t *testing.T, h *harness) {
	h.put(filterFixtures()...)
	h.put(unindexed("b", "img", "latest", apiv1.StatusIgnored, "an image"), unindexed("c", "img", "latest", apiv1.StatusIgnored, "an image"))
	for _, tc := range []struct {
		name      string
		access    catalog.Access
		packages  []string
		unindexed []string
	}{
		{"all", all, []string{"a/alpha", "a/beta", "b/delta", "b/epsilon", "b/gamma", "c/zeta"},
			[]string{"a/omega", "b/img", "c/img"}},
		{"a and c", catalog.NamespaceAccess("c", "a"), []string{"a/alpha", "a/beta", "c/zeta"}, []string{"a/omega", "c/img"}},
		{"unknown namespace", catalog.NamespaceAccess("zz"), nil, nil},
		{"nothing", catalog.Access{}, nil, nil},
		{"packages", catalog.Access{Pull: pullOnly("a/alpha", "b/gamma", "b/img", "c/none")},
			[]string{"a/alpha", "b/gamma"}, []string{"b/img"}},
		{"namespace a, packages of b", catalog.Access{
			Namespace: func(ns string) catalog.Coverage {
				switch ns {
				case "a":
					return catalog.CoversAll
				case "b":
					return catalog.CoversSome
				}
				return catalog.CoversNone
			},
			Pull: func(ns, name string) bool { return ns == "a" || ns+"/"+name == "b/delta" || ns+"/"+name == "b/img" },
		}, []string{"a/alpha", "a/beta", "b/delta"}, []string{"a/omega", "b/img"}},
	} {
		res := h.search(catalog.Query{Access: tc.access, Limit: catalog.MaxLimit})
		if got := names(res.Packages); !slices.Equal(got, tc.packages) || res.Total != len(tc.packages) {
			t.Errorf("%s: Search = %v (total %d), want %v", tc.name, got, res.Total, tc.packages)
		}
		for ns, n := range res.Facets.Namespace {
			if n > 0 && tc.access.Covers(ns) == catalog.CoversNone {
				t.Errorf("%s: facets count %d packages in namespace %s", tc.name, n, ns)
			}
		}
		text := h.search(catalog.Query{Text: "alpha", Access: tc.access})
		for _, p := range text.Packages {
			if !tc.access.Allows(p.Namespace, p.Name) {
				t.Errorf("%s: text search found %s/%s", tc.name, p.Namespace, p.Name)
			}
		}
		un, err := h.store.Unindexed(h.ctx, tc.access, 100, 0)
		if err != nil {
			t.Fatal(err)
		}
		var gotUn []string
		for _, a := range un {
			gotUn = append(gotUn, a.Namespace+"/"+a.Name)
		}
		if !slices.Equal(gotUn, tc.unindexed) {
			t.Errorf("%s: Unindexed = %v, want %v", tc.name, gotUn, tc.unindexed)
		}
		var paged []string
		for offset := 0; offset <= len(tc.unindexed); offset++ {
			page, err := h.store.Unindexed(h.ctx, tc.access, 1, offset)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range page {
				paged = append(paged, a.Namespace+"/"+a.Name)
			}
		}
		if !slices.Equal(paged, tc.unindexed) {
			t.Errorf("%s: Unindexed by pages of 1 = %v, want %v", tc.name, paged, tc.unindexed)
		}
		var walked []string
		if err := h.store.Walk(h.ctx, tc.access, "", func(e *catalog.Entry) error {
			if k := e.Namespace + "/" + e.Name; !slices.Contains(walked, k) {
				walked = append(walked, k)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(walked, tc.packages) {
			t.Errorf("%s: Walk = %v, want %v", tc.name, walked, tc.packages)
		}
	}
	// A namespace filter never widens access.
	res := h.search(catalog.Query{Namespace: "b", Access: catalog.NamespaceAccess("a")})
	if res.Total != 0 {
		t.Errorf("namespace b with access to a: %v", names(res.Packages))
	}
	n := 0
	if err := h.store.Walk(h.ctx, catalog.NamespaceAccess("a"), "b", func(*catalog.Entry) error { n++; return nil }); err != nil || n != 0 {
		t.Errorf("Walk of namespace b with access to a: %d entries, %v", n, err)
	}
}

// pullOnly is the Pull of an access to the packages named.
func pullOnly(packages ...string) func(namespace, name string) bool {
	return func(ns, name string) bool { return slices.Contains(packages, ns+"/"+name) }
}

func testHostileText(t *testing.T, h *harness) {
	h.put(pkg("a", "kafka", "1.0.0", withDescription("Streams events.")), pkg("a", "near", "1.0.0"), pkg("a", "and-or-not", "1.0.0"))
	for _, tc := range []struct {
		text  string
		finds string // a package the text must still find, if any
	}{
		{`"`, ""},
		{`""`, ""},
		{`"kafka`, "a/kafka"},
		{`kafka"`, "a/kafka"},
		{`*`, ""},
		{`kafka*`, "a/kafka"},
		{`**kaf**`, "a/kafka"},
		{`NEAR(`, "a/near"},
		{`NEAR(kafka events, 2)`, ""},
		{`-`, ""},
		{`-kafka`, "a/kafka"},
		{`kafka -streams`, "a/kafka"},
		{`AND`, "a/and-or-not"},
		{`OR`, ""},
		{`NOT`, ""},
		{`kafka OR`, ""},
		{`AND OR NOT`, "a/and-or-not"},
		{`name:kafka`, ""},
		{`{name description}: kafka`, ""},
		{`(kafka`, "a/kafka"},
		{`)`, ""},
		{`^kafka`, "a/kafka"},
		{`kafka'; DROP TABLE entries; --`, ""},
		{`%_\`, ""},
		{"\x00", ""},
		{"kaf\x00ka", ""},
		{"kafka\x00", "a/kafka"},
		{"\xff\xfe\xfd", ""},
		{"日本語のパッケージ", ""},
		{"Ünïcödé ñ", ""},
		{"🚀 kafka", "a/kafka"},
		{"\u202e\u200bkafka", ""},
		{strings.Repeat("kafka ", 5000), ""},
		{strings.Repeat("k", 100000), ""},
		{strings.Repeat("(", 1000) + "kafka", "a/kafka"},
		{strings.Repeat(`"a" AND `, 500), ""},
	} {
		for _, sort := range []catalog.Sort{catalog.SortRelevance, catalog.SortName} {
			label := tc.text
			if len(label) > 40 {
				label = label[:40] + "..."
			}
			res, err := h.store.Search(h.ctx, catalog.Query{Text: tc.text, Sort: sort, Access: all})
			if err != nil {
				t.Errorf("Search %q: %v", label, err)
				continue
			}
			if tc.finds != "" && !slices.Contains(names(res.Packages), tc.finds) {
				t.Errorf("Search %q = %v, want it to find %s", label, names(res.Packages), tc.finds)
			}
		}
	}
	if st := h.stats(); st.Versions != 3 {
		t.Errorf("after hostile searches, %d versions, want 3", st.Versions)
	}
}
