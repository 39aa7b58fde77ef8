package quota

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Refusal reasons, the reason label of berth_quota_refused_total.
const (
	// ReasonQuota is a push that would exceed the namespace's quota.
	ReasonQuota = "quota"
	// ReasonSize is an upload beyond registry.uploads.maxSize.
	ReasonSize = "size"
	// ReasonUploads is an upload beyond the subject's concurrent uploads.
	ReasonUploads = "uploads"
)

// Metrics counts refusals and purges, and reads the ledger at each scrape
// for berth_quota_used_bytes, berth_quota_limit_bytes and
// berth_uploads_open. A nil *Metrics counts nothing.
type Metrics struct {
	refused *prometheus.CounterVec
	purged  prometheus.Counter
}

// scrapeTimeout bounds the ledger's read at a scrape.
const scrapeTimeout = 5 * time.Second

// NewMetrics registers the metrics of r in reg.
func NewMetrics(reg prometheus.Registerer, r Reader) (*Metrics, error) {
	m := &Metrics{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_quota_refused_total",
			Help: "Pushes refused, by namespace and reason: quota (over the namespace's quota), size (beyond registry.uploads.maxSize), uploads (too many open uploads).",
		}, []string{"namespace", "reason"}),
		purged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_uploads_purged_total",
			Help: "Abandoned uploads purged after registry.uploads.purgeAfter.",
		}),
	}
	for _, c := range []prometheus.Collector{m.refused, m.purged, &usageCollector{r: r}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Refused counts a refusal of a push into namespace.
func (m *Metrics) Refused(namespace, reason string) {
	if m != nil {
		m.refused.WithLabelValues(namespace, reason).Inc()
	}
}

// Purged counts n purged uploads.
func (m *Metrics) Purged(n int) {
	if m != nil {
		m.purged.Add(float64(n))
	}
}

var (
	usedDesc  = prometheus.NewDesc("berth_quota_used_bytes", "What each namespace stores, each blob and manifest counted once.", []string{"namespace"}, nil)
	limitDesc = prometheus.NewDesc("berth_quota_limit_bytes", "Each namespace's quota (namespaces[].quota); 0 for none.", []string{"namespace"}, nil)
	openDesc  = prometheus.NewDesc("berth_uploads_open", "Blob uploads open, across replicas.", nil, nil)
)

// usageCollector reads the ledger at each scrape.
type usageCollector struct{ r Reader }

func (c *usageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- usedDesc
	ch <- limitDesc
	ch <- openDesc
}

func (c *usageCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	usages, err := c.r.Usages(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(usedDesc, err)
		return
	}
	var open int64
	for _, u := range usages {
		ch <- prometheus.MustNewConstMetric(usedDesc, prometheus.GaugeValue, float64(u.UsedBytes), u.Namespace)
		ch <- prometheus.MustNewConstMetric(limitDesc, prometheus.GaugeValue, float64(u.LimitBytes), u.Namespace)
		open += u.OpenUploads
	}
	ch <- prometheus.MustNewConstMetric(openDesc, prometheus.GaugeValue, float64(open))
}
