package catalog

import (
	"context"
	"errors"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/olm"
	"github.com/berth-registry/berth/pkgformat"
)

var (
	_ olm.Source     = (*Catalog)(nil)
	_ olm.Reconciler = (*Catalog)(nil)
)

// Reconciling reports whether this process's first reconciliation with the
// registry is running, the one that indexes everything a catalog without
// its database finds, for the OLM catalog publisher, which then publishes a
// namespace's changes once they settle. Later reconciliations are not
// reported: pushes during them keep the publisher's short debounce.
func (c *Catalog) Reconciling() bool {
	return c.reconciling.Load() > 0 && c.reconcileStatus().Runs == 0
}

// OLMPackages lists, per namespace, the packages that have indexed OLM
// versions, for the OLM catalog publisher.
func (c *Catalog) OLMPackages(ctx context.Context) (map[string][]string, error) {
	out := make(map[string][]string)
	err := c.store.Walk(ctx, Access{All: true}, "", func(e *Entry) error {
		if e.Metadata == nil || e.Metadata.Format != pkgformat.OLM {
			return nil
		}
		if names := out[e.Namespace]; len(names) == 0 || names[len(names)-1] != e.Name {
			out[e.Namespace] = append(names, e.Name) // Walk orders by namespace and name
		}
		return nil
	})
	return out, err
}

// OLMVersions returns the indexed OLM versions of a package, in no
// particular order; none when it has none (deleted, or not an OLM package).
func (c *Catalog) OLMVersions(ctx context.Context, namespace, name string) ([]olm.Version, error) {
	entries, err := c.store.Entries(ctx, namespace, name)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []olm.Version
	for _, e := range entries {
		if e.Status == apiv1.StatusIndexed && e.Metadata != nil && e.Metadata.Format == pkgformat.OLM {
			out = append(out, olm.Version{Version: e.Tag, Digest: e.Digest, Metadata: e.Metadata, Bundle: e.OLM})
		}
	}
	return out, nil
}
