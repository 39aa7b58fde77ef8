package registry

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/distribution/distribution/v3"
	storagedriver "github.com/distribution/distribution/v3/registry/storage/driver"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"
)

// berth deletes tags before the manifests they name, so that a crash at any
// point leaves no dangling tag: one that tags/list shows but that names a
// manifest that is gone. distribution does the reverse. Its manifest DELETE
// removes the manifest's revision link, then looks up the tags naming it and
// removes them; its repository removal is one recursive delete of the
// repository's directory, in whatever order the storage lists it, and the
// filesystem and S3 drivers both reach _manifests/revisions before
// _manifests/tags.

// untagConcurrency bounds the tags one delete removes at once.
const untagConcurrency = 16

// Remove removes a repository. It first removes every tag — the package
// versions and other tags, then the tags that name a manifest by digest
// (cosign's sha256-<hex>.sig and .att, the referrers tag schema), so that a
// crash never leaves a version without the signatures it had — and then the
// repository's directory: manifests, layer links and referrers index. A
// crash in the middle leaves fewer tags, each naming a manifest still there,
// and untagged manifests; never a dangling tag.
//
// It removes that repository alone (removeOwn): distribution's removal
// deletes the repository's directory with every repository nested in it,
// so that deleting a package team-b/olm deleted team-b/olm/catalog, the
// namespace's OLM catalog image.
func (n *guardedNamespace) Remove(ctx context.Context, name reference.Named) error {
	repo, err := n.Repository(ctx, name)
	if err != nil {
		return err
	}
	ts := repo.Tags(ctx)
	tags, err := ts.All(ctx)
	var unknown distribution.ErrRepositoryUnknown
	if err != nil && !errors.As(err, &unknown) {
		return err
	}
	var first, last []string
	for _, tag := range tags {
		if namesDigest(tag) {
			last = append(last, tag)
		} else {
			first = append(first, tag)
		}
	}
	for _, group := range [][]string{first, last} {
		if err := untagAll(ctx, ts, group); err != nil {
			return fmt.Errorf("registry: remove %s: %w", name.Name(), err)
		}
	}
	defer n.guard.markDirty(name.Name())
	n.guard.recent.forgetRepository(name.Name())
	return n.removeOwn(ctx, name.Name())
}

// removeOwn deletes what the storage keeps of repository repo: the entries
// of its directory whose names start with "_" (distribution's _manifests,
// _layers and _uploads, berth's _referrers; no repository path component
// starts with "_"), then the directory itself unless another repository is
// nested in it. An error of the storage driver is returned as it is; a
// repository that is not there is its PathNotFoundError, as distribution's
// removal answers.
func (n *guardedNamespace) removeOwn(ctx context.Context, repo string) error {
	dir := path.Join(repositoriesRoot, repo)
	entries, err := n.guard.driver.List(ctx, dir)
	if err != nil {
		return err
	}
	nested := false
	for _, e := range entries {
		if !strings.HasPrefix(path.Base(e), "_") {
			nested = true
			continue
		}
		if err := n.guard.driver.Delete(ctx, e); err != nil && !isGone(err) {
			return fmt.Errorf("registry: remove %s: %w", repo, err)
		}
	}
	if nested {
		return nil
	}
	if err := n.guard.driver.Delete(ctx, dir); err != nil && !isGone(err) {
		return fmt.Errorf("registry: remove %s: %w", repo, err)
	}
	return nil
}

// untagAll removes tags; a tag already gone is no error.
func untagAll(ctx context.Context, ts distribution.TagService, tags []string) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(untagConcurrency)
	for _, tag := range tags {
		g.Go(func() error {
			if err := ts.Untag(ctx, tag); err != nil && !isGone(err) {
				return fmt.Errorf("untag %s: %w", tag, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// namesDigest reports whether tag names another manifest by digest, as
// cosign's sha256-<hex>.sig, .att and .sbom tags and the OCI referrers tag
// schema's sha256-<hex> do.
func namesDigest(tag string) bool {
	base, _, _ := strings.Cut(tag, ".")
	alg, enc, ok := strings.Cut(base, "-")
	return ok && digest.NewDigestFromEncoded(digest.Algorithm(alg), enc).Validate() == nil
}

// untagNaming removes the tags of the repository that name dgst, before the
// manifest is deleted. Each is checked again under its push lock, so that a
// tag re-pointed meanwhile stays.
func (m *guardedManifests) untagNaming(ctx context.Context, dgst digest.Digest) error {
	ts := m.repo.Tags(ctx)
	tags, err := ts.Lookup(ctx, v1.Descriptor{Digest: dgst})
	if err != nil {
		return err
	}
	name := m.repo.Named().Name()
	for _, tag := range tags {
		err := func() error {
			unlock, err := m.repo.guard.lockTag(ctx, name, tag)
			if err != nil {
				return err
			}
			defer unlock()
			desc, err := ts.Get(ctx, tag)
			if err != nil || desc.Digest != dgst {
				return nil // removed or re-pointed meanwhile
			}
			if err := ts.Untag(ctx, tag); err != nil && !isGone(err) {
				return err
			}
			return nil
		}()
		if err != nil {
			return fmt.Errorf("untag %s:%s: %w", name, tag, err)
		}
	}
	return nil
}

// UntagDangling removes tag from repository repo if it is dangling: listed,
// but with no current link or naming a manifest that is gone, as a crash in
// the middle of a delete by an older berth, or by distribution, leaves. It
// decides under the lock that pushes of repo:tag hold, so it never removes a
// tag that a push is writing or has just re-pointed; a push writes its
// manifest before its tag, so a tag is never dangling while one is in
// flight. It reports whether it removed the tag; a tag that is gone, or
// that names a manifest, is left and is no error.
func (r *Registry) UntagDangling(ctx context.Context, repo, tag string) (bool, error) {
	var current digest.Digest
	removed, err := r.untagIf(ctx, repo, tag, func(rp distribution.Repository, desc v1.Descriptor, err error) (bool, error) {
		switch {
		case isGone(err):
			return true, nil // no current link: the tag is gone, or listed without one
		case err != nil:
			return false, err
		}
		current = desc.Digest
		ms, err := rp.Manifests(ctx)
		if err != nil {
			return false, err
		}
		exists, err := ms.Exists(ctx, desc.Digest)
		return !exists, err
	})
	if removed {
		r.log.WarnContext(ctx, "registry: removed a dangling tag", "repo", repo, "tag", tag, "digest", current.String())
	}
	return removed, err
}

// untagIf removes tag from repository repo when decide, asked under the
// lock that pushes of repo:tag hold with what the tag names now (or the
// error of reading it), says to. It reports whether it removed the tag; a
// tag gone meanwhile is not removed and is no error.
func (r *Registry) untagIf(ctx context.Context, repo, tag string, decide func(rp distribution.Repository, desc v1.Descriptor, err error) (bool, error)) (bool, error) {
	named, err := reference.WithName(repo)
	if err != nil {
		return false, fmt.Errorf("registry: untag %s:%s: %w: %v", repo, tag, ErrInvalid, err)
	}
	unlock, err := r.guard.lockTag(ctx, repo, tag)
	if err != nil {
		return false, err
	}
	defer unlock()
	rp, err := r.guard.namespace.Repository(ctx, named)
	if err != nil {
		return false, err
	}
	ts := rp.Tags(ctx)
	desc, err := ts.Get(ctx, tag)
	if remove, err := decide(rp, desc, err); err != nil || !remove {
		return false, err
	}
	if err := ts.Untag(ctx, tag); err != nil {
		if isGone(err) {
			return false, nil
		}
		return false, fmt.Errorf("registry: untag %s:%s: %w", repo, tag, err)
	}
	return true, nil
}

// isGone reports whether err says that a tag, or the path of one, does not exist.
func isGone(err error) bool {
	var (
		tag distribution.ErrTagUnknown
		pnf storagedriver.PathNotFoundError
	)
	return errors.As(err, &tag) || errors.As(err, &pnf)
}
