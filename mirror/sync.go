package mirror

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
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
	"github.com/berth-registry/berth/signing"
)

// SyncState is the state file of a sync: where in the source's change feed
// the target is current up to, for which selection, and the changes read
// from the feed but not applied yet.
type SyncState struct {
	Source string `json:"source"`
	Target string `json:"target"`
	// Selection is the selection synced, as JSON; null when every package
	// the source lets the client pull is. A state file is of one selection:
	// its cursor says nothing of what another selection has synced.
	Selection json.RawMessage `json:"selection"`
	// Cursor is where the next sync reads the change feed from: every
	// change before it was applied, or is in Pending.
	Cursor int64 `json:"cursor"`
	// Pending are changes behind the cursor not applied yet: versions whose
	// copy failed, retried by the next sync, and versions deleted in the
	// source, deleted in the target by the next sync with Prune.
	Pending []PendingChange `json:"pending,omitempty"`
	Updated time.Time       `json:"updated"`
}

// PendingChange is a change of the feed a sync has not applied yet.
type PendingChange struct {
	// Action is apiv1.ActionPut (copy the version) or apiv1.ActionDelete
	// (delete it in the target).
	Action     string        `json:"action"`
	Repository string        `json:"repository"`
	Tag        string        `json:"tag"`
	Digest     digest.Digest `json:"digest"`
	// Reason says why it is pending: the last failure, or that the
	// deletion waits for a sync with Prune.
	Reason string `json:"reason,omitempty"`
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
// change feed after the cursor in the state file, and the changes the state
// file holds pending: each version put since is copied with its
// signatures, attestations and referrers (only what the target lacks),
// tagged last; a cosign tag (sha256-<hex>.sig, .att, .sbom) put since
// copies again the versions of its repository it signs, so that what it
// adds arrives; each version deleted is reported once, and deleted in the
// target with Prune. When nothing changed it costs one feed request.
//
// One version's failure does not hold the others back: it is reported in
// Summary.Failed, kept pending in the state file and retried by the next
// sync, while the cursor moves past every change read. A deletion seen
// without Prune is kept pending too, so that a later sync with Prune
// applies it. A state file of another selection is refused.
func Sync(ctx context.Context, opts SyncOptions) (*Summary, error) {
	start := time.Now()
	if opts.Progress == nil {
		opts.Progress = &Progress{}
	}
	sel, err := json.Marshal(opts.Selection)
	if err != nil {
		return nil, err
	}
	state, err := readState(opts.State, opts.Source, opts.Target, sel)
	if err != nil {
		return nil, err
	}
	feed, err := readFeed(ctx, opts.Catalog, state)
	if err != nil {
		return nil, err
	}
	feed.resync(ctx, opts.Catalog)
	puts, deletes := feed.puts, feed.deletes
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
		g, err := w.walk(ctx, v, nil)
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
	var pending []PendingChange
	var deleted []Problem
	for _, v := range deletes {
		p := Problem{Repository: v.Repository, Tag: v.Tag, Digest: v.Digest, Reason: "deleted in the source; run with --prune to delete it here"}
		if !opts.Prune {
			pending = append(pending, PendingChange{Action: apiv1.ActionDelete, Repository: v.Repository, Tag: v.Tag, Digest: v.Digest, Reason: p.Reason})
			if !feed.known[v.key()] {
				deleted = append(deleted, p)
			}
			continue
		}
		done, err := prune(ctx, opts.Client.Repository(opts.Target, v.Repository), v)
		if err != nil {
			t.counts.fail(v, err)
			pending = append(pending, PendingChange{Action: apiv1.ActionDelete, Repository: v.Repository, Tag: v.Tag, Digest: v.Digest, Reason: err.Error()})
			continue
		}
		p.Reason = done
		deleted = append(deleted, p)
	}
	sum := t.counts.summary(start)
	sum.Failed = append(sum.Failed, feed.failed...)
	for _, f := range sum.Failed {
		if !feed.isDelete(f) {
			pending = append(pending, PendingChange{Action: apiv1.ActionPut, Repository: f.Repository, Tag: f.Tag, Digest: f.Digest, Reason: f.Reason})
		}
	}
	sum.Failed = append(sum.Failed, feed.bad...)
	sum.Deleted = deleted
	slices.SortFunc(pending, func(a, b PendingChange) int {
		return cmp.Or(cmp.Compare(a.Repository, b.Repository), cmp.Compare(a.Tag, b.Tag), cmp.Compare(a.Action, b.Action))
	})
	if feed.next != state.Cursor || !slices.Equal(pending, state.Pending) || state.Updated.IsZero() {
		state.Cursor, state.Pending, state.Updated = feed.next, pending, time.Now().UTC()
		if err := writeState(opts.State, state); err != nil {
			return sum, err
		}
	}
	sum.Seconds = time.Since(start).Seconds()
	return sum, nil
}

// key names a version by repository and tag.
func (v Version) key() string { return v.Repository + ":" + v.Tag }

// syncFeed is what a sync has to do: the changes of the feed after the
// cursor, with those the state file holds pending, each version once, as
// its last change left it.
type syncFeed struct {
	puts, deletes []Version
	// signed are, by repository, the cosign tags put since, by the digest
	// each signs, attests or describes.
	signed map[string]map[digest.Digest][]Version
	// known are the pending changes the state file held: a deletion among
	// them was reported already.
	known map[string]bool
	// bad are the changes that name no valid digest, reported as failed;
	// failed are the cosign tags whose versions could not be listed,
	// reported as failed and kept pending.
	bad, failed []Problem
	// next is the cursor after the last change read.
	next int64
}

// readFeed reads the change feed after the state's cursor to its end and
// merges it with the state's pending changes. Only changes of package
// versions are kept: an event of a tracked source (apiv1.ActionSource) is
// passed over, as its version has a put change of its own; a change of a cosign tag is recorded in signed (its
// deletion leaves the target's copy alone), and a change of a tag the
// source does not serve as a version (status ignored) is passed over.
func readFeed(ctx context.Context, feed FeedReader, state *SyncState) (*syncFeed, error) {
	type change struct {
		action string
		v      Version
	}
	last := map[string]change{}
	f := &syncFeed{signed: map[string]map[digest.Digest][]Version{}, known: map[string]bool{}, next: state.Cursor}
	record := func(action string, v Version) {
		if subject, ok := signing.CosignSubject(v.Tag); ok {
			if action != apiv1.ActionDelete {
				if f.signed[v.Repository] == nil {
					f.signed[v.Repository] = map[digest.Digest][]Version{}
				}
				f.signed[v.Repository][subject] = append(f.signed[v.Repository][subject], v)
			}
			return
		}
		last[v.key()] = change{action, v}
	}
	for _, p := range state.Pending {
		v := Version{Repository: p.Repository, Tag: p.Tag, Digest: p.Digest}
		record(p.Action, v)
		f.known[v.key()] = true
	}
	for {
		page, err := feed.Changes(ctx, f.next, feedPage)
		if err != nil {
			return nil, fmt.Errorf("read the change feed after %d: %w", f.next, err)
		}
		for _, c := range page.Changes {
			if c.Action != apiv1.ActionPut && c.Action != apiv1.ActionDelete {
				continue
			}
			repo := c.Namespace + "/" + c.Name
			v := Version{Repository: repo, Tag: pkgformat.Tag(c.Version), Version: c.Version, Digest: digest.Digest(c.Digest)}
			if err := v.Digest.Validate(); err != nil {
				f.bad = append(f.bad, Problem{Repository: repo, Tag: v.Tag, Digest: v.Digest,
					Reason: fmt.Sprintf("change %d of the feed gives the digest %q: %v; passed over", c.Seq, c.Digest, err)})
				continue
			}
			if _, cosign := signing.CosignSubject(v.Tag); c.Status == apiv1.StatusIgnored && !cosign {
				continue
			}
			record(c.Action, v)
			delete(f.known, v.key())
		}
		// A page whose changes the server hid from the caller is empty
		// but still moves Next on: only a Next that does not move is the end.
		if page.Next <= f.next {
			break
		}
		f.next = page.Next
	}
	keys := slices.Sorted(maps.Keys(last))
	for _, k := range keys {
		c := last[k]
		if c.action == apiv1.ActionDelete {
			f.deletes = append(f.deletes, c.v)
		} else {
			f.puts = append(f.puts, c.v)
		}
	}
	return f, nil
}

// resync adds to the puts the versions a cosign tag put since may have
// added to: in each repository, the versions whose digest it is of, or,
// when it is of none (a signature of an attestation or SBOM), every
// version of the repository. A version put since is walked anyway. When a
// repository's versions cannot be listed, its cosign tags are failed, to
// be kept pending.
func (f *syncFeed) resync(ctx context.Context, cat CatalogReader) {
	have := map[string]bool{}
	for _, v := range append(slices.Clone(f.puts), f.deletes...) {
		have[v.key()] = true
	}
	for _, repo := range slices.Sorted(maps.Keys(f.signed)) {
		ns, name, _ := strings.Cut(repo, "/")
		p, err := cat.Package(ctx, ns, name)
		if errors.Is(err, client.ErrNotFound) {
			continue
		}
		if err != nil {
			for _, tags := range f.signed[repo] {
				for _, v := range tags {
					f.failed = append(f.failed, Problem{Repository: repo, Tag: v.Tag, Digest: v.Digest,
						Reason: fmt.Sprintf("list the versions of %s, to carry this cosign tag with its version: %v", repo, err)})
				}
			}
			continue
		}
		var of, all []Version
		matched := false
		for _, pv := range p.Versions {
			v := Version{Repository: repo, Tag: pkgformat.Tag(pv.Version), Version: pv.Version, Digest: digest.Digest(pv.Digest)}
			_, signs := f.signed[repo][v.Digest]
			matched = matched || signs
			if have[v.key()] || v.Digest.Validate() != nil {
				continue
			}
			all = append(all, v)
			if signs {
				of = append(of, v)
			}
		}
		if !matched {
			of = all
		}
		for _, v := range of {
			have[v.key()] = true
			f.puts = append(f.puts, v)
		}
	}
}

// isDelete reports whether p is about a deletion of the feed.
func (f *syncFeed) isDelete(p Problem) bool {
	return slices.ContainsFunc(f.deletes, func(v Version) bool { return v.Repository == p.Repository && v.Tag == p.Tag })
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
// another manifest now. It returns what it did; the error is a deletion
// that failed and may be tried again.
func prune(ctx context.Context, repo *remote.Repository, v Version) (string, error) {
	desc, err := repo.Resolve(ctx, v.Tag)
	switch {
	case errors.Is(err, errdef.ErrNotFound):
		return "deleted in the source and not here", nil
	case err != nil:
		return "", fmt.Errorf("resolve %s:%s: %w", v.Repository, v.Tag, err)
	case desc.Digest != v.Digest:
		return fmt.Sprintf("deleted in the source; here the tag names %s, not the %s deleted, and is left as it is", desc.Digest, v.Digest), nil
	}
	if err := repo.Manifests().Delete(ctx, desc); err != nil && !errors.Is(err, errdef.ErrNotFound) {
		return "", fmt.Errorf("delete %s@%s: %w", v.Repository, v.Digest, err)
	}
	return "deleted in the source and here", nil
}

// registrySource serves blobs from the source registry.
type registrySource struct {
	repo func(name string) *remote.Repository
}

func (s registrySource) open(ctx context.Context, repository string, desc ocispec.Descriptor) (io.ReadCloser, error) {
	return s.repo(repository).Fetch(ctx, desc)
}

// readState reads the state file; a missing file is a sync from the start.
// A state file of another source, target or selection is refused, and so
// is one that records no selection (written before berth kept it) past the
// start of the feed.
func readState(path, source, target string, selection []byte) (*SyncState, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &SyncState{Source: source, Target: target, Selection: selection}, nil
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
	if s.Selection != nil {
		// The state file is written indented.
		var b bytes.Buffer
		if err := json.Compact(&b, s.Selection); err != nil {
			return nil, fmt.Errorf("state file %s: selection: %w", path, err)
		}
		s.Selection = b.Bytes()
	}
	switch {
	case s.Selection == nil && s.Cursor > 0:
		return nil, fmt.Errorf("state file %s does not say which selection it is of (an older berth wrote it): give a new --state file, and the first sync copies what the target lacks", path)
	case s.Selection == nil:
		s.Selection = selection
	case !bytes.Equal(s.Selection, selection):
		return nil, fmt.Errorf("state file %s is the state of a sync of %s, not of %s: each selection keeps its own place in the change feed, give another --state file", path, describeSelection(s.Selection), describeSelection(selection))
	}
	return &s, nil
}

// describeSelection names a selection as a state file records it.
func describeSelection(b []byte) string {
	if string(b) == "null" {
		return "every package (no selection)"
	}
	return "the selection " + string(b)
}

// writeState writes the state file atomically.
func writeState(path string, s *SyncState) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(b, '\n'))
}
