package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/distribution/distribution/v3"
	"github.com/distribution/distribution/v3/registry/api/errcode"
	storagedriver "github.com/distribution/distribution/v3/registry/storage/driver"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"

	"github.com/berth-registry/berth/pkgformat"
)

// guard is berth's distribution registry middleware. It refuses to re-point a
// tag that names a package version (a berth package or a Helm chart) to
// another digest, whatever is pushed in its place, unless the namespace allows
// overwrites. Other tags stay mutable as OCI has them: cosign rewrites its
// sha256-<hex>.sig tags on every signature.
type guard struct {
	allowOverwrite func(namespace string) bool
	onEvent        func(Event)
	namespace      distribution.Namespace
	driver         storagedriver.StorageDriver
}

// initGuard is the distribution middleware constructor; options["guard"]
// carries the *guard of the Registry being built.
func initGuard(_ context.Context, ns distribution.Namespace, driver storagedriver.StorageDriver, options map[string]any) (distribution.Namespace, error) {
	g, ok := options["guard"].(*guard)
	if !ok {
		return nil, errors.New("berth registry middleware: no guard in options")
	}
	g.driver = driver
	g.namespace = &guardedNamespace{Namespace: ns, guard: g}
	return g.namespace, nil
}

// guardedNamespace hands out guarded repositories. It keeps the repository
// remover of the namespace it wraps, which distribution looks for by type assertion.
type guardedNamespace struct {
	distribution.Namespace
	guard *guard
}

var (
	_ distribution.Namespace         = (*guardedNamespace)(nil)
	_ distribution.RepositoryRemover = (*guardedNamespace)(nil)
)

func (n *guardedNamespace) Repository(ctx context.Context, name reference.Named) (distribution.Repository, error) {
	repo, err := n.Namespace.Repository(ctx, name)
	if err != nil {
		return nil, err
	}
	return &guardedRepository{Repository: repo, guard: n.guard}, nil
}

func (n *guardedNamespace) Remove(ctx context.Context, name reference.Named) error {
	remover, ok := n.Namespace.(distribution.RepositoryRemover)
	if !ok {
		return distribution.ErrUnsupported
	}
	return remover.Remove(ctx, name)
}

type guardedRepository struct {
	distribution.Repository
	guard *guard
}

func (r *guardedRepository) Manifests(ctx context.Context, options ...distribution.ManifestServiceOption) (distribution.ManifestService, error) {
	ms, err := r.Repository.Manifests(ctx, options...)
	if err != nil {
		return nil, err
	}
	return &guardedManifests{ManifestService: ms, repo: r}, nil
}

type guardedManifests struct {
	distribution.ManifestService
	repo *guardedRepository
}

// Put refuses, with an OCI DENIED error, a manifest pushed by tag when the tag
// already names a different package manifest.
func (m *guardedManifests) Put(ctx context.Context, mf distribution.Manifest, options ...distribution.ManifestServiceOption) (digest.Digest, error) {
	if tag := tagOption(options); tag != "" {
		name := m.repo.Named().Name()
		namespace, _, _ := strings.Cut(name, "/")
		if !m.repo.guard.allowOverwrite(namespace) {
			if err := m.checkRetag(ctx, name, tag, mf); err != nil {
				return "", err
			}
		}
	}
	return m.ManifestService.Put(ctx, mf, options...)
}

func (m *guardedManifests) checkRetag(ctx context.Context, repo, tag string, mf distribution.Manifest) error {
	current, err := m.repo.Tags(ctx).Get(ctx, tag)
	var unknown distribution.ErrTagUnknown
	if errors.As(err, &unknown) {
		return nil
	}
	if err != nil {
		return err
	}
	_, payload, err := mf.Payload()
	if err != nil {
		return err
	}
	pushed := digest.FromBytes(payload)
	if current.Digest == pushed {
		return nil
	}
	if !m.storedIsPackage(ctx, current.Digest) {
		return nil
	}
	return errcode.ErrorCodeDenied.WithMessage(fmt.Sprintf(
		"%s:%s already exists with digest %s; package versions are immutable, refusing to re-point it to %s (delete the version first, or allow overwrites for namespace %q)",
		repo, tag, current.Digest, pushed, strings.SplitN(repo, "/", 2)[0]))
}

// storedIsPackage reports whether the stored manifest d is a package. A
// manifest that can no longer be read is not one: its tag is dangling.
func (m *guardedManifests) storedIsPackage(ctx context.Context, d digest.Digest) bool {
	mf, err := m.ManifestService.Get(ctx, d)
	if err != nil {
		return false
	}
	_, payload, err := mf.Payload()
	return err == nil && isPackage(payload)
}

// isPackage reports whether a manifest payload is a package manifest.
func isPackage(payload []byte) bool {
	var m struct {
		ArtifactType string `json:"artifactType"`
		Config       struct {
			MediaType string `json:"mediaType"`
		} `json:"config"`
	}
	if json.Unmarshal(payload, &m) != nil {
		return false
	}
	return pkgformat.IsPackage(m.ArtifactType, m.Config.MediaType)
}

func tagOption(options []distribution.ManifestServiceOption) string {
	for _, o := range options {
		if t, ok := o.(distribution.WithTagOption); ok {
			return t.Tag
		}
	}
	return ""
}
