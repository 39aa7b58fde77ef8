package node

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/retention"
)

// maintenance is the leader's periodic work on the storage (docs/gc.md):
// retention removes the tags of expired versions, then garbage collection
// reclaims what no tag, index or subject holds any more.
type maintenance struct {
	cfg *config.Config
	reg *registry.Registry
	cat *catalog.Catalog
	log *slog.Logger

	runs                    *prometheus.CounterVec
	bytes, blobs, manifests *prometheus.CounterVec
	expired                 *prometheus.CounterVec
	duration                *prometheus.HistogramVec
}

func newMaintenance(cfg *config.Config, reg *registry.Registry, cat *catalog.Catalog, log *slog.Logger, m prometheus.Registerer) (*maintenance, error) {
	dry := []string{"dry_run"}
	mt := &maintenance{cfg: cfg, reg: reg, cat: cat, log: log,
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
			Help:    "Time of each garbage collection phase: mark (pushes go on) and sweep (manifest pushes wait).",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 8)}, []string{"phase"}),
	}
	for _, c := range []prometheus.Collector{mt.runs, mt.bytes, mt.blobs, mt.manifests, mt.expired, mt.duration} {
		if err := m.Register(c); err != nil {
			return nil, err
		}
	}
	// Every series exists from the start, so that rates and alerts see
	// the first increase.
	for _, result := range []string{"ok", "failed"} {
		mt.runs.WithLabelValues(result)
	}
	for _, c := range []*prometheus.CounterVec{mt.bytes, mt.blobs, mt.manifests, mt.expired} {
		for _, v := range []string{"true", "false"} {
			c.WithLabelValues(v)
		}
	}
	return mt, nil
}

// loop runs retention and garbage collection every gc.interval until ctx
// ends (the term of the leader ends).
func (mt *maintenance) loop(ctx context.Context) {
	tick := time.NewTicker(mt.cfg.GC.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		mt.run(ctx)
	}
}

// run applies the retention policies, then collects garbage.
func (mt *maintenance) run(ctx context.Context) {
	dry := mt.cfg.GC.DryRun
	label := prometheus.Labels{"dry_run": map[bool]string{true: "true", false: "false"}[dry]}
	expired, err := retention.Expired(ctx, mt.cat, func(ns string) int { return mt.cfg.NamespacePolicy(ns).KeepLast })
	if err == nil {
		var n int
		n, err = retention.Apply(ctx, mt.reg, expired, dry)
		mt.expired.With(label).Add(float64(n))
		if n > 0 {
			mt.log.Info("retention: versions untagged", "versions", n, "dryRun", dry)
		}
	}
	if err != nil {
		mt.runs.WithLabelValues("failed").Inc()
		mt.log.Error("retention", "err", err)
		return
	}
	rep, err := mt.reg.CollectGarbage(ctx, registry.GCOptions{
		Grace:  mt.cfg.GC.Grace,
		DryRun: dry,
		KeepUntagged: func(repo string) time.Duration {
			ns, _, _ := strings.Cut(repo, "/")
			return mt.cfg.NamespacePolicy(ns).UntaggedOlderThan
		},
	})
	mt.duration.WithLabelValues("mark").Observe(rep.Mark.Seconds())
	mt.duration.WithLabelValues("sweep").Observe(rep.Sweep.Seconds())
	mt.bytes.With(label).Add(float64(rep.Bytes))
	mt.blobs.With(label).Add(float64(rep.Blobs))
	mt.manifests.With(label).Add(float64(rep.Manifests))
	if err != nil {
		mt.runs.WithLabelValues("failed").Inc()
		mt.log.Error("gc", "err", err)
		return
	}
	mt.runs.WithLabelValues("ok").Inc()
	mt.log.Info("gc: collected", "manifests", rep.Manifests, "blobs", rep.Blobs, "bytes", rep.Bytes,
		"mark", rep.Mark.Round(time.Millisecond), "sweep", rep.Sweep.Round(time.Millisecond), "dryRun", dry)
}
