package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/internal/keyedmutex"
	"github.com/berth-registry/berth/signing"
)

// DefaultConcurrency is how many versions are copied at a time when an
// operation's Concurrency is not set.
const DefaultConcurrency = 8

// blobConcurrency is how many blobs of one version or image are copied at
// a time: an image of many layers, or an index of many platforms, need not
// wait for each in turn.
const blobConcurrency = 4

// Progress counts how far an operation has come. The operation updates it
// as it goes; a caller may read it at any time to draw progress bars.
type Progress struct {
	VersionsTotal, VersionsDone atomic.Int64
	BytesTotal, BytesDone       atomic.Int64
}

// Summary is what an export, import or sync did.
type Summary struct {
	// Versions counts the versions exported, or tagged in the target by
	// this run (a version the target had already is not counted).
	Versions int `json:"versions"`
	// Blobs and Manifests count what was written to the archive or sent
	// to the target.
	Blobs     int `json:"blobs"`
	Manifests int `json:"manifests"`
	// Bytes counts the bytes written to the archive, or of blobs sent.
	Bytes int64 `json:"bytes"`
	// BytesResumed counts the bytes of blobs an earlier, interrupted
	// import had sent, which this one did not send again (import).
	BytesResumed int64 `json:"bytesResumed,omitempty"`
	// BytesSkipped counts the bytes of blobs the far side or the target
	// had already, and so were neither written nor sent.
	BytesSkipped int64 `json:"bytesSkipped"`
	// Quarantined are versions imported but left untagged because their
	// signatures do not satisfy the trust policy.
	Quarantined []Problem `json:"quarantined"`
	// Failed are versions that could not be exported or imported.
	Failed []Problem `json:"failed"`
	// Deleted are versions deleted upstream (sync): pruned in the target
	// with Prune, else only reported.
	Deleted []Problem `json:"deleted,omitempty"`
	// Damaged says what of the archive is lost (import): a part missing,
	// or a tar file cut, and where.
	Damaged []string `json:"damaged,omitempty"`
	// Images counts the images written to the archive (export), or pushed
	// to the target or found whole there (import).
	Images int `json:"images"`
	// ImagesFailed are the images that could not be exported or imported,
	// each with the versions that run it.
	ImagesFailed []ImageProblem `json:"imagesFailed"`
	// Moved names the image tags of the target that named another digest
	// and were re-pointed at the one exported (import).
	Moved []string `json:"moved,omitempty"`
	// ImageMirrors are where import put the images of each source
	// repository.
	ImageMirrors []apiv1.ImageMirror `json:"imageMirrors,omitempty"`
	// Files are the archive's files (export).
	Files []string `json:"files,omitempty"`
	// Resources are the cluster resources import wrote (ResourcesDir).
	Resources []string `json:"resources,omitempty"`
	// Seconds is how long it took.
	Seconds float64 `json:"seconds"`
}

// Problem names a version and what happened to it.
type Problem struct {
	Repository string        `json:"repository"`
	Tag        string        `json:"tag"`
	Digest     digest.Digest `json:"digest"`
	Reason     string        `json:"reason"`
}

// ImageProblem names an image that could not be carried, the versions
// that run it, and why.
type ImageProblem struct {
	Reference string   `json:"reference"`
	Versions  []string `json:"versions"`
	Reason    string   `json:"reason"`
}

// counters are a Summary's counts, updated concurrently.
type counters struct {
	versions, blobs, manifests, images atomic.Int64
	bytes, skipped                     atomic.Int64

	mu           sync.Mutex
	quarantined  []Problem
	failed       []Problem
	imagesFailed []ImageProblem
	moved        []string
}

func (c *counters) failImage(img Image, reason string) {
	c.mu.Lock()
	c.imagesFailed = append(c.imagesFailed, ImageProblem{Reference: img.Reference, Versions: img.Versions, Reason: reason})
	c.mu.Unlock()
}

func (c *counters) move(what string) {
	c.mu.Lock()
	c.moved = append(c.moved, what)
	c.mu.Unlock()
}

func (c *counters) fail(v Version, err error) {
	c.mu.Lock()
	c.failed = append(c.failed, Problem{Repository: v.Repository, Tag: v.Tag, Digest: v.Digest, Reason: err.Error()})
	c.mu.Unlock()
}

func (c *counters) quarantine(v Version, reason string) {
	c.mu.Lock()
	c.quarantined = append(c.quarantined, Problem{Repository: v.Repository, Tag: v.Tag, Digest: v.Digest, Reason: reason})
	c.mu.Unlock()
}

func (c *counters) summary(start time.Time) *Summary {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &Summary{
		Versions:     int(c.versions.Load()),
		Blobs:        int(c.blobs.Load()),
		Manifests:    int(c.manifests.Load()),
		Bytes:        c.bytes.Load(),
		BytesSkipped: c.skipped.Load(),
		Quarantined:  append([]Problem{}, c.quarantined...),
		Failed:       append([]Problem{}, c.failed...),
		Images:       int(c.images.Load()),
		ImagesFailed: append([]ImageProblem{}, c.imagesFailed...),
		Moved:        slices.Clone(c.moved),
		Seconds:      time.Since(start).Seconds(),
	}
}

// blobSource opens the blobs a version needs: an archive's, or a source
// registry's.
type blobSource interface {
	// open returns the blob, or an error wrapping ErrNotInArchive when the
	// source does not carry it.
	open(ctx context.Context, repository string, desc ocispec.Descriptor) (io.ReadCloser, error)
}

// target is the registry an import or sync writes to.
type target struct {
	c        *client.Client
	host     string
	policy   *signing.Policy
	counts   *counters
	progress *Progress
	// have, when known, is what the target held when the operation began
	// (a berth target answers it in one request): what it lists is not
	// sent again, and what it does not list is sent without asking first.
	// When nil, each blob, manifest and tag is asked for.
	have *holdings
	// up, when set, sends large blobs as chunked uploads that a rerun
	// resumes; when nil every blob goes in one request.
	up *uploader
	// blobLocks (by name@digest) let one push of a blob into a repository
	// run at a time: the images and versions copied at once share layers,
	// and two chunked uploads of one blob would take each other's journal
	// entry up.
	blobLocks keyedmutex.Mutex
	// pushed (name@digest) are the blobs this operation put into the target.
	pushed sync.Map
}

// inventoryFrom is how many versions an operation must copy before it
// takes the target's inventory: the inventory is one request, but its size
// grows with the target, while asking per blob, manifest and tag grows only
// with what is copied.
var inventoryFrom = 64

// newTarget returns the target host for copying n versions, with what it
// holds when n is at least inventoryFrom and it is a berth server that
// answers its inventory.
func newTarget(ctx context.Context, c *client.Client, host string, policy *signing.Policy, progress *Progress, n int) *target {
	t := &target{c: c, host: host, policy: policy, counts: &counters{}, progress: progress}
	if n < inventoryFrom {
		return t
	}
	if cat, err := c.Catalog(host); err == nil {
		if inv, err := cat.Inventory(ctx); err == nil {
			t.have = newHoldings(inv)
		}
	}
	return t
}

// holds reports whether the target's repository name has digest d: from
// what it held at the start when that is known, else by asking.
func (t *target) holds(ctx context.Context, name string, desc ocispec.Descriptor, exists func(context.Context, ocispec.Descriptor) (bool, error)) (bool, error) {
	if t.have != nil {
		return t.have.repos[name][desc.Digest], nil
	}
	return exists(ctx, desc)
}

// put copies the version of g into the target: its blobs (skipping those the
// target has, mounting those the far side holds in another repository),
// then its manifests by digest, then cosign's tags, and last, when its
// signatures satisfy the trust policy, the version's own tag. mountFrom
// names a repository of the target holding a blob src does not carry. It
// reports whether the version was tagged; a version the policy refuses is
// quarantined: left untagged and reported.
func (t *target) put(ctx context.Context, g *graph, src blobSource, mountFrom func(digest.Digest) string) (bool, error) {
	v := g.version
	repo := t.c.Repository(t.host, v.Repository)
	covered := false
	if t.policy != nil {
		_, covered = t.policy.For(v.Repository)
	}
	// The version's manifest is pushed under its tag, last, in one request,
	// unless a trust policy is to check its signatures first (a quarantined
	// version is left by digest).
	last := v.Tag
	if covered {
		last = ""
	}
	if err := t.putContent(ctx, repo, g, src, mountFrom, last); err != nil {
		return false, err
	}
	if covered {
		report, err := signing.Check(ctx, t.c.Fetcher(t.host), t.policy, v.Repository, v.Digest.String())
		if err != nil {
			return false, fmt.Errorf("check the signatures of %s@%s: %w", v.Repository, v.Digest, err)
		}
		if !report.Verified() {
			t.counts.quarantine(v, report.Reason())
			return false, nil
		}
	}
	tagged, _, err := t.tag(ctx, repo, g.nodes[v.Digest], v.Tag)
	if err != nil {
		var resp *errcode.ErrorResponse
		if errors.As(err, &resp) && resp.StatusCode == 403 {
			// The target's own policy refused the tag: a berth whose trust
			// policy requires a verified signature.
			t.counts.quarantine(v, "the target refused the tag: "+err.Error())
			return false, nil
		}
		return false, err
	}
	if tagged {
		t.counts.versions.Add(1)
	}
	return tagged, nil
}

// putContent copies what g needs into repo, but for the root's own tag:
// its blobs, blobConcurrency at a time (skipping those the target has,
// mounting those the far side holds in another repository), then its manifests by digest, then
// cosign's tags. A manifest a cosign tag names is pushed under its tag, in
// one request; so is the root's when last, the tag it will be given last,
// is not empty.
func (t *target) putContent(ctx context.Context, repo *remote.Repository, g *graph, src blobSource, mountFrom func(digest.Digest) string, last string) error {
	v := g.version
	blobs, bctx := errgroup.WithContext(ctx)
	blobs.SetLimit(blobConcurrency)
	for _, b := range g.blobs() {
		blobs.Go(func() error { return t.putBlob(bctx, repo, v.Repository, b.desc, src, mountFrom) })
	}
	if err := blobs.Wait(); err != nil {
		return err
	}
	byTag := map[digest.Digest]string{}
	for _, tag := range v.Tags {
		if _, ok := byTag[tag.Digest]; !ok {
			byTag[tag.Digest] = tag.Tag
		}
	}
	if last != "" {
		byTag[v.Digest] = last
	}
	for _, m := range g.manifests() {
		if _, ok := byTag[m.desc.Digest]; ok && m.body != nil {
			continue
		}
		if err := t.putManifest(ctx, repo, v.Repository, m); err != nil {
			return err
		}
	}
	for _, tag := range v.Tags {
		if _, _, err := t.tag(ctx, repo, g.nodes[tag.Digest], tag.Tag); err != nil {
			return err
		}
	}
	return nil
}

// putBlob makes sure the target's repository has blob desc.
func (t *target) putBlob(ctx context.Context, repo *remote.Repository, name string, desc ocispec.Descriptor, src blobSource, mountFrom func(digest.Digest) string) error {
	key := name + "@" + desc.Digest.String()
	defer t.blobLocks.Lock(key)()
	if err := t.pushBlob(ctx, repo, name, desc, src, mountFrom); err != nil {
		return err
	}
	t.pushed.Store(key, true)
	return nil
}

// pushBlob is putBlob, without its lock.
func (t *target) pushBlob(ctx context.Context, repo *remote.Repository, name string, desc ocispec.Descriptor, src blobSource, mountFrom func(digest.Digest) string) error {
	_, have := t.pushed.Load(name + "@" + desc.Digest.String())
	if !have {
		var err error
		if have, err = t.holds(ctx, name, desc, repo.Blobs().Exists); err != nil {
			return fmt.Errorf("blob %s in %s: %w", desc.Digest, name, err)
		}
	}
	if have {
		t.counts.skipped.Add(desc.Size)
		t.progress.BytesDone.Add(desc.Size)
		if t.up.chunked(desc.Size) {
			t.up.journal.remove(t.host, name, desc.Digest)
		}
		return nil
	}
	rc, err := src.open(ctx, name, desc)
	if errors.Is(err, ErrNotInArchive) {
		from := ""
		if mountFrom != nil {
			from = mountFrom(desc.Digest)
		}
		if from == "" || from == name {
			return fmt.Errorf("blob %s: the target's %s lacks it and the archive does not carry it; take a new inventory of the target and export again", desc.Digest, name)
		}
		if err := repo.Mount(ctx, desc, from, nil); err != nil {
			return fmt.Errorf("blob %s: mount from %s into %s, as the archive expects the target to hold it there: %w", desc.Digest, from, name, err)
		}
		t.counts.skipped.Add(desc.Size)
		t.progress.BytesDone.Add(desc.Size)
		return nil
	}
	if err != nil {
		return fmt.Errorf("blob %s: %w", desc.Digest, err)
	}
	if t.up.chunked(desc.Size) {
		// The upload opens the blob again each time it takes it up.
		rc.Close()
		open := func() (io.ReadCloser, error) { return src.open(ctx, name, desc) }
		sent, err := t.up.put(ctx, repo, t.host, name, desc, open, &t.progress.BytesDone)
		t.counts.bytes.Add(sent)
		if err != nil {
			return fmt.Errorf("push blob %s to %s: %w", desc.Digest, name, err)
		}
		t.counts.blobs.Add(1)
		return nil
	}
	defer rc.Close()
	if err := repo.Blobs().Push(ctx, desc, &countingReader{r: rc, n: &t.progress.BytesDone}); err != nil {
		return fmt.Errorf("push blob %s to %s: %w", desc.Digest, name, err)
	}
	t.counts.blobs.Add(1)
	t.counts.bytes.Add(desc.Size)
	return nil
}

// putManifest pushes manifest m by digest unless the target has it.
func (t *target) putManifest(ctx context.Context, repo *remote.Repository, name string, m *node) error {
	have, err := t.holds(ctx, name, m.desc, repo.Manifests().Exists)
	if err != nil {
		return fmt.Errorf("manifest %s in %s: %w", m.desc.Digest, name, err)
	}
	if have {
		return nil
	}
	if m.body == nil {
		return fmt.Errorf("manifest %s: the target's %s lacks it and the archive does not carry it; take a new inventory of the target and export again", m.desc.Digest, name)
	}
	if err := repo.Manifests().Push(ctx, m.desc, bytes.NewReader(m.body)); err != nil {
		return fmt.Errorf("push manifest %s to %s: %w", m.desc.Digest, name, err)
	}
	t.counts.manifests.Add(1)
	return nil
}

// tag points tag at manifest m, unless it does already; it reports
// whether it moved the tag, and the manifest the tag named before when it
// named another.
func (t *target) tag(ctx context.Context, repo *remote.Repository, m *node, tag string) (bool, digest.Digest, error) {
	var (
		have ocispec.Descriptor
		err  error = errdef.ErrNotFound
	)
	// A tag can name the manifest only if the target held it.
	if t.have == nil || t.have.repos[repo.Reference.Repository][m.desc.Digest] {
		have, err = repo.Resolve(ctx, tag)
	}
	var was digest.Digest
	switch {
	case err == nil && have.Digest == m.desc.Digest:
		return false, "", nil
	case err == nil:
		was = have.Digest
	case !errors.Is(err, errdef.ErrNotFound):
		return false, "", fmt.Errorf("resolve %s:%s: %w", repo.Reference.Repository, tag, err)
	}
	if m.body == nil {
		err = repo.Tag(ctx, m.desc, tag)
	} else {
		err = repo.PushReference(ctx, m.desc, bytes.NewReader(m.body), tag)
	}
	if err != nil {
		return false, "", fmt.Errorf("tag %s:%s: %w", repo.Reference.Repository, tag, err)
	}
	if m.body != nil && (t.have == nil || !t.have.repos[repo.Reference.Repository][m.desc.Digest]) {
		t.counts.manifests.Add(1)
	}
	return true, was, nil
}

// countingReader adds what is read to n, an *atomic.Int64 or a tally
// of them: the HTTP transport reads a request's body on a goroutine of
// its own.
type countingReader struct {
	r io.Reader
	n interface{ Add(int64) int64 }
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// forEach runs fn for each of items, at most concurrency at a time, and
// stops early when ctx ends.
func forEach[T any](ctx context.Context, concurrency int, items []T, fn func(T)) {
	if concurrency <= 0 {
		concurrency = DefaultConcurrency
	}
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	for _, it := range items {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(it)
		}()
	}
	wg.Wait()
}
