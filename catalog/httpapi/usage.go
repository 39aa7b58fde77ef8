package httpapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/quota"
)

// errNoQuotas answers the usage endpoints of a server that keeps no quota
// ledger.
var errNoQuotas = fmt.Errorf("this server keeps no storage usage or quotas (berth serve catalog has no registry storage to count); ask the registry itself: %w", catalog.ErrNotImplemented)

// usages answers GET /api/v1/usage: the usage of every namespace that
// stores something or has a quota, among those the caller may pull from
// (MayPullFrom).
func (h *handler) usages(w http.ResponseWriter, r *http.Request) error {
	access, err := h.pullable(r)
	if err != nil {
		return err
	}
	if h.quota == nil {
		return errNoQuotas
	}
	all, err := h.quota.Usages(r.Context())
	if err != nil {
		return fmt.Errorf("read namespace usage: %w", err)
	}
	res := apiv1.Usages{Namespaces: []apiv1.NamespaceUsage{}}
	var counts map[string]int // pullable packages by namespace, once needed
	counted := false
	for _, u := range all {
		switch access.Covers(u.Namespace) {
		case catalog.CoversNone:
			continue
		case catalog.CoversSome:
			if !counted {
				if counts, err = pullableCounts(r.Context(), h.cat, access, ""); err != nil {
					return err
				}
				counted = true
			}
			if counts[u.Namespace] == 0 {
				continue
			}
		}
		res.Namespaces = append(res.Namespaces, UsageOf(u))
	}
	return writeJSON(w, http.StatusOK, res)
}

// namespaceUsage answers GET /api/v1/namespaces/{namespace}/usage. A
// namespace the caller may pull nothing from is not found, as is one that
// stores nothing and has no quota, the same way, so that the answer does
// not tell a hidden namespace from an unknown one.
func (h *handler) namespaceUsage(w http.ResponseWriter, r *http.Request) error {
	access, err := h.pullable(r)
	if err != nil {
		return err
	}
	ns, err := NamespaceParam(r)
	if err != nil {
		return err
	}
	if h.quota == nil {
		return errNoQuotas
	}
	notFound := fmt.Errorf("namespace %q has no usage to show: it stores nothing and has no quota, or you may not pull from it: %w", ns, catalog.ErrNotFound)
	if ok, err := MayPullFrom(r.Context(), h.cat, access, ns); err != nil {
		return err
	} else if !ok {
		return notFound
	}
	u, err := h.quota.Usage(r.Context(), ns)
	if err != nil {
		return fmt.Errorf("read the usage of namespace %q: %w", ns, err)
	}
	if u == (quota.Usage{Namespace: u.Namespace}) {
		return notFound // the ledger does not list it
	}
	u.Namespace = ns
	return writeJSON(w, http.StatusOK, UsageOf(u))
}

// MayPullFrom reports whether access lets the caller pull from namespace
// ns, whose usage it may then see: every package of it, or, where the rules
// decide package by package, some package the catalog holds there (asked
// of cat).
func MayPullFrom(ctx context.Context, cat Reader, access catalog.Access, ns string) (bool, error) {
	switch access.Covers(ns) {
	case catalog.CoversAll:
		return true, nil
	case catalog.CoversNone:
		return false, nil
	}
	counts, err := pullableCounts(ctx, cat, access, ns)
	return counts[ns] > 0, err
}

// pullableCounts counts the packages access allows in each namespace, or
// in namespace ns alone when it is not empty, with one search of cat.
func pullableCounts(ctx context.Context, cat Reader, access catalog.Access, ns string) (map[string]int, error) {
	res, err := cat.Search(ctx, catalog.Query{Namespace: ns, Access: access, Sort: catalog.SortName, Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("count the packages the caller may pull: %w", err)
	}
	return res.Facets.Namespace, nil
}

// UsageOf is u as the API writes it, and the UI shows it.
func UsageOf(u quota.Usage) apiv1.NamespaceUsage {
	return apiv1.NamespaceUsage{
		Namespace: u.Namespace, UsedBytes: u.UsedBytes, LimitBytes: u.LimitBytes,
		Blobs: u.Blobs, OpenUploads: u.OpenUploads,
	}
}
