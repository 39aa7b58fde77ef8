package registry

import (
	"context"
	"errors"

	"github.com/distribution/distribution/v3"
	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// Event actions.
const (
	EventPush   = "push"
	EventDelete = "delete"
)

// Event reports a change to what a repository's tags or manifests name: a tag
// written (push, with Tag and Digest), a tag removed (delete, with Tag), a
// manifest with a subject stored (push, with Digest and Subject, no Tag;
// pushed by tag, the tag's own event follows) or a manifest deleted (delete,
// with Digest, and Subject when it had one). It is sent after the change is
// stored and before the client gets its response.
type Event struct {
	Action     string
	Repository string
	Tag        string
	Digest     string
	MediaType  string
	// Subject is the digest of the manifest that the pushed or deleted
	// manifest refers to (a signature's or an SBOM's subject), if any.
	Subject string
}

// notify sends e to the registry's listener, if any. A manifest deleted
// marks its namespace for a recompute of its quota.
func (g *guard) notify(e Event) {
	if e.Action == EventDelete && e.Tag == "" {
		g.markDirty(e.Repository)
	}
	if g.onEvent != nil {
		g.onEvent(e)
	}
}

// Tags returns the repository's tag service, reporting tag writes and removals.
func (r *guardedRepository) Tags(ctx context.Context) distribution.TagService {
	return &notifyingTags{TagService: r.Repository.Tags(ctx), repo: r}
}

type notifyingTags struct {
	distribution.TagService
	repo *guardedRepository
}

func (t *notifyingTags) Tag(ctx context.Context, tag string, desc v1.Descriptor) error {
	if err := t.TagService.Tag(ctx, tag, desc); err != nil {
		return err
	}
	t.repo.guard.notify(Event{Action: EventPush, Repository: t.repo.Named().Name(), Tag: tag, Digest: desc.Digest.String(), MediaType: desc.MediaType})
	return nil
}

func (t *notifyingTags) Untag(ctx context.Context, tag string) error {
	if err := t.TagService.Untag(ctx, tag); err != nil {
		return err
	}
	t.repo.guard.notify(Event{Action: EventDelete, Repository: t.repo.Named().Name(), Tag: tag})
	return nil
}

// Delete deletes a manifest and reports it. The tags naming it go first (see
// untagNaming), so a crash leaves no tag naming a deleted manifest. A
// manifest with a subject leaves the referrers index after it is deleted: a
// crash between the two steps leaves an index entry naming a missing
// manifest, which listings skip.
func (m *guardedManifests) Delete(ctx context.Context, dgst digest.Digest) error {
	name := m.repo.Named().Name()
	subject, exists, err := m.storedSubject(ctx, dgst)
	if err != nil {
		return err
	}
	if exists {
		if err := m.untagNaming(ctx, dgst); err != nil {
			return err
		}
	}
	m.repo.guard.recent.forget(name, dgst)
	if err := m.ManifestService.Delete(ctx, dgst); err != nil {
		return err
	}
	var s string
	if subject != "" {
		s = subject.String()
		if err := m.repo.guard.referrers.remove(ctx, name, subject, dgst); err != nil {
			// The manifest is gone, and listings skip entries of missing
			// manifests: the delete has done what the client asked.
			m.repo.guard.log.WarnContext(ctx, "registry: referrers index entry left behind", "repo", name, "digest", dgst.String(), "err", err)
		}
	}
	m.repo.guard.notify(Event{Action: EventDelete, Repository: name, Digest: dgst.String(), Subject: s})
	return nil
}

// storedSubject returns the subject of stored manifest dgst, or "" when it
// has none, and whether the manifest is stored at all.
func (m *guardedManifests) storedSubject(ctx context.Context, dgst digest.Digest) (subject digest.Digest, exists bool, err error) {
	mf, err := m.ManifestService.Get(ctx, dgst)
	var unknown distribution.ErrManifestUnknownRevision
	if errors.As(err, &unknown) || errors.Is(err, distribution.ErrBlobUnknown) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	mediaType, payload, err := mf.Payload()
	if err != nil {
		return "", true, err
	}
	ref, err := referrerOf(mediaType, payload)
	if ref == nil || err != nil {
		return "", true, nil
	}
	return ref.subject, true, nil
}
