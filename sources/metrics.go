package sources

import (
	"cmp"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-registry/berth/catalog/apiv1"
)

// The results of a check (berth_sources_checks_total) and of a build
// (berth_sources_builds_total).
const (
	checkUnchanged = "unchanged"
	checkChanged   = "changed"
	checkFailed    = "failed"

	buildPublished = "published"
	buildUnchanged = "unchanged"
	buildFailed    = "failed"
)

// metrics are the tracker's Prometheus metrics.
type metrics struct {
	checks    *prometheus.CounterVec
	builds    *prometheus.CounterVec
	duration  prometheus.Histogram
	lastCheck *prometheus.GaugeVec
	pending   prometheus.Gauge
}

// newMetrics makes the metrics and registers them on reg when it is set;
// berth_sources_last_check_timestamp_seconds has one series per source of
// the configuration, and no other.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_sources_checks_total",
			Help: "Checks of tracked sources, by result: unchanged, changed (a build followed) or failed.",
		}, []string{"result"}),
		builds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_sources_builds_total",
			Help: "Builds of versions from tracked sources, by result: published, unchanged (the version holds that content already) or failed.",
		}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "berth_sources_check_duration_seconds",
			Help:    "How long a check of a tracked source took, its builds included.",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 9),
		}),
		lastCheck: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_sources_last_check_timestamp_seconds",
			Help: "When each tracked source was last checked, in Unix seconds.",
		}, []string{"namespace", "package"}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_sources_pending",
			Help: "Checks of tracked sources due or asked for that wait for a free worker.",
		}),
	}
	for _, r := range []string{checkUnchanged, checkChanged, checkFailed} {
		m.checks.WithLabelValues(r)
	}
	for _, r := range []string{buildPublished, buildUnchanged, buildFailed} {
		m.builds.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.checks, m.builds, m.duration, m.lastCheck, m.pending} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// sortSources orders statuses by namespace, then package.
func sortSources(s []apiv1.Source) {
	slices.SortFunc(s, func(a, b apiv1.Source) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Package, b.Package))
	})
}
