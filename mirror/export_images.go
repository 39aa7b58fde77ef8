package mirror

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/client"
)

// ImageLister is the part of a berth server's catalog API that tells the
// images of a version; *client.Catalog implements it.
type ImageLister interface {
	VersionImages(ctx context.Context, namespace, name, version string) (*apiv1.VersionImages, error)
}

// ExportCatalog is what Export reads of the source's catalog API: the
// selection's versions, and the images each runs.
type ExportCatalog interface {
	CatalogReader
	ImageLister
}

// imageWant is an image the exported versions run, as it is being carried.
type imageWant struct {
	img Image
	ref imageRef
}

// wantImages asks the source for the images of version s (exported as v)
// and notes each as wanted by v.
func (e *exporter) wantImages(ctx context.Context, s Selected, v Version) {
	name := v.Repository + ":" + v.Tag
	res, err := e.opts.Catalog.VersionImages(ctx, s.Namespace, s.Name, s.Version)
	if err != nil {
		hint := ""
		if errors.Is(err, client.ErrRegistry) {
			hint = " (a berth older than image mirroring does not list them: --images=false carries the packages alone)"
		}
		e.counts.failImage(Image{Versions: []string{name}}, fmt.Sprintf("list the images of %s: %v%s", name, err, hint))
		return
	}
	if res.Incomplete != "" && e.opts.Warn != nil {
		e.opts.Warn(fmt.Sprintf("%s: its images may be incomplete: %s", name, res.Incomplete))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, vi := range res.Images {
		if slices.Equal(vi.Found, []string{catalog.BundleImageFound}) {
			// The bundle image berth generated: a referrer of the version,
			// carried with it, and generated again by a far berth.
			continue
		}
		w := &imageWant{img: Image{Reference: vi.Reference, Problem: vi.Problem}}
		if w.img.Problem == "" {
			if w.ref, err = parseImageRef(vi.Reference); err != nil {
				w.img.Problem = err.Error()
			} else {
				w.img.Reference, w.img.Repository, w.img.Tag, w.img.Digest = w.ref.ref, w.ref.repository, w.ref.tag, w.ref.digest
			}
		}
		if have, ok := e.images[w.img.Reference]; ok {
			w = have
		} else {
			e.images[w.img.Reference] = w
		}
		if !slices.Contains(w.img.Versions, name) {
			w.img.Versions = append(w.img.Versions, name)
		}
	}
}

// exportImages carries every image wanted, concurrency at a time.
func (e *exporter) exportImages(ctx context.Context) {
	e.mu.Lock()
	wants := make([]*imageWant, 0, len(e.images))
	for _, w := range e.images {
		slices.Sort(w.img.Versions)
		wants = append(wants, w)
	}
	e.mu.Unlock()
	slices.SortFunc(wants, func(a, b *imageWant) int { return cmp.Compare(a.img.Reference, b.img.Reference) })
	var keep childFilter
	if len(e.opts.Platforms) > 0 {
		keep = platformFilter(e.opts.Platforms)
	}
	forEach(ctx, e.opts.Concurrency, wants, func(w *imageWant) {
		if w.img.Problem == "" {
			if err := e.exportImage(ctx, w, keep); err != nil {
				w.img.Problem = err.Error()
			}
		}
		if w.img.Problem != "" {
			w.img.Tags, w.img.Referrers, w.img.Needs = nil, nil, nil
			e.counts.failImage(w.img, w.img.Problem)
			return
		}
		e.counts.images.Add(1)
	})
}

// imageRepository returns the repository an image repository
// (quay.io/org/img, normalised) is read from, under the registry map.
func (e *exporter) imageRepository(name string) *remote.Repository {
	host, path, _ := strings.Cut(name, "/")
	host, path = e.opts.RegistryMap.readFrom(host, path)
	return e.opts.Client.Repository(host, path)
}

// exportImage resolves w's tag to a digest, discovers its graph (its
// manifest or index, the children keep keeps, cosign's tags and referrers)
// and writes what the far side lacks of it, blobConcurrency at a time.
func (e *exporter) exportImage(ctx context.Context, w *imageWant, keep childFilter) error {
	repo := e.imageRepository(w.ref.repository)
	where := ""
	if read := repo.Reference.Registry + "/" + repo.Reference.Repository; read != w.ref.repository {
		where = " (read from " + read + ")"
	}
	if w.img.Digest == "" {
		desc, err := repo.Resolve(ctx, w.ref.tag)
		if err != nil {
			return fmt.Errorf("resolve %s%s: %w", w.ref.ref, where, err)
		}
		w.img.Digest = desc.Digest
	}
	g, err := e.imageWalker.walk(ctx, Version{Repository: w.ref.repository, Digest: w.img.Digest}, keep)
	if err != nil {
		return fmt.Errorf("%w%s", err, where)
	}
	writes, wctx := errgroup.WithContext(ctx)
	writes.SetLimit(blobConcurrency)
	for _, d := range g.version.Needs {
		n := g.nodes[d]
		if held, at := e.base.holdsImage(w.ref, n); held {
			e.record(n, false, at)
			continue
		}
		writes.Go(func() error {
			if err := e.write(wctx, repo, n); err != nil {
				return fmt.Errorf("%s: %w%s", w.ref.ref, err, where)
			}
			e.record(n, true, "")
			return nil
		})
	}
	if err := writes.Wait(); err != nil {
		return err
	}
	w.img.MediaType = g.nodes[w.img.Digest].desc.MediaType
	w.img.Platforms, w.img.Tags, w.img.Referrers, w.img.Needs = g.platforms, g.version.Tags, g.version.Referrers, g.version.Needs
	return nil
}

// imageList is the images exported, ordered by reference.
func (e *exporter) imageList() []Image {
	out := make([]Image, 0, len(e.images))
	for _, w := range e.images {
		out = append(out, w.img)
	}
	slices.SortFunc(out, func(a, b Image) int { return cmp.Compare(a.Reference, b.Reference) })
	return out
}

// holdsImage reports whether the far side has n as image r needs it: a
// blob in any repository, a manifest in a repository named as r's
// repository, or whose path ends with r's path (mirror/org/img holds the
// manifests of quay.io/org/img: the far side's prefix is not known when
// exporting); at is that repository.
func (h *holdings) holdsImage(r imageRef, n *node) (bool, string) {
	if !n.manifest {
		at, ok := h.anywhere[n.desc.Digest]
		return ok, at
	}
	if h.repos[r.repository][n.desc.Digest] {
		return true, r.repository
	}
	for _, at := range h.bySuffix[r.path] {
		if h.repos[at][n.desc.Digest] {
			return true, at
		}
	}
	return false, ""
}
