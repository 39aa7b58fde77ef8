package auth

import "github.com/prometheus/client_golang/prometheus"

// Metrics are auth's Prometheus metrics. A nil *Metrics records nothing.
type Metrics struct {
	decisions    *prometheus.CounterVec
	failedLogins *prometheus.CounterVec
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
	return m
}

// Decision counts one decision.
func (m *Metrics) Decision(action Action, allowed bool) {
	if m == nil {
		return
	}
	result := "denied"
	if allowed {
		result = "allowed"
	}
	m.decisions.WithLabelValues(string(action), result).Inc()
}

// FailedLogin counts one failed login.
func (m *Metrics) FailedLogin(reason string) {
	if m == nil {
		return
	}
	m.failedLogins.WithLabelValues(reason).Inc()
}
