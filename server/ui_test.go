package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestUIRoutes: the UI answers / and /ui/*, the catalog everything else it
// serves, /ui/index.yaml (the KUDO index of a namespace named ui) included.
func TestUIRoutes(t *testing.T) {
	tag := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, name) })
	}
	h := New(Options{Catalog: tag("catalog"), UI: tag("ui")}).Handler()
	for path, want := range map[string]string{
		"/":                        "ui",
		"/ui/login":                "ui",
		"/ui/packages/a/b":         "ui",
		"/ui/static/style.css":     "ui",
		"/ui/index.yaml":           "catalog",
		"/kudo/index.yaml":         "catalog",
		"/index.yaml":              "catalog",
		"/api/v1/packages":         "catalog",
		"/api/v1/packages/ui/name": "catalog",
		"/no/such/page":            "ui",

		// A download's path may end in index.yaml: it is still the UI's.
		"/ui/packages/a/b/versions/1.0.0/download/index.yaml": "ui",
	} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
			if method == http.MethodGet && rec.Body.String() != want {
				t.Errorf("GET %s: served by %q, want %s", path, rec.Body.String(), want)
			}
			if rec.Code != http.StatusOK {
				t.Errorf("%s %s: status %d", method, path, rec.Code)
			}
		}
	}
}
