package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distribution/distribution/v3"
	storagedriver "github.com/distribution/distribution/v3/registry/storage/driver"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"
)

// Online garbage collection (docs/gc.md). distribution's garbage-collect
// needs the registry stopped or read-only, because of a race: a push uploads
// a blob, the collector finds it referenced by no manifest and deletes it,
// and the manifest that references it arrives next. berth collects while
// pushes go on:
//
//   - The mark reads the storage without stopping anything: every tag,
//     every manifest revision and layer link with its modification time, and
//     every blob. A manifest is live when a tag names it, a live index lists
//     it, or its subject is live; a blob is live when a live manifest is it
//     or references it.
//   - Grace: a blob, or an untagged manifest, written or linked into a
//     repository less than Grace ago is live. A push in progress has uploaded
//     its blobs and not yet pushed the manifest that references them; an
//     upload links its blob into the repository (the layer link), so a blob
//     uploaded again is as young as the upload.
//   - The sweep runs under the exclusive lock gcLock, which every write
//     that makes content live holds shared (guard.holdGC: a manifest write,
//     an upload's commit, a cross-repository mount), on every replica
//     whether it collects or not: while the sweep runs these writes wait,
//     so none can make a candidate live unseen. Each of these writes, once
//     stored, records what it made live in the journals that go with the
//     locks (gcjournal.go), which the collector opens before its mark reads
//     anything. Under the lock the sweep marks live what the journal names
//     (a manifest with what it references, a blob), without reading the
//     repositories again, and deletes only the candidates of the mark that
//     are still dead.
//
// A client that found a blob present (HEAD) before the sweep deleted it, and
// so did not upload it, gets MANIFEST_BLOB_UNKNOWN for its manifest and
// pushes again: a push fails cleanly, and nothing a finished push references
// is deleted.

// gcLock is the key of the lock the writes that make content live hold
// shared and the sweep holds exclusively.
const gcLock = "gc"

// gcDeleteConcurrency bounds the deletions a sweep runs at once: manifest
// pushes wait for the sweep, and on object storage each deletion is a
// round trip.
const gcDeleteConcurrency = 16

// blobsRoot is where distribution keeps blob data:
// blobs/<alg>/<first two hex>/<hex>/data.
const blobsRoot = "/docker/registry/v2/blobs"

// GCOptions configure a garbage collection.
type GCOptions struct {
	// Grace keeps blobs and untagged manifests younger than this: long
	// enough for the slowest push to go from its first blob upload to its
	// manifest. 0 means DefaultGCGrace.
	Grace time.Duration
	// KeepUntagged, when set, is how long the untagged manifests of a
	// repository are kept, when longer than Grace (a namespace's
	// untaggedOlderThan).
	KeepUntagged func(repo string) time.Duration
	// DryRun reports what would be deleted and deletes nothing.
	DryRun bool
}

// manifestDeadline returns, for each repository, the time before which its
// untagged manifests are old enough to collect.
func (o GCOptions) manifestDeadline(start time.Time) func(repo string) time.Time {
	return func(repo string) time.Time {
		keep := o.Grace
		if o.KeepUntagged != nil {
			keep = max(keep, o.KeepUntagged(repo))
		}
		return start.Add(-keep)
	}
}

// DefaultGCGrace is the grace period when GCOptions.Grace is 0.
const DefaultGCGrace = time.Hour

// GCReport is what a garbage collection deleted, or would delete in a dry
// run.
type GCReport struct {
	DryRun bool `json:"dryRun"`
	// Manifests and Blobs count what was deleted; Bytes is the size of the
	// blobs.
	Manifests int   `json:"manifests"`
	Blobs     int   `json:"blobs"`
	Bytes     int64 `json:"bytes"`
	// Mark and Sweep are how long each phase took; manifest writes wait
	// during the sweep.
	Mark  time.Duration `json:"mark"`
	Sweep time.Duration `json:"sweep"`
}

// CollectGarbage deletes the manifests no tag, live index or live subject
// references and the blobs no live manifest references, keeping what is
// younger than the grace period, while the registry serves. Collections do
// not overlap, across replicas either: the sweep holds gcLock. A manifest
// is deleted as a client's DELETE would delete it (its referrers index entry
// goes, the catalog hears of it).
func (r *Registry) CollectGarbage(ctx context.Context, opts GCOptions) (GCReport, error) {
	if opts.Grace <= 0 {
		opts.Grace = DefaultGCGrace
	}
	rep := GCReport{DryRun: opts.DryRun}
	start := time.Now()
	// Opened before the mark reads the storage: a write the mark does not
	// see records itself in it (gcjournal.go).
	journal, err := r.guard.journals.OpenJournal(ctx)
	if err != nil {
		return rep, fmt.Errorf("registry: gc: %w", err)
	}
	defer func() {
		if err := journal.Close(context.WithoutCancel(ctx)); err != nil {
			r.log.WarnContext(ctx, "registry: gc: the journal stays open until it expires", "err", err)
		}
	}()
	blobs, err := r.scanBlobs(ctx)
	if err != nil {
		return rep, fmt.Errorf("registry: gc: %w", err)
	}
	st, err := r.scanRepositories(ctx)
	if err != nil {
		return rep, fmt.Errorf("registry: gc: %w", err)
	}
	deadline, manifestDeadline := start.Add(-opts.Grace), opts.manifestDeadline(start)
	live, err := r.gc.mark(ctx, r.driver, st, manifestDeadline)
	if err != nil {
		return rep, fmt.Errorf("registry: gc: %w", err)
	}
	deadManifests := st.dead(live)
	var deadBlobs []digest.Digest
	for d, b := range blobs {
		if !live.blobs[d] && b.modified.Before(deadline) && !st.linkedSince(d, deadline) {
			deadBlobs = append(deadBlobs, d)
		}
	}
	rep.Mark = time.Since(start)
	if r.gcBeforeSweep != nil {
		r.gcBeforeSweep()
	}

	start = time.Now()
	unlock, err := r.guard.locks.Lock(ctx, gcLock)
	if err != nil {
		return rep, fmt.Errorf("registry: gc: %w", err)
	}
	defer unlock()
	// Marked again under the lock, from what the writes since the mark
	// began made live.
	entries, err := journal.Entries(ctx)
	if err != nil {
		return rep, fmt.Errorf("registry: gc: %w", err)
	}
	written, err := parseJournal(entries)
	if err != nil {
		return rep, fmt.Errorf("registry: gc: %w", err)
	}
	if err := r.gc.markWritten(ctx, r.driver, st, live, written); err != nil {
		return rep, fmt.Errorf("registry: gc: %w", err)
	}
	if r.gcSweeping != nil {
		r.gcSweeping()
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(gcDeleteConcurrency)
	var deleted atomic.Int64
	for _, m := range deadManifests {
		if live.manifests[m] {
			continue
		}
		if opts.DryRun {
			deleted.Add(1)
			continue
		}
		g.Go(func() error {
			gone, err := r.deleteManifest(gctx, m.repo, m.digest)
			if err != nil {
				return fmt.Errorf("registry: gc: delete %s@%s: %w", m.repo, m.digest, err)
			}
			if gone {
				deleted.Add(1)
			}
			return nil
		})
	}
	// The manifests go before the blobs: a crash in between leaves blobs
	// that nothing references, never a manifest whose blob is gone.
	err = g.Wait()
	rep.Manifests = int(deleted.Load())
	if err != nil {
		return rep, err
	}
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(gcDeleteConcurrency)
	for _, d := range deadBlobs {
		if live.blobs[d] {
			continue
		}
		rep.Blobs++
		rep.Bytes += blobs[d].size
		if !opts.DryRun {
			g.Go(func() error {
				if err := r.deleteBlob(gctx, d); err != nil {
					return fmt.Errorf("registry: gc: delete blob %s: %w", d, err)
				}
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return rep, err
	}
	rep.Sweep = time.Since(start)
	if q := r.guard.quota; q != nil && !opts.DryRun && rep.Manifests+rep.Blobs > 0 {
		// What the collection freed is given back by the leader's next
		// recomputes (KeepQuotas).
		if err := q.Ledger.MarkAllDirty(ctx); err != nil {
			r.log.WarnContext(ctx, "quota: the bytes this collection freed are given back at the next one", "err", err)
		}
	}
	return rep, nil
}

// deleteManifest deletes manifest d of repo through the guarded repository,
// and reports whether it was there to delete (a client may have deleted it
// since the mark).
func (r *Registry) deleteManifest(ctx context.Context, repo string, d digest.Digest) (bool, error) {
	named, err := reference.WithName(repo)
	if err != nil {
		return false, err
	}
	rp, err := r.guard.namespace.Repository(ctx, named)
	if err != nil {
		return false, err
	}
	ms, err := rp.Manifests(ctx)
	if err != nil {
		return false, err
	}
	err = ms.Delete(ctx, d)
	var unknown distribution.ErrManifestUnknownRevision
	if errors.As(err, &unknown) || errors.Is(err, distribution.ErrBlobUnknown) {
		return false, nil
	}
	return err == nil, err
}

// deleteBlob deletes blob d's folder. On the filesystem it unlinks the
// data and removes the folder, two system calls, where the driver's Delete
// takes a Stat and os.RemoveAll's reading of the folder; a folder that
// holds anything else is left to the driver.
func (r *Registry) deleteBlob(ctx context.Context, d digest.Digest) error {
	if r.files != nil {
		dir := filepath.Join(r.files.root, "blobs", d.Algorithm().String(), d.Encoded()[:2], d.Encoded())
		err := os.Remove(filepath.Join(dir, "data"))
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			if err = os.Remove(dir); err == nil || errors.Is(err, fs.ErrNotExist) {
				return nil
			}
		}
	}
	if err := r.driver.Delete(ctx, path.Dir(blobDataPath(d))); err != nil && !isPathNotFound(err) {
		return err
	}
	return nil
}

// blobInfo is a blob's size and the time its data was written.
type blobInfo struct {
	size     int64
	modified time.Time
}

// scanBlobs lists every blob in the storage.
func (r *Registry) scanBlobs(ctx context.Context) (map[digest.Digest]blobInfo, error) {
	out := map[digest.Digest]blobInfo{}
	err := r.driver.Walk(ctx, blobsRoot, func(fi storagedriver.FileInfo) error {
		if fi.IsDir() || path.Base(fi.Path()) != "data" {
			return nil
		}
		dir := path.Dir(fi.Path())
		alg := path.Base(path.Dir(path.Dir(dir)))
		d := digest.NewDigestFromEncoded(digest.Algorithm(alg), path.Base(dir))
		if d.Validate() == nil {
			out[d] = blobInfo{size: fi.Size(), modified: fi.ModTime()}
		}
		return nil
	})
	if isPathNotFound(err) {
		return out, nil
	}
	return out, err
}

// blobDataPath is where distribution keeps the data of blob d.
func blobDataPath(d digest.Digest) string {
	return path.Join(blobsRoot, d.Algorithm().String(), d.Encoded()[:2], d.Encoded(), "data")
}

// repoManifest is one manifest of one repository.
type repoManifest struct {
	repo   string
	digest digest.Digest
}

// links are the digests a repository links, with when each link was written.
type links map[digest.Digest]time.Time

func (l links) has(d digest.Digest) bool { _, ok := l[d]; return ok }

// storageState is what the repositories hold: their manifest revisions,
// the manifests their tags name, and their layer links.
type storageState struct {
	revisions map[string]links
	tagged    map[string][]digest.Digest
	// layers are the newest layer link of each blob, in any repository.
	layers links
	// referrers are, by repository, the manifests of each subject, as
	// the mark found them.
	referrers map[string]map[digest.Digest][]digest.Digest
}

// linkedSince reports whether some repository linked blob d after t.
func (s *storageState) linkedSince(d digest.Digest, t time.Time) bool {
	return s.layers[d].After(t)
}

// dead returns the manifests live does not hold.
func (s *storageState) dead(live *liveSet) []repoManifest {
	var out []repoManifest
	for repo, revs := range s.revisions {
		for d := range revs {
			if m := (repoManifest{repo, d}); !live.manifests[m] {
				out = append(out, m)
			}
		}
	}
	return out
}

// scanRepositories reads every repository's manifest revisions, tags and
// layer links from the storage, in one walk and one read per tag.
func (r *Registry) scanRepositories(ctx context.Context) (*storageState, error) {
	return r.scanRepositoriesUnder(ctx, repositoriesRoot)
}

// scanRepositoriesUnder is scanRepositories of the repositories under
// root, a directory of repositoriesRoot (a namespace's).
func (r *Registry) scanRepositoriesUnder(ctx context.Context, root string) (*storageState, error) {
	st := &storageState{revisions: map[string]links{}, tagged: map[string][]digest.Digest{}, layers: links{}}
	var tagLinks []string
	err := r.driver.Walk(ctx, root, func(fi storagedriver.FileInfo) error {
		p := fi.Path()
		if fi.IsDir() || path.Base(p) != "link" {
			return nil
		}
		rel := strings.TrimPrefix(p, repositoriesRoot+"/")
		for _, kind := range []string{"/_manifests/revisions/", "/_layers/", "/_manifests/tags/"} {
			i := strings.Index(rel, kind)
			if i < 0 {
				continue
			}
			repo, rest := rel[:i], strings.Split(rel[i+len(kind):], "/")
			switch {
			case kind == "/_manifests/tags/":
				if len(rest) == 3 && rest[1] == "current" {
					tagLinks = append(tagLinks, p)
				}
			case len(rest) == 3:
				d := digest.NewDigestFromEncoded(digest.Algorithm(rest[0]), rest[1])
				if d.Validate() != nil {
					return nil
				}
				if kind == "/_layers/" {
					if fi.ModTime().After(st.layers[d]) {
						st.layers[d] = fi.ModTime()
					}
				} else {
					if st.revisions[repo] == nil {
						st.revisions[repo] = links{}
					}
					st.revisions[repo][d] = fi.ModTime()
				}
			}
			return nil
		}
		return nil
	})
	if err != nil && !isPathNotFound(err) {
		return nil, err
	}
	for _, p := range tagLinks {
		b, err := r.driver.GetContent(ctx, p)
		if isPathNotFound(err) {
			continue // untagged since the walk
		}
		if err != nil {
			return nil, err
		}
		d, err := digest.Parse(strings.TrimSpace(string(b)))
		if err != nil {
			continue // a torn link names nothing
		}
		repo := strings.TrimPrefix(p[:strings.Index(p, "/_manifests/tags/")], repositoriesRoot+"/")
		st.tagged[repo] = append(st.tagged[repo], d)
	}
	return st, nil
}

// liveSet is what a mark found live.
type liveSet struct {
	manifests map[repoManifest]bool
	blobs     map[digest.Digest]bool
}

// manifestRefs is what a manifest references: the blobs of an image
// (config and layers), the manifests of an index, and its subject.
type manifestRefs struct {
	blobs     []digest.Digest
	manifests []digest.Digest
	subject   digest.Digest
}

// gcState caches what the collector parsed: manifests are content
// addressed, so a digest's references never change.
type gcState struct {
	mu   sync.Mutex
	refs map[digest.Digest]*manifestRefs
}

// gcCacheLimit bounds the parsed manifests kept between collections.
const gcCacheLimit = 1 << 20

// mark computes what is live in st: tagged manifests and those younger
// than their repository's deadline are roots; the manifests of a live index and the
// referrers of a live manifest are live; a live manifest's own blob and
// the blobs it references are live. It keeps in st the referrers of each
// repository's manifests, for markWritten.
func (g *gcState) mark(ctx context.Context, driver storagedriver.StorageDriver, st *storageState, deadlineOf func(repo string) time.Time) (*liveSet, error) {
	live := &liveSet{manifests: map[repoManifest]bool{}, blobs: map[digest.Digest]bool{}}
	st.referrers = map[string]map[digest.Digest][]digest.Digest{}
	for repo, revs := range st.revisions {
		deadline := deadlineOf(repo)
		referrers := map[digest.Digest][]digest.Digest{}
		var queue []digest.Digest
		for d, modified := range revs {
			refs, err := g.parse(ctx, driver, d)
			if err != nil {
				return nil, err
			}
			if refs != nil && refs.subject != "" {
				referrers[refs.subject] = append(referrers[refs.subject], d)
			}
			if modified.After(deadline) {
				queue = append(queue, d)
			}
		}
		st.referrers[repo] = referrers
		queue = append(queue, st.tagged[repo]...)
		if err := g.markFrom(ctx, driver, st, live, repo, queue); err != nil {
			return nil, err
		}
	}
	return live, nil
}

// markWritten adds to live, marked from st, what the writes the journal
// names made live: a manifest written is live with what it references (its
// blobs, the manifests it lists, its referrers), a blob linked is live.
func (g *gcState) markWritten(ctx context.Context, driver storagedriver.StorageDriver, st *storageState, live *liveSet, written journaled) error {
	for _, d := range written.blobs {
		live.blobs[d] = true
	}
	for _, m := range written.manifests {
		if live.manifests[m] {
			continue
		}
		// Written since the scan, it may be missing from st: it is marked
		// as a revision of its repository from here on.
		if st.revisions[m.repo] == nil {
			st.revisions[m.repo] = links{}
		}
		if !st.revisions[m.repo].has(m.digest) {
			st.revisions[m.repo][m.digest] = time.Time{}
		}
		if err := g.markFrom(ctx, driver, st, live, m.repo, []digest.Digest{m.digest}); err != nil {
			return err
		}
	}
	return nil
}

// markFrom marks live, in repo, the manifests of queue that st holds and
// what they reference.
func (g *gcState) markFrom(ctx context.Context, driver storagedriver.StorageDriver, st *storageState, live *liveSet, repo string, queue []digest.Digest) error {
	revs, referrers := st.revisions[repo], st.referrers[repo]
	for len(queue) > 0 {
		d := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		m := repoManifest{repo, d}
		if live.manifests[m] || !revs.has(d) {
			continue
		}
		live.manifests[m] = true
		live.blobs[d] = true
		refs, err := g.parse(ctx, driver, d)
		if err != nil {
			return err
		}
		if refs != nil {
			for _, b := range refs.blobs {
				live.blobs[b] = true
			}
			queue = append(queue, refs.manifests...)
		}
		queue = append(queue, referrers[d]...)
	}
	return nil
}

// manifestDoc is what an image manifest, an index or an artifact
// manifest references, as JSON has it.
type manifestDoc struct {
	Config    *docDescriptor  `json:"config"`
	Layers    []docDescriptor `json:"layers"`
	Blobs     []docDescriptor `json:"blobs"`
	Manifests []docDescriptor `json:"manifests"`
	Subject   *docDescriptor  `json:"subject"`
}

// docDescriptor is a descriptor of a manifestDoc; a layer with URLs may
// be stored elsewhere (non-distributable).
type docDescriptor struct {
	Digest digest.Digest `json:"digest"`
	Size   int64         `json:"size"`
	URLs   []string      `json:"urls"`
}

// parse returns what manifest d references, or nil when its blob is gone.
func (g *gcState) parse(ctx context.Context, driver storagedriver.StorageDriver, d digest.Digest) (*manifestRefs, error) {
	g.mu.Lock()
	refs, ok := g.refs[d]
	g.mu.Unlock()
	if ok {
		return refs, nil
	}
	b, err := driver.GetContent(ctx, blobDataPath(d))
	if isPathNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var doc manifestDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		// What it references cannot be told: collecting anything could
		// delete a blob it needs.
		return nil, fmt.Errorf("manifest %s cannot be read, so nothing is collected: %w", d, err)
	}
	refs = &manifestRefs{}
	if doc.Config != nil {
		refs.blobs = append(refs.blobs, doc.Config.Digest)
	}
	for _, l := range append(doc.Layers, doc.Blobs...) {
		refs.blobs = append(refs.blobs, l.Digest)
	}
	for _, m := range doc.Manifests {
		refs.manifests = append(refs.manifests, m.Digest)
	}
	if doc.Subject != nil {
		refs.subject = doc.Subject.Digest
	}
	g.mu.Lock()
	if g.refs == nil || len(g.refs) >= gcCacheLimit {
		g.refs = map[digest.Digest]*manifestRefs{}
	}
	g.refs[d] = refs
	g.mu.Unlock()
	return refs, nil
}

// Untag removes tag from repository repo, if it still names dgst, under the
// lock that pushes of the tag hold, and reports whether it removed it. The
// catalog hears of it as of a client's untag. Retention removes expired
// versions so; garbage collection then reclaims what they alone held.
func (r *Registry) Untag(ctx context.Context, repo, tag string, dgst digest.Digest) (bool, error) {
	return r.untagIf(ctx, repo, tag, func(_ distribution.Repository, desc v1.Descriptor, err error) (bool, error) {
		if isGone(err) {
			return false, nil
		}
		// Re-pointed meanwhile: the version retention read is gone.
		return err == nil && desc.Digest == dgst, err
	})
}
