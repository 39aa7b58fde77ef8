package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/distribution/distribution/v3"
	"github.com/distribution/distribution/v3/registry/api/errcode"
	storagedriver "github.com/distribution/distribution/v3/registry/storage/driver"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/coord"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/quota"
)

// guard is berth's distribution registry middleware. It refuses to re-point a
// tag that names a package version (a berth package or a Helm chart) to
// another digest, whatever is pushed in its place, unless the namespace allows
// overwrites. Other tags stay mutable as OCI has them: cosign rewrites its
// sha256-<hex>.sig tags on every signature. It also keeps the referrers index
// up to date as manifests with a subject are pushed and deleted.
type guard struct {
	allowOverwrite func(namespace string) bool
	admitTag       func(ctx context.Context, push TagPush) error
	onEvent        func(Event)
	log            *slog.Logger
	namespace      distribution.Namespace
	driver         storagedriver.StorageDriver
	referrers      *referrerIndex
	// locks serialise the pushes by tag of one repository and tag with the
	// untags that must not undo them (lockTag), and every write that makes
	// a blob or manifest live with a garbage collection's sweep (holdGC), in
	// this process or, shared, across the replicas of one storage.
	locks coord.Locks
	// journals record, under gcLock held shared, what those writes made
	// live, for a collection's sweep (gcjournal.go).
	journals coord.Journals
	// quota, nil without quotas, charges pushes and counts uploads
	// (quota.go).
	quota *quotas
	// recent, nil without Options.Recent, keeps the manifests accepted and
	// the small blobs uploaded here for the catalog (recent.go).
	recent *recentContent
}

// holdGC takes gcLock shared and returns the function that releases it.
// Every write that makes content live holds it (a manifest write, an
// upload's commit, a cross-repository mount), whether or not any replica
// collects garbage: a collection's sweep holds it exclusively, so it sees
// every such write that began before it, and the writes that begin during
// it wait for its end. It fails, as unavailable, when the lock cannot be
// asked for (the database is unreachable).
func (g *guard) holdGC(ctx context.Context) (func(), error) {
	unlock, err := g.locks.RLock(ctx, gcLock)
	if err != nil {
		return nil, errcode.ErrorCodeUnavailable.WithMessage(fmt.Sprintf("cannot lock out garbage collection: %v", err))
	}
	return unlock, nil
}

// lockTag locks repo:tag and returns the function that unlocks it. A push by
// tag holds it from its immutability check to its tag write, and so does an
// untag that decided from what the tag names, so that it never removes a tag
// that a push has just written. It fails when ctx ends first, or when shared
// locks cannot be asked for (the database is unreachable): the caller then
// refuses the request as unavailable.
func (g *guard) lockTag(ctx context.Context, repo, tag string) (unlock func(), err error) {
	unlock, err = g.locks.Lock(ctx, "tag:"+repo+":"+tag)
	if err != nil {
		return nil, errcode.ErrorCodeUnavailable.WithMessage(fmt.Sprintf("cannot lock %s:%s: %v", repo, tag, err))
	}
	return unlock, nil
}

// initGuard is the distribution middleware constructor; options["guard"]
// carries the *guard of the Registry being built.
func initGuard(_ context.Context, ns distribution.Namespace, driver storagedriver.StorageDriver, options map[string]any) (distribution.Namespace, error) {
	g, ok := options["guard"].(*guard)
	if !ok {
		return nil, errors.New("berth registry middleware: no guard in options")
	}
	g.driver = driver
	g.referrers = &referrerIndex{driver: driver, cache: newDescriptorCache(referrerCacheEntries), log: g.log}
	g.namespace = &guardedNamespace{Namespace: ns, guard: g}
	return g.namespace, nil
}

// guardedNamespace hands out guarded repositories, and removes a repository
// itself (Remove), never the repositories nested in its path.
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

// Blobs returns the repository's blob store, whose uploads commit and
// whose cross-repository mounts link under gcLock held shared (holdGC).
func (r *guardedRepository) Blobs(ctx context.Context) distribution.BlobStore {
	return &guardedBlobs{BlobStore: r.Repository.Blobs(ctx), guard: r.guard, repo: r.Named().Name()}
}

// guardedBlobs is a repository's blob store whose writes that make a blob
// live, a mount (Create with WithMountFrom) and an upload's commit, hold
// gcLock shared: a blob that already exists, uploaded again or mounted
// while a collection sweeps, is either linked before the sweep's second
// mark, which then sees it young, or after the sweep, which then has not
// deleted it under the client's feet.
type guardedBlobs struct {
	distribution.BlobStore
	guard *guard
	repo  string
}

var _ distribution.BlobEnumerator = (*guardedBlobs)(nil)

// Enumerate lists the repository's blobs as the store it wraps does, for
// the readers of the whole storage (Registry.Inventory). It returns an
// error when the wrapped store cannot enumerate.
func (b *guardedBlobs) Enumerate(ctx context.Context, ingester func(digest.Digest) error) error {
	return enumerate(ctx, b.BlobStore, "blobs", ingester)
}

// Create starts an upload, counted against its subject's open uploads,
// or mounts a blob from another repository under gcLock, charged to the
// namespace. A refusal is left for the response (refuseUpload), since
// distribution's handler keeps no code of Create's errors.
func (b *guardedBlobs) Create(ctx context.Context, options ...distribution.BlobCreateOption) (distribution.BlobWriter, error) {
	var opts distribution.CreateOptions
	for _, o := range options {
		// An option of another kind leaves opts as it was; the wrapped
		// store refuses it.
		_ = o.Apply(&opts)
	}
	q := b.guard.quota
	var mountDesc v1.Descriptor
	charged := false
	if opts.Mount.ShouldMount {
		unlock, err := b.guard.holdGC(ctx)
		if err != nil {
			return nil, err
		}
		defer unlock()
		if q != nil {
			if mountDesc, charged, err = b.chargeMount(ctx, opts.Mount.From.Digest()); err != nil {
				return nil, refuseUpload(ctx, err)
			}
		}
	}
	w, err := b.BlobStore.Create(ctx, options...)
	mounted := distribution.ErrBlobMounted{}
	if charged && !errors.As(err, &mounted) {
		q.uncharge(ctx, b.repo, mountDesc.Digest)
	}
	if errors.As(err, &mounted) {
		if rerr := b.guard.recordLive(ctx, blobEntry(mounted.Descriptor.Digest)); rerr != nil {
			return nil, rerr
		}
	}
	if err != nil {
		return nil, err
	}
	if q != nil {
		openedUpload(ctx, w.ID())
		if err := q.openUpload(ctx, b.repo, w.ID()); err != nil {
			_ = w.Cancel(ctx)
			return nil, refuseUpload(ctx, err)
		}
	}
	return newGuardedBlobWriter(w, b.guard, b.repo), nil
}

// chargeMount charges the blob d a cross-repository mount would link; a
// blob that is not there is not charged (distribution opens an upload).
func (b *guardedBlobs) chargeMount(ctx context.Context, d digest.Digest) (v1.Descriptor, bool, error) {
	desc, err := b.guard.namespace.BlobStatter().Stat(ctx, d)
	if err != nil {
		return v1.Descriptor{}, false, nil
	}
	charged, err := b.guard.quota.charge(ctx, b.repo, quota.Push{Item: item(desc.Digest, desc.Size)})
	return desc, charged, err
}

// Put stores a blob berth writes itself (an OLM bundle's) and links it
// into the repository, under gcLock held shared, and records it for a
// collection's sweep.
func (b *guardedBlobs) Put(ctx context.Context, mediaType string, p []byte) (v1.Descriptor, error) {
	unlock, err := b.guard.holdGC(ctx)
	if err != nil {
		return v1.Descriptor{}, err
	}
	defer unlock()
	desc, err := b.BlobStore.Put(ctx, mediaType, p)
	if err != nil {
		return desc, err
	}
	return desc, b.guard.recordLive(ctx, blobEntry(desc.Digest))
}

// Resume continues an upload, whose commit holds gcLock.
func (b *guardedBlobs) Resume(ctx context.Context, id string) (distribution.BlobWriter, error) {
	w, err := b.BlobStore.Resume(ctx, id)
	if err != nil {
		return nil, err
	}
	return newGuardedBlobWriter(w, b.guard, b.repo), nil
}

// Delete deletes the repository's link to blob d, which the recent content
// forgets.
func (b *guardedBlobs) Delete(ctx context.Context, d digest.Digest) error {
	b.guard.recent.forget(b.repo, d)
	return b.BlobStore.Delete(ctx, d)
}

// guardedBlobWriter is an upload of repo that commits under gcLock,
// charged to the namespace, and whose writes the ledger records.
type guardedBlobWriter struct {
	distribution.BlobWriter
	guard *guard
	repo  string
	// size is what the upload held when this request took it up, and
	// written what the request wrote since: the writer's own Size lags
	// behind on object storage, which sends data in parts.
	size, written int64
	// buf keeps what the request writes for the recent content, nil when
	// it keeps nothing (recent.go).
	buf *uploadBuffer
}

func newGuardedBlobWriter(w distribution.BlobWriter, g *guard, repo string) *guardedBlobWriter {
	size := w.Size()
	return &guardedBlobWriter{BlobWriter: w, guard: g, repo: repo, size: size, buf: newUploadBuffer(g.recent, size)}
}

// Write writes p to the upload.
func (w *guardedBlobWriter) Write(p []byte) (int, error) {
	n, err := w.BlobWriter.Write(p)
	w.written += int64(n)
	w.buf.keep(p[:n])
	return n, err
}

// ReadFrom writes what r reads to the upload.
func (w *guardedBlobWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.buf != nil {
		r = teeReader{r: r, buf: w.buf}
	}
	n, err := w.BlobWriter.ReadFrom(r)
	w.written += n
	return n, err
}

// held is what the upload holds.
func (w *guardedBlobWriter) held() int64 { return w.size + w.written }

// Commit moves the uploaded blob into place and links it into the
// repository, under gcLock held shared, once it is charged to the
// namespace, and records it for a collection's sweep (recordLive). A
// refusal (beyond registry.uploads.maxSize, over the quota)
// is an OCI error, after which distribution cancels the upload; as its
// handler then saves the upload's state again, the refusal is left for
// serveUpload too, which deletes what is left.
func (w *guardedBlobWriter) Commit(ctx context.Context, provisional v1.Descriptor) (v1.Descriptor, error) {
	desc, err := w.commit(ctx, provisional)
	if err == nil {
		w.buf.commit(w.repo, desc.Digest, desc.Size)
	}
	w.buf.drop()
	return desc, err
}

// commit is Commit, but for the recent content.
func (w *guardedBlobWriter) commit(ctx context.Context, provisional v1.Descriptor) (v1.Descriptor, error) {
	unlock, err := w.guard.holdGC(ctx)
	if err != nil {
		return v1.Descriptor{}, err
	}
	defer unlock()
	q, charged := w.guard.quota, false
	if q != nil {
		size := w.held()
		if err := q.checkSize(quota.Namespace(w.repo), size); err != nil {
			return v1.Descriptor{}, refuseUpload(ctx, err)
		}
		// The charge closes the upload in the ledger: committed or,
		// failing, cancelled by distribution, it is over either way.
		if charged, err = q.charge(ctx, w.repo, quota.Push{Item: item(provisional.Digest, size), Upload: w.ID()}); err != nil {
			return v1.Descriptor{}, refuseUpload(ctx, err)
		}
	}
	desc, err := w.BlobWriter.Commit(ctx, provisional)
	if err != nil {
		if charged {
			q.uncharge(ctx, w.repo, provisional.Digest)
		}
		return desc, err
	}
	return desc, w.guard.recordLive(ctx, blobEntry(desc.Digest))
}

// Cancel deletes the upload and forgets it.
func (w *guardedBlobWriter) Cancel(ctx context.Context) error {
	w.buf.drop()
	err := w.BlobWriter.Cancel(ctx)
	if q := w.guard.quota; q != nil {
		err = errors.Join(err, q.Ledger.CloseUpload(context.WithoutCancel(ctx), w.ID()))
	}
	return err
}

// Close saves the upload's state for its next request, and records in the
// ledger what it holds when this request wrote to it.
func (w *guardedBlobWriter) Close() error {
	w.buf.drop()
	err := w.BlobWriter.Close()
	if q := w.guard.quota; q != nil && err == nil && w.written > 0 {
		err = q.Ledger.TouchUpload(context.Background(), w.ID(), w.held(), time.Now())
	}
	return err
}

type guardedManifests struct {
	distribution.ManifestService
	repo *guardedRepository
}

var _ distribution.ManifestEnumerator = (*guardedManifests)(nil)

// Enumerate lists the repository's manifest revisions as the manifest
// service it wraps does (distribution's storage), which readers of the
// whole storage (Registry.Inventory, distribution's garbage collector) find
// by type assertion. Listing changes nothing, so the guard has no say in it.
// It returns an error when the wrapped service cannot enumerate.
func (m *guardedManifests) Enumerate(ctx context.Context, ingester func(digest.Digest) error) error {
	return enumerate(ctx, m.ManifestService, "manifests of "+m.repo.Named().Name(), ingester)
}

// enumerate lists what inner, a wrapped manifest service or blob store,
// lists, or fails, naming what, when it cannot enumerate.
func enumerate(ctx context.Context, inner any, what string, ingester func(digest.Digest) error) error {
	e, ok := inner.(interface {
		Enumerate(ctx context.Context, ingester func(digest.Digest) error) error
	})
	if !ok {
		return fmt.Errorf("registry: the %s cannot be enumerated", what)
	}
	return e.Enumerate(ctx, ingester)
}

// Put refuses, with an OCI DENIED error, a manifest pushed by tag when the tag
// already names a different package manifest, when the admission hook
// refuses a package pushed by tag, or when a sign-only push (WithSignOnly)
// is no signature or referrer. Once distribution has stored a manifest
// with a subject, Put records it in the referrers index, reports it and
// leaves the subject for the OCI-Subject response header.
func (m *guardedManifests) Put(ctx context.Context, mf distribution.Manifest, options ...distribution.ManifestServiceOption) (digest.Digest, error) {
	mediaType, payload, err := mf.Payload()
	if err != nil {
		return "", err
	}
	ref, err := referrerOf(mediaType, payload)
	if err != nil {
		return "", err
	}
	name := m.repo.Named().Name()
	tag := tagOption(options)
	if isSignOnly(ctx) {
		if err := checkSignOnly(tag, mediaType, payload, ref != nil); err != nil {
			return "", err
		}
	}
	if tag != "" {
		if err := m.checkTag(ctx, name, tag, mediaType, payload); err != nil {
			return "", err
		}
	}
	unlock, err := m.repo.guard.holdGC(ctx)
	if err != nil {
		return "", err
	}
	defer unlock()
	q, charged := m.repo.guard.quota, false
	if q != nil {
		push := quota.Push{Item: item(digest.FromBytes(payload), int64(len(payload))), Refs: refsOf(payload)}
		if charged, err = q.charge(ctx, name, push); err != nil {
			return "", err
		}
	}
	dgst, err := m.ManifestService.Put(ctx, mf, options...)
	if err != nil && charged {
		q.uncharge(ctx, name, digest.FromBytes(payload))
	}
	if err == nil {
		err = m.repo.guard.recordLive(ctx, manifestEntry(name, dgst))
	}
	if err != nil {
		return dgst, err
	}
	m.repo.guard.recent.add(recentKey{repo: name, digest: dgst, manifest: true}, mediaType, payload)
	if ref == nil {
		return dgst, nil
	}
	ref.desc.Digest = dgst
	if err := m.repo.guard.referrers.add(ctx, name, ref.subject, ref.desc); err != nil {
		return "", err
	}
	if p := pushResultFrom(ctx); p != nil {
		p.subject = ref.subject
	}
	m.repo.guard.notify(Event{Action: EventPush, Repository: name, Digest: dgst.String(), MediaType: mediaType, Subject: ref.subject.String()})
	return dgst, nil
}

// TagPush is a package manifest pushed by tag, as Options.AdmitTag is asked
// about it before it is stored: its blobs are, its manifest is not yet.
type TagPush struct {
	Repo, Tag string
	// Digest is the manifest's, MediaType and Payload what was pushed.
	Digest    digest.Digest
	MediaType string
	Payload   []byte
}

// checkTag decides whether payload may be stored under tag: not when the tag
// names another package version (unless the namespace allows overwrites),
// nor, for a package, when the admission hook refuses it.
func (m *guardedManifests) checkTag(ctx context.Context, repo, tag, mediaType string, payload []byte) error {
	g := m.repo.guard
	namespace, _, _ := strings.Cut(repo, "/")
	if !g.allowOverwrite(namespace) {
		if err := m.checkRetag(ctx, repo, tag, payload); err != nil {
			return err
		}
	}
	if g.admitTag != nil && pkgformat.ClassifyManifest(mediaType, payload).IsPackage() {
		if err := g.admitTag(ctx, TagPush{Repo: repo, Tag: tag, Digest: digest.FromBytes(payload), MediaType: mediaType, Payload: payload}); err != nil {
			return errcode.ErrorCodeDenied.WithMessage(err.Error())
		}
	}
	return nil
}

func (m *guardedManifests) checkRetag(ctx context.Context, repo, tag string, payload []byte) error {
	current, err := m.repo.Tags(ctx).Get(ctx, tag)
	var unknown distribution.ErrTagUnknown
	if errors.As(err, &unknown) {
		return nil
	}
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

// storedIsPackage reports whether the stored manifest d is a package version
// (pkgformat.ClassifyManifest). A manifest that can no longer be read is not
// one: its tag is dangling, and may be pointed elsewhere.
func (m *guardedManifests) storedIsPackage(ctx context.Context, d digest.Digest) bool {
	mf, err := m.ManifestService.Get(ctx, d)
	if err != nil {
		return false
	}
	mediaType, payload, err := mf.Payload()
	return err == nil && pkgformat.ClassifyManifest(mediaType, payload).IsPackage()
}

func tagOption(options []distribution.ManifestServiceOption) string {
	for _, o := range options {
		if t, ok := o.(distribution.WithTagOption); ok {
			return t.Tag
		}
	}
	return ""
}
