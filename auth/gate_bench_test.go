package auth

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-registry/berth/internal/cputime"
)

// BenchmarkGate measures what Registry adds to a request under /v2/ that
// carries an access token: authentication (the token, its subject as it
// stands now), the decision, its metrics and, for a manifest PUT, the audit
// events, in front of a handler that answers at once. "pull" is a blob GET,
// "upload-start" a POST /blobs/uploads/ and "manifest-put" a tag push:
//
//	go test -run - -bench Gate -benchmem -count 6 ./auth/
func BenchmarkGate(b *testing.B) {
	f := newFixture(b)
	f.now = time.Now
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			w.Header().Set("Docker-Content-Digest", "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
			w.WriteHeader(http.StatusCreated)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	gate := Registry(next, RegistryOptions{Authenticator: f.Authn, Policy: f.policy, Service: "berth", Audit: f.audit, Metrics: NewMetrics(prometheus.NewRegistry())})
	tok, _, err := f.Issue(f.user(b, "alice"), []Grant{{Type: "repository", Name: "a/app", Actions: []string{"pull", "push"}}})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, method, path string }{
		{"pull", http.MethodGet, "/v2/a/app/blobs/sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
		{"upload-start", http.MethodPost, "/v2/a/app/blobs/uploads/"},
		{"manifest-put", http.MethodPut, "/v2/a/app/manifests/1.0.0"},
	} {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest(c.method, c.path, nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			defer cputime.Report(b)()
			for b.Loop() {
				f.auditLog.Reset()
				w := httptest.NewRecorder()
				gate.ServeHTTP(w, req)
				if w.Code >= 300 {
					b.Fatalf("%s %s: %d %s", c.method, c.path, w.Code, w.Body)
				}
			}
		})
	}
}
