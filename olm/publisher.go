package olm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-registry/berth/pkgformat"
)

// ErrNoCatalog is wrapped by the errors of WriteFBC for a namespace that has
// no catalog image.
var ErrNoCatalog = errors.New("no OLM catalog")

// Source is where the Publisher reads packages (the catalog implements it).
type Source interface {
	// OLMPackages lists, per namespace, the packages that have indexed OLM versions.
	OLMPackages(ctx context.Context) (map[string][]string, error)
	// OLMVersions returns the indexed OLM versions of one package (none: deleted / no longer OLM).
	OLMVersions(ctx context.Context, namespace, name string) ([]Version, error)
}

// Writer stores the images berth generates: the catalog writes bundle
// images with it, the Publisher catalog images (the embedded registry,
// written in process, implements it).
type Writer interface {
	// BlobExists reports whether repo holds the blob.
	BlobExists(ctx context.Context, repo string, d digest.Digest) (bool, error)
	// PushBlob stores a blob in repo.
	PushBlob(ctx context.Context, repo string, b Blob) error
	// PushManifest stores a manifest in repo, under tag when it is not
	// empty, else by digest alone.
	PushManifest(ctx context.Context, repo, tag string, desc ocispec.Descriptor, payload []byte) error
}

// Registry is where the Publisher stores catalog images and reads their
// layers back.
type Registry interface {
	Writer
	// Blob opens the blob of digest dgst in repo.
	Blob(ctx context.Context, repo, dgst string) (io.ReadCloser, error)
}

// Resolver is an optional capability of a Registry: what a tag points to.
// With it, the first publish of a namespace after a start pushes no
// manifest when the catalog image a previous run pushed is still current.
type Resolver interface {
	// Resolve returns the digest of the manifest tag names.
	Resolve(ctx context.Context, repo, tag string) (string, error)
}

// Reconciler is an optional capability of a Source (the catalog has it):
// whether it is reconciling with the registry in bulk (the catalog: its
// first reconciliation), when a whole namespace may be indexed package
// after package for minutes. While it is, a burst of
// changes is published once it settles, maxBurst×Debounce after its last
// change, rather than at the latest maxBurst×Debounce after its first: a
// namespace being indexed gets one catalog image, not one every
// maxBurst×Debounce with a few more packages each time.
type Reconciler interface {
	Reconciling() bool
}

// PublisherOptions configure a Publisher.
type PublisherOptions struct {
	Source   Source
	Registry Registry
	// Host is the public host[:port] of bundle image references.
	Host string
	// Debounce is the quiet time after a change before its namespace is
	// published, so that a burst of changes is published once; 0 means
	// 100ms. A burst is published at most 5×Debounce after its first
	// change even if changes keep coming, unless the Source is a
	// Reconciler that is reconciling: then it is published once no change
	// came for 5×Debounce.
	Debounce time.Duration
	// Leader, when set, says whether this replica writes the catalog
	// images. Every replica of several that share a catalog and a registry
	// renders the same images (rendering is deterministic), so that each can
	// serve their FBC; only the leader pushes them. When a replica becomes
	// the leader it calls Refresh, which checks against the registry what
	// it rendered as a follower, so what a dead leader left unpushed is
	// pushed then. Nil: always the leader.
	Leader func() bool
	// Logger defaults to discarding; Metrics, when set, receives the
	// berth_olm_* metrics.
	Logger  *slog.Logger
	Metrics prometheus.Registerer
}

// PublishStats describe one publish of a namespace's catalog.
type PublishStats struct {
	Digest       digest.Digest // of the catalog manifest
	Layers       int           // layers of the image: its non-empty shards
	Packages     int           // packages in those layers
	LayersPushed int           // layer blobs pushed (those the registry lacked)
	BytesPushed  int64         // bytes of blobs and manifest pushed
	Pushed       bool          // a new manifest was pushed (false: the image came out the same)
	// Duration is the time from the first change of the burst to the end
	// of the publish: the manifest pushed.
	Duration time.Duration
}

// Publisher keeps one FBC catalog image per namespace in the registry, at
// CatalogRepository(namespace):CatalogTag, with one layer per non-empty
// shard of its packages (at most 128, in shard order; see shardOf). A
// change to a package re-renders that package alone and rebuilds its
// shard's layer from the other packages' FBC as the layer in the registry
// holds it; the other layers are reused by digest. Namespaces publish concurrently,
// each one publish at a time. A namespace gets a catalog image once it has
// an OLM package, and keeps one (possibly with no layers) after that.
type Publisher struct {
	src      Source
	reg      Registry
	host     string
	debounce time.Duration
	log      *slog.Logger
	metrics  *metrics
	wake     chan struct{}
	leader   func() bool

	mu     sync.Mutex
	spaces map[string]*space
}

// space is the Publisher's state of one namespace.
type space struct {
	name string
	pub  sync.Mutex // held by a publish
	// Guarded by Publisher.mu.
	dirty       map[string]bool // packages changed since the last publish
	first, last time.Time       // first and last change of the pending burst
	failures    int             // consecutive failed publishes
	retryAt     time.Time       // no retry before, after a failure
	busy        bool            // Run is publishing it
	// cat is the published catalog, nil until the first publish.
	cat atomic.Pointer[catalog]
	// unverified is set while cat was rendered but not pushed by this
	// replica (a follower's): the registry may lack its layers and tag.
	unverified atomic.Bool
}

// catalog is a published catalog image.
type catalog struct {
	manifest ocispec.Descriptor
	layers   []shardLayer // by shard
	packages int          // in all its layers
	stats    PublishStats
}

const (
	defaultDebounce = 100 * time.Millisecond
	// maxBurst is how many Debounces after its first change a burst is
	// published at the latest; while the Source reconciles, how many
	// Debounces without a change settle a burst.
	maxBurst = 5
	// parallelism bounds the namespaces published at once.
	parallelism = 4
)

// NewPublisher returns a Publisher; it publishes once Run or Flush is called.
// It fails when Source, Registry or Host is missing or Debounce is negative.
func NewPublisher(opts PublisherOptions) (*Publisher, error) {
	switch {
	case opts.Source == nil:
		return nil, errors.New("olm publisher: no Source")
	case opts.Registry == nil:
		return nil, errors.New("olm publisher: no Registry")
	case opts.Host == "":
		return nil, errors.New("olm publisher: no Host for bundle image references")
	case opts.Debounce < 0:
		return nil, fmt.Errorf("olm publisher: negative Debounce %s", opts.Debounce)
	}
	p := &Publisher{
		src:      opts.Source,
		reg:      opts.Registry,
		host:     opts.Host,
		debounce: opts.Debounce,
		log:      opts.Logger,
		metrics:  newMetrics(opts.Metrics),
		wake:     make(chan struct{}, 1),
		leader:   opts.Leader,
		spaces:   map[string]*space{},
	}
	if p.debounce == 0 {
		p.debounce = defaultDebounce
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	return p, nil
}

// Changed tells the Publisher that a package changed (a version pushed,
// indexed or deleted). It does not block; the namespace is published once
// the burst of changes it belongs to is over. Invalid names are ignored.
func (p *Publisher) Changed(namespace, name string) {
	if pkgformat.ValidNamespace(namespace) != nil || pkgformat.ValidName(name) != nil {
		p.log.Warn("olm publisher: change of an invalid package ignored", "namespace", namespace, "name", name)
		return
	}
	p.mu.Lock()
	p.mark(namespace, name, time.Now())
	p.space(namespace).retryAt = time.Time{}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// space returns the state of namespace, creating it. p.mu must be held.
func (p *Publisher) space(namespace string) *space {
	s := p.spaces[namespace]
	if s == nil {
		s = &space{name: namespace}
		p.spaces[namespace] = s
	}
	return s
}

// mark records a change of namespace/name at now. p.mu must be held.
func (p *Publisher) mark(namespace, name string, now time.Time) {
	s := p.space(namespace)
	if s.dirty == nil {
		s.dirty = map[string]bool{}
	}
	s.dirty[name] = true
	if s.first.IsZero() || now.Before(s.first) {
		s.first = now
	}
	s.last = later(s.last, now)
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Run publishes every namespace, then follows Changed until ctx ends. When
// the Source cannot list the packages, it retries with backoff; a namespace
// whose publish fails keeps its changes and is retried with backoff or at
// its next change.
func (p *Publisher) Run(ctx context.Context) {
	for failures := 1; ; failures++ {
		err := p.markAll(ctx)
		if err == nil {
			break
		}
		p.log.Error("olm publisher: list OLM packages", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff(failures)):
		}
	}
	if err := p.Flush(ctx); err != nil {
		p.log.Error("olm publisher: initial publish", "err", err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait := time.Hour
		if next := p.startDue(ctx, &wg); !next.IsZero() {
			wait = time.Until(next)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-timer.C:
		}
	}
}

// startDue starts publishing the namespaces whose bursts are over, at most
// parallelism at once, and returns when the next one is due (zero: none
// pending).
func (p *Publisher) startDue(ctx context.Context, wg *sync.WaitGroup) time.Time {
	reconciling := false
	if r, ok := p.src.(Reconciler); ok {
		reconciling = r.Reconciling()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	busy := 0
	for _, s := range p.spaces {
		if s.busy {
			busy++
		}
	}
	var next time.Time
	for _, name := range slices.Sorted(maps.Keys(p.spaces)) {
		s := p.spaces[name]
		if s.busy || len(s.dirty) == 0 {
			continue
		}
		due := p.due(s, reconciling)
		if due.After(now) {
			if next.IsZero() || due.Before(next) {
				next = due
			}
			continue
		}
		if busy >= parallelism {
			continue // the end of a publish wakes Run
		}
		s.busy = true
		busy++
		wg.Go(func() {
			err := p.publish(ctx, s)
			if err != nil {
				p.log.Error("olm publisher: publish", "namespace", s.name, "err", err)
			}
			p.mu.Lock()
			s.busy = false
			p.mu.Unlock()
			select {
			case p.wake <- struct{}{}:
			default:
			}
		})
	}
	return next
}

// due is when the pending burst of s is to be published: Debounce after
// its last change, or maxBurst×Debounce after its first if that is sooner;
// while the Source is reconciling, maxBurst×Debounce after its last change.
// Never before a retry is due. p.mu must be held.
func (p *Publisher) due(s *space, reconciling bool) time.Time {
	if reconciling {
		return later(s.last.Add(maxBurst*p.debounce), s.retryAt)
	}
	due := s.last.Add(p.debounce)
	if end := s.first.Add(maxBurst * p.debounce); end.Before(due) {
		due = end
	}
	return later(due, s.retryAt)
}

// markAll marks every package of every namespace as changed: those the
// Source lists and those of the catalogs already published, so that a
// package no longer listed leaves its catalog.
func (p *Publisher) markAll(ctx context.Context) error {
	pkgs, err := p.src.OLMPackages(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for ns, names := range pkgs {
		if pkgformat.ValidNamespace(ns) != nil {
			p.log.Warn("olm publisher: invalid namespace ignored", "namespace", ns)
			continue
		}
		for _, name := range names {
			if pkgformat.ValidName(name) != nil {
				p.log.Warn("olm publisher: invalid package name ignored", "namespace", ns, "name", name)
				continue
			}
			p.mark(ns, name, now)
		}
	}
	for ns, s := range p.spaces {
		if c := s.cat.Load(); c != nil {
			for _, l := range c.layers {
				for _, name := range l.Packages {
					p.mark(ns, name, now)
				}
			}
		}
	}
	return nil
}

// Refresh re-renders every package of every namespace now and publishes what
// changed, as Run does when it starts. Errors are those of the Source's
// listing or, joined, of the namespaces' publishes.
func (p *Publisher) Refresh(ctx context.Context) error {
	if err := p.markAll(ctx); err != nil {
		return err
	}
	return p.Flush(ctx)
}

// Flush publishes every pending change now, ignoring debounce and backoff,
// and waits for publishes under way. The error joins those of the
// namespaces whose publish failed; their changes stay pending.
func (p *Publisher) Flush(ctx context.Context) error {
	p.mu.Lock()
	spaces := slices.Collect(maps.Values(p.spaces))
	p.mu.Unlock()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, parallelism)
	)
	for _, s := range spaces {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := p.publish(ctx, s); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// publish publishes the pending changes of s, if any. On failure the changes
// stay pending, to be retried after a backoff.
func (p *Publisher) publish(ctx context.Context, s *space) error {
	s.pub.Lock()
	defer s.pub.Unlock()
	p.mu.Lock()
	names := slices.Sorted(maps.Keys(s.dirty))
	first := s.first
	s.dirty, s.first, s.last = nil, time.Time{}, time.Time{}
	p.mu.Unlock()
	if len(names) == 0 {
		return nil
	}
	stats, err := p.rebuild(ctx, s, names, first)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.metrics.failed(stats.BytesPushed)
		now := time.Now()
		for _, name := range names {
			p.mark(s.name, name, first)
		}
		s.last = later(s.last, now)
		s.failures++
		s.retryAt = now.Add(backoff(s.failures))
		return fmt.Errorf("catalog of %s: %w", s.name, err)
	}
	s.failures, s.retryAt = 0, time.Time{}
	return nil
}

// rebuild re-renders the named packages of s, rebuilds the layers of their
// shards, pushes those that changed and the registry lacks, and then the
// config and manifest unless the image came out the same. It returns what
// it pushed, also on failure. A follower (Leader false) renders and pushes
// nothing.
func (p *Publisher) rebuild(ctx context.Context, s *space, names []string, first time.Time) (PublishStats, error) {
	var stats PublishStats
	lead := p.leader == nil || p.leader()
	repo := CatalogRepository(s.name)
	cur := s.cat.Load()
	verified := cur != nil && !s.unverified.Load()
	layers := map[int]shardLayer{}
	packages := 0
	if cur != nil {
		for _, l := range cur.layers {
			layers[l.Shard] = l
		}
		packages = cur.packages
	}
	changed := map[int][]string{}
	for _, name := range names {
		changed[shardOf(name)] = append(changed[shardOf(name)], name)
	}
	for _, shard := range slices.Sorted(maps.Keys(changed)) {
		old, had := layers[shard]
		l, data, err := p.renderShard(ctx, s.name, shard, old, had, changed[shard])
		if err != nil {
			return stats, err
		}
		packages += len(l.Packages) - len(old.Packages)
		if data == nil {
			delete(layers, shard)
			continue
		}
		if !lead {
			layers[shard] = l
			continue
		}
		if had && verified && old.Blob.Digest == l.Blob.Digest {
			continue
		}
		n, err := p.pushBlob(ctx, repo, Blob{Descriptor: l.Blob, Data: data})
		if err != nil {
			return stats, fmt.Errorf("layer of %s: %w", strings.Join(l.Packages, ", "), err)
		}
		if n > 0 {
			stats.LayersPushed++
			stats.BytesPushed += n
		}
		layers[shard] = l
	}
	if cur == nil && len(layers) == 0 {
		return stats, nil
	}
	sorted := slices.SortedFunc(maps.Values(layers), func(a, b shardLayer) int { return a.Shard - b.Shard })
	config, manifest, err := catalogImage(sorted)
	if err != nil {
		return stats, err
	}
	stats.Digest, stats.Layers, stats.Packages = manifest.Descriptor.Digest, len(sorted), packages
	next := &catalog{manifest: manifest.Descriptor, layers: sorted, packages: packages}
	if !lead {
		// A follower's: rendered as the leader pushes it, pushed by none.
		next.stats = stats
		s.cat.Store(next)
		s.unverified.Store(true)
		return stats, nil
	}
	known := cur
	if !verified {
		known = nil
	}
	if !p.current(ctx, known, repo, manifest.Descriptor.Digest) {
		n, err := p.pushBlob(ctx, repo, config)
		stats.BytesPushed += n
		if err != nil {
			return stats, err
		}
		if err := p.reg.PushManifest(ctx, repo, CatalogTag, manifest.Descriptor, manifest.Data); err != nil {
			return stats, fmt.Errorf("push manifest %s: %w", manifest.Descriptor.Digest, err)
		}
		stats.BytesPushed += manifest.Descriptor.Size
		stats.Pushed = true
	}
	stats.Duration = time.Since(first)
	before := 0
	if cur != nil {
		before = cur.packages
	}
	next.stats = stats
	s.cat.Store(next)
	s.unverified.Store(false)
	p.metrics.published(stats, packages-before)
	if stats.Pushed {
		p.log.Info("olm publisher: catalog published", "namespace", s.name, "digest", stats.Digest,
			"packages", len(names), "layers_pushed", stats.LayersPushed, "bytes", stats.BytesPushed, "duration", stats.Duration)
	}
	return stats, nil
}

// renderShard rebuilds the layer of shard, whose packages changed: it
// renders those alone and takes the FBC of its other packages from its
// current layer old (when had), read back from the registry. When the
// registry cannot give old back (a follower's layer the leader has not
// pushed yet), every package of the shard is rendered. data is nil when
// the shard has no package left.
func (p *Publisher) renderShard(ctx context.Context, namespace string, shard int, old shardLayer, had bool, changed []string) (l shardLayer, data []byte, err error) {
	fbcs := map[string][]byte{}
	render := changed
	if had && slices.ContainsFunc(old.Packages, func(name string) bool { return !slices.Contains(changed, name) }) {
		kept, err := readShard(ctx, p.reg, CatalogRepository(namespace), old)
		if err != nil {
			p.log.Debug("olm publisher: rendering a whole shard again", "namespace", namespace, "shard", shard, "err", err)
			render = slices.Compact(slices.Sorted(slices.Values(slices.Concat(old.Packages, changed))))
		} else {
			for name, fbc := range kept {
				if !slices.Contains(changed, name) {
					fbcs[name] = fbc
				}
			}
		}
	}
	for _, name := range render {
		fbc, err := p.render(ctx, namespace, name)
		if err != nil {
			return shardLayer{}, nil, err
		}
		if fbc == nil {
			delete(fbcs, name)
			continue
		}
		fbcs[name] = fbc
	}
	if len(fbcs) == 0 {
		return shardLayer{}, nil, nil
	}
	return newShardLayer(shard, fbcs)
}

// render renders one package's FBC; nil when the package has none (no
// longer OLM, deleted, or no channel).
func (p *Publisher) render(ctx context.Context, namespace, name string) ([]byte, error) {
	versions, err := p.src.OLMVersions(ctx, namespace, name)
	if err != nil {
		return nil, fmt.Errorf("%s: read versions: %w", name, err)
	}
	var fbc bytes.Buffer
	if err := RenderPackage(&fbc, p.host, namespace, name, versions); err != nil {
		return nil, err
	}
	if fbc.Len() == 0 {
		return nil, nil
	}
	return fbc.Bytes(), nil
}

// current reports whether the manifest of digest d is the namespace's
// current catalog: the one published, or when none was yet, the one the
// registry's tag points to (when the registry can tell).
func (p *Publisher) current(ctx context.Context, cur *catalog, repo string, d digest.Digest) bool {
	if cur != nil {
		return cur.manifest.Digest == d
	}
	r, ok := p.reg.(Resolver)
	if !ok {
		return false
	}
	current, err := r.Resolve(ctx, repo, CatalogTag)
	return err == nil && current == d.String()
}

// pushBlob pushes b to repo unless the registry has it, and returns the
// bytes pushed.
func (p *Publisher) pushBlob(ctx context.Context, repo string, b Blob) (int64, error) {
	ok, err := p.reg.BlobExists(ctx, repo, b.Descriptor.Digest)
	if err != nil {
		return 0, fmt.Errorf("blob %s: %w", b.Descriptor.Digest, err)
	}
	if ok {
		return 0, nil
	}
	if err := p.reg.PushBlob(ctx, repo, b); err != nil {
		return 0, fmt.Errorf("push blob %s: %w", b.Descriptor.Digest, err)
	}
	return b.Descriptor.Size, nil
}

// Catalog returns the descriptor of the namespace's current catalog
// manifest, and false when the namespace has none.
func (p *Publisher) Catalog(namespace string) (ocispec.Descriptor, bool) {
	c := p.catalog(namespace)
	if c == nil {
		return ocispec.Descriptor{}, false
	}
	return c.manifest, true
}

// LastPublish returns the stats of the namespace's last successful publish,
// and false when it has had none.
func (p *Publisher) LastPublish(namespace string) (PublishStats, bool) {
	c := p.catalog(namespace)
	if c == nil {
		return PublishStats{}, false
	}
	return c.stats, true
}

// catalog returns the namespace's published catalog, or nil.
func (p *Publisher) catalog(namespace string) *catalog {
	p.mu.Lock()
	s := p.spaces[namespace]
	p.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.cat.Load()
}

// WriteFBC streams the namespace's current FBC, the content of its catalog
// image, package by package in the image's order: layer by layer, and by
// name within a layer. allow(name) filters packages the caller may pull and
// keep(schema, pkg) filters documents, pkg being the package a document
// belongs to (for an olm.package document, its name); nil allows or keeps
// all. It reads the layers back from the registry, so only one document is
// in memory at a time. An empty catalog (every package deleted) writes
// nothing. The error wraps ErrNoCatalog when the namespace has no catalog
// image; other errors are the registry's, those of a layer that cannot be
// read, or those of w.
func (p *Publisher) WriteFBC(ctx context.Context, w io.Writer, namespace string, allow func(name string) bool, keep func(schema, pkg string) bool) error {
	c := p.catalog(namespace)
	if c == nil {
		return fmt.Errorf("namespace %q: %w", namespace, ErrNoCatalog)
	}
	for _, l := range c.layers {
		if allow != nil && !slices.ContainsFunc(l.Packages, allow) {
			continue
		}
		err := readLayer(ctx, p.reg, CatalogRepository(namespace), l, func(name string, fbc io.Reader) error {
			if allow != nil && !allow(name) {
				return nil
			}
			if err := writeDocuments(w, fbc, name, keep); err != nil {
				return fmt.Errorf("package %s: %w", name, err)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("catalog of %s: %w", namespace, err)
		}
	}
	return nil
}
