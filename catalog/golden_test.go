package catalog_test

import (
	"bufio"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/pkgformat"
)

var update = flag.Bool("update", false, "rewrite testdata/search.golden with the current results")

// goldenFile holds search-quality cases over the real fixtures: a line
// "query: <query string>" (the parameters of GET /api/v1/packages) and, below
// it, the expected top results in order, one "namespace/name" per line. The
// results must start with exactly these. KUDO fixtures are in namespace kudo,
// OLM community operators in namespace community.
const goldenFile = "testdata/search.golden"

// goldenTop is how many results -update writes per query.
const goldenTop = 5

func TestSearchGolden(t *testing.T) {
	cases := readGolden(t)
	e := newEnv(t, envOptions{})
	n := pushAllFixtures(t, e)
	e.waitFor("every fixture indexed", func() bool {
		st, err := e.cat.Status(e.ctx)
		return err == nil && st.Versions == n
	})
	var out strings.Builder
	for _, c := range cases {
		q := parseQuery(t, c.query)
		res, err := e.cat.Search(e.ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", c.query, err)
		}
		var got []string
		for _, p := range res.Packages {
			got = append(got, p.Namespace+"/"+p.Name)
		}
		if *update {
			fmt.Fprintf(&out, "query: %s\n", c.query)
			for _, g := range got[:min(len(got), goldenTop)] {
				fmt.Fprintf(&out, "  %s\n", g)
			}
			out.WriteString("\n")
			continue
		}
		if len(got) < len(c.want) || strings.Join(got[:len(c.want)], " ") != strings.Join(c.want, " ") {
			t.Errorf("query %s:\n got  %v\n want %v first", c.query, got[:min(len(got), len(c.want)+2)], c.want)
		}
	}
	if *update {
		if err := os.WriteFile(goldenFile, []byte(strings.TrimSpace(out.String())+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type goldenCase struct {
	query string
	want  []string
}

func readGolden(t *testing.T) []goldenCase {
	t.Helper()
	f, err := os.Open(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []goldenCase
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "query:"):
			cases = append(cases, goldenCase{query: strings.TrimSpace(strings.TrimPrefix(line, "query:"))})
		case len(cases) > 0:
			cases[len(cases)-1].want = append(cases[len(cases)-1].want, line)
		default:
			t.Fatalf("%s: result %q before any query", goldenFile, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cases
}

// parseQuery reads the subset of the search API's parameters the golden file uses.
func parseQuery(t *testing.T, s string) catalog.Query {
	t.Helper()
	v, err := url.ParseQuery(s)
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	q := catalog.Query{Text: v.Get("q"), Namespace: v.Get("namespace"), Format: pkgformat.Format(v.Get("format")),
		Channel: v.Get("channel"), Access: all, Limit: 20}
	if p := v.Get("provides"); p != "" {
		group, kind, ok := strings.Cut(p, "/")
		switch {
		case ok:
			q.Provides = catalog.APIFilter{Group: group, Kind: kind}
		case strings.Contains(p, "."):
			q.Provides.Group = p
		default:
			q.Provides.Kind = p
		}
	}
	if k := v.Get("kubeVersion"); k != "" {
		key, ok := catalog.KubeVersionKey(k)
		if !ok {
			t.Fatalf("%s: bad kubeVersion", s)
		}
		q.KubeVersion = key
	}
	if l := v.Get("limit"); l != "" {
		q.Limit, _ = strconv.Atoi(l)
	}
	return q
}

// fixtureVersions is how many versions the fixtures hold: 38 KUDO, 489 OLM.
const fixtureVersions = 38 + 489

// pushAllFixtures pushes every KUDO version to namespace kudo and every OLM
// version to namespace community; it returns how many versions it pushed,
// and fails the test unless that is fixtureVersions.
func pushAllFixtures(t *testing.T, e *env) int {
	t.Helper()
	n := 0
	kudo, err := filepath.Glob(filepath.Join(fixtures, "kudo", "*", "*", "operator.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range kudo {
		dir, _ := filepath.Rel(fixtures, filepath.Dir(op))
		e.pushPackage("kudo", load(t, dir))
		n++
	}
	olm, err := os.ReadDir(filepath.Join(fixtures, "olm-community"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range olm {
		if !d.IsDir() {
			continue
		}
		for _, p := range loadRepository(t, filepath.Join("olm-community", d.Name())) {
			e.pushPackage("community", p)
			n++
		}
	}
	if n != fixtureVersions {
		t.Fatalf("pushed %d fixture versions from %s, want %d", n, fixtures, fixtureVersions)
	}
	return n
}
