package catalog_test

import (
	"path/filepath"
	"testing"

	"github.com/berth-registry/berth/pkgformat"
)

// BenchmarkOverview measures what the package page asks of the catalog
// (Overview: the package, its versions and its default channel's graph) for
// the fixture package with the most versions, mongodb-enterprise's OLM
// bundles, on a SQLite store.
func BenchmarkOverview(b *testing.B) {
	e := newEnv(b, envOptions{lose: true})
	ps, err := pkgformat.LoadRepository(filepath.Join(fixtures, "olm-community/mongodb-enterprise"), pkgformat.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range ps {
		e.pushPackage("bench", p)
	}
	if st, err := e.cat.Reconcile(e.ctx); err != nil || st.Indexed != len(ps) {
		b.Fatalf("%+v %v", st, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		pkg, g, err := e.cat.Overview(e.ctx, all, "bench", "mongodb-enterprise", "")
		if err != nil || len(pkg.Versions) != len(ps) || g == nil {
			b.Fatalf("%v versions, graph %v: %v", len(ps), g != nil, err)
		}
	}
}
