package pkgsource

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/berth-registry/berth/pkgformat"
)

// maxManifestSize bounds the manifest of an image source.
const maxManifestSize = 4 << 20

func imageRepository(s Spec, sess *session) (*remote.Repository, error) {
	ref := strings.TrimPrefix(s.URL, "oci://")
	repo, err := remote.NewRepository(ref)
	if err != nil {
		return nil, fmt.Errorf("%s: not an image reference (host/repository:tag or @digest): %w", sess.src, ErrInvalid)
	}
	if repo.Reference.Reference == "" {
		repo.Reference.Reference = "latest"
	}
	client := &auth.Client{Client: sess.client(), Cache: auth.NewCache()}
	if s.Credentials != (Credentials{}) {
		client.Credential = auth.StaticCredential(repo.Reference.Registry, auth.Credential{
			Username: s.Credentials.Username, Password: s.Credentials.Password})
	}
	repo.Client = client
	repo.PlainHTTP = isLoopbackHost(repo.Reference.Host())
	return repo, nil
}

// isLoopbackHost reports whether host (host[:port]) is localhost or a
// loopback IP, which registries serve over plain HTTP.
func isLoopbackHost(host string) bool {
	h := host
	if i := strings.LastIndex(h, ":"); i >= 0 && !strings.HasSuffix(h, "]") {
		h = h[:i]
	}
	h = strings.Trim(h, "[]")
	return h == "localhost" || strings.HasPrefix(h, "127.") || h == "::1"
}

func resolveImage(ctx context.Context, s Spec, l Limits) (Resolved, error) {
	sess := newSession(s.name(), l)
	defer sess.close()
	repo, err := imageRepository(s, sess)
	if err != nil {
		return Resolved{}, err
	}
	desc, err := repo.Resolve(ctx, repo.Reference.Reference)
	if err != nil {
		return Resolved{}, named(sess.src, err)
	}
	return Resolved{Kind: Image, URL: s.URL, Revision: desc.Digest.String()}, nil
}

// fetchImage unpacks what the image is: a berth package (its content
// layer), a Helm chart (its chart directory), or an OLM registry+v1 bundle
// (its layers, in order).
func fetchImage(ctx context.Context, s Spec, t *tree) (Resolved, error) {
	sess := newSession(t.src, t.l)
	defer sess.close()
	repo, err := imageRepository(s, sess)
	if err != nil {
		return Resolved{}, err
	}
	desc, rc, err := repo.FetchReference(ctx, repo.Reference.Reference)
	if err != nil {
		return Resolved{}, named(t.src, err)
	}
	if desc.Size > maxManifestSize {
		rc.Close()
		return Resolved{}, fmt.Errorf("%s: manifest of %d bytes is larger than %d: %w", t.src, desc.Size, maxManifestSize, ErrLimit)
	}
	payload, err := content.ReadAll(rc, desc)
	rc.Close()
	if err != nil {
		return Resolved{}, named(t.src, err)
	}
	if desc.MediaType != ocispec.MediaTypeImageManifest && desc.MediaType != "application/vnd.docker.distribution.manifest.v2+json" {
		return Resolved{}, fmt.Errorf("%s: a %s, not an image manifest (name one platform's image): %w", t.src, desc.MediaType, ErrInvalid)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(payload, &m); err != nil {
		return Resolved{}, fmt.Errorf("%s: manifest: %w: %w", t.src, err, ErrInvalid)
	}
	var total int64
	for _, l := range m.Layers {
		total += l.Size
	}
	if total > t.l.MaxBytes {
		return Resolved{}, fmt.Errorf("%s: layers of %d bytes, more than %d: %w", t.src, total, t.l.MaxBytes, ErrLimit)
	}
	layers, dir := m.Layers, ""
	switch {
	case len(m.Layers) > 0 && m.Layers[0].MediaType == pkgformat.ContentMediaType:
		layers = m.Layers[:1]
	case m.Config.MediaType == pkgformat.HelmConfigMediaType:
		layers = nil
		for _, l := range m.Layers {
			if l.MediaType == pkgformat.HelmChartContentMediaType {
				layers = []ocispec.Descriptor{l}
				break
			}
		}
		if layers == nil {
			return Resolved{}, fmt.Errorf("%s: a Helm chart without a %s layer: %w", t.src, pkgformat.HelmChartContentMediaType, ErrInvalid)
		}
		dir = "*"
	default:
		for _, l := range m.Layers {
			if !strings.Contains(l.MediaType, "tar") || strings.Contains(l.MediaType, "zstd") {
				return Resolved{}, fmt.Errorf("%s: layer %s is a %s, not a tar or gzipped tar: %w", t.src, l.Digest, l.MediaType, ErrInvalid)
			}
		}
	}
	for _, l := range layers {
		if err := unpackLayer(ctx, repo, l, t, dir); err != nil {
			return Resolved{}, err
		}
	}
	return Resolved{Kind: Image, URL: s.URL, Revision: desc.Digest.String()}, nil
}

// unpackLayer fetches a tar layer, gzipped or not (by its media type),
// checks its digest and unpacks it into t. dir "*" takes the first element (a Helm chart's directory)
// off every name.
func unpackLayer(ctx context.Context, repo *remote.Repository, l ocispec.Descriptor, t *tree, dir string) error {
	rc, err := repo.Fetch(ctx, l)
	if err != nil {
		return fmt.Errorf("%s: layer %s: %w", t.src, l.Digest, err)
	}
	defer rc.Close()
	verified := content.NewVerifyReader(rc, l)
	untar := t.untar
	if l.MediaType == ocispec.MediaTypeImageLayer {
		untar = t.untarPlain
	}
	if err := untar(verified, dir); err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, verified); err != nil {
		return fmt.Errorf("%s: layer %s: %w", t.src, l.Digest, err)
	}
	if err := verified.Verify(); err != nil {
		return fmt.Errorf("%s: layer %s: %w: %w", t.src, l.Digest, err, ErrInvalid)
	}
	return nil
}
