// Package mirrortest serves a fake of the parts of a berth server's catalog
// API that berth mirror check reads, for tests of mirror.CheckInstall and
// the command.
package mirrortest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/pkgformat"
)

// Package returns a package with versions, each verified, with a digest
// derived from its name.
func Package(namespace, name string, format pkgformat.Format, versions ...string) *apiv1.Package {
	p := &apiv1.Package{Namespace: namespace, Name: name, Format: format}
	for _, v := range versions {
		p.Versions = append(p.Versions, apiv1.VersionSummary{Version: v, Digest: digest.FromString(namespace + "/" + name + "@" + v).String(), Verified: true})
	}
	return p
}

// NewBerth starts a server answering, as a berth does, the package search
// (GET /api/v1/packages, namespace= honoured, one page), each package
// (GET /api/v1/packages/{ns}/{name}) and each version's installable answer
// (GET …/versions/{v}/installable) from installable, by
// "namespace/name@version"; anything else is the API's NOT_FOUND or a
// plain 404. It returns the server's URL; the server stops when the test
// ends.
func NewBerth(t testing.TB, packages []*apiv1.Package, installable map[string]*apiv1.Installable) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		write := func(status int, v any) {
			w.Header().Set("Content-Type", apiv1.MediaTypeJSON)
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(v)
		}
		notFound := func(what string) {
			write(http.StatusNotFound, apiv1.Errors{Errors: []apiv1.Error{{Code: "NOT_FOUND", Message: what + " not found"}}})
		}
		rest, ok := strings.CutPrefix(r.URL.Path, "/api/v1/packages")
		if !ok {
			http.NotFound(w, r)
			return
		}
		parts := strings.Split(strings.TrimPrefix(rest, "/"), "/")
		switch {
		case rest == "":
			res := apiv1.SearchResponse{}
			for _, p := range packages {
				if ns := r.URL.Query().Get("namespace"); ns == "" || ns == p.Namespace {
					res.Packages = append(res.Packages, apiv1.PackageSummary{Namespace: p.Namespace, Name: p.Name, Format: p.Format})
				}
			}
			res.Total = len(res.Packages)
			write(http.StatusOK, res)
		case len(parts) == 2:
			for _, p := range packages {
				if p.Namespace == parts[0] && p.Name == parts[1] {
					write(http.StatusOK, p)
					return
				}
			}
			notFound("package")
		case len(parts) == 5 && parts[2] == "versions" && parts[4] == "installable":
			if inst, ok := installable[parts[0]+"/"+parts[1]+"@"+parts[3]]; ok {
				write(http.StatusOK, inst)
				return
			}
			notFound("version")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
