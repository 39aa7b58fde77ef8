package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/berth-registry/berth/internal/forwarded"
)

type requestIDKey struct{}

// RequestIDHeader carries the request ID in requests and responses.
const RequestIDHeader = "X-Request-Id"

// RequestID returns the ID the server assigned to the request of ctx.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// requestID keeps a well-formed X-Request-Id from the client or makes one,
// and echoes it in the response. The request carries it too, in its header,
// for handlers that log it (auth's audit events).
func requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(RequestIDHeader)
		if !validRequestID(id) {
			var b [8]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set(RequestIDHeader, id)
		r.Header.Set(RequestIDHeader, id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id)))
	})
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// httpMetrics are the server's Prometheus metrics, in a registry of their own
// so that several servers can live in one process.
type httpMetrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	bytesIn  *prometheus.CounterVec
	bytesOut *prometheus.CounterVec
	inflight prometheus.Gauge
}

func newHTTPMetrics() *httpMetrics {
	m := &httpMetrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_http_requests_total", Help: "HTTP requests served, by route, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "berth_http_request_duration_seconds", Help: "Time to serve an HTTP request, by route and method.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route", "method"}),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_http_request_bytes_total", Help: "Request body bytes received, by route.",
		}, []string{"route"}),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_http_response_bytes_total", Help: "Response body bytes sent, by route.",
		}, []string{"route"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_http_requests_in_flight", Help: "HTTP requests being served.",
		}),
	}
	m.registry.MustRegister(m.requests, m.duration, m.bytesIn, m.bytesOut, m.inflight,
		collectors.NewBuildInfoCollector())
	return m
}

// countingBody counts the bytes read from a request body.
type countingBody struct {
	io.ReadCloser
	n int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	return n, err
}

// accessLog logs one line per request and records its metrics. Probe and
// scrape requests are logged at debug level.
func accessLog(log *slog.Logger, m *httpMetrics) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			m.inflight.Inc()
			defer m.inflight.Dec()
			body := &countingBody{ReadCloser: r.Body}
			if r.Body != nil && r.Body != http.NoBody {
				r.Body = body
			}
			ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
			next.ServeHTTP(ww, r)

			status := ww.Status()
			if status == 0 {
				status = http.StatusOK
			}
			bytesOut := ww.BytesWritten()
			if r.Method == http.MethodHead {
				bytesOut = 0 // net/http sends no body, whatever the handler wrote
			}
			elapsed := time.Since(start)
			route := routeName(r)
			m.requests.WithLabelValues(route, r.Method, strconv.Itoa(status)).Inc()
			m.duration.WithLabelValues(route, r.Method).Observe(elapsed.Seconds())
			m.bytesIn.WithLabelValues(route).Add(float64(body.n))
			m.bytesOut.WithLabelValues(route).Add(float64(bytesOut))

			level := slog.LevelInfo
			if route == "/healthz" || route == "/readyz" || route == "/metrics" {
				level = slog.LevelDebug
			}
			log.LogAttrs(r.Context(), level, "request",
				slog.String("request_id", RequestID(r.Context())),
				slog.String("method", r.Method),
				slog.String("path", r.URL.Path),
				slog.Int("status", status),
				slog.Int64("bytes_in", body.n),
				slog.Int("bytes_out", bytesOut),
				slog.Duration("duration", elapsed),
				slog.String("remote", r.RemoteAddr),
				slog.String("client", forwarded.Of(r).Client),
				slog.String("user_agent", r.UserAgent()),
			)
		})
	}
}

// headAsGet answers HEAD wherever GET is answered: it hands a HEAD request on
// as a GET, so that every router and handler behind it, including routes
// added later, treats it as one and sets the same status and headers. The
// body is not sent: net/http, which still serves a HEAD, drops whatever the
// handler writes, and computes Content-Length from it as it does for a GET.
// The distribution API under /v2 answers HEAD itself and is left alone.
func headAsGet(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodHead || registryPath(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		get := r.WithContext(r.Context())
		get.Method = http.MethodGet
		next.ServeHTTP(w, get)
	})
}

// registryPath reports whether p is /v2 or below it.
func registryPath(p string) bool {
	rest, ok := strings.CutPrefix(p, "/v2")
	return ok && (rest == "" || rest[0] == '/')
}

// routeName is the metrics label of a request: the chi route pattern, or for
// the distribution API the kind of endpoint, so that repository names and
// digests never become label values.
func routeName(r *http.Request) string {
	if registryPath(r.URL.Path) {
		p := strings.TrimPrefix(r.URL.Path, "/v2")
		switch {
		case p == "" || p == "/":
			return "v2_base"
		case p == "/_catalog":
			return "v2_catalog"
		case strings.HasSuffix(p, "/tags/list"):
			return "v2_tags"
		case strings.Contains(p, "/manifests/"):
			return "v2_manifest"
		case strings.Contains(p, "/blobs/uploads"):
			return "v2_blob_upload"
		case strings.Contains(p, "/blobs/"):
			return "v2_blob"
		case strings.Contains(p, "/referrers/"):
			return "v2_referrers"
		}
		return "v2_other"
	}
	if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
		return rc.RoutePattern()
	}
	return "unmatched"
}

// recoverPanics turns a handler panic into a logged 500 instead of a dropped
// connection. http.ErrAbortHandler keeps its meaning.
func recoverPanics(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				p := recover()
				if p == nil {
					return
				}
				if p == http.ErrAbortHandler {
					panic(p)
				}
				log.ErrorContext(r.Context(), "handler panic", "request_id", RequestID(r.Context()),
					"path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
				http.Error(w, "internal server error", http.StatusInternalServerError)
			}()
			next.ServeHTTP(w, r)
		})
	}
}
