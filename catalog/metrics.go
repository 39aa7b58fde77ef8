package catalog

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the catalog's Prometheus metrics.
type metrics struct {
	indexed   *prometheus.CounterVec
	removed   prometheus.Counter
	dropped   prometheus.Counter
	reconcile prometheus.Histogram
	checked   *prometheus.CounterVec
	// reindex counts the versions of the background re-index by state:
	// pending (recorded with an older IndexVersion, as the store last
	// counted them) and done (read again by this process); reindexed is
	// done's count.
	reindex   *prometheus.GaugeVec
	reindexed atomic.Int64
}

func newMetrics(c *Catalog, reg prometheus.Registerer) *metrics {
	m := &metrics{
		indexed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_catalog_indexed_total",
			Help: "Tags the catalog (re)indexed, by the status it recorded: indexed, invalid or ignored.",
		}, []string{"status"}),
		removed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_catalog_removed_total",
			Help: "Tags the catalog removed because the registry no longer has them.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_catalog_events_dropped_total",
			Help: "Registry events dropped because the catalog's queue was full; a reconciliation follows each.",
		}),
		reconcile: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "berth_catalog_reconcile_duration_seconds",
			Help:    "How long reconciliations with the registry took.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 8),
		}),
		checked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_catalog_signatures_checked_total",
			Help: "Signature checks of version digests against the trust policy, by verdict: verified or unverified.",
		}, []string{"result"}),
		reindex: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_catalog_reindex_versions",
			Help: "Versions of the background re-index after an upgrade, by state: pending (recorded by an older berth's indexing, as the leader last counted them) and done (read again by this process).",
		}, []string{"state"}),
	}
	if reg != nil {
		queued := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "berth_catalog_queue_length",
			Help: "Tags waiting to be indexed.",
		}, func() float64 {
			n := 0
			for _, q := range c.queues {
				n += len(q)
			}
			return float64(n)
		})
		reg.MustRegister(m.indexed, m.removed, m.dropped, m.reconcile, m.checked, m.reindex, queued)
	}
	return m
}
