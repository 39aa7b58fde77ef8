package olm

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Results of a publish, the label of berth_olm_publishes_total.
const (
	resultPublished = "published" // a new catalog manifest was pushed
	resultUnchanged = "unchanged" // the catalog image came out the same: nothing pushed
	resultFailed    = "failed"
)

// metrics are the Publisher's Prometheus metrics.
type metrics struct {
	publishes *prometheus.CounterVec
	duration  prometheus.Histogram
	bytes     prometheus.Counter
	packages  prometheus.Gauge
}

// newMetrics creates the Publisher's metrics and registers them with reg,
// unless reg is nil.
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		publishes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_olm_publishes_total",
			Help: "Catalog image publishes, by result: published, unchanged or failed.",
		}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "berth_olm_publish_duration_seconds",
			Help:    "Time from the first change of a burst to its catalog manifest pushed.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
		}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_olm_bytes_pushed_total",
			Help: "Bytes of catalog image blobs and manifests pushed to the registry.",
		}),
		packages: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_olm_packages",
			Help: "Packages in the published catalog images, all namespaces together.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.publishes, m.duration, m.bytes, m.packages)
	}
	return m
}

// published records a successful publish.
func (m *metrics) published(s PublishStats, packagesDelta int) {
	result := resultUnchanged
	if s.Pushed {
		result = resultPublished
		m.duration.Observe(s.Duration.Seconds())
	}
	m.publishes.WithLabelValues(result).Inc()
	m.bytes.Add(float64(s.BytesPushed))
	m.packages.Add(float64(packagesDelta))
}

// failed records a failed publish, with the bytes it pushed before failing.
func (m *metrics) failed(bytesPushed int64) {
	m.publishes.WithLabelValues(resultFailed).Inc()
	m.bytes.Add(float64(bytesPushed))
}

// backoff is the wait before retrying after failures consecutive failures:
// one second, doubling up to a minute.
func backoff(failures int) time.Duration {
	d := time.Second
	for i := 1; i < failures && d < time.Minute; i++ {
		d *= 2
	}
	return min(d, time.Minute)
}
