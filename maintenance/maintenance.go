// Package maintenance is the work berth does on its storage besides serving
// it (docs/gc.md): retention removes the tags of expired package versions,
// then garbage collection reclaims what no tag, index or subject holds any
// more. The leader runs it every gc.interval (Loop); an administrator runs
// it on demand (Handler: POST /api/v1/admin/gc, which berth gc calls).
//
// Runs never overlap: in one process a run that finds another in progress
// does not start (Run returns ErrRunning: the periodic run skips its turn,
// the admin API answers 409 Conflict), and across replicas a run waits for
// the one in progress to end (the lock maintenanceLock).
package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/coord"
	"github.com/berth-registry/berth/olm"
	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/retention"
)

// maintenanceLock is the lock a run holds exclusively from its retention to
// the end of its collection, on every replica.
const maintenanceLock = "maintenance"

// ErrRunning says that a run is already in progress in this process.
var ErrRunning = errors.New("a retention and garbage collection run is already in progress")

// Options configure a Maintenance.
type Options struct {
	// Config holds the gc settings (grace, dry run, interval) and the
	// namespaces' retention policies (keepLast, untaggedOlderThan).
	Config *config.Config
	// Registry is collected; Catalog (a *catalog.Catalog) lists the versions
	// retention expires.
	Registry *registry.Registry
	Catalog  retention.Walker
	// Locks keep runs of different replicas apart: the registry's locks
	// (coord.Postgres with several replicas). Nil means locks of this
	// process.
	Locks coord.Locks
	// Logger receives a line per run. Nil means slog.Default().
	Logger *slog.Logger
	// Metrics receives berth_gc_* and berth_retention_* (docs/gc.md).
	Metrics prometheus.Registerer
}

// Report is what a run did, or would do in a dry run: the versions
// retention untagged, and what garbage collection deleted.
type Report struct {
	registry.GCReport
	// Versions counts the package versions retention untagged.
	Versions int `json:"versions"`
}

// Maintenance runs retention and garbage collection.
type Maintenance struct {
	opts    Options
	log     *slog.Logger
	running sync.Mutex

	runs                    *prometheus.CounterVec
	bytes, blobs, manifests *prometheus.CounterVec
	expired                 *prometheus.CounterVec
	duration                *prometheus.HistogramVec
}

// New returns the maintenance of opts.Registry and registers its metrics
// with opts.Metrics; it fails when they are registered already.
func New(opts Options) (*Maintenance, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Locks == nil {
		opts.Locks = &coord.Local{}
	}
	dry := []string{"dry_run"}
	m := &Maintenance{opts: opts, log: opts.Logger,
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_gc_runs_total",
			Help: "Garbage collections by result (ok, failed)."}, []string{"result"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_gc_bytes_reclaimed_total",
			Help: "Bytes of blobs garbage collection deleted (dry_run=\"true\": would have deleted)."}, dry),
		blobs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_gc_blobs_deleted_total",
			Help: "Blobs garbage collection deleted (dry_run=\"true\": would have deleted)."}, dry),
		manifests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_gc_manifests_deleted_total",
			Help: "Manifests garbage collection deleted (dry_run=\"true\": would have deleted)."}, dry),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_retention_versions_deleted_total",
			Help: "Package versions retention policies untagged (dry_run=\"true\": would have untagged)."}, dry),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "berth_gc_duration_seconds",
			Help:    "Time of each garbage collection phase: mark (pushes go on) and sweep (writes wait).",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 8)}, []string{"phase"}),
	}
	for _, c := range []prometheus.Collector{m.runs, m.bytes, m.blobs, m.manifests, m.expired, m.duration} {
		if err := opts.Metrics.Register(c); err != nil {
			return nil, err
		}
	}
	// Every series exists from the start, so that rates and alerts see
	// the first increase.
	for _, result := range []string{"ok", "failed"} {
		m.runs.WithLabelValues(result)
	}
	for _, c := range []*prometheus.CounterVec{m.bytes, m.blobs, m.manifests, m.expired} {
		for _, v := range []string{"true", "false"} {
			c.WithLabelValues(v)
		}
	}
	return m, nil
}

// Loop runs retention and garbage collection every gc.interval until ctx
// ends (the term of the leader ends), with gc.dryRun; it returns at once
// when gc.interval is 0. A turn that finds a run in progress is skipped.
func (m *Maintenance) Loop(ctx context.Context) {
	if m.opts.Config.GC.Interval <= 0 {
		return
	}
	tick := time.NewTicker(m.opts.Config.GC.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if _, err := m.Run(ctx, m.opts.Config.GC.DryRun, "schedule"); errors.Is(err, ErrRunning) {
			m.log.Info("gc: periodic run skipped: a run is in progress")
		}
	}
}

// Run applies the retention policies, then collects garbage, and returns
// what it did; by names who asked, for the log. It returns ErrRunning when
// a run is in progress in this process, and waits for one in progress on
// another replica to end. A retention that fails stops the run before the
// collection.
func (m *Maintenance) Run(ctx context.Context, dryRun bool, by string) (Report, error) {
	if !m.running.TryLock() {
		return Report{}, ErrRunning
	}
	defer m.running.Unlock()
	unlock, err := m.opts.Locks.Lock(ctx, maintenanceLock)
	if err != nil {
		return Report{}, fmt.Errorf("maintenance: wait for the run of another replica: %w", err)
	}
	defer unlock()
	rep, err := m.run(ctx, dryRun)
	if err != nil {
		m.runs.WithLabelValues("failed").Inc()
		m.log.Error("gc", "by", by, "dryRun", dryRun, "err", err)
		return rep, err
	}
	m.runs.WithLabelValues("ok").Inc()
	m.log.Info("gc: collected", "by", by, "versions", rep.Versions, "manifests", rep.Manifests, "blobs", rep.Blobs, "bytes", rep.Bytes,
		"mark", rep.Mark.Round(time.Millisecond), "sweep", rep.Sweep.Round(time.Millisecond), "dryRun", dryRun)
	return rep, nil
}

// keepUntagged is how long collection keeps the untagged manifests of a
// repository beyond the grace: its namespace's untaggedOlderThan, except in
// the namespace's OLM catalog repository, whose untagged manifests are the
// catalog images berth itself superseded (docs/olm.md): those go once the
// grace has passed, and with them the layers no current image shares.
func keepUntagged(cfg *config.Config) func(repo string) time.Duration {
	return func(repo string) time.Duration {
		if _, ok := olm.CatalogNamespace(repo); ok {
			return 0
		}
		ns, _, _ := strings.Cut(repo, "/")
		return cfg.NamespacePolicy(ns).UntaggedOlderThan
	}
}

func (m *Maintenance) run(ctx context.Context, dryRun bool) (Report, error) {
	cfg := m.opts.Config
	label := prometheus.Labels{"dry_run": fmt.Sprint(dryRun)}
	rep := Report{GCReport: registry.GCReport{DryRun: dryRun}}
	expired, err := retention.Expired(ctx, m.opts.Catalog, func(ns string) int { return cfg.NamespacePolicy(ns).KeepLast })
	if err == nil {
		rep.Versions, err = retention.Apply(ctx, m.opts.Registry, expired, dryRun)
		m.expired.With(label).Add(float64(rep.Versions))
	}
	if err != nil {
		return rep, fmt.Errorf("retention: %w", err)
	}
	gc, err := m.opts.Registry.CollectGarbage(ctx, registry.GCOptions{
		Grace:        cfg.GC.Grace,
		DryRun:       dryRun,
		KeepUntagged: keepUntagged(cfg),
	})
	rep.GCReport = gc
	m.duration.WithLabelValues("mark").Observe(gc.Mark.Seconds())
	m.duration.WithLabelValues("sweep").Observe(gc.Sweep.Seconds())
	m.bytes.With(label).Add(float64(gc.Bytes))
	m.blobs.With(label).Add(float64(gc.Blobs))
	m.manifests.With(label).Add(float64(gc.Manifests))
	return rep, err
}
