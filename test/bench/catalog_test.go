package main

// Tests of the catalog benchmarks' pure parts: the corpus generator and the
// table. Nothing here starts a server or times anything.

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/pkgformat"
)

// builtCorpus builds every version of a small corpus.
func builtCorpus(t *testing.T, seed uint64, versions int) (*corpus, [][]*pkgformat.Package) {
	t.Helper()
	c := newCorpus(seed, versions)
	out := make([][]*pkgformat.Package, len(c.packages))
	for i := range c.packages {
		pkgs, err := c.packages[i].build()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = pkgs
	}
	return c, out
}

func TestCorpusIsDeterministic(t *testing.T) {
	a, pa := builtCorpus(t, 7, 200)
	b, pb := builtCorpus(t, 7, 200)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two corpora from the same seed differ")
	}
	for i := range pa {
		for j := range pa[i] {
			x, err := pa[i][j].Artifact()
			if err != nil {
				t.Fatal(err)
			}
			y, err := pb[i][j].Artifact()
			if err != nil {
				t.Fatal(err)
			}
			if x.ManifestDesc.Digest != y.ManifestDesc.Digest {
				t.Errorf("%s %s: built twice, digests %s and %s", pa[i][j].Metadata.Name, pa[i][j].Metadata.Version, x.ManifestDesc.Digest, y.ManifestDesc.Digest)
			}
		}
	}
	// Building a package alone gives what building all in order gave.
	last := &a.packages[len(a.packages)-1]
	alone, err := last.build()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(alone, pa[len(pa)-1]) {
		t.Error("a package built on its own differs from the same package built after the others")
	}
	if c := newCorpus(8, 200); reflect.DeepEqual(c.packages, a.packages) {
		t.Error("another seed gave the same corpus")
	}
}

func TestCorpusPackages(t *testing.T) {
	const versions = 600
	c, built := builtCorpus(t, 1, versions)
	if c.versions != versions {
		t.Errorf("corpus holds %d versions, want %d", c.versions, versions)
	}
	if n := len(c.packages); n < versions/7 || n > versions/3 {
		t.Errorf("%d packages for %d versions; want about 5 versions each", n, versions)
	}
	names := map[string]bool{}
	formats := map[pkgformat.Format]int{}
	namespaces := map[string]bool{}
	total, withKube, withChannels := 0, 0, 0
	for i, p := range c.packages {
		if names[p.name] {
			t.Errorf("name %s used twice", p.name)
		}
		names[p.name] = true
		namespaces[p.namespace] = true
		formats[p.format]++
		if p.namespace == kudoFixtureNamespace || p.namespace == olmFixtureNamespace {
			t.Errorf("%s is in the fixtures' namespace %s", p.name, p.namespace)
		}
		if n := strings.Count(p.description, ". "); n > 2 || !strings.HasSuffix(p.description, ".") {
			t.Errorf("%s: description is not one to three sentences: %q", p.name, p.description)
		}
		pkgs := built[i]
		if len(pkgs) != p.versions {
			t.Errorf("%s: %d versions built, want %d", p.name, len(pkgs), p.versions)
		}
		tags := map[string]bool{}
		for _, pkg := range pkgs {
			total++
			md := pkg.Metadata
			tag := pkgformat.Tag(md.Version)
			if tags[tag] {
				t.Errorf("%s: version %s twice", p.name, md.Version)
			}
			tags[tag] = true
			if md.Name != p.name || md.Format != p.format {
				t.Errorf("%s %s: read back as %s (%s)", p.name, md.Version, md.Name, md.Format)
			}
			if len(md.ProvidedAPIs) == 0 {
				t.Errorf("%s %s provides no API", p.name, md.Version)
			}
			if md.MinKubeVersion != "" {
				withKube++
			}
			if len(md.Channels) > 0 {
				withChannels++
			}
			if p.format != pkgformat.Plain && (md.Description != p.description || len(md.Maintainers) == 0) {
				t.Errorf("%s %s: description %q and maintainers %v not read", p.name, md.Version, md.Description, md.Maintainers)
			}
			// The catalog reads what was pushed: the content tarball, again
			// through pkgformat, named by the repository and the tag.
			a, err := pkg.Artifact()
			if err != nil {
				t.Fatal(err)
			}
			files, err := pkgformat.ReadArchive(bytes.NewReader(a.Content), pkgformat.Limits{})
			if err != nil {
				t.Fatalf("%s %s: %v", p.name, md.Version, err)
			}
			again, err := pkgformat.New(files, pkgformat.Options{Name: p.name, Version: tag})
			if err != nil {
				t.Fatalf("%s %s: content does not read back: %v", p.name, md.Version, err)
			}
			if again.Metadata.Version != md.Version || again.Metadata.Format != md.Format {
				t.Errorf("%s %s: content reads back as %s (%s)", p.name, md.Version, again.Metadata.Version, again.Metadata.Format)
			}
		}
	}
	if total != versions {
		t.Errorf("%d versions built, want %d", total, versions)
	}
	for _, f := range []pkgformat.Format{pkgformat.KUDO, pkgformat.OLM, pkgformat.Helm, pkgformat.Plain} {
		if formats[f] == 0 {
			t.Errorf("no %s package", f)
		}
	}
	if len(namespaces) < 10 {
		t.Errorf("packages in %d namespaces, want most of the %d", len(namespaces), len(generatedNamespaces))
	}
	if withKube == 0 || withKube == total || withChannels == 0 {
		t.Errorf("%d of %d versions have a minimum Kubernetes version, %d have channels", withKube, total, withChannels)
	}
}

func TestFreshPackages(t *testing.T) {
	c := newCorpus(1, 2000)
	corpusNames := map[string]bool{}
	for _, p := range c.packages {
		corpusNames[p.name] = true
	}
	fresh := freshPackages(1, 50, freshNamespace)
	seen := map[string]bool{}
	for _, p := range fresh {
		if seen[p.name] || corpusNames[p.name] {
			t.Errorf("fresh name %s is not unique", p.name)
		}
		seen[p.name] = true
		pkgs, err := p.build()
		if err != nil {
			t.Fatal(err)
		}
		if len(pkgs) != 1 || p.namespace != freshNamespace {
			t.Errorf("%s: %d versions in %s", p.name, len(pkgs), p.namespace)
		}
	}
}

func TestSearchTerms(t *testing.T) {
	c := newCorpus(1, 5000)
	term, df := c.midFrequencyTerm(0.02)
	want := 0.02 * float64(len(c.packages))
	if df < int(want/2) || df > int(want*2) || len(term) < 5 {
		t.Errorf("mid-frequency term %q in %d packages, want about %.0f", term, df, want)
	}
	held := 0
	for _, p := range c.packages {
		if p.format != pkgformat.Plain && strings.Contains(strings.ToLower(p.description), term) {
			held++
		}
	}
	if held < df {
		t.Errorf("%q is in %d descriptions of packages with one, counted %d", term, held, df)
	}
	if tech := c.commonTech(); !slices.Contains(techs, tech) {
		t.Errorf("common tech %q is not from the vocabulary", tech)
	}
	if ns := c.largestNamespace(); !slices.Contains(generatedNamespaces, ns) {
		t.Errorf("largest namespace %q", ns)
	}
	for in, want := range map[string]string{"postgres": "post", "kafka": "kafk", "etcd": "etc", "ray": "ray"} {
		if got := prefixOf(in); got != want {
			t.Errorf("prefixOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPercentile(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100 .. 1
	}
	for _, tc := range []struct {
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 0.5, 0},
		{ms(7), 0.99, 7 * time.Millisecond},
		{ms(3, 1, 2), 0.5, 2 * time.Millisecond},
		{ms(4, 1, 3, 2), 0.5, 2 * time.Millisecond},
		{ms(hundred...), 0.99, 99 * time.Millisecond},
		{ms(hundred...), 0.5, 50 * time.Millisecond},
		{ms(hundred...), 1, 100 * time.Millisecond},
	} {
		in := slices.Clone(tc.in)
		if got := percentile(in, tc.p); got != tc.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", tc.in, tc.p, got, tc.want)
		}
		if !slices.Equal(in, tc.in) {
			t.Error("percentile reordered its input")
		}
	}
}

func TestFormatting(t *testing.T) {
	for d, want := range map[time.Duration]string{
		850 * time.Microsecond:   "0.85 ms",
		12300 * time.Microsecond: "12.30 ms",
		1500 * time.Millisecond:  "1.50 s",
		754 * time.Second:        "12m34s",
	} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v) = %q, want %q", d, got, want)
		}
	}
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 100527: "100,527", 1234567: "1,234,567", -4200: "-4,200"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseProcStatus(t *testing.T) {
	status := "Name:\tberth\nVmPeak:\t 2000000 kB\nVmHWM:\t  180224 kB\nVmRSS:\t  102400 kB\nRssAnon:\t   61440 kB\nRssFile:\t   40960 kB\nThreads:\t12\n"
	got, err := parseProcStatus([]byte(status))
	want := procMemory{rss: 100 << 20, hwm: 176 << 20, anon: 60 << 20, file: 40 << 20}
	if err != nil || got != want {
		t.Errorf("parseProcStatus = %+v, %v; want %+v", got, err, want)
	}
	if _, err := parseProcStatus([]byte("Name:\tx\n")); err == nil {
		t.Error("no error without VmRSS")
	}
}

func TestPrintCatalogTable(t *testing.T) {
	rows := []catRow{
		{name: "full rebuild", value: "95.00 s", detail: "1,058 versions/s"},
		limitRow("restart: /readyz", 300*time.Millisecond, 2*time.Second, ""),
		{name: "search term, c=1", value: "0.80 ms", p99: "6.10 ms", target: "p99 <= 5.00 ms", result: verdict(false), detail: "412 matches"},
	}
	var out bytes.Buffer
	printCatalogTable(&out, "catalog: test", rows)
	want := `catalog: test
row               p50 / value  p99      target          result  detail
full rebuild      95.00 s      -        -               -       1,058 versions/s
restart: /readyz  300.00 ms    -        <= 2.00 s       met     
search term, c=1  0.80 ms      6.10 ms  p99 <= 5.00 ms  MISS    412 matches
1 of 2 rows with a target MISS (or are INCOMPLETE/ERROR)
`
	if got := out.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}
