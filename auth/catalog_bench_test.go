package auth_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/searchindex"
	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/pkgformat"
)

// BenchmarkRestrictedSearch compares searches of 100,000 packages (1,000
// namespaces of 100) with access to everything and with the access
// CatalogAuthorizer gives a user who owns ten namespaces and some packages of
// an eleventh, and one denied a package of its own; "per-package" asks Decide
// for every package, without the namespace shortcut.
func BenchmarkRestrictedSearch(b *testing.B) {
	ix := searchindex.New()
	words := []string{"kafka", "postgres", "redis", "operator", "backup", "stream", "cache", "mesh"}
	for n := range 100_000 {
		ns, name := fmt.Sprintf("team-%03d", n/100), fmt.Sprintf("app-%05d", n)
		ix.Set(&searchindex.Doc{Summary: apiv1.PackageSummary{
			Namespace: ns, Name: name, Version: "1.0.0", Format: pkgformat.Helm,
			Description: words[n%len(words)] + " " + words[(n/8)%len(words)] + " package",
			Updated:     time.Unix(int64(n), 0),
		}})
	}
	p, err := auth.NewPolicy(&config.Auth{Public: []string{"team-999"}, Rules: []config.AuthRule{
		{Subjects: []string{"user:u"}, Repositories: []string{"team-01*/*"}, Actions: []string{"admin"}},
		{Subjects: []string{"user:u"}, Repositories: []string{"team-02*/*"}, Actions: []string{"pull"}},
		{Subjects: []string{"user:u"}, Repositories: []string{"team-500/app-5000*"}, Actions: []string{"pull"}},
		{Subjects: []string{"user:u"}, Repositories: []string{"team-021/app-02100"}, Actions: []string{"pull"}, Effect: "deny"},
	}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := auth.WithIdentity(context.Background(), auth.Identity{Subject: "user:u"})
	restricted, err := auth.CatalogAuthorizer{Policy: p}.Pullable(ctx)
	if err != nil {
		b.Fatal(err)
	}
	perPackage := restricted
	perPackage.Namespace = nil
	accesses := []struct {
		name   string
		access catalog.Access
	}{
		{"all", catalog.Access{All: true}}, {"restricted", restricted}, {"per-package", perPackage},
	}
	for _, q := range []struct {
		name  string
		query catalog.Query
	}{
		{"list", catalog.Query{}},
		{"list-updated", catalog.Query{Sort: catalog.SortUpdated}},
		{"text", catalog.Query{Text: "kafka"}},
		{"prefix", catalog.Query{Text: "app-0"}},
	} {
		for _, a := range accesses {
			b.Run(q.name+"/"+a.name, func(b *testing.B) {
				q.query.Access = a.access
				var total int
				for b.Loop() {
					res, err := ix.Search(q.query)
					if err != nil {
						b.Fatal(err)
					}
					total = res.Total
				}
				b.ReportMetric(float64(total), "total")
			})
		}
	}
}
