package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type readyFunc func() error

func (f readyFunc) Ready(context.Context, time.Duration) error { return f() }

func get(t *testing.T, h http.Handler, path string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func TestHealthAndReadiness(t *testing.T) {
	var storageErr atomic.Value
	storageErr.Store("")
	var logs bytes.Buffer
	s := New(Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Ready: map[string]ReadyChecker{"storage": readyFunc(func() error {
		if msg := storageErr.Load().(string); msg != "" {
			return errors.New(msg)
		}
		return nil
	})}})
	h := s.Handler()

	if w := get(t, h, "/healthz"); w.Code != http.StatusOK {
		t.Fatalf("/healthz: %d", w.Code)
	}
	if w := get(t, h, "/readyz"); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"storage":"ok"`) {
		t.Fatalf("/readyz: %d %s", w.Code, w.Body)
	}
	// Why a check fails may name a database's user, host and name: the
	// answer names the check, the log says why.
	storageErr.Store("failed to connect to user=berth database=catalog host=db.internal:5432")
	w := get(t, h, "/readyz")
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), `"storage":"unavailable"`) || strings.Contains(w.Body.String(), "db.internal") {
		t.Fatalf("/readyz with failing storage: %d %s", w.Code, w.Body)
	}
	if !strings.Contains(logs.String(), "db.internal") {
		t.Errorf("the log does not say why storage is not ready:\n%s", logs.String())
	}
	if w := get(t, h, "/healthz"); w.Code != http.StatusOK {
		t.Fatalf("/healthz must not depend on storage: %d", w.Code)
	}
}

func TestRequestID(t *testing.T) {
	h := New(Options{Logger: quiet}).Handler()
	for _, tc := range []struct{ sent, want string }{
		{"abc-123", "abc-123"},
		{"", ""},
		{"has spaces", ""},
		{strings.Repeat("x", 65), ""},
	} {
		w := get(t, h, "/healthz", RequestIDHeader, tc.sent)
		got := w.Header().Get(RequestIDHeader)
		if tc.want != "" && got != tc.want {
			t.Errorf("sent %q: got id %q, want it kept", tc.sent, got)
		}
		if tc.want == "" && (got == "" || got == tc.sent) {
			t.Errorf("sent %q: got id %q, want a fresh one", tc.sent, got)
		}
	}
}

func TestMetricsByRoute(t *testing.T) {
	registry := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte("12345"))
	})
	h := New(Options{Logger: quiet, Registry: registry}).Handler()
	req := httptest.NewRequest(http.MethodPut, "/v2/kudo/kafka/manifests/1.0.0", strings.NewReader("manifest"))
	h.ServeHTTP(httptest.NewRecorder(), req)
	get(t, h, "/v2/kudo/kafka/blobs/sha256:abc")
	get(t, h, "/nope")
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodHead, "/healthz", nil))

	body := get(t, h, "/metrics").Body.String()
	for _, want := range []string{
		`berth_http_requests_total{code="200",method="PUT",route="v2_manifest"} 1`,
		`berth_http_requests_total{code="200",method="GET",route="v2_blob"} 1`,
		`berth_http_requests_total{code="404",method="GET",route="unmatched"} 1`,
		`berth_http_request_bytes_total{route="v2_manifest"} 8`,
		`berth_http_response_bytes_total{route="v2_manifest"} 5`,
		`berth_http_request_duration_seconds_count{method="PUT",route="v2_manifest"} 1`,
		`berth_http_requests_total{code="200",method="HEAD",route="/healthz"} 1`,
		`berth_http_response_bytes_total{route="/healthz"} 0`, // net/http sends no body for a HEAD
		"go_goroutines",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, "kafka") {
		t.Error("a repository name became a metric label")
	}
}

// TestMetricsGatherer: /metrics serves the Gatherer's metrics, and then
// not the default registry's.
func TestMetricsGatherer(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "berth_test_own", Help: "A metric of this server's registry."}, func() float64 { return 1 }))
	body := get(t, New(Options{Logger: quiet, Gatherer: reg}).Handler(), "/metrics").Body.String()
	if !strings.Contains(body, "berth_test_own 1") {
		t.Errorf("/metrics lacks the Gatherer's berth_test_own:\n%s", body)
	}
	if strings.Contains(body, "go_goroutines") {
		t.Error("/metrics serves the default registry's go_goroutines beside a Gatherer of its own")
	}
}

func TestRouteNames(t *testing.T) {
	for path, want := range map[string]string{
		"/v2":                        "v2_base",
		"/v2/":                       "v2_base",
		"/v2/_catalog":               "v2_catalog",
		"/v2/a/b/tags/list":          "v2_tags",
		"/v2/a/b/manifests/1":        "v2_manifest",
		"/v2/a/b/blobs/uploads/":     "v2_blob_upload",
		"/v2/a/b/blobs/uploads/uuid": "v2_blob_upload",
		"/v2/a/b/blobs/sha256:1":     "v2_blob",
		"/v2/a/b/referrers/sha256:1": "v2_referrers",
		"/v2/a/b/whatever":           "v2_other",
		"/v2x":                       "unmatched",
	} {
		if got := routeName(httptest.NewRequest(http.MethodGet, path, nil)); got != want {
			t.Errorf("routeName(%s) = %s, want %s", path, got, want)
		}
	}
}

func TestPanicBecomes500(t *testing.T) {
	h := New(Options{Logger: quiet, Registry: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") })}).Handler()
	if w := get(t, h, "/v2/"); w.Code != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", w.Code)
	}
}

// slowRegistry answers after delay, telling started when a request arrives.
func slowRegistry(delay time.Duration, started chan<- struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		time.Sleep(delay)
		w.Write([]byte("done"))
	})
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// shutdownWithRequestInFlight runs a server whose registry answers after
// delay, sends it a request, and cancels Run's context once the request has
// reached the handler. It returns the server, its address, Run's result and
// the response body ("" when the request failed).
func shutdownWithRequestInFlight(t *testing.T, timeout, delay time.Duration) (s *Server, addr string, ran <-chan error, body <-chan string) {
	t.Helper()
	started := make(chan struct{}, 1)
	s = New(Options{Logger: quiet, ShutdownTimeout: timeout, Registry: slowRegistry(delay, started)})
	ln := listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	runErr, got := make(chan error, 1), make(chan string, 1)
	go func() { runErr <- s.Run(ctx, ln) }()
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/v2/")
		if err != nil {
			got <- ""
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- string(b)
	}()
	<-started
	cancel()
	return s, ln.Addr().String(), runErr, got
}

func TestShutdownLetsInFlightRequestsFinish(t *testing.T) {
	_, addr, ran, body := shutdownWithRequestInFlight(t, 5*time.Second, 300*time.Millisecond)
	if got := <-body; got != "done" {
		t.Fatalf("in-flight request got %q, want it finished", got)
	}
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Fatal("server still accepts connections after shutdown")
	}
}

func TestShutdownTimeoutIsReported(t *testing.T) {
	_, _, ran, _ := shutdownWithRequestInFlight(t, 50*time.Millisecond, 2*time.Second)
	err := <-ran
	if err == nil || !strings.Contains(err.Error(), "did not finish within 50ms") {
		t.Fatalf("Run = %v, want a shutdown timeout error", err)
	}
}

func TestNotReadyWhileDraining(t *testing.T) {
	s, _, ran, _ := shutdownWithRequestInFlight(t, 5*time.Second, 300*time.Millisecond)
	deadline := time.Now().Add(time.Second)
	for !s.draining.Load() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	w := get(t, s.Handler(), "/readyz")
	var body struct{ Checks map[string]string }
	json.Unmarshal(w.Body.Bytes(), &body)
	if w.Code != http.StatusServiceUnavailable || body.Checks["server"] != "shutting down" {
		t.Fatalf("/readyz while draining: %d %s", w.Code, w.Body)
	}
	<-ran
}
