package ui

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/httpapi"
	"github.com/berth-registry/berth/pkgformat"
)

// sourcesPage is the data of the sources page.
type sourcesPage struct {
	// Namespace narrows the page to one namespace's sources; empty for all.
	Namespace string
	// Tracked is false on a server that follows no sources.
	Tracked bool
	Sources []apiv1.Source
}

func (p sourcesPage) title() string {
	if p.Namespace != "" {
		return "Sources of " + p.Namespace
	}
	return "Package sources"
}

// sourcesList serves GET /ui/sources?namespace=: the status of the tracked
// sources whose package the viewer may pull, as GET /api/v1/sources
// answers it.
func (h *handler) sourcesList(w http.ResponseWriter, r *http.Request) error {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return fmt.Errorf("the query string is malformed: %v: %w", err, catalog.ErrInvalid)
	}
	for k := range q {
		if k != "namespace" {
			return fmt.Errorf("query parameter %q: unknown; the page takes namespace only: %w", k, catalog.ErrInvalid)
		}
	}
	ns := q.Get("namespace")
	if ns != "" {
		if err := pkgformat.ValidNamespace(ns); err != nil {
			return fmt.Errorf("query parameter %q: %v: %w", "namespace", err, catalog.ErrInvalid)
		}
	}
	access, err := h.auth.Pullable(r.Context())
	if err != nil {
		return err
	}
	list, err := httpapi.VisibleSources(r.Context(), h.sources, access, ns)
	if err != nil {
		return err
	}
	h.render(w, r, http.StatusOK, "sources", sourcesPage{Namespace: ns, Tracked: h.sources != nil, Sources: list})
	return nil
}
