package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/internal/atomicfile"
	"github.com/berth-registry/berth/pkgformat"
)

// SyncState is the state file of a sync: where in the source's change feed
// the target is current up to.
type SyncState struct {
	Source string `json:"source"`
	Target string `json:"target"`
	// Cursor is the sequence number of the last change applied.
	Cursor  int64     `json:"cursor"`
	Updated time.Time `json:"updated"`
}

// SyncOptions say what Sync copies from where to where.
type SyncOptions struct {
	// Client reads the source and writes the target.
	Client *client.Client
	// Source is a berth server, host[:port], and Catalog its catalog API,
	// whose change feed says what changed.
	Source  string
	Catalog FeedReader
	// Target is any OCI registry, host[:port].
	Target string
	// Selection, when set, narrows what is synced; nil syncs every package
	// the source lets the client pull.
	Selection *Selection
	// State is the state file holding the feed cursor.
	State string
	// Prune deletes in the target the versions deleted in the source; without
	// it they are only reported.
	Prune bool
	// Concurrency is how many versions are copied at a time.
	Concurrency int
	// Progress, when set, is updated as the sync goes.
	Progress *Progress
}

// FeedReader is the part of a berth server's catalog API that Sync reads;
// *client.Catalog implements it.
type FeedReader interface {
	CatalogReader
	Changes(ctx context.Context, since int64, limit int) (*apiv1.Changes, error)
}

// feedPage is how many changes Sync asks for at a time.
const feedPage = 500

// Sync brings the target up to date with the source, from the source's
// change feed after the cursor in the state file: each version put since
// is copied with its signatures, attestations and referrers (only what the
// target lacks), tagged last; each version deleted is reported, and deleted
// in the target with Prune. When nothing changed it costs one feed request.
// The cursor moves only when every change up to it was applied.
func Sync(ctx context.Context, opts SyncOptions) (*Summary, error) {
	start := time.Now()
	if opts.Progress == nil {
		opts.Progress = &Progress{}
	}
	state, err := readState(opts.State, opts.Source, opts.Target)
	if err != nil {
		return nil, err
	}
	puts, deletes, next, err := readFeed(ctx, opts.Catalog, state.Cursor)
	if err != nil {
		return nil, err
	}
	if len(puts)+len(deletes) > 0 && opts.Selection != nil {
		res, err := Resolve(ctx, opts.Catalog, opts.Selection)
		if err != nil {
			return nil, err
		}
		puts, deletes = selected(res, puts), selectedRepos(opts.Selection, res, deletes)
	}
	// A sync with nothing to copy asks the target nothing.
	t := newTarget(ctx, opts.Client, opts.Target, nil, opts.Progress, len(puts))
	sourceRepo := func(name string) *remote.Repository { return opts.Client.Repository(opts.Source, name) }
	w, src := newWalker(sourceRepo), registrySource{repo: sourceRepo}
	opts.Progress.VersionsTotal.Store(int64(len(puts)))
	forEach(ctx, opts.Concurrency, puts, func(v Version) {
		defer opts.Progress.VersionsDone.Add(1)
		g, err := w.walk(ctx, v)
		if err == nil {
			_, err = t.put(ctx, g, src, nil)
		}
		if err != nil {
			t.counts.fail(v, err)
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var deleted []Problem
	for _, v := range deletes {
		p := Problem{Repository: v.Repository, Tag: v.Tag, Digest: v.Digest, Reason: "deleted in the source; run with --prune to delete it here"}
		if opts.Prune {
			p.Reason = "deleted in the source and here"
			if err := prune(ctx, opts.Client.Repository(opts.Target, v.Repository), v); err != nil {
				t.counts.fail(v, err)
				continue
			}
		}
		deleted = append(deleted, p)
	}
	sum := t.counts.summary(start)
	sum.Deleted = deleted
	if len(sum.Failed) == 0 && next != state.Cursor {
		state.Cursor, state.Updated = next, time.Now().UTC()
		if err := writeState(opts.State, state); err != nil {
			return sum, err
		}
	}
	sum.Seconds = time.Since(start).Seconds()
	return sum, nil
}

// readFeed reads the change feed after since to its end and returns the
// versions put and deleted, each once, as the last change left them, and
// the cursor after the last change.
func readFeed(ctx context.Context, feed FeedReader, since int64) (puts, deletes []Version, next int64, err error) {
	last := map[string]apiv1.Change{}
	next = since
	for {
		page, err := feed.Changes(ctx, next, feedPage)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("read the change feed after %d: %w", next, err)
		}
		for _, c := range page.Changes {
			last[c.Namespace+"/"+c.Name+":"+c.Version] = c
		}
		if len(page.Changes) == 0 || page.Next <= next {
			break
		}
		next = page.Next
	}
	keys := make([]string, 0, len(last))
	for k := range last {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		c := last[k]
		v := Version{Repository: c.Namespace + "/" + c.Name, Tag: pkgformat.Tag(c.Version), Version: c.Version, Digest: digest.Digest(c.Digest)}
		if err := v.Digest.Validate(); err != nil {
			return nil, nil, 0, fmt.Errorf("the change feed gives %s the digest %q: %w", k, c.Digest, err)
		}
		if c.Action == apiv1.ActionDelete {
			deletes = append(deletes, v)
		} else {
			puts = append(puts, v)
		}
	}
	return puts, deletes, next, nil
}

// selected keeps the versions the resolution holds.
func selected(res *Resolution, vs []Version) []Version {
	keep := map[string]bool{}
	for _, s := range res.Versions {
		keep[s.Repository()+"@"+s.Digest.String()] = true
	}
	return slices.DeleteFunc(vs, func(v Version) bool { return !keep[v.Repository+"@"+v.Digest.String()] })
}

// selectedRepos keeps the deleted versions of packages the selection's
// rules name. A deleted version can no longer be resolved, so its
// package is what decides.
func selectedRepos(sel *Selection, res *Resolution, vs []Version) []Version {
	repos := map[string]bool{}
	for _, s := range res.Versions {
		repos[s.Repository()] = true
	}
	return slices.DeleteFunc(vs, func(v Version) bool { return !repos[v.Repository] && !sel.namesRepository(v.Repository) })
}

// namesRepository reports whether a rule of s names repository
// (namespace/name), by its namespace or a matching glob.
func (s *Selection) namesRepository(repository string) bool {
	ns, _, _ := strings.Cut(repository, "/")
	for _, r := range s.Packages {
		nsOK := r.Namespace == "" || r.Namespace == ns
		globOK := r.Repository == ""
		if !globOK {
			globOK, _ = path.Match(r.Repository, repository)
		}
		if nsOK && globOK {
			return true
		}
	}
	return false
}

// prune deletes version v in the target, unless the target's tag names
// another manifest now.
func prune(ctx context.Context, repo *remote.Repository, v Version) error {
	desc, err := repo.Resolve(ctx, v.Tag)
	switch {
	case errors.Is(err, errdef.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("resolve %s:%s: %w", v.Repository, v.Tag, err)
	case desc.Digest != v.Digest:
		return fmt.Errorf("%s:%s names %s here, not the %s deleted in the source; left as it is", v.Repository, v.Tag, desc.Digest, v.Digest)
	}
	if err := repo.Manifests().Delete(ctx, desc); err != nil && !errors.Is(err, errdef.ErrNotFound) {
		return fmt.Errorf("delete %s@%s: %w", v.Repository, v.Digest, err)
	}
	return nil
}

// registrySource serves blobs from the source registry.
type registrySource struct {
	repo func(name string) *remote.Repository
}

func (s registrySource) open(ctx context.Context, repository string, desc ocispec.Descriptor) (io.ReadCloser, error) {
	return s.repo(repository).Fetch(ctx, desc)
}

// readState reads the state file; a missing file is a sync from the start.
// A state file of another source or target is refused.
func readState(path, source, target string) (*SyncState, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &SyncState{Source: source, Target: target}, nil
	}
	if err != nil {
		return nil, err
	}
	var s SyncState
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	if s.Source != source || s.Target != target {
		return nil, fmt.Errorf("state file %s is the state of a sync from %s to %s, not from %s to %s", path, s.Source, s.Target, source, target)
	}
	return &s, nil
}

// writeState writes the state file atomically.
func writeState(path string, s *SyncState) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(b, '\n'))
}
