package catalog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

// maxManifestSize caps the manifests the catalog reads, as distribution does.
const maxManifestSize = 4 << 20

// RemoteSource reads any OCI registry over the distribution API.
type RemoteSource struct {
	reg *remote.Registry
}

var _ Source = (*RemoteSource)(nil)

// NewRemoteSource reads the registry at base, "http(s)://host[:port]";
// plain HTTP is used only when base says http. client makes the requests
// (nil means oras-go's default client, with no credentials).
func NewRemoteSource(base string, client remote.Client) (*RemoteSource, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" {
		return nil, fmt.Errorf("registry URL %q: want http(s)://host[:port]", base)
	}
	reg, err := remote.NewRegistry(u.Host)
	if err != nil {
		return nil, fmt.Errorf("registry URL %q: %w", base, err)
	}
	reg.PlainHTTP = u.Scheme == "http"
	if client != nil {
		reg.Client = client
	}
	return &RemoteSource{reg: reg}, nil
}

// Repositories lists the registry's _catalog.
func (s *RemoteSource) Repositories(ctx context.Context) ([]string, error) {
	var all []string
	err := s.reg.Repositories(ctx, "", func(repos []string) error {
		all = append(all, repos...)
		return nil
	})
	if err != nil {
		return nil, remoteError("list repositories", err)
	}
	return all, nil
}

func (s *RemoteSource) repository(ctx context.Context, repo string) (*remote.Repository, error) {
	r, err := s.reg.Repository(ctx, repo)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", repo, ErrNotFound, err)
	}
	return r.(*remote.Repository), nil
}

// Tags lists a repository's tags and resolves each one.
func (s *RemoteSource) Tags(ctx context.Context, repo string) ([]TagRef, error) {
	r, err := s.repository(ctx, repo)
	if err != nil {
		return nil, err
	}
	var tags []string
	if err := r.Tags(ctx, "", func(ts []string) error {
		tags = append(tags, ts...)
		return nil
	}); err != nil {
		if errors.Is(err, errdef.ErrNotFound) {
			return nil, nil
		}
		return nil, remoteError(repo+": list tags", err)
	}
	refs := make([]TagRef, 0, len(tags))
	for _, tag := range tags {
		d, err := s.Resolve(ctx, repo, tag)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		refs = append(refs, TagRef{Tag: tag, Digest: d})
	}
	return refs, nil
}

// Resolve asks the registry which digest a tag names (a HEAD request).
func (s *RemoteSource) Resolve(ctx context.Context, repo, tag string) (string, error) {
	r, err := s.repository(ctx, repo)
	if err != nil {
		return "", err
	}
	desc, err := r.Resolve(ctx, tag)
	if err != nil {
		return "", remoteError(repo+":"+tag, err)
	}
	return desc.Digest.String(), nil
}

// Manifest fetches a manifest by digest and verifies it.
func (s *RemoteSource) Manifest(ctx context.Context, repo, dgst string) (string, []byte, error) {
	r, err := s.repository(ctx, repo)
	if err != nil {
		return "", nil, err
	}
	desc, rc, err := r.Manifests().FetchReference(ctx, dgst)
	if err != nil {
		return "", nil, remoteError(repo+"@"+dgst, err)
	}
	defer rc.Close()
	if desc.Size > maxManifestSize {
		return "", nil, fmt.Errorf("%s@%s: manifest of %d bytes is over the %d byte limit", repo, dgst, desc.Size, maxManifestSize)
	}
	payload, err := io.ReadAll(io.LimitReader(rc, maxManifestSize+1))
	if err != nil {
		return "", nil, remoteError(repo+"@"+dgst, err)
	}
	if digest.Digest(dgst).Validate() == nil && digest.Digest(dgst).Algorithm().FromBytes(payload) != digest.Digest(dgst) {
		return "", nil, fmt.Errorf("%s@%s: the registry sent a manifest with another digest", repo, dgst)
	}
	return desc.MediaType, payload, nil
}

// Blob opens a blob of the repository.
func (s *RemoteSource) Blob(ctx context.Context, repo, dgst string) (io.ReadCloser, error) {
	r, err := s.repository(ctx, repo)
	if err != nil {
		return nil, err
	}
	_, rc, err := r.Blobs().FetchReference(ctx, dgst)
	if err != nil {
		return nil, remoteError(repo+": blob "+dgst, err)
	}
	return rc, nil
}

// maxReferrers caps the referrers RemoteSource.Referrers lists for one
// manifest: a registry could page on for ever.
const maxReferrers = 10000

// Referrers lists the manifests whose subject is dgst, by the registry's
// referrers API or, on a registry without it, by the referrers tag schema
// (the index tagged sha256-<hex>), as oras-go does. An unknown repository
// or manifest has none; past maxReferrers, the rest are left out.
func (s *RemoteSource) Referrers(ctx context.Context, repo, dgst string) ([]ocispec.Descriptor, error) {
	d, err := digest.Parse(dgst)
	if err != nil {
		return nil, fmt.Errorf("%s@%s: %w: %w", repo, dgst, ErrNotFound, err)
	}
	r, err := s.repository(ctx, repo)
	if err != nil {
		return nil, err
	}
	var out []ocispec.Descriptor
	errEnough := errors.New("enough referrers")
	err = r.Referrers(ctx, ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: d}, "", func(refs []ocispec.Descriptor) error {
		out = append(out, refs[:min(len(refs), maxReferrers-len(out))]...)
		if len(out) >= maxReferrers {
			return errEnough
		}
		return nil
	})
	var resp *errcode.ErrorResponse
	switch {
	case errors.Is(err, errEnough):
	case errors.Is(err, errdef.ErrNotFound), errors.As(err, &resp) && resp.StatusCode == http.StatusNotFound:
		return nil, nil // an unknown repository (NAME_UNKNOWN)
	case err != nil:
		return nil, remoteError(repo+": referrers of "+dgst, err)
	}
	return out, nil
}

// DeleteRepository deletes every tagged manifest of the repository by digest,
// which removes the tags that name them too.
func (s *RemoteSource) DeleteRepository(ctx context.Context, repo string) error {
	refs, err := s.Tags(ctx, repo)
	if err != nil {
		return err
	}
	if len(refs) == 0 {
		return fmt.Errorf("%s: %w", repo, ErrNotFound)
	}
	r, err := s.repository(ctx, repo)
	if err != nil {
		return err
	}
	done := make(map[string]bool)
	for _, ref := range refs {
		if done[ref.Digest] {
			continue
		}
		done[ref.Digest] = true
		err := r.Manifests().Delete(ctx, ocispec.Descriptor{Digest: digest.Digest(ref.Digest)})
		if err != nil && !errors.Is(err, errdef.ErrNotFound) {
			return remoteError(repo+"@"+ref.Digest+": delete", err)
		}
	}
	return nil
}

// remoteError classifies an error of the remote registry.
func remoteError(what string, err error) error {
	if errors.Is(err, errdef.ErrNotFound) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return fmt.Errorf("%s: %w: %w", what, ErrUnavailable, err)
}
