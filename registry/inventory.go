package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/distribution/distribution/v3"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
)

// inventoryPage is how many repository names one listing of the storage
// fetches while an inventory is taken.
const inventoryPage = 100

// Inventory reads from the storage what the registry holds. It calls fn
// once for each repository that allow keeps (every one when allow is nil),
// in the order distribution lists them, with the digests of every manifest
// revision and every blob linked in the repository, ordered and without
// duplicates; a blob linked in several repositories is listed under each.
// Repositories allow refuses are not read. Only one repository's digests are
// held at a time, so fn can write them out as they come.
//
// It reads the storage as distribution's garbage collector does, not over
// HTTP: no tag, referrer or manifest is parsed. It returns fn's error, the
// context's error, or the storage's error naming the repository.
func (r *Registry) Inventory(ctx context.Context, allow func(repository string) bool, fn func(repository string, digests []digest.Digest) error) error {
	return inventory(ctx, r.guard.namespace, allow, fn)
}

// inventory is Registry.Inventory over any namespace whose repositories'
// manifest services are distribution.ManifestEnumerators and whose blob
// stores are distribution.BlobEnumerators, as distribution's storage (and
// guardedNamespace over it) are.
func inventory(ctx context.Context, ns distribution.Namespace, allow func(string) bool, fn func(string, []digest.Digest) error) error {
	if allow != nil {
		ctx = WithRepositoryFilter(ctx, allow)
	}
	buf := make([]string, inventoryPage)
	last := ""
	for {
		n, err := ns.Repositories(ctx, buf, last)
		for _, name := range buf[:n] {
			ds, err := repositoryInventory(ctx, ns, name)
			if err != nil {
				return err
			}
			if err := fn(name, ds); err != nil {
				return err
			}
		}
		switch {
		case errors.Is(err, io.EOF), isPathNotFound(err): // the end; an empty storage has no repositories directory
			return nil
		case err != nil:
			return fmt.Errorf("registry: inventory: list repositories after %q: %w", last, err)
		case n == 0:
			return nil
		}
		last = buf[n-1]
	}
}

// repositoryInventory returns the digests of the manifest revisions and
// linked blobs of repository name, ordered and without duplicates.
func repositoryInventory(ctx context.Context, ns distribution.Namespace, name string) ([]digest.Digest, error) {
	fail := func(what string, err error) ([]digest.Digest, error) {
		return nil, fmt.Errorf("registry: inventory of %s: %s: %w", name, what, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	named, err := reference.WithName(name)
	if err != nil {
		return fail("repository name", err)
	}
	repo, err := ns.Repository(ctx, named)
	if err != nil {
		return fail("open", err)
	}
	ms, err := repo.Manifests(ctx)
	if err != nil {
		return fail("manifests", err)
	}
	manifests, ok := ms.(distribution.ManifestEnumerator)
	if !ok {
		return fail("manifests", errors.New("the storage cannot enumerate them"))
	}
	blobs, ok := repo.Blobs(ctx).(distribution.BlobEnumerator)
	if !ok {
		return fail("blobs", errors.New("the storage cannot enumerate them"))
	}
	ds := []digest.Digest{}
	add := func(d digest.Digest) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		ds = append(ds, d)
		return nil
	}
	// A repository without manifests or without blobs has no directory
	// for them: nothing to list.
	if err := manifests.Enumerate(ctx, add); err != nil && !isPathNotFound(err) {
		return fail("manifests", err)
	}
	if err := blobs.Enumerate(ctx, add); err != nil && !isPathNotFound(err) {
		return fail("blobs", err)
	}
	slices.Sort(ds)
	return slices.Compact(ds), nil
}
