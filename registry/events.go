package registry

import (
	"context"

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
// written (push, with Tag and Digest), a tag removed (delete, with Tag) or a
// manifest deleted (delete, with Digest). It is sent after the change is
// stored and before the client gets its response.
type Event struct {
	Action     string
	Repository string
	Tag        string
	Digest     string
	MediaType  string
}

// notify sends e to the registry's listener, if any.
func (g *guard) notify(e Event) {
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

// Delete deletes a manifest and reports it.
func (m *guardedManifests) Delete(ctx context.Context, dgst digest.Digest) error {
	if err := m.ManifestService.Delete(ctx, dgst); err != nil {
		return err
	}
	m.repo.guard.notify(Event{Action: EventDelete, Repository: m.repo.Named().Name(), Digest: dgst.String()})
	return nil
}
