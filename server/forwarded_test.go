package server

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/berth-registry/berth/internal/forwarded"
)

// TestTrustedProxies checks that every route sees the client address and
// base URL that a trusted proxy forwards, that an untrusted peer's
// forwarding headers are ignored, and that the access log names the client.
func TestTrustedProxies(t *testing.T) {
	proxies, err := forwarded.ParseProxies([]string{"10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(forwarded.Of(r).Client + " " + forwarded.BaseURL(r, "")))
	})
	s := New(Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Catalog: echo, UI: echo, TrustedProxies: proxies})
	header := []string{"X-Forwarded-For", "203.0.113.5", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "registry.example.com"}
	for _, tc := range []struct {
		peer, path, want string
	}{
		{"10.1.2.3:5000", "/index.yaml", "203.0.113.5 https://registry.example.com"},
		{"10.1.2.3:5000", "/ui/packages", "203.0.113.5 https://registry.example.com"},
		{"192.0.2.1:5000", "/index.yaml", "192.0.2.1 http://berth.example"},
		{"192.0.2.1:5000", "/ui/packages", "192.0.2.1 http://berth.example"},
	} {
		logs.Reset()
		req := httptest.NewRequest(http.MethodGet, "http://berth.example"+tc.path, nil)
		req.RemoteAddr = tc.peer
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req)
		if got := w.Body.String(); got != tc.want {
			t.Errorf("%s from %s: %q, want %q", tc.path, tc.peer, got, tc.want)
		}
		client, _, _ := strings.Cut(tc.want, " ")
		if !strings.Contains(logs.String(), "client="+client) {
			t.Errorf("%s from %s: the access log does not name client %s: %s", tc.path, tc.peer, client, logs.String())
		}
	}
}
