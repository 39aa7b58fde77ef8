package ui

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/httpapi"
	"github.com/berth-registry/berth/pkgformat"
)

// searchPage is the data of the search page and of a namespace's page.
type searchPage struct {
	// Namespace is the namespace of a namespace's page; empty on the
	// search page.
	Namespace string
	// Action is the URL the filter form submits to.
	Action string
	Query  catalog.Query
	// Form holds the parameters as given, to fill the form.
	Form     url.Values
	Packages []apiv1.PackageSummary
	Total    int
	Facets   []facet
	// First and Last number the packages shown, from 1.
	First, Last int
	Prev, Next  string
	// Storage is a namespace's storage against its quota; nil on the search
	// page, without a quota ledger, and for a namespace the viewer may pull
	// nothing from.
	Storage *namespaceStorage
	// Sources is set on a namespace's page when the server follows
	// package sources: the page links to the namespace's.
	Sources bool
}

// namespaceStorage is what a namespace's page shows of its storage.
type namespaceStorage struct {
	apiv1.NamespaceUsage
	// Low and High are the thresholds of the usage meter: 80% and 95% of
	// the quota.
	Low, High int64
}

// Full reports whether the namespace has a quota and has used all of it.
func (s namespaceStorage) Full() bool { return s.LimitBytes > 0 && s.UsedBytes >= s.LimitBytes }

// storage reads namespace ns's usage for a viewer with access; nil when
// the UI has no quota ledger or the viewer may not pull from ns
// (httpapi.MayPullFrom).
func (h *handler) storage(ctx context.Context, access catalog.Access, ns string) (*namespaceStorage, error) {
	if h.quota == nil {
		return nil, nil
	}
	if ok, err := httpapi.MayPullFrom(ctx, h.cat, access, ns); !ok || err != nil {
		return nil, err
	}
	u, err := h.quota.Usage(ctx, ns)
	if err != nil {
		return nil, fmt.Errorf("read the usage of namespace %q: %w", ns, err)
	}
	return &namespaceStorage{
		NamespaceUsage: httpapi.UsageOf(u),
		Low:            u.LimitBytes / 100 * 80, High: u.LimitBytes / 100 * 95,
	}, nil
}

func (p searchPage) title() string {
	switch {
	case p.Namespace != "":
		return "Namespace " + p.Namespace
	case p.Query.Text != "":
		return "Search: " + p.Query.Text
	}
	return "Search packages"
}

// facet is one filter with the number of matches of each of its values.
type facet struct {
	Name   string // the parameter
	Label  string
	Values []facetValue
}

type facetValue struct {
	Label    string
	Count    int
	URL      string
	Selected bool
}

// search serves GET /: the search form, facets and one page of results.
func (h *handler) search(w http.ResponseWriter, r *http.Request) error {
	return h.searchIn(w, r, "")
}

// namespace serves GET /ui/namespaces/{namespace}: the packages of one
// namespace, searched as on the search page.
func (h *handler) namespace(w http.ResponseWriter, r *http.Request) error {
	ns, err := httpapi.NamespaceParam(r)
	if err != nil {
		return err
	}
	return h.searchIn(w, r, ns)
}

// searchIn answers a search, within namespace ns unless it is empty.
func (h *handler) searchIn(w http.ResponseWriter, r *http.Request, ns string) error {
	q, err := httpapi.ParseSearch(r)
	if err != nil {
		return err
	}
	action := "/"
	if ns != "" {
		if q.Namespace != "" && q.Namespace != ns {
			return fmt.Errorf("query parameter %q: the page is of namespace %q: %w", "namespace", ns, catalog.ErrInvalid)
		}
		q.Namespace, action = ns, "/ui/namespaces/"+url.PathEscape(ns)
	}
	if q.Access, err = h.auth.Pullable(r.Context()); err != nil {
		return err
	}
	res, err := h.cat.Search(r.Context(), q)
	if err != nil {
		return err
	}
	form := r.URL.Query()
	p := searchPage{
		Namespace: ns, Action: action, Query: q, Form: form,
		Packages: res.Packages, Total: res.Total,
		First: q.Offset + 1, Last: q.Offset + len(res.Packages),
		Sources: h.sources != nil,
	}
	if ns != "" {
		if p.Storage, err = h.storage(r.Context(), q.Access, ns); err != nil {
			return err
		}
	}
	if next := q.Offset + q.Limit; next < res.Total {
		p.Next = pageURL(action, form, next)
	}
	if q.Offset > 0 {
		p.Prev = pageURL(action, form, max(q.Offset-q.Limit, 0))
	}
	p.Facets = append(p.Facets, countFacet(action, form, "format", "Format", res.Facets.Format))
	if ns == "" {
		p.Facets = append(p.Facets, countFacet(action, form, "namespace", "Namespace", res.Facets.Namespace))
	}
	p.Facets = append(p.Facets, verifiedFacet(action, form, res.Total, res.Facets.Verified))
	h.render(w, r, http.StatusOK, "search", p)
	return nil
}

// pageURL is the URL of the page of results that starts at offset.
func pageURL(action string, form url.Values, offset int) string {
	v := cloneValues(form)
	v.Del("cursor")
	if offset > 0 {
		v.Set("cursor", httpapi.EncodeCursor(offset))
	}
	return withQuery(action, v)
}

// filterURL is the URL of the first page of results with parameter name set
// to value (removed when value is empty).
func filterURL(action string, form url.Values, name, value string) string {
	v := cloneValues(form)
	v.Del("cursor")
	v.Del(name)
	if value != "" {
		v.Set(name, value)
	}
	return withQuery(action, v)
}

func withQuery(path string, v url.Values) string {
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		if len(vs) > 0 && vs[0] != "" {
			out[k] = slices.Clone(vs)
		}
	}
	return out
}

// countFacet is the facet of parameter name, its values by count (most
// first), with "any" first.
func countFacet(action string, form url.Values, name, label string, counts map[string]int) facet {
	cur := form.Get(name)
	f := facet{Name: name, Label: label, Values: []facetValue{{Label: "any", URL: filterURL(action, form, name, ""), Selected: cur == "", Count: -1}}}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b)) })
	for _, k := range keys {
		f.Values = append(f.Values, facetValue{Label: k, Count: counts[k], URL: filterURL(action, form, name, k), Selected: cur == k})
	}
	return f
}

// verifiedFacet is the facet of verified packages.
func verifiedFacet(action string, form url.Values, total, verified int) facet {
	cur := form.Get("verified")
	f := facet{Name: "verified", Label: "Signature", Values: []facetValue{
		{Label: "any", URL: filterURL(action, form, "verified", ""), Selected: cur == "", Count: -1},
		{Label: "verified", URL: filterURL(action, form, "verified", "true"), Selected: cur == "true", Count: verified},
	}}
	if cur != "true" {
		f.Values = append(f.Values, facetValue{Label: "not verified", URL: filterURL(action, form, "verified", "false"), Selected: cur == "false", Count: total - verified})
	}
	return f
}

// formats are the package formats, as the filter form offers them.
var formats = []pkgformat.Format{pkgformat.KUDO, pkgformat.OLM, pkgformat.Helm, pkgformat.Plain}

// sorts are the orders the search form offers.
var sorts = []catalog.Sort{catalog.SortRelevance, catalog.SortName, catalog.SortUpdated}

// Formats lists the package formats for the form.
func (searchPage) Formats() []pkgformat.Format { return formats }

// Sorts lists the orders for the form.
func (searchPage) Sorts() []catalog.Sort { return sorts }

// ShowingText says which results are shown.
func (p searchPage) ShowingText() string {
	switch {
	case p.Total == 0:
		return "No packages match."
	case p.Total == 1:
		return "1 package."
	case p.First == 1 && p.Last == p.Total:
		return strconv.Itoa(p.Total) + " packages."
	}
	return fmt.Sprintf("Packages %d–%d of %d.", p.First, p.Last, p.Total)
}
