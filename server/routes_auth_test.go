package server

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// named answers with its name, and whether the API hook wrapped it.
func named(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Handler", name)
		w.Header().Set("X-Api", r.Header.Get("X-Api"))
	})
}

func TestAuthRoutes(t *testing.T) {
	api := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Header.Set("X-Api", "yes")
			next.ServeHTTP(w, r)
		})
	}
	gate := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Api") != "yes" {
				t.Error("the metrics gate runs outside the API hook")
			}
			if r.Header.Get("X-Admin") == "" {
				w.WriteHeader(http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	h := New(Options{
		Logger: quiet, Catalog: named("catalog"), Robots: named("robots"), Auth: named("auth"),
		API: api, Metrics: gate,
	}).Handler()
	for _, tc := range []struct {
		method, path, handler, api string
		status                     int
	}{
		{"GET", "/auth/token", "auth", "", 200},
		{"POST", "/auth/token", "auth", "", 200},
		{"POST", "/auth/revoke", "auth", "", 200},
		{"GET", "/auth/jwks.json", "auth", "", 200},
		{"POST", "/api/v1/robots", "robots", "yes", 200},
		{"GET", "/api/v1/robots", "robots", "yes", 200},
		{"HEAD", "/api/v1/robots/a/ci", "robots", "yes", 200},
		{"DELETE", "/api/v1/robots/a/ci", "robots", "yes", 200},
		{"GET", "/api/v1/packages", "catalog", "yes", 200},
		{"GET", "/api/v1/inventory", "catalog", "yes", 200},
		{"GET", "/api/v1/robotsx", "catalog", "yes", 200},
		{"GET", "/a/index.yaml", "catalog", "yes", 200},
		{"GET", "/api/helm/index.yaml", "catalog", "yes", 200},
		{"POST", "/events", "catalog", "", 200},
		{"GET", "/metrics", "", "", 403},
		{"POST", "/metrics", "", "", 405},
	} {
		req := httptest.NewRequest(tc.method, tc.path, nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != tc.status || w.Header().Get("X-Handler") != tc.handler || w.Header().Get("X-Api") != tc.api {
			t.Errorf("%s %s: %d by %q (api %q), want %d by %q (api %q)", tc.method, tc.path, w.Code,
				w.Header().Get("X-Handler"), w.Header().Get("X-Api"), tc.status, tc.handler, tc.api)
		}
	}
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("X-Admin", "1")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != 200 || w.Header().Get("Content-Type") == "" {
		t.Errorf("/metrics as admin: %d", w.Code)
	}
}
