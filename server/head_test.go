package server

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/berth-registry/berth/internal/rawhttp"
)

// exchange sends one request to addr over a connection of its own.
func exchange(t *testing.T, addr, method, target string) (resp *http.Response, body, after []byte) {
	t.Helper()
	resp, body, after, err := rawhttp.Exchange(addr, method, target)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body, after
}

// sameHeaders drops the headers that differ from one response to the next.
func sameHeaders(h http.Header) http.Header {
	h = h.Clone()
	h.Del("Date")
	h.Del(RequestIDHeader)
	return h
}

// TestHeadAnswersLikeGet sends GET and then HEAD to every kind of route the
// server has: its own, and those of a catalog handler with a router of its
// own, as the real one has, and whose routes the server does not know. HEAD
// must answer the same status and headers, Content-Length included, and send
// no body.
func TestHeadAnswersLikeGet(t *testing.T) {
	cat := chi.NewRouter()
	cat.Get("/api/v1/things", func(w http.ResponseWriter, _ *http.Request) {
		body := `{"things":[]}`
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		io.WriteString(w, body)
	})
	cat.Get("/index.yaml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		io.WriteString(w, "apiVersion: v1\n")
	})
	cat.Get("/{namespace}/index.yaml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		io.WriteString(w, strings.Repeat("# long\n", 10000)) // streamed, chunked
	})
	cat.Get("/api/v1/missing", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no such thing", http.StatusNotFound)
	})
	cat.Post("/events", func(http.ResponseWriter, *http.Request) {})
	cat.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	})
	var registryMethod string
	reg := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		registryMethod = r.Method
		w.Header().Set("Content-Length", "3")
		w.WriteHeader(http.StatusOK)
	})
	srv := httptest.NewServer(New(Options{Logger: quiet, Registry: reg, Catalog: cat}).Handler())
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()

	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/healthz", 200},
		{"/readyz", 200},
		{"/metrics", 200},
		{"/api/v1/things", 200},
		{"/index.yaml", 200},
		{"/kudo/index.yaml", 200},
		{"/api/v1/missing", 404},
		{"/events", 405},
		{"/nope", 404},
	} {
		t.Run(tc.path, func(t *testing.T) {
			get, getBody, _ := exchange(t, addr, http.MethodGet, tc.path)
			head, headBody, after := exchange(t, addr, http.MethodHead, tc.path)
			if get.StatusCode != tc.status || head.StatusCode != tc.status {
				t.Fatalf("GET %d, HEAD %d; want %d", get.StatusCode, head.StatusCode, tc.status)
			}
			if len(getBody) == 0 {
				t.Fatal("GET has no body to leave out")
			}
			if len(headBody) != 0 || len(after) != 0 {
				t.Errorf("HEAD sent a body: %q", append(headBody, after...))
			}
			if g, h := sameHeaders(get.Header), sameHeaders(head.Header); !maps.EqualFunc(g, h, slices.Equal) {
				t.Errorf("headers differ\n GET %v\nHEAD %v", g, h)
			}
		})
	}
	if exchange(t, addr, http.MethodHead, "/v2/a/b/blobs/sha256:1"); registryMethod != http.MethodHead {
		t.Errorf("the registry got HEAD as %s; it answers HEAD itself", registryMethod)
	}
}

// TestMetricsTakesOnlyGetAndHead checks that /metrics, /healthz and /readyz
// refuse other methods with a 405 that lists the methods they take.
func TestMetricsTakesOnlyGetAndHead(t *testing.T) {
	h := New(Options{Logger: quiet}).Handler()
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		for _, method := range []string{http.MethodPut, http.MethodPost, http.MethodDelete, http.MethodPatch} {
			t.Run(method+" "+path, func(t *testing.T) {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader("x")))
				var doc struct {
					Errors []struct{ Code, Message string }
				}
				err := json.Unmarshal(w.Body.Bytes(), &doc)
				if w.Code != http.StatusMethodNotAllowed || err != nil || len(doc.Errors) != 1 || doc.Errors[0].Code != "METHOD_NOT_ALLOWED" {
					t.Fatalf("%d %s, want 405 with one METHOD_NOT_ALLOWED error", w.Code, w.Body)
				}
				if got := w.Header().Get("Allow"); got != "GET, HEAD" {
					t.Errorf("Allow %q, want %q", got, "GET, HEAD")
				}
				if ct := w.Header().Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q", ct)
				}
			})
		}
	}
}
