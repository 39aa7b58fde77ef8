package catalog

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/pkgformat"
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
	// Workers index in parallel; one tag is always handled by the same
	// worker, in order. Zero means 2.
	Workers int
	// Limits cap what reading one package may take. Zero fields: pkgformat's defaults.
	Limits pkgformat.Limits
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Metrics registers the catalog's metrics; nil means none.
	Metrics prometheus.Registerer
}

// queueSize bounds each worker's queue of pending tags. Events that find it
// full are dropped, and the reconciler that follows catches up.
const queueSize = 4096

// Catalog keeps a Store in step with a registry and answers queries on it.
// Every write for a tag goes through that tag's worker, which reads the
// registry's current state before writing: events and the reconciler only say
// which tags to look at, so the order they arrive in never matters.
type Catalog struct {
	store    Store
	source   Source
	ix       *indexer
	log      *slog.Logger
	interval time.Duration
	queues   []chan task
	kick     chan struct{}

	mu     sync.Mutex
	status apiv1.ReconcileStatus

	metrics *metrics
}

// task asks a worker to bring one tag, or the tags holding one digest, up to date.
type task struct {
	repo, tag string
	// digest, without tag: a manifest was deleted; check the tags that named it.
	digest string
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
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
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
		store:    opts.Store,
		source:   opts.Source,
		ix:       &indexer{source: opts.Source, limits: limits, now: time.Now},
		log:      opts.Logger,
		interval: opts.ReconcileInterval,
		queues:   make([]chan task, opts.Workers),
		kick:     make(chan struct{}, 1),
	}
	for i := range c.queues {
		c.queues[i] = make(chan task, queueSize)
	}
	c.metrics = newMetrics(c, opts.Metrics)
	return c, nil
}

// Run indexes events as they come and reconciles with the registry at start
// and every ReconcileInterval, until ctx ends.
func (c *Catalog) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, q := range c.queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.work(ctx, q)
		}()
	}
	c.reconcileLoop(ctx)
	wg.Wait()
}

func (c *Catalog) reconcileLoop(ctx context.Context) {
	var tick <-chan time.Time
	if c.interval > 0 {
		t := time.NewTicker(c.interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		if _, err := c.Reconcile(ctx); err != nil && ctx.Err() == nil {
			c.log.Error("catalog: reconcile", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
		case <-c.kick:
		}
	}
}

// Notify tells the catalog about a change in the registry. It never blocks:
// when the tag's queue is full the event is dropped and a reconciliation is
// scheduled instead.
func (c *Catalog) Notify(e Event) {
	t, ok := eventTask(e)
	if !ok {
		return
	}
	c.enqueue(t)
}

// enqueue queues t without blocking; when the queue is full, t is dropped
// and a reconciliation is scheduled instead.
func (c *Catalog) enqueue(t task) {
	select {
	case c.queue(t) <- t:
	default:
		c.metrics.dropped.Inc()
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
}

// Ingest takes a batch of events from a registry's notification webhook.
func (c *Catalog) Ingest(_ context.Context, events []Event) error {
	for _, e := range events {
		c.Notify(e)
	}
	return nil
}

// eventTask turns an event into the task that checks what it touched.
func eventTask(e Event) (task, bool) {
	switch {
	case e.Repository == "":
		return task{}, false
	case e.Tag != "" && e.Action == EventPush:
		return task{repo: e.Repository, tag: e.Tag, expect: e.Digest}, true
	case e.Tag != "":
		return task{repo: e.Repository, tag: e.Tag}, true
	case e.Action == EventDelete && e.Digest != "":
		return task{repo: e.Repository, digest: e.Digest}, true
	}
	return task{}, false // a push by digest names no version
}

// queue is the worker queue of a task: by tag, so that one tag is handled
// in order; digest tasks go by repository, with no ordering need.
func (c *Catalog) queue(t task) chan task {
	h := fnv.New32a()
	h.Write([]byte(t.repo))
	h.Write([]byte{0})
	h.Write([]byte(t.tag))
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
	if t.tag == "" {
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
// that digest ("" when the tag does not exist).
func (c *Catalog) syncTag(ctx context.Context, repo, tag string) (result, string, error) {
	ns, name, _ := strings.Cut(repo, "/")
	dgst, err := c.source.Resolve(ctx, repo, tag)
	if errors.Is(err, ErrNotFound) {
		changed, err := c.store.Delete(ctx, ns, name, tag)
		if err != nil || !changed {
			return resultUnchanged, "", err
		}
		c.metrics.removed.Inc()
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
		// Re-pointed or deleted while we read: check again.
		return c.syncTag(ctx, repo, tag)
	}
	if err != nil {
		return resultFailed, dgst, err
	}
	changed, err := c.store.Put(ctx, e)
	if err != nil || !changed {
		return resultUnchanged, dgst, err
	}
	c.metrics.indexed.WithLabelValues(e.Status).Inc()
	if e.Status == apiv1.StatusIndexed {
		c.log.Debug("catalog: indexed", "repo", repo, "tag", tag, "digest", dgst)
	} else {
		c.log.Info("catalog: not a package version", "repo", repo, "tag", tag, "digest", dgst, "status", e.Status, "reason", e.Reason)
	}
	return resultIndexed, dgst, nil
}

// handleDeletedDigest re-checks every tag of repo that the catalog has at dgst.
func (c *Catalog) handleDeletedDigest(ctx context.Context, repo, dgst string) result {
	ns, name, _ := strings.Cut(repo, "/")
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
