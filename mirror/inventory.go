package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/internal/atomicfile"
)

// invConcurrency bounds the requests a walk of a registry has in flight.
const invConcurrency = 8

// TakeInventory returns what the registry at host[:port] holds; its
// Registry is host. From a berth server it asks GET /api/v1/inventory,
// which reads the server's storage. From any other OCI registry (one that
// answers that route 404, or 501 as berth serve catalog does) it walks the
// registry over the distribution API: /v2/_catalog, each repository's tags,
// each tag's manifest and, recursively, the manifests and blobs it refers
// to (an index's manifests, a manifest's config and layers, but not its
// subject), and the referrers of each manifest found (on registries
// without the referrers API, those the referrers tag schema's sha256-<hex>
// indexes list), with at most 8 requests in flight. A walk finds only what tags and
// referrers reach; the berth route also lists untagged manifests and blobs
// no manifest names. Layers that name URLs (non-distributable layers) are
// left out, as the registry may not hold them. progress, when not nil, is
// called with the number of repositories done so far.
//
// It returns an error naming the registry, and the repository when one
// failed; an error from the berth route other than its absence (a denied
// or unauthenticated caller, a server error) is returned as it is, without
// walking.
func TakeInventory(ctx context.Context, c *client.Client, host string, progress func(repos int)) (*Inventory, error) {
	cat, err := c.Catalog(host)
	if err != nil {
		return nil, fmt.Errorf("inventory of %s: %w", host, err)
	}
	inv, err := cat.Inventory(ctx)
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return invWalk(ctx, c, host, progress)
	case err != nil:
		return nil, fmt.Errorf("inventory of %s: %w", host, err)
	}
	inv.Registry = host
	if err := invCheck(inv); err != nil {
		return nil, fmt.Errorf("inventory of %s: the server's answer: %w", host, err)
	}
	if progress != nil {
		progress(len(inv.Repositories))
	}
	return inv, nil
}

// ReadInventory reads the inventory file at path, as WriteInventory writes
// it, and returns it with the sha256 digest of the file's bytes. It checks
// the media type, the repository names and the digests, and orders each
// repository's digests; fields it does not know are ignored. Its errors
// name the file, and the repository and digest at fault.
func ReadInventory(path string) (*Inventory, digest.Digest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("inventory: %w", err)
	}
	var inv Inventory
	if err := json.Unmarshal(data, &inv); err != nil {
		return nil, "", fmt.Errorf("inventory %s: not an inventory document: %w", path, err)
	}
	if err := invCheck(&inv); err != nil {
		return nil, "", fmt.Errorf("inventory %s: %w", path, err)
	}
	return &inv, digest.FromBytes(data), nil
}

// WriteInventory writes inv to path as indented JSON, atomically (a
// temporary file in the same directory, renamed over path), and returns
// the sha256 digest of the bytes written. An empty MediaType is written as
// InventoryMediaType; another is an error, as is an invalid repository name
// or digest. inv is not changed.
func WriteInventory(path string, inv *Inventory) (digest.Digest, error) {
	out := *inv
	if out.MediaType == "" {
		out.MediaType = InventoryMediaType
	}
	out.Repositories = make(map[string][]digest.Digest, len(inv.Repositories))
	for repo, ds := range inv.Repositories {
		out.Repositories[repo] = slices.Clone(ds)
	}
	if err := invCheck(&out); err != nil {
		return "", fmt.Errorf("inventory %s: %w", path, err)
	}
	data, err := json.MarshalIndent(&out, "", "  ")
	if err != nil {
		return "", fmt.Errorf("inventory %s: %w", path, err)
	}
	data = append(data, '\n')
	if err := atomicfile.Write(path, data); err != nil {
		return "", fmt.Errorf("inventory %s: %w", path, err)
	}
	return digest.FromBytes(data), nil
}

// InventoryOf is the inventory of what the far side holds once the archive
// that m describes was imported: for each version, its repository holds
// every digest the version needs; for each image carried, a repository
// named by its source repository (quay.io/org/img) holds every digest the
// image needs, which an export matches with the far side's repository of
// the same path under any prefix. Its Taken is when the archive was made;
// its Registry is empty, as the archive does not name the far side.
func InventoryOf(m *Manifest) *Inventory {
	inv := &Inventory{MediaType: InventoryMediaType, Taken: m.Created, Repositories: map[string][]digest.Digest{}}
	for _, v := range m.Versions {
		inv.Repositories[v.Repository] = append(inv.Repositories[v.Repository], v.Needs...)
	}
	for _, img := range m.Images {
		if img.Problem == "" {
			inv.Repositories[img.Repository] = append(inv.Repositories[img.Repository], img.Needs...)
		}
	}
	for repo, ds := range inv.Repositories {
		slices.Sort(ds)
		inv.Repositories[repo] = slices.Compact(ds)
	}
	return inv
}

// invCheck checks an inventory's media type, repository names and digests,
// and orders each repository's digests without duplicates. A missing
// repositories map is an empty one.
func invCheck(inv *Inventory) error {
	if inv.MediaType != InventoryMediaType {
		return fmt.Errorf("mediaType %q, want %q (an inventory written by berth mirror inventory)", inv.MediaType, InventoryMediaType)
	}
	if inv.Repositories == nil {
		inv.Repositories = map[string][]digest.Digest{}
	}
	for repo, ds := range inv.Repositories {
		if err := (registry.Reference{Registry: "inventory", Repository: repo}).ValidateRepository(); err != nil {
			return fmt.Errorf("repository %q: not a repository name", repo)
		}
		for _, d := range ds {
			if err := d.Validate(); err != nil {
				return fmt.Errorf("repository %s: digest %q: %w", repo, d, err)
			}
		}
		if ds == nil {
			ds = []digest.Digest{}
		}
		slices.Sort(ds)
		inv.Repositories[repo] = slices.Compact(ds)
	}
	return nil
}

// invWalk takes the inventory of a registry without berth's route by
// walking it over the distribution API (TakeInventory). It lists every
// repository first, so that the requests in flight never exceed
// invConcurrency.
func invWalk(ctx context.Context, c *client.Client, host string, progress func(int)) (*Inventory, error) {
	taken := time.Now().UTC()
	var names []string
	err := c.Registry(host).Repositories(ctx, "", func(page []string) error {
		names = append(names, page...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("inventory of %s: list its repositories (/v2/_catalog): %w", host, err)
	}
	inv := &Inventory{MediaType: InventoryMediaType, Registry: host, Taken: taken, Repositories: make(map[string][]digest.Digest, len(names))}
	sem := make(chan struct{}, invConcurrency)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(invConcurrency)
	var mu sync.Mutex
	for _, name := range names {
		g.Go(func() error {
			ds, err := invWalkRepository(gctx, c.Repository(host, name), sem)
			if err != nil {
				return fmt.Errorf("inventory of %s/%s: %w", host, name, err)
			}
			mu.Lock()
			defer mu.Unlock()
			inv.Repositories[name] = ds
			if progress != nil {
				progress(len(inv.Repositories))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return inv, nil
}

// invRepoWalk is the walk of one repository.
type invRepoWalk struct {
	ctx  context.Context
	repo *remote.Repository
	sem  chan struct{} // shared by every repository's walk
	g    *errgroup.Group

	mu     sync.Mutex
	held   map[digest.Digest]bool // every manifest and blob found
	walked map[digest.Digest]bool // the manifests read or being read
}

// invWalkRepository returns the digests of what the tags of repo and the
// referrers of its manifests reach, ordered.
func invWalkRepository(ctx context.Context, repo *remote.Repository, sem chan struct{}) ([]digest.Digest, error) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(invConcurrency)
	w := &invRepoWalk{ctx: gctx, repo: repo, sem: sem, g: g, held: map[digest.Digest]bool{}, walked: map[digest.Digest]bool{}}
	var tags []string
	err := w.request(func() error {
		return repo.Tags(gctx, "", func(page []string) error {
			tags = append(tags, page...)
			return nil
		})
	})
	if err != nil && !invNotFound(err) { // a repository without tags
		return nil, fmt.Errorf("list tags: %w", err)
	}
	for _, tag := range tags {
		if err := w.spawn(func() error { return w.tag(tag) }); err != nil {
			g.Wait()
			return nil, err
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	ds := make([]digest.Digest, 0, len(w.held))
	for d := range w.held {
		ds = append(ds, d)
	}
	slices.Sort(ds)
	return ds, nil
}

// request runs one request to the registry once a slot is free.
func (w *invRepoWalk) request(f func() error) error {
	select {
	case w.sem <- struct{}{}:
	case <-w.ctx.Done():
		return w.ctx.Err()
	}
	defer func() { <-w.sem }()
	return f()
}

// spawn runs f in the walk's group, or here when the group is full, so
// that work found by work never waits for a free goroutine.
func (w *invRepoWalk) spawn(f func() error) error {
	if w.g.TryGo(f) {
		return nil
	}
	return f()
}

// claim reports whether manifest d is still to be read, marking it read.
func (w *invRepoWalk) claim(d digest.Digest) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.walked[d] {
		return false
	}
	w.walked[d] = true
	return true
}

func (w *invRepoWalk) add(ds ...digest.Digest) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, d := range ds {
		w.held[d] = true
	}
}

// tag reads the manifest tag names and walks it.
func (w *invRepoWalk) tag(tag string) error {
	var (
		desc    ocispec.Descriptor
		payload []byte
	)
	err := w.request(func() error {
		d, rc, err := w.repo.FetchReference(w.ctx, tag)
		if err != nil {
			return err
		}
		defer rc.Close()
		if d.Size > client.MaxManifestSize {
			return fmt.Errorf("manifest %s: %w: %d bytes, more than %d", d.Digest, client.ErrTooLarge, d.Size, client.MaxManifestSize)
		}
		desc = d
		payload, err = content.ReadAll(rc, d)
		return err
	})
	switch {
	case invNotFound(err): // untagged since it was listed
		return nil
	case err != nil:
		return fmt.Errorf("tag %s: %w", tag, err)
	}
	if !w.claim(desc.Digest) {
		return nil
	}
	return w.manifest(desc, payload)
}

// fetch reads manifest desc, unless it was read already, and walks it. A
// manifest the repository does not hold is left out.
func (w *invRepoWalk) fetch(desc ocispec.Descriptor) error {
	if !w.claim(desc.Digest) {
		return nil
	}
	if desc.Size > client.MaxManifestSize {
		return fmt.Errorf("manifest %s: %w: %d bytes, more than %d", desc.Digest, client.ErrTooLarge, desc.Size, client.MaxManifestSize)
	}
	var payload []byte
	err := w.request(func() error {
		rc, err := w.repo.Manifests().Fetch(w.ctx, desc)
		if err != nil {
			return err
		}
		defer rc.Close()
		payload, err = content.ReadAll(rc, desc)
		return err
	})
	switch {
	case invNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("manifest %s: %w", desc.Digest, err)
	}
	return w.manifest(desc, payload)
}

// manifest records desc and the blobs its payload names (but layers stored
// elsewhere, at URLs), and walks the manifests it names and its referrers.
func (w *invRepoWalk) manifest(desc ocispec.Descriptor, payload []byte) error {
	children, blobs, _, err := parseManifest(desc, payload)
	if err != nil {
		return err
	}
	w.add(desc.Digest)
	for _, b := range blobs {
		if len(b.URLs) == 0 {
			w.add(b.Digest)
		}
	}
	for _, child := range children {
		if err := w.spawn(func() error { return w.fetch(child) }); err != nil {
			return err
		}
	}
	return w.spawn(func() error { return w.referrers(desc) })
}

// referrers walks the referrers of manifest desc. A registry that cannot
// list them has none to walk.
func (w *invRepoWalk) referrers(desc ocispec.Descriptor) error {
	var found []ocispec.Descriptor
	err := w.request(func() error {
		return w.repo.Referrers(w.ctx, desc, "", func(page []ocispec.Descriptor) error {
			found = append(found, page...)
			return nil
		})
	})
	switch {
	case errors.Is(err, errdef.ErrUnsupported), invNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("referrers of %s: %w", desc.Digest, err)
	}
	for _, r := range found {
		if err := w.spawn(func() error { return w.fetch(r) }); err != nil {
			return err
		}
	}
	return nil
}

// invNotFound reports whether err says the registry does not have what was
// asked for: oras-go's ErrNotFound, or an error response with status 404
// (NAME_UNKNOWN for a repository without tags, MANIFEST_UNKNOWN).
func invNotFound(err error) bool {
	var resp *errcode.ErrorResponse
	return errors.Is(err, errdef.ErrNotFound) || errors.As(err, &resp) && resp.StatusCode == http.StatusNotFound
}
