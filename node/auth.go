package node

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/auth/authstore"
	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/config"
)

// authParts are the pieces of berth serve's auth: every one of them is a
// no-op, and berth is open, when the configuration has no auth section.
type authParts struct {
	authorizer catalog.Authorizer
	registry   func(http.Handler) http.Handler
	token      http.Handler
	robots     http.Handler
	api        func(http.Handler) http.Handler
	metrics    func(http.Handler) http.Handler
	// admin gates the admin API to administrators; a no-op when auth is off.
	admin func(http.Handler) http.Handler
	// sessions are the web UI's logins; nil when auth is off.
	sessions *auth.Sessions
	// keyID is the key id of the token key, which replicas compare
	// (membership); empty when auth is off.
	keyID string
}

// startAuth builds the auth of cfg. Without an auth section it warns that
// berth is open. Its metrics register in m. close releases the robot store
// and the audit log.
func startAuth(ctx context.Context, cfg *config.Config, log *slog.Logger, m prometheus.Registerer) (*authParts, func(), error) {
	if cfg.Auth == nil {
		log.Warn("auth is off: anyone who can reach berth may pull, push and delete anything; add an auth section to the configuration (docs/auth.md)")
		return &authParts{
			authorizer: catalog.AllowAll{},
			registry:   func(h http.Handler) http.Handler { return h },
			admin:      auth.AdminGate(nil, ""),
		}, func() {}, nil
	}
	policy, err := auth.NewPolicy(cfg.Auth)
	if err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	audit, auditFile, err := auth.OpenAuditor(cfg.Auth.Audit, auth.Rotation{
		MaxSize: int64(cfg.Auth.AuditMaxSize), MaxFiles: cfg.Auth.AuditMaxFiles,
		OnError: func(err error) { log.Error("auth.audit", "err", err) },
	})
	if err != nil {
		return nil, nil, fmt.Errorf("auth.audit: %w", err)
	}
	// Robots and revoked sessions live where every replica reads them: the
	// catalog's PostgreSQL for replicas, auth.db for one process.
	robots, err := authstore.Open(ctx, cfg)
	if err != nil {
		auditFile.Close()
		return nil, nil, err
	}
	closeAll := func() {
		if err := robots.Close(); err != nil {
			log.Error("auth: close the robot store", "err", err)
		}
		if err := auditFile.Close(); err != nil {
			log.Error("auth: close the audit log", "err", err)
		}
	}
	if err := authstore.ImportSQLite(ctx, cfg, robots, log); err != nil {
		closeAll()
		return nil, nil, err
	}
	metrics := auth.NewMetrics(m)
	authn, err := auth.NewAuthn(cfg.Auth, auth.AuthnOptions{Policy: policy, Robots: robots, Revocations: robots, Audit: audit, Metrics: metrics})
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	parts := &authParts{
		authorizer: auth.CatalogAuthorizer{Policy: policy, Audit: audit, Metrics: metrics},
		registry: func(h http.Handler) http.Handler {
			return auth.Registry(h, auth.RegistryOptions{Authenticator: authn, Policy: policy, Service: cfg.Auth.Service, Audit: audit, Metrics: metrics, Uploads: authn})
		},
		token:    authn.Handler(),
		robots:   auth.RobotsHandler(auth.RobotsOptions{Store: robots, Policy: policy, MaxExpiry: cfg.Auth.Robots.MaxExpiry, Audit: audit}),
		api:      auth.API(auth.APIOptions{Authenticator: authn, Policy: policy, Metrics: metrics, Audit: audit}),
		sessions: auth.NewSessions(authn, auth.SessionOptions{}),
		admin:    auth.AdminGate(policy, "the admin API is for administrators"),
		keyID:    authn.KeyID(),
	}
	if cfg.Auth.Metrics == "admin" {
		parts.metrics = auth.MetricsGate(policy)
	}
	log.Info("auth is on", "service", cfg.Auth.Service, "rules", len(cfg.Auth.Rules), "public", cfg.Auth.Public, "oidc issuers", len(cfg.Auth.OIDC), "audit", cfg.Auth.Audit)
	return parts, closeAll, nil
}
