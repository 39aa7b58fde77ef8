package auth

import "github.com/prometheus/client_golang/prometheus"

// Metrics are auth's Prometheus metrics. A nil *Metrics records nothing.
type Metrics struct {
	decisions    *prometheus.CounterVec
	failedLogins *prometheus.CounterVec
	// counters are the decisions' counters by action, denied then allowed:
	// looked up once, not by their label values at every request.
	counters map[Action]*[2]prometheus.Counter
}

// NewMetrics registers auth's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_auth_decisions_total",
			Help: "Access decisions, by action and result (allowed or denied).",
		}, []string{"action", "result"}),
		failedLogins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_auth_failed_logins_total",
			Help: "Failed logins, by reason (bad_credentials, rate_limited, inactive_robot, bad_token).",
		}, []string{"reason"}),
	}
	reg.MustRegister(m.decisions, m.failedLogins)
	m.counters = make(map[Action]*[2]prometheus.Counter, len(Actions))
	for _, a := range Actions {
		m.counters[a] = &[2]prometheus.Counter{
			m.decisions.WithLabelValues(string(a), "denied"),
			m.decisions.WithLabelValues(string(a), "allowed"),
		}
	}
	return m
}

// Decision counts one decision.
func (m *Metrics) Decision(action Action, allowed bool) {
	if m == nil {
		return
	}
	c, ok := m.counters[action]
	if !ok {
		m.decisions.WithLabelValues(string(action), map[bool]string{false: "denied", true: "allowed"}[allowed]).Inc()
		return
	}
	i := 0
	if allowed {
		i = 1
	}
	c[i].Inc()
}

// FailedLogin counts one failed login.
func (m *Metrics) FailedLogin(reason string) {
	if m == nil {
		return
	}
	m.failedLogins.WithLabelValues(reason).Inc()
}
