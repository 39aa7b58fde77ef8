package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/signing"
)

// MaxManifestSize caps the manifests berth reads, 4 MiB, as oras-go and
// distribution do.
const MaxManifestSize = 4 << 20

// Package is a package version as found in a registry.
type Package struct {
	// Reference is the reference that was resolved, with Digest set to the
	// manifest digest.
	Reference Reference
	// ManifestDesc describes the manifest: digest, size and media type.
	ManifestDesc ocispec.Descriptor
	// Manifest is the parsed manifest.
	Manifest ocispec.Manifest
	// ConfigDesc and ContentDesc describe the config blob and the content layer.
	ConfigDesc  ocispec.Descriptor
	ContentDesc ocispec.Descriptor
	// Metadata is derived from the content, as the catalog derives it; the
	// config blob is not read.
	Metadata *pkgformat.Metadata
	// Content is the content layer, the package as a gzipped tar, byte for
	// byte as pushed. Only Pull sets it.
	Content []byte
	// Signatures is what Pull found when the client's trust policy covers
	// the repository: the version's signatures and attestations, each with
	// its verdict. Nil when no policy covers it, and for Inspect.
	Signatures *signing.Report
}

// Push pushes a package artifact: the config and content blobs (skipping
// those the registry already has), then the manifest, tagged with ref.Tag or,
// when ref has no tag, with the version in the manifest's
// org.opencontainers.image.version annotation. Pushing identical bytes again
// succeeds. It returns the manifest descriptor.
//
// Errors wrap ErrInvalidReference (ref has a digest, or no version can be
// found), ErrDenied (e.g. the version exists with another digest; the text
// carries the registry's message), ErrUnauthorized, ErrRegistry, or the
// transport error.
func (c *Client) Push(ctx context.Context, ref Reference, art *pkgformat.Artifact) (ocispec.Descriptor, error) {
	ref, repo, err := c.pushBlobs(ctx, ref, art)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if err := repo.PushReference(ctx, art.ManifestDesc, bytes.NewReader(art.Manifest), ref.Tag); err != nil {
		return ocispec.Descriptor{}, wrapError("push", ref, "", err)
	}
	return art.ManifestDesc, nil
}

// PushSigned is Push for a repository whose versions must be signed before
// they are tagged: it pushes the blobs and the manifest by digest, signs the
// digest with s (as Sign does), and only then tags the version, so that a
// registry that refuses to tag unsigned versions accepts it. It returns the
// manifest descriptor. Errors are those of Push and Sign; a refused tag
// wraps ErrDenied and carries the registry's message.
func (c *Client) PushSigned(ctx context.Context, ref Reference, art *pkgformat.Artifact, s *signing.Signer, opts SignOptions) (ocispec.Descriptor, error) {
	if s == nil {
		return ocispec.Descriptor{}, fmt.Errorf("push %s: no signer", ref)
	}
	ref, repo, err := c.pushBlobs(ctx, ref, art)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	exists, err := repo.Exists(ctx, art.ManifestDesc)
	if err != nil {
		return ocispec.Descriptor{}, wrapError("push", ref, "check manifest "+art.ManifestDesc.Digest.String(), err)
	}
	if !exists {
		if err := repo.Push(ctx, art.ManifestDesc, bytes.NewReader(art.Manifest)); err != nil {
			return ocispec.Descriptor{}, wrapError("push", ref, "manifest "+art.ManifestDesc.Digest.String(), err)
		}
	}
	if err := c.sign(ctx, ref, art.ManifestDesc.Digest, s, opts); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("push %s: %w", ref, err)
	}
	if err := repo.PushReference(ctx, art.ManifestDesc, bytes.NewReader(art.Manifest), ref.Tag); err != nil {
		return ocispec.Descriptor{}, wrapError("push", ref, "tag", err)
	}
	return art.ManifestDesc, nil
}

// pushBlobs checks ref and art, gives ref the version tag, and pushes the
// config and content blobs the registry does not have yet.
func (c *Client) pushBlobs(ctx context.Context, ref Reference, art *pkgformat.Artifact) (Reference, *remote.Repository, error) {
	if art == nil {
		return ref, nil, fmt.Errorf("push %s: no artifact", ref)
	}
	if ref.Digest != "" {
		return ref, nil, fmt.Errorf("push %s: %w: a pushed package is tagged with its version; remove the digest", ref, ErrInvalidReference)
	}
	if ref.Tag == "" {
		tag, err := manifestVersionTag(art.Manifest)
		if err != nil {
			return ref, nil, fmt.Errorf("push %s: %w", ref, err)
		}
		ref.Tag = tag
	}
	repo := c.repository(ref)
	blobs := []struct {
		desc ocispec.Descriptor
		data []byte
	}{{art.ConfigDesc, art.Config}, {art.ContentDesc, art.Content}}
	for _, b := range blobs {
		exists, err := repo.Exists(ctx, b.desc)
		if err != nil {
			return ref, nil, wrapError("push", ref, "check blob "+b.desc.Digest.String(), err)
		}
		if exists {
			continue
		}
		r := c.track("push", b.desc, bytes.NewReader(b.data))
		if err := repo.Push(ctx, b.desc, r); err != nil {
			return ref, nil, wrapError("push", ref, "blob "+b.desc.Digest.String(), err)
		}
	}
	return ref, repo, nil
}

// manifestVersionTag returns the tag for the version a package manifest
// carries in its org.opencontainers.image.version annotation.
func manifestVersionTag(manifest []byte) (string, error) {
	var m ocispec.Manifest
	if err := json.Unmarshal(manifest, &m); err != nil {
		return "", fmt.Errorf("read manifest: %w", err)
	}
	v := m.Annotations[ocispec.AnnotationVersion]
	if v == "" {
		return "", fmt.Errorf("%w: no version given and the manifest has no %s annotation", ErrInvalidReference, ocispec.AnnotationVersion)
	}
	tag, err := versionTag(v)
	if err != nil {
		return "", fmt.Errorf("%w: manifest version: %v", ErrInvalidReference, err)
	}
	return tag, nil
}

// Pull resolves ref (by tag or digest), checks that it is a berth package and
// downloads its content, verifying its digest and size, and derives the
// metadata from it. The content is returned byte for byte as pushed.
//
// When Options.TrustPolicy covers the repository, Pull first resolves ref to
// its digest and checks that digest's signatures (Package.Signatures); when
// the policy requires a verified signature and none verifies, it returns an
// error wrapping ErrUnverified, with the reasons, before downloading any
// content. The version is then pulled by the digest that was checked.
//
// Errors wrap ErrInvalidReference (ref has neither version nor digest),
// ErrNotFound, ErrNotPackage (naming what the artifact is instead),
// ErrDigestMismatch, ErrTooLarge, ErrUnauthorized, ErrDenied, ErrRegistry,
// ErrUnverified, or pkgformat.ErrInvalid / pkgformat.ErrLimit when the
// metadata cannot be read.
func (c *Client) Pull(ctx context.Context, ref Reference) (*Package, error) {
	return c.get(ctx, "pull", ref, true)
}

// Inspect is Pull without signature checks and without returning the content
// (Package.Content is nil); it still downloads the content, from which the
// metadata is derived. It returns the errors Pull does.
func (c *Client) Inspect(ctx context.Context, ref Reference) (*Package, error) {
	return c.get(ctx, "inspect", ref, false)
}

// get is Pull (withContent) and Inspect.
func (c *Client) get(ctx context.Context, op string, ref Reference, withContent bool) (*Package, error) {
	if ref.Tag == "" && ref.Digest == "" {
		return nil, fmt.Errorf("%s %s: %w: give a version (name:version) or a digest (name@sha256:...)", op, ref, ErrInvalidReference)
	}
	var report *signing.Report
	if _, covered := c.opts.TrustPolicy.For(ref.Repository()); covered && withContent {
		desc, err := c.resolve(ctx, op, ref)
		if err != nil {
			return nil, err
		}
		if report, err = c.verifyRequired(ctx, op+" "+ref.String(), ref, ref.Repository(), desc.Digest); err != nil {
			return nil, err
		}
		ref.Digest = desc.Digest // pull what was verified
	}
	repo := c.repository(ref)
	pkg, err := c.fetchManifest(ctx, repo, ref)
	if err != nil {
		return nil, wrapError(op, ref, "", err)
	}
	pkg.Signatures = report
	ref = pkg.Reference
	if limit := c.contentLimit(); pkg.ContentDesc.Size > limit {
		return nil, wrapError(op, ref, "content", fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, pkg.ContentDesc.Size, limit))
	}
	data, err := c.fetchBlob(ctx, repo, pkg.ContentDesc)
	if err != nil {
		return nil, wrapError(op, ref, "content "+pkg.ContentDesc.Digest.String(), err)
	}
	if withContent {
		pkg.Content = data
	}
	md, err := c.metadata(ref, pkg.Manifest, data)
	if err != nil {
		return nil, fmt.Errorf("%s %s: read metadata: %w", op, ref, err)
	}
	pkg.Metadata = md
	return pkg, nil
}

// metadata derives a package's metadata from its content, as the catalog
// does: the config blob's claims are not read. A package whose content
// carries no name or version (plain manifests) is read again with the
// repository name and the version of ref (its tag, or else the version the
// manifest is annotated with) where Options.Package sets none.
func (c *Client) metadata(ref Reference, m ocispec.Manifest, data []byte) (*pkgformat.Metadata, error) {
	opts := c.opts.Package
	files, err := pkgformat.ReadArchive(bytes.NewReader(data), opts.Limits)
	if err != nil {
		return nil, err
	}
	p, err := pkgformat.New(files, opts)
	if err == nil {
		return &p.Metadata, nil
	}
	named := opts
	named.Name = cmp.Or(opts.Name, ref.Name)
	named.Version = cmp.Or(opts.Version, ref.Tag, m.Annotations[ocispec.AnnotationVersion])
	if named == opts {
		return nil, err
	}
	if p, err = pkgformat.New(files, named); err != nil {
		return nil, err
	}
	return &p.Metadata, nil
}

// fetchManifest fetches and parses the manifest ref points at and checks that
// it is a berth package.
func (c *Client) fetchManifest(ctx context.Context, repo *remote.Repository, ref Reference) (*Package, error) {
	desc, rc, err := repo.FetchReference(ctx, ref.manifestReference())
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if desc.Size > MaxManifestSize {
		return nil, fmt.Errorf("manifest: %w: %d bytes, the limit is %d", ErrTooLarge, desc.Size, MaxManifestSize)
	}
	data, err := content.ReadAll(rc, desc)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", desc.Digest, err)
	}
	class := pkgformat.ClassifyManifest(desc.MediaType, data)
	if !class.IsPackage() {
		return nil, fmt.Errorf("%w: it is %s (%s)", ErrNotPackage, describeMediaType(desc.MediaType, class.Parsed), class.Reason)
	}
	m := class.Parsed
	layer := class.Content
	ref.Digest = desc.Digest
	return &Package{Reference: ref, ManifestDesc: desc, Manifest: m, ConfigDesc: m.Config, ContentDesc: layer}, nil
}

// describeMediaType names the kind of artifact a manifest of this media type
// is (by its config, for an OCI image manifest), for ErrNotPackage messages.
func describeMediaType(mediaType string, m ocispec.Manifest) string {
	if mediaType == ocispec.MediaTypeImageManifest {
		mediaType = m.Config.MediaType
	}
	switch mediaType {
	case ocispec.MediaTypeImageIndex, "application/vnd.docker.distribution.manifest.list.v2+json":
		return "an image index (a multi-platform image)"
	case ocispec.MediaTypeImageConfig, "application/vnd.docker.container.image.v1+json",
		"application/vnd.docker.distribution.manifest.v2+json":
		return "a container image"
	case pkgformat.HelmConfigMediaType:
		return "a Helm chart without a chart layer"
	case "application/vnd.dev.cosign.simplesigning.v1+json":
		return "a cosign signature"
	case ocispec.MediaTypeEmptyJSON:
		return "an artifact with an empty config"
	}
	return "an artifact of another kind"
}

// contentLimit is the largest content layer Pull accepts: the package limit
// on compressed archives.
func (c *Client) contentLimit() int64 {
	if l := c.opts.Package.Limits.MaxArchiveSize; l > 0 {
		return l
	}
	return pkgformat.DefaultLimits().MaxArchiveSize
}

// fetchBlob downloads a blob, reporting progress for large ones, and verifies
// its size and digest.
func (c *Client) fetchBlob(ctx context.Context, repo *remote.Repository, desc ocispec.Descriptor) ([]byte, error) {
	rc, err := repo.Fetch(ctx, desc)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := content.ReadAll(c.track("pull", desc, rc), desc)
	if err != nil {
		return nil, err
	}
	return data, nil
}
