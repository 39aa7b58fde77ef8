// Package retention applies berth's retention policies (docs/gc.md): in the
// namespaces whose policy sets keepLast, each package keeps its keepLast
// newest versions and every version that heads one of its channels; the
// other versions' tags are removed. Garbage collection, which runs after,
// then reclaims what only they held.
package retention

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/opencontainers/go-digest"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/graph"
)

// Version is one package version retention removes.
type Version struct {
	Namespace, Name, Version, Digest string
}

// Untagger removes a tag if it still names a digest (registry.Registry).
type Untagger interface {
	Untag(ctx context.Context, repo, tag string, dgst digest.Digest) (bool, error)
}

// Walker walks the catalog's indexed versions, package by package
// (catalog.Catalog, catalog.Store).
type Walker interface {
	Walk(ctx context.Context, access catalog.Access, namespace string, fn func(*catalog.Entry) error) error
}

// Expired lists the versions the policies expire, walking every indexed
// version of the catalog: keepLast says how many versions each package of a
// namespace keeps, 0 for all of them.
func Expired(ctx context.Context, store Walker, keepLast func(namespace string) int) ([]Version, error) {
	var out []Version
	var pkg []*catalog.Entry
	flush := func() {
		if len(pkg) > 0 {
			out = append(out, expire(pkg, keepLast(pkg[0].Namespace))...)
		}
		pkg = pkg[:0]
	}
	err := store.Walk(ctx, catalog.Access{All: true}, "", func(e *catalog.Entry) error {
		if len(pkg) > 0 && (pkg[0].Namespace != e.Namespace || pkg[0].Name != e.Name) {
			flush()
		}
		pkg = append(pkg, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("retention: %w", err)
	}
	flush()
	return out, nil
}

// expire returns the versions of one package beyond its keep newest that
// head no channel.
func expire(entries []*catalog.Entry, keep int) []Version {
	if keep <= 0 || len(entries) <= keep {
		return nil
	}
	versions := make([]graph.Version, len(entries))
	for i, e := range entries {
		versions[i] = graph.Version{Version: e.Tag, Digest: e.Digest, Metadata: e.Metadata}
	}
	heads := map[string]bool{}
	for _, ch := range graph.Build(versions).Channels() {
		heads[ch.Head] = true
	}
	newest := slices.Clone(entries)
	slices.SortFunc(newest, func(a, b *catalog.Entry) int {
		if c := cmp.Compare(catalog.VersionKey(b.Tag), catalog.VersionKey(a.Tag)); c != 0 {
			return c
		}
		return cmp.Compare(a.Tag, b.Tag)
	})
	var out []Version
	for _, e := range newest[keep:] {
		if !heads[e.Tag] {
			out = append(out, Version{Namespace: e.Namespace, Name: e.Name, Version: e.Tag, Digest: e.Digest})
		}
	}
	return out
}

// Apply removes the tags of versions through u, each only if it still names
// the digest retention read, and returns how many it removed. dryRun
// removes nothing and counts every version.
func Apply(ctx context.Context, u Untagger, versions []Version, dryRun bool) (int, error) {
	n := 0
	for _, v := range versions {
		if dryRun {
			n++
			continue
		}
		d, err := digest.Parse(v.Digest)
		if err != nil {
			continue // never indexed from a manifest: nothing to untag
		}
		removed, err := u.Untag(ctx, v.Namespace+"/"+v.Name, v.Version, d)
		if err != nil {
			return n, fmt.Errorf("retention: %s/%s:%s: %w", v.Namespace, v.Name, v.Version, err)
		}
		if removed {
			n++
		}
	}
	return n, nil
}
