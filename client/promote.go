package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/berth-registry/berth/signing"
)

// Promotion is what Promote did.
type Promotion struct {
	// Source is the version promoted, with its digest.
	Source Reference
	// Destination is the version created, with its tag and digest.
	Destination Reference
	// Descriptor describes the version's manifest.
	Descriptor ocispec.Descriptor
	// Tags are cosign's tags of the version (sha256-<hex>.sig, .att,
	// .sbom) that the destination has now, as in the source.
	Tags []string
	// Kept are cosign's tags the destination already had with content the
	// source's lacks (a signature only the destination has); they are left
	// as they were, not merged. A destination's tag whose layers the
	// source's all has is replaced by the source's.
	Kept []string
	// Referrers are the manifests that refer to the version, directly or
	// through another referrer (signatures, attestations, SBOMs), copied
	// or already in the destination; ordered by digest.
	Referrers []ocispec.Descriptor
	// Signatures is the check of the source's signatures against the
	// destination's trust policy, when Options.TrustPolicy covers the
	// destination; nil otherwise.
	Signatures *signing.Report
}

// Promote copies the version src names into dst's repository: the
// manifest and its blobs by digest, then its cosign signatures,
// attestations and SBOMs (the tag scheme, under the same tags), then every
// manifest that refers to it (the referrers API, or its tag fallback), and
// last it tags the version in dst with dst's version, or src's when dst
// has none. Tagging last lets a registry that requires verified signatures
// in dst's namespace find them when it is asked to tag. Blobs are mounted
// rather than copied within one registry.
//
// When Options.TrustPolicy covers dst's repository and requires a verified
// signature, the source's signatures are checked against it first, and an
// unverified version is refused (ErrUnverified) before anything is copied.
//
// A refused final tag wraps ErrDenied, with the registry's message.
// Other errors wrap ErrInvalidReference (dst has a digest; neither gives a
// version), ErrNotFound, ErrUnauthorized, ErrDenied, ErrRegistry or
// ErrDigestMismatch.
func (c *Client) Promote(ctx context.Context, src, dst Reference) (*Promotion, error) {
	label := "promote " + src.String() + " → " + dst.String()
	tag := dst.Tag
	switch {
	case src.Tag == "" && src.Digest == "":
		return nil, fmt.Errorf("%s: %w: give the source a version (name:version) or a digest (name@sha256:...)", label, ErrInvalidReference)
	case dst.Digest != "":
		return nil, fmt.Errorf("%s: %w: the destination is a repository, host/namespace/name[:version], not a digest", label, ErrInvalidReference)
	case tag == "" && src.Tag == "":
		return nil, fmt.Errorf("%s: %w: the source is given by digest, so give the destination a version (host/namespace/name:version)", label, ErrInvalidReference)
	case tag == "":
		tag = src.Tag
	}
	srcRepo, dstRepo := c.repository(src), c.repository(dst)
	desc, err := srcRepo.Resolve(ctx, src.manifestReference())
	if err != nil {
		return nil, classify(label, src.Registry, err)
	}
	p := &Promotion{Source: src, Destination: dst, Descriptor: desc}
	p.Source.Digest = desc.Digest
	p.Destination.Tag, p.Destination.Digest = tag, desc.Digest

	if p.Signatures, err = c.verifyRequired(ctx, label, src, dst.Repository(), desc.Digest); err != nil {
		return nil, err
	}

	source := &trackedRepository{Repository: srcRepo, c: c}
	opts := oras.CopyGraphOptions{}
	if src.Registry == dst.Registry && src.Repository() != dst.Repository() {
		from := []string{src.Repository()}
		opts.MountFrom = func(context.Context, ocispec.Descriptor) ([]string, error) { return from, nil }
	}
	if err := oras.CopyGraph(ctx, source, dstRepo, desc, opts); err != nil {
		return nil, classify(label+": copy "+desc.Digest.String(), dst.Registry, err)
	}
	if err := c.copyCosignTags(ctx, label, source, dstRepo, src, dst, desc.Digest, opts, p); err != nil {
		return nil, err
	}
	if p.Referrers, err = copyReferrers(ctx, source, dstRepo, desc, opts); err != nil {
		return nil, classify(label+": copy the referrers of "+desc.Digest.String(), dst.Registry, err)
	}

	if err := dstRepo.Tag(ctx, desc, tag); err != nil {
		var resp *errcode.ErrorResponse
		if errors.As(err, &resp) && responseKind(resp) == ErrDenied {
			return nil, &opError{msg: label + ": refused by the registry: " + describeResponse(resp), kind: ErrDenied, cause: err}
		}
		return nil, classify(label+": tag "+tag, dst.Registry, err)
	}
	return p, nil
}

// copyCosignTags copies the manifests cosign tags sha256-<hex>.sig, .att
// and .sbom for digest d from src to dst, with their blobs, under the same
// tags. A tag dst already has with other content is kept as it is.
func (c *Client) copyCosignTags(ctx context.Context, label string, source *trackedRepository, dstRepo *remote.Repository,
	src, dst Reference, d digest.Digest, opts oras.CopyGraphOptions, p *Promotion) error {
	for _, tag := range signing.CosignTags(d) {
		desc, err := source.Resolve(ctx, tag)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return classify(label+": "+src.Registry+"/"+src.Repository()+":"+tag, src.Registry, err)
		}
		have, err := dstRepo.Resolve(ctx, tag)
		switch {
		case err == nil && have.Digest == desc.Digest:
			p.Tags = append(p.Tags, tag)
			continue
		case err == nil:
			// Replace it only when the source's has every layer it has, as
			// after the source was signed again: nothing is lost.
			superset, err := layersInclude(ctx, source, desc, dstRepo, have)
			if err != nil {
				return classify(label+": compare "+tag, dst.Registry, err)
			}
			if !superset {
				p.Kept = append(p.Kept, tag)
				continue
			}
		case !isNotFound(err):
			return classify(label+": "+dst.Registry+"/"+dst.Repository()+":"+tag, dst.Registry, err)
		}
		if err := oras.CopyGraph(ctx, source, dstRepo, desc, opts); err != nil {
			return classify(label+": copy "+tag, dst.Registry, err)
		}
		if err := dstRepo.Tag(ctx, desc, tag); err != nil {
			return classify(label+": tag "+tag, dst.Registry, err)
		}
		p.Tags = append(p.Tags, tag)
	}
	return nil
}

// layersInclude reports whether manifest a of repository ra has every layer,
// with the same annotations, that manifest b of rb has.
func layersInclude(ctx context.Context, ra content.Fetcher, a ocispec.Descriptor, rb content.Fetcher, b ocispec.Descriptor) (bool, error) {
	layers := func(f content.Fetcher, desc ocispec.Descriptor) ([]ocispec.Descriptor, error) {
		if desc.Size > MaxManifestSize {
			return nil, fmt.Errorf("manifest %s: %w: %d bytes, the limit is %d", desc.Digest, ErrTooLarge, desc.Size, MaxManifestSize)
		}
		b, err := content.FetchAll(ctx, f, desc)
		if err != nil {
			return nil, err
		}
		var m ocispec.Manifest
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("manifest %s: %w", desc.Digest, err)
		}
		return m.Layers, nil
	}
	la, err := layers(ra, a)
	if err != nil {
		return false, err
	}
	lb, err := layers(rb, b)
	if err != nil {
		return false, err
	}
	for _, l := range lb {
		if !slices.ContainsFunc(la, func(x ocispec.Descriptor) bool {
			return x.Digest == l.Digest && maps.Equal(x.Annotations, l.Annotations)
		}) {
			return false, nil
		}
	}
	return true, nil
}

// copyReferrers copies every manifest that refers to root, directly or
// through another referrer, with its blobs, and returns them ordered by
// digest.
func copyReferrers(ctx context.Context, source *trackedRepository, dstRepo *remote.Repository, root ocispec.Descriptor, opts oras.CopyGraphOptions) ([]ocispec.Descriptor, error) {
	var (
		mu    sync.Mutex
		found = map[digest.Digest]ocispec.Descriptor{}
	)
	record := func(_ context.Context, desc ocispec.Descriptor) error {
		if desc.Digest != root.Digest && IsManifest(desc.MediaType) {
			mu.Lock()
			found[desc.Digest] = desc
			mu.Unlock()
		}
		return nil
	}
	eopts := oras.ExtendedCopyGraphOptions{CopyGraphOptions: opts}
	eopts.PostCopy, eopts.OnCopySkipped = record, record
	if err := oras.ExtendedCopyGraph(ctx, source, dstRepo, root, eopts); err != nil {
		return nil, err
	}
	refs := make([]ocispec.Descriptor, 0, len(found))
	for _, d := range found {
		refs = append(refs, d)
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].Digest < refs[j].Digest })
	return refs, nil
}

// IsManifest reports whether mediaType is that of a manifest or index:
// OCI's (with the artifact manifest of image-spec 1.1's release
// candidates) or Docker's.
func IsManifest(mediaType string) bool {
	switch mediaType {
	case ocispec.MediaTypeImageManifest, ocispec.MediaTypeImageIndex,
		"application/vnd.oci.artifact.manifest.v1+json",
		"application/vnd.docker.distribution.manifest.v2+json",
		"application/vnd.docker.distribution.manifest.list.v2+json":
		return true
	}
	return false
}

// trackedRepository is a source repository whose blob downloads report
// progress.
type trackedRepository struct {
	*remote.Repository
	c *Client
}

// Fetch implements content.Fetcher, reporting progress as "copy".
func (r *trackedRepository) Fetch(ctx context.Context, desc ocispec.Descriptor) (io.ReadCloser, error) {
	rc, err := r.Repository.Fetch(ctx, desc)
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{r.c.track("copy", desc, rc), rc}, nil
}
