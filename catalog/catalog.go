package catalog

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/coord"
	"github.com/berth-registry/berth/internal/keyedmutex"
	"github.com/berth-registry/berth/olm"
	"github.com/berth-registry/berth/permissions"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/signing"
)

// Options configure a Catalog. Zero values are documented defaults.
type Options struct {
	// Store keeps the catalog. Required.
	Store Store
	// Source is the registry to index. Required.
	Source Source
	// ReconcileInterval is how often the catalog reconciles with the
	// registry after the reconciliation at start. Zero means 5 minutes;
	// negative means only at start.
	ReconcileInterval time.Duration
	// SignatureInterval is how often a periodic reconciliation also checks
	// the signatures of every version again (the others check only versions
	// never checked or checked under another trust policy). Zero means 1
	// hour; negative means never after start.
	SignatureInterval time.Duration
	// Workers index and check signatures in parallel; one tag, and the
	// signatures of one digest, are always handled by the same worker, in
	// order. A pass that checks every version's signatures keeps at most
	// one check per worker in flight. Zero means 2.
	Workers int
	// Limits cap what reading one package may take. Zero fields: pkgformat's defaults.
	Limits pkgformat.Limits
	// IndexTimeout bounds the reading of one package; a package that takes
	// longer is invalid. Zero means 30 seconds.
	IndexTimeout time.Duration
	// IndexMemory is the memory, in bytes, that the packages being indexed
	// at once may take between them, each weighing its files and the YAML
	// trees it may build (pkgformat.ParseCost). Zero means 256 MiB.
	IndexMemory int64
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Metrics registers the catalog's metrics; nil means none.
	Metrics prometheus.Registerer
	// Policy is the trust policy signatures are verified against. Nil
	// means none: no signature verifies, each saying that no trust policy
	// covers its repository.
	Policy *signing.Policy
	// Elector, when set, decides when this process runs the reconciler and
	// the signature passes: only while it leads, so that of several
	// replicas on one store exactly one does. Nil: always.
	Elector coord.Elector
	// Locks, when set, serialise the indexing of one tag across the
	// replicas that share the store, as each tag's worker does within one
	// process. Nil: no lock beyond the worker's.
	Locks coord.Locks
	// Signals, when set with an Elector, carry a follower's request for a
	// reconciliation (its queue overflowed and it dropped events) to the
	// leader, which runs one at once instead of at its next interval.
	Signals coord.Signals
	// QueueSize bounds each worker's queue of pending tags; 0 means 4096.
	QueueSize int
	// RefuseWideningPermissions, when set, names the namespaces whose
	// versions AdmitPermissions refuses to tag when they ask for
	// permissions beyond what the gate has admitted for their package
	// name, unless Approvals holds an approval of exactly those
	// permissions.
	RefuseWideningPermissions func(namespace string) bool
	// MaxUnapprovedRating, when set, is the highest rating a gated
	// namespace admits for the first version of a package name without an
	// approval. Nil: permissions.DefaultMaxUnapproved.
	MaxUnapprovedRating func(namespace string) permissions.Rating
	// Approvals keep the approvals AdmitPermissions honours and Approve
	// records, and the allowances of package names. Nil: none can be
	// recorded.
	Approvals GateRecords
	// OnChange, when set, is called after a version of the package
	// namespace/name is recorded, replaced or removed (the OLM catalog
	// publisher follows it). It must not block.
	OnChange func(namespace, name string)
}

// queueSize bounds each worker's queue of pending tags unless
// Options.QueueSize says otherwise. Events that find it full are dropped,
// and the reconciler that follows catches up.
const queueSize = 4096

// reconcileTopic is the Signals topic of a follower's request for a
// reconciliation.
const reconcileTopic = "catalog/reconcile"

// Catalog keeps a Store in step with a registry and answers queries on it.
// Every write for a tag goes through that tag's worker, and every verdict on
// the signatures of a digest through that digest's, which read the
// registry's current state before writing: events and the reconciler only
// say what to look at, so the order they arrive in never matters.
type Catalog struct {
	store    Store
	source   Source
	ix       *indexer
	log      *slog.Logger
	interval time.Duration
	// sigInterval is Options.SignatureInterval.
	sigInterval time.Duration
	queues      []chan task
	kick        chan struct{}
	// signals carry reconciliation requests between replicas: askLeader
	// holds this follower's, leaderWakes brings every replica's.
	signals     coord.Signals
	askLeader   chan struct{}
	leaderWakes <-chan struct{}
	policy      *signing.Policy
	policyID    string // policy.Fingerprint()

	// checking is set while a background pass of CheckSignatures runs;
	// background tracks it.
	checking   atomic.Bool
	background sync.WaitGroup
	// feeds number the change feeds of accesses that do not allow
	// everything (Changes).
	feeds feedNumbering
	// deferred are the checks a full queue could not take, for the next
	// pass of CheckSignatures; past maxDeferred, deferredAll asks that
	// pass to check everything instead.
	deferMu  sync.Mutex
	deferred map[repoDigest]bool
	// checking serialises the checks of one repository and digest: each
	// reads the registry and records its verdict under the lock, so the last
	// verdict recorded was read after the last change that asked for one.
	checkLocks  keyedmutex.Mutex
	deferredAll bool

	refuseWidening      func(namespace string) bool
	maxUnapprovedRating func(namespace string) permissions.Rating
	gate                GateRecords

	onChange func(namespace, name string)
	elector  coord.Elector
	locks    coord.Locks

	mu     sync.Mutex
	status apiv1.ReconcileStatus
	// reconciling counts the reconciliations running (Reconciling).
	reconciling atomic.Int32

	metrics *metrics
}

// task asks a worker to bring one tag, or the tags holding one digest, or the
// verdict on the signatures of one digest, up to date.
type task struct {
	repo, tag string
	// digest, without tag: a manifest was deleted; check the tags that named
	// it, and the signatures of the digests it signed.
	digest string
	// pushed, without tag: a manifest was pushed by digest; read its subject.
	pushed string
	// subject, alone: check the signatures of the versions at this digest.
	subject string
	// expect, with tag: the digest a push event says the tag names. When the
	// registry does not show it yet (distribution sends its webhook before it
	// writes the tag), the tag is checked again a little later.
	expect  string
	attempt int
	done    func(result)
}

// recheckDelays are the waits before each re-check of a pushed tag the
// registry did not show yet.
var recheckDelays = []time.Duration{20 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond, 2 * time.Second}

type result int

const (
	resultUnchanged result = iota
	resultIndexed
	resultRemoved
	resultFailed
)

// New builds a Catalog. Call Run to start following the registry.
func New(opts Options) (*Catalog, error) {
	if opts.Store == nil || opts.Source == nil {
		return nil, errors.New("catalog: a store and a source are required")
	}
	if opts.ReconcileInterval == 0 {
		opts.ReconcileInterval = 5 * time.Minute
	}
	if opts.SignatureInterval == 0 {
		opts.SignatureInterval = time.Hour
	}
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.IndexTimeout <= 0 {
		opts.IndexTimeout = defaultIndexTimeout
	}
	if opts.IndexMemory <= 0 {
		opts.IndexMemory = defaultIndexMemory
	}
	limits := opts.Limits
	def := pkgformat.DefaultLimits()
	if limits.MaxArchiveSize == 0 {
		limits.MaxArchiveSize = def.MaxArchiveSize
	}
	if limits.MaxFileSize == 0 {
		limits.MaxFileSize = def.MaxFileSize
	}
	c := &Catalog{
		store:  opts.Store,
		source: opts.Source,
		ix: &indexer{source: opts.Source, limits: limits, now: time.Now,
			timeout: opts.IndexTimeout, memory: newMemoryBudget(opts.IndexMemory)},
		log:         opts.Logger,
		interval:    opts.ReconcileInterval,
		sigInterval: opts.SignatureInterval,
		queues:      make([]chan task, opts.Workers),
		kick:        make(chan struct{}, 1),
		policy:      opts.Policy,
		policyID:    opts.Policy.Fingerprint(),
		deferred:    make(map[repoDigest]bool),
		onChange:    opts.OnChange,
		elector:     opts.Elector,
		locks:       opts.Locks,

		refuseWidening:      opts.RefuseWideningPermissions,
		maxUnapprovedRating: opts.MaxUnapprovedRating,
		gate:                opts.Approvals,
	}
	size := opts.QueueSize
	if size <= 0 {
		size = queueSize
	}
	for i := range c.queues {
		c.queues[i] = make(chan task, size)
	}
	if opts.Signals != nil && opts.Elector != nil {
		c.signals, c.askLeader = opts.Signals, make(chan struct{}, 1)
		c.leaderWakes = opts.Signals.Subscribe(reconcileTopic)
	}
	c.metrics = newMetrics(c, opts.Metrics)
	return c, nil
}

// Run indexes events as they come and reconciles with the registry at start
// and every ReconcileInterval, until ctx ends. With an Elector, it
// reconciles only while this process leads, starting when it becomes the
// leader.
func (c *Catalog) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, q := range c.queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.work(ctx, q)
		}()
	}
	if c.askLeader != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.forwardRequests(ctx)
		}()
	}
	if c.elector != nil {
		c.elector.Lead(ctx, c.lead)
	} else {
		c.lead(ctx)
	}
	c.background.Wait()
	wg.Wait()
}

// wantReconcile asks for a reconciliation: of this process's reconciler,
// and, when this process follows, of the leader's.
func (c *Catalog) wantReconcile() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
	if c.askLeader != nil && !c.elector.Leader() {
		select {
		case c.askLeader <- struct{}{}:
		default:
		}
	}
}

// forwardRequests sends this follower's requests for a reconciliation to
// the leader until ctx ends.
func (c *Catalog) forwardRequests(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.askLeader:
		}
		if err := c.signals.Notify(ctx, reconcileTopic); err != nil && ctx.Err() == nil {
			c.log.Warn("catalog: asking the leader for a reconciliation", "err", err)
		}
	}
}

func (c *Catalog) reconcileLoop(ctx context.Context) {
	var tick <-chan time.Time
	if c.interval > 0 {
		t := time.NewTicker(c.interval)
		defer t.Stop()
		tick = t.C
	}
	// A reconciliation checks the signatures of the versions never checked
	// or checked under another trust policy; the first periodic one every
	// SignatureInterval checks every version's again, which is how
	// referrers whose events were lost are found.
	all, lastAll := false, time.Now()
	for {
		if _, err := c.Reconcile(ctx); err != nil && ctx.Err() == nil {
			c.log.Error("catalog: reconcile", "err", err)
		}
		if all {
			lastAll = time.Now()
		}
		c.checkInBackground(ctx, all)
		select {
		case <-ctx.Done():
			return
		case <-tick:
			all = c.sigInterval > 0 && time.Since(lastAll) >= c.sigInterval
		case <-c.kick:
			all = false
		case <-c.leaderWakes:
			all = false
		}
	}
}

// Notify tells the catalog about a change in the registry. It never blocks:
// when the tag's queue is full the event is dropped and a reconciliation is
// scheduled instead.
func (c *Catalog) Notify(e Event) {
	for _, t := range eventTasks(e) {
		c.enqueue(t)
	}
}

// enqueue queues t without blocking; when the queue is full, t is dropped
// and a reconciliation is scheduled instead.
func (c *Catalog) enqueue(t task) {
	select {
	case c.queue(t) <- t:
	default:
		c.metrics.dropped.Inc()
		c.wantReconcile()
	}
}

// Ingest takes a batch of events from a registry's notification webhook.
func (c *Catalog) Ingest(_ context.Context, events []Event) error {
	for _, e := range events {
		c.Notify(e)
	}
	return nil
}

// eventTasks turns an event into the tasks that check what it touched.
func eventTasks(e Event) []task {
	if _, generated := olm.CatalogNamespace(e.Repository); generated || e.Repository == "" {
		return nil
	}
	var ts []task
	switch {
	case e.Tag != "" && e.Action == EventPush:
		ts = append(ts, task{repo: e.Repository, tag: e.Tag, expect: e.Digest})
	case e.Tag != "":
		ts = append(ts, task{repo: e.Repository, tag: e.Tag})
	case e.Action == EventDelete && e.Digest != "":
		ts = append(ts, task{repo: e.Repository, digest: e.Digest})
	case e.Action == EventPush && e.Digest != "" && e.Subject == "" && maySubject(e.MediaType):
		// A push by digest names no version, but may be a referrer (a
		// webhook does not say): its manifest tells.
		ts = append(ts, task{repo: e.Repository, pushed: e.Digest})
	}
	if e.Subject != "" {
		ts = append(ts, task{repo: e.Repository, subject: e.Subject})
	}
	return ts
}

// maySubject reports whether a manifest of the media type can have a subject.
func maySubject(mediaType string) bool {
	return mediaType == "" || mediaType == ocispec.MediaTypeImageManifest || mediaType == ocispec.MediaTypeImageIndex
}

// queue is the worker queue of a task: by tag, so that one tag is handled
// in order, and by subject digest, so that the signature checks of one
// digest are; digest tasks go by repository, with no ordering need.
func (c *Catalog) queue(t task) chan task {
	h := fnv.New32a()
	h.Write([]byte(t.repo))
	h.Write([]byte{0})
	if t.subject != "" {
		h.Write([]byte("@" + t.subject)) // no tag has an "@"
	} else {
		h.Write([]byte(t.tag))
	}
	return c.queues[h.Sum32()%uint32(len(c.queues))]
}

func (c *Catalog) work(ctx context.Context, q chan task) {
	for {
		select {
		case <-ctx.Done():
			return
		case t := <-q:
			r := c.handle(ctx, t)
			if t.done != nil {
				t.done(r)
			}
		}
	}
}

// handle brings the catalog's view of a tag (or of a deleted manifest's tags)
// up to date with the registry.
func (c *Catalog) handle(ctx context.Context, t task) result {
	switch {
	case t.subject != "":
		return c.checkSignatures(ctx, t.repo, t.subject)
	case t.pushed != "":
		return c.subjectOf(ctx, t.repo, t.pushed)
	case t.tag == "":
		return c.handleDeletedDigest(ctx, t.repo, t.digest)
	}
	r, seen, err := c.syncTag(ctx, t.repo, t.tag)
	if err == nil && t.expect != "" && seen != t.expect && t.attempt < len(recheckDelays) {
		next := t
		next.attempt++
		next.done = nil
		time.AfterFunc(recheckDelays[t.attempt], func() {
			if ctx.Err() == nil {
				c.enqueue(next)
			}
		})
	}
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("catalog: index", "repo", t.repo, "tag", t.tag, "err", err)
		}
		return resultFailed
	}
	return r
}

// syncTag reads which digest the tag names now and records it; it returns
// that digest ("" when the tag does not exist). A version it (re)indexes has
// its signatures checked; a tag of cosign's scheme it records or removes
// asks for a check of the digest it is about.
func (c *Catalog) syncTag(ctx context.Context, repo, tag string) (result, string, error) {
	if c.locks != nil {
		unlock, err := c.locks.Lock(ctx, "catalog:"+repo+":"+tag)
		if err != nil {
			return resultFailed, "", err
		}
		defer unlock()
	}
	return c.syncTagLocked(ctx, repo, tag)
}

// syncTagLocked is syncTag, once the tag's lock is held.
func (c *Catalog) syncTagLocked(ctx context.Context, repo, tag string) (result, string, error) {
	ns, name, _ := strings.Cut(repo, "/")
	dgst, err := c.source.Resolve(ctx, repo, tag)
	if errors.Is(err, ErrNotFound) {
		changed, err := c.store.Delete(ctx, ns, name, tag)
		if err != nil || !changed {
			return resultUnchanged, "", err
		}
		c.changed(ns, name)
		c.metrics.removed.Inc()
		c.signaturesChanged(repo, tag)
		return resultRemoved, "", nil
	}
	if err != nil {
		return resultFailed, "", err
	}
	if old, err := c.store.Entry(ctx, ns, name, tag); err == nil && old.Digest == dgst {
		return resultUnchanged, dgst, nil
	}
	e, err := c.ix.read(ctx, repo, tag, dgst)
	if errors.Is(err, ErrNotFound) {
		// Re-pointed or deleted while we read: check again. A tag that still
		// names the digest whose content is missing is a failure, not a
		// reason to read it again forever.
		if again, rerr := c.source.Resolve(ctx, repo, tag); rerr == nil && again == dgst {
			return resultFailed, dgst, err
		}
		return c.syncTagLocked(ctx, repo, tag)
	}
	if err != nil {
		return resultFailed, dgst, err
	}
	if err := c.storeBundle(ctx, repo, e); err != nil {
		return resultFailed, dgst, err
	}
	changed, err := c.store.Put(ctx, e)
	if err != nil || !changed {
		return resultUnchanged, dgst, err
	}
	c.changed(ns, name)
	c.metrics.indexed.WithLabelValues(e.Status).Inc()
	c.signaturesChanged(repo, tag)
	if e.Status == apiv1.StatusIndexed {
		// Checked here, on the tag's worker, so that a version is indexed
		// and verified in one step, and a rebuild leaves no checks behind.
		c.checkIndexed(ctx, repo, dgst)
		c.log.Debug("catalog: indexed", "repo", repo, "tag", tag, "digest", dgst)
	} else {
		c.log.Info("catalog: not a package version", "repo", repo, "tag", tag, "digest", dgst, "status", e.Status, "reason", e.Reason)
	}
	return resultIndexed, dgst, nil
}

// storeBundle stores the OLM bundle image of an entry in the registry before
// the entry that names it is recorded, so that the catalog never points at
// an image that is not there. From a Source that cannot store images, the
// entry is recorded without one.
func (c *Catalog) storeBundle(ctx context.Context, repo string, e *Entry) error {
	if e.bundleErr != nil {
		c.log.Warn("catalog: no OLM bundle image for this version", "repo", repo, "tag", e.Tag, "err", e.bundleErr)
	}
	if e.bundle == nil {
		return nil
	}
	w, ok := c.source.(olm.Writer)
	if !ok {
		e.OLM = nil
		return nil
	}
	if err := storeBundle(ctx, w, repo, e.bundle); err != nil {
		return fmt.Errorf("store the OLM bundle image of %s:%s: %w", repo, e.Tag, err)
	}
	return nil
}

// changed tells Options.OnChange that a package's versions changed.
func (c *Catalog) changed(namespace, name string) {
	if c.onChange != nil {
		c.onChange(namespace, name)
	}
}

// signaturesChanged asks for a check of the digest a tag of cosign's scheme
// is about, when tag is one.
func (c *Catalog) signaturesChanged(repo, tag string) {
	if subject, ok := signatureSubject(tag); ok {
		c.enqueueCheck(repo, subject)
	}
}

// handleDeletedDigest re-checks every tag of repo that the catalog has at
// dgst, and the signatures of the digests it held signatures of (a deleted
// referrer: a webhook does not say what it referred to).
func (c *Catalog) handleDeletedDigest(ctx context.Context, repo, dgst string) result {
	ns, name, _ := strings.Cut(repo, "/")
	if signed, err := c.store.SignedBy(ctx, ns, name, dgst); err == nil {
		for _, subject := range signed {
			c.enqueueCheck(repo, subject)
		}
	}
	entries, err := c.store.Entries(ctx, ns, name)
	if err != nil {
		return resultUnchanged
	}
	res := resultUnchanged
	for _, e := range entries {
		if e.Digest != dgst {
			continue
		}
		r, _, err := c.syncTag(ctx, repo, e.Tag)
		if err != nil {
			c.log.Warn("catalog: index", "repo", repo, "tag", e.Tag, "err", err)
			r = resultFailed
		}
		if r != resultUnchanged {
			res = r
		}
	}
	return res
}

// errorf wraps a sentinel with a message about the request.
func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), sentinel)
}

// Ready reports whether the store answers within timeout.
func (c *Catalog) Ready(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := c.store.Stats(ctx); err != nil {
		return fmt.Errorf("catalog store: %w", err)
	}
	return nil
}
