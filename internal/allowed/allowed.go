// Package allowed lists the methods a chi router takes for a path, for the
// Allow header of a 405 answer. berth answers HEAD wherever it answers GET
// (the server hands a HEAD on as a GET), so HEAD is listed after GET.
package allowed

import (
	"net/http"

	"github.com/go-chi/chi/v5"
)

// Methods returns the methods routes takes for the path of r, in a fixed
// order, HEAD after GET.
func Methods(routes chi.Routes, r *http.Request) []string {
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	var methods []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if !routes.Match(chi.NewRouteContext(), m, path) {
			continue
		}
		methods = append(methods, m)
		if m == http.MethodGet {
			methods = append(methods, http.MethodHead)
		}
	}
	return methods
}
