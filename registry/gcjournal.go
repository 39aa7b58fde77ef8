package registry

import (
	"context"
	"fmt"
	"strings"

	"github.com/distribution/distribution/v3/registry/api/errcode"
	"github.com/opencontainers/go-digest"

	"github.com/berth-registry/berth/coord"
)

// The journal of a garbage collection (docs/gc.md). Every write that makes
// content live holds gcLock shared and, once it is stored and before it
// lets the lock go, records what it made live in the open journals of
// coord.Journals (the locks' own, so that every replica that shares the
// lock records where the collector reads): a manifest written (pushed by
// digest or by tag, pushed again), a blob linked into a repository (an
// upload's commit, a cross-repository mount, a blob put by berth itself).
// The collector opens a journal before its mark reads the storage; under
// the exclusive lock, its sweep marks what the journal names as live
// instead of reading every repository again. A write that recorded before
// the journal opened was stored before the mark read the storage, so the
// mark saw it.

// Journal entries: "manifest <repo>@<digest>" and "blob <digest>".
const (
	manifestEntryPrefix = "manifest "
	blobEntryPrefix     = "blob "
)

func manifestEntry(repo string, d digest.Digest) string {
	return manifestEntryPrefix + repo + "@" + d.String()
}

func blobEntry(d digest.Digest) string { return blobEntryPrefix + d.String() }

// journaled is what a journal's entries name.
type journaled struct {
	manifests []repoManifest
	blobs     []digest.Digest
}

// parseJournal reads entries; one it cannot read fails, naming it, since
// what it made live cannot be told.
func parseJournal(entries []string) (journaled, error) {
	var out journaled
	for _, e := range entries {
		if rest, ok := strings.CutPrefix(e, manifestEntryPrefix); ok {
			repo, d, ok := strings.Cut(rest, "@")
			if dg, err := digest.Parse(d); ok && err == nil {
				out.manifests = append(out.manifests, repoManifest{repo, dg})
				continue
			}
		} else if rest, ok := strings.CutPrefix(e, blobEntryPrefix); ok {
			if dg, err := digest.Parse(rest); err == nil {
				out.blobs = append(out.blobs, dg)
				continue
			}
		}
		return out, fmt.Errorf("journal entry %q cannot be read, so nothing is collected", e)
	}
	return out, nil
}

// journalsOf returns the journals that go with locks: their own when they
// keep some (coord.Local, coord.Postgres), else journals of this process.
func journalsOf(locks coord.Locks) coord.Journals {
	if j, ok := locks.(coord.Journals); ok {
		return j
	}
	return &coord.Local{}
}

// recordLive records, in the open journals, entries a write made live; its
// caller holds gcLock shared (holdGC) and has stored the write. It fails,
// as unavailable, when the journals cannot be written (the database is
// unreachable): the client tries again, and its write records then.
func (g *guard) recordLive(ctx context.Context, entries ...string) error {
	if err := g.journals.Record(ctx, entries...); err != nil {
		return errcode.ErrorCodeUnavailable.WithMessage(fmt.Sprintf("cannot record the write for garbage collection: %v", err))
	}
	return nil
}
