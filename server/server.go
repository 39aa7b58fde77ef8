// Package server assembles berth serve's HTTP surface on one port: the
// registry under /v2/, the catalog, the token service under /auth/, the
// robots API, the web UI, /healthz, /readyz and /metrics, behind middleware
// that assigns request IDs, writes the access log and records Prometheus
// metrics.
// HEAD is answered wherever GET is, outside /v2/ (which answers it itself).
// Run serves until its context ends, then shuts down cleanly.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/berth-registry/berth/internal/allowed"
	"github.com/berth-registry/berth/internal/forwarded"
)

// ReadyChecker reports whether a part the server depends on can serve.
type ReadyChecker interface {
	Ready(ctx context.Context, timeout time.Duration) error
}

// Options configure a Server.
type Options struct {
	// Registry serves the OCI distribution API under /v2/.
	Registry http.Handler
	// Catalog serves the catalog: /api/v1/, /api/helm/, /index.yaml,
	// /{namespace}/index.yaml and /events.
	Catalog http.Handler
	// Auth is the token service of the Docker token spec, mounted at
	// /auth/token, /auth/revoke and /auth/jwks.json. It authenticates its
	// own requests.
	Auth http.Handler
	// Robots serves the robots API at /api/v1/robots and /api/v1/robots/*.
	Robots http.Handler
	// UI serves the web UI at / and /ui/*, and the 404 page of every path
	// no other part serves. It reads its own session cookie; API does not
	// wrap it, and no other route honours the cookie.
	UI http.Handler
	// API wraps the catalog's routes, the robots API and /metrics: it
	// authenticates the request and puts its identity in the context
	// (auth.API). Nil leaves them as they are.
	API func(http.Handler) http.Handler
	// Metrics wraps /metrics, inside API: auth.MetricsGate when only
	// administrators may read the metrics. Nil leaves /metrics open.
	Metrics func(http.Handler) http.Handler
	// Gatherer holds the metrics /metrics serves besides the server's own
	// HTTP metrics. Nil means prometheus.DefaultGatherer.
	Gatherer prometheus.Gatherer
	// Ready names the checks /readyz runs (e.g. "storage").
	Ready map[string]ReadyChecker
	// Logger is the server's logger. Nil means slog.Default().
	Logger *slog.Logger
	// ShutdownTimeout bounds how long in-flight requests may run after Run's
	// context ends. Zero means 30s.
	ShutdownTimeout time.Duration
	// TrustedProxies are the proxies whose forwarding headers tell the
	// client's address and the external URL of every request
	// (forwarded.Of). The zero value trusts none.
	TrustedProxies forwarded.Proxies
}

// readyTimeout bounds each readiness check.
const readyTimeout = 2 * time.Second

// Server is berth's HTTP server.
type Server struct {
	opts     Options
	log      *slog.Logger
	handler  http.Handler
	draining atomic.Bool
}

// New builds the server and its routes.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ShutdownTimeout == 0 {
		opts.ShutdownTimeout = 30 * time.Second
	}
	s := &Server{opts: opts, log: opts.Logger}

	metrics := newHTTPMetrics()
	r := chi.NewRouter()
	r.Use(opts.TrustedProxies.Handler, requestID, accessLog(s.log, metrics), recoverPanics(s.log), headAsGet)
	r.MethodNotAllowed(methodNotAllowed)
	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	api := opts.API
	if api == nil {
		api = func(h http.Handler) http.Handler { return h }
	}
	gatherer := opts.Gatherer
	if gatherer == nil {
		gatherer = prometheus.DefaultGatherer
	}
	var promHandler http.Handler = promhttp.HandlerFor(prometheus.Gatherers{metrics.registry, gatherer}, promhttp.HandlerOpts{})
	if opts.Metrics != nil {
		promHandler = opts.Metrics(promHandler)
	}
	r.Method(http.MethodGet, "/metrics", api(promHandler))
	if opts.Registry != nil {
		r.Handle("/v2", opts.Registry)
		r.Handle("/v2/*", opts.Registry)
	}
	if opts.Auth != nil {
		r.Handle("/auth/token", opts.Auth)
		r.Handle("/auth/revoke", opts.Auth)
		r.Handle("/auth/jwks.json", opts.Auth)
	}
	if opts.Catalog != nil {
		cat := api(opts.Catalog)
		r.Handle("/api/v1", cat)
		r.Handle("/api/v1/*", cat)
		r.Handle("/api/helm/*", cat)
		r.Handle("/index.yaml", cat)
		r.Handle("/{namespace}/index.yaml", cat)
		// A namespace named ui keeps its KUDO index under the UI's prefix.
		r.Handle("/ui/index.yaml", cat)
		r.Handle("/events", opts.Catalog)
	}
	if opts.Robots != nil {
		robots := api(opts.Robots)
		r.Handle("/api/v1/robots", robots)
		r.Handle("/api/v1/robots/*", robots)
	}
	if opts.UI != nil {
		r.Handle("/", opts.UI)
		r.Handle("/ui/*", opts.UI)
		// Any other path is the UI's 404 page.
		r.NotFound(opts.UI.ServeHTTP)
	}
	s.handler = r
	return s
}

// Handler returns the server's root handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Run serves on ln until ctx ends, then stops accepting connections, marks
// the server not ready and lets in-flight requests finish for up to
// ShutdownTimeout. It returns an error if serving failed or requests were
// still running when the timeout passed.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	s.log.Info("berth serving", "addr", ln.Addr().String())

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	s.draining.Store(true)
	s.log.Info("shutting down", "timeout", s.opts.ShutdownTimeout.String())
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		srv.Close()
		return fmt.Errorf("shutdown: in-flight requests did not finish within %s: %w", s.opts.ShutdownTimeout, err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	s.log.Info("stopped")
	return nil
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz runs every readiness check; it fails while the server drains. A
// failing check is named, and why it fails is logged.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	checks := map[string]string{}
	ready := !s.draining.Load()
	if !ready {
		checks["server"] = "shutting down"
	}
	for name, c := range s.opts.Ready {
		if err := c.Ready(r.Context(), readyTimeout); err != nil {
			// The reason may name the database's user, host and
			// database, or the storage's paths: it goes to the log, not
			// to whoever may ask /readyz.
			s.log.Warn("not ready", "check", name, "error", err)
			checks[name] = "unavailable"
			ready = false
			continue
		}
		checks[name] = "ok"
	}
	if !ready {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "checks": checks})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "checks": checks})
}

// methodNotAllowed answers a method that a route of the server does not take
// with an error document in the catalog API's format, listing in Allow the
// methods the route takes (HEAD wherever GET).
func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	var methods []string
	if rctx := chi.RouteContext(r.Context()); rctx != nil {
		methods = allowed.Methods(rctx.Routes, r)
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"errors": []map[string]string{{
		"code":    "METHOD_NOT_ALLOWED",
		"message": fmt.Sprintf("%s %s: method not allowed; allowed: %s", r.Method, r.URL.Path, strings.Join(methods, ", ")),
	}}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
