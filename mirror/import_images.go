package mirror

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/opencontainers/go-digest"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/pkgformat"
)

// checkImages checks the images of an archive manifest: each carried
// image names a valid normalised repository, reference, tag and digest,
// and every digest it needs has its entry.
func checkImages(m *Manifest, entries map[digest.Digest]Entry) error {
	for i, img := range m.Images {
		what := fmt.Sprintf("%s: image %d (%s)", ManifestFile, i+1, img.Reference)
		if img.Problem != "" {
			continue
		}
		r, err := parseImageRef(img.Reference)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if r.repository != img.Repository || r.tag != img.Tag || (r.digest != "" && r.digest != img.Digest) {
			return fmt.Errorf("%s: repository %q, tag %q and digest %s do not match the reference", what, img.Repository, img.Tag, img.Digest)
		}
		if err := img.Digest.Validate(); err != nil {
			return fmt.Errorf("%s: digest: %w", what, err)
		}
		for _, t := range img.Tags {
			if err := pkgformat.ValidTag(t.Tag); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
		}
		if err := checkNeeds(what, img.Needs, img.Digest, img.Referrers, img.Tags, entries); err != nil {
			return err
		}
	}
	return nil
}

// importImages pushes the images of the archive into the target, each to
// the repository mapping names: blobs, then manifests by digest (children
// before their index), then cosign's tags, and last the image's own tag
// when the content names it by one. An image that fails is reported in
// the summary; the others are imported.
func (t *target) importImages(ctx context.Context, a *Archive, m *Manifest, entries map[digest.Digest]Entry, mapping imageMapping, concurrency int, src blobSource, mountFrom func(digest.Digest) string) {
	var imgs []Image
	for _, img := range m.Images {
		if img.Problem == "" {
			imgs = append(imgs, img)
		}
	}
	forEach(ctx, concurrency, imgs, func(img Image) {
		if err := t.importImage(ctx, a, img, mapping[img.Repository], entries, src, mountFrom); err != nil {
			t.counts.failImage(img, err.Error())
			return
		}
		t.counts.images.Add(1)
	})
}

// importImage pushes img into the target's repository dst.
func (t *target) importImage(ctx context.Context, a *Archive, img Image, dst string, entries map[digest.Digest]Entry, src blobSource, mountFrom func(digest.Digest) string) error {
	v := Version{Repository: dst, Tag: img.Tag, Digest: img.Digest, Tags: img.Tags, Referrers: img.Referrers, Needs: img.Needs}
	g, err := archiveGraph(a, v, entries)
	if err != nil {
		return err
	}
	repo := t.c.Repository(t.host, dst)
	if err := t.putContent(ctx, repo, g, src, mountFrom, img.Tag); err != nil {
		return partialIndexRefused(img, err)
	}
	if img.Tag == "" {
		return nil
	}
	var was digest.Digest
	if t.have != nil && !t.have.repos[dst][img.Digest] {
		// t.tag asks what the tag names only when the target held the
		// image; a tag that names something else is to be reported.
		if have, err := repo.Resolve(ctx, img.Tag); err == nil {
			was = have.Digest
		}
	}
	_, named, err := t.tag(ctx, repo, g.nodes[img.Digest], img.Tag)
	if err != nil {
		return partialIndexRefused(img, err)
	}
	if named != "" {
		was = named
	}
	if was != "" && was != img.Digest {
		t.counts.move(fmt.Sprintf("%s/%s:%s named %s; it now names %s, what %s named when exported", t.host, dst, img.Tag, was, img.Digest, img.Reference))
	}
	return nil
}

// partialIndexRefused explains err when the target refused the index of an
// image exported with --platform because the children of the other
// platforms are missing, as distribution's registry does by default.
func partialIndexRefused(img Image, err error) error {
	var resp *errcode.ErrorResponse
	if len(img.Platforms) == 0 || !errors.As(err, &resp) {
		return err
	}
	for _, e := range resp.Errors {
		if e.Code == "MANIFEST_BLOB_UNKNOWN" {
			return fmt.Errorf("%w: the target refuses an index whose manifests are not all present, and the archive carries those of %s only (--platform): let it accept such an index (distribution: validation.manifests.indexes.platforms: none, or list these platforms), or export without --platform",
				err, strings.Join(img.Platforms, ", "))
		}
	}
	return err
}

// mountFrom returns, for a blob the archive does not carry, the repository
// of the target to mount it from: the one the archive manifest names, or
// for a source repository of an image (recorded so by a delta against a
// previous archive), where the images of that repository go.
func (im imageMapping) mountFrom(m *Manifest, entries map[digest.Digest]Entry, p ImagePrefixes) func(digest.Digest) string {
	packages := map[string]bool{}
	for _, v := range m.Versions {
		packages[v.Repository] = true
	}
	return func(d digest.Digest) string {
		at := entries[d].At
		if dst, ok := im[at]; ok {
			return dst
		}
		if host, path, err := splitSourceRepository(at); err == nil && !packages[at] {
			return p.target(host, path)
		}
		return at
	}
}

// recordMirrors records the mapping in a berth target (PUT
// /api/v1/image-mirrors), so that its API, berth show and its UI name
// where each image now lives, and returns every mirror the target now
// records, this import's and earlier ones'. A target that is not a berth
// server is left alone; one that refuses is told to warn. Both return nil.
func recordMirrors(ctx context.Context, c *client.Client, host string, mirrors []apiv1.ImageMirror, warn func(string)) []apiv1.ImageMirror {
	cat, err := c.Catalog(host)
	var recorded *apiv1.ImageMirrors
	if err == nil {
		recorded, err = cat.SetImageMirrors(ctx, apiv1.ImageMirrors{Mirrors: mirrors})
	}
	switch {
	case err == nil:
		return recorded.Mirrors
	case errors.Is(err, client.ErrRegistry), errors.Is(err, client.ErrNotFound):
		// Not a berth server (or one without image mirrors).
	case errors.Is(err, client.ErrDenied), errors.Is(err, client.ErrUnauthorized):
		warn(fmt.Sprintf("%s did not record where the images now live (it needs admin on everything, as berth permissions grant it): %v; the images are imported", host, err))
	default:
		warn(fmt.Sprintf("%s did not record where the images now live: %v; the images are imported", host, err))
	}
	return nil
}

// resourcesFor is what a cluster needs to pull the images of m from the
// target, for WriteClusterResources.
func resourcesFor(m *Manifest, target string, mirrors []apiv1.ImageMirror) ClusterResources {
	r := ClusterResources{Target: target, Mirrors: mirrors}
	for _, img := range m.Images {
		if img.Problem == "" && img.Tag != "" {
			r.ByTag = append(r.ByTag, img.Repository)
		}
	}
	for _, v := range m.Versions {
		if v.Format == string(pkgformat.OLM) {
			ns, _, _ := strings.Cut(v.Repository, "/")
			r.OLMNamespaces = append(r.OLMNamespaces, ns)
		}
	}
	slices.Sort(r.ByTag)
	r.ByTag = slices.Compact(r.ByTag)
	slices.Sort(r.OLMNamespaces)
	r.OLMNamespaces = slices.Compact(r.OLMNamespaces)
	return r
}
