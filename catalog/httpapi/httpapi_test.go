package httpapi_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/httpapi"
)

func newFake() *fakeCatalog {
	return &fakeCatalog{
		total:     45,
		artifacts: 45,
		seq:       7,
		files: map[string]string{
			"kudo/kafka/2.5.1_1.3.2/operator.yaml":                 "apiVersion: kudo.dev/v1beta1\nname: kafka\n",
			"kudo/kafka/2.5.1_1.3.2/templates/deployment.yaml":     "kind: Deployment\n",
			"kudo/kafka/2.5.1_1.3.2/README.md":                     "# Kafka\n",
			"kudo/kafka/2.5.1_1.3.2/icon.svg":                      "<svg xmlns=\"http://www.w3.org/2000/svg\"/>",
			"kudo/kafka/2.5.1_1.3.2/bin/tool":                      "\x00\x01\x02",
			"kudo/kafka/2.5.1_1.3.2/templates/config %2F odd.json": "{}",
		},
		changes: []apiv1.Change{
			{Seq: 1, Action: apiv1.ActionPut, Namespace: "kudo", Name: "kafka", Version: "1.0.0", Digest: "sha256:" + strings.Repeat("1", 64), Status: apiv1.StatusIndexed, Time: t0},
			{Seq: 2, Action: apiv1.ActionPut, Namespace: "secret", Name: "x", Version: "1.0.0", Digest: "sha256:" + strings.Repeat("2", 64), Status: apiv1.StatusIndexed, Time: t0},
			{Seq: 3, Action: apiv1.ActionDelete, Namespace: "kudo", Name: "kafka", Version: "1.0.0", Digest: "sha256:" + strings.Repeat("1", 64), Time: t0},
		},
	}
}

func TestEndpoints(t *testing.T) {
	const v = "/api/v1/packages/kudo/kafka/versions/2.5.1_1.3.2"
	for _, tc := range []struct {
		method, target string
		status         int
		contentType    string
		body           string // contained in the body
	}{
		{"GET", "/api/v1/packages", 200, "application/json", `"next":"`},
		{"GET", "/api/v1/packages?q=kafka&format=kudo&sort=name&limit=5", 200, "application/json", `"total":45`},
		{"GET", "/api/v1/packages/kudo/kafka", 200, "application/json", `"versions":[]`},
		{"GET", "/api/v1/packages/kudo/nope", 404, "application/json", `"code":"NOT_FOUND"`},
		{"GET", v, 200, "application/json", `"signatures":[]`},
		{"GET", v, 200, "application/json", `"attestations":[]`},
		{"GET", "/api/v1/packages/kudo/kafka/versions/9.9.9", 404, "application/json", `"NOT_FOUND"`},
		{"GET", "/api/v1/packages/kudo/kafka/channels/stable/graph", 200, "application/json", `"edges":[]`},
		{"GET", "/api/v1/packages/kudo/kafka/channels/beta/graph", 404, "application/json", `"NOT_FOUND"`},
		{"GET", "/api/v1/packages/kudo/kafka/upgrades?from=2.5.1_1.3.1", 200, "application/json", `"path":[]`},
		{"GET", "/api/v1/packages/kudo/kafka/upgrades?from=2.5.1_1.3.1&channel=stable", 200, "application/json", `"head":"2.5.1_1.3.2"`},
		{"GET", v + "/images", 200, "application/json", `"images":[]`},
		{"GET", v + "/images?x=1", 400, "application/json", `x`},
		{"GET", "/api/v1/packages/kudo/kafka/versions/9.9.9/images", 404, "application/json", `"NOT_FOUND"`},
		{"GET", v + "/installable", 200, "application/json", `"installable":true`},
		{"GET", "/api/v1/packages/kudo/kafka/versions/9.9.9/installable", 404, "application/json", `"NOT_FOUND"`},
		{"GET", "/api/v1/image-mirrors", 200, "application/json", `"mirrors":[]`},
		{"GET", "/api/v1/packages?image=quay.io/org/img", 200, "application/json", `"total":45`},
		{"GET", "/api/v1/packages?image=quay.io/org/img@@x", 400, "application/json", `"image"`},
		{"GET", v + "/permissions", 200, "application/json", `"rating":"low"`},
		{"GET", v + "/permissions", 200, "application/json", `"text":"no verb (grants nothing) on pods, across the cluster"`},
		{"GET", v + "/permissions?from=2.5.1_1.3.1", 200, "application/json", `"from":"2.5.1_1.3.1","change":{"from":"none","to":"low"`},
		{"GET", v + "/permissions?from=..%2F1", 400, "application/json", `"from"`},
		{"GET", v + "/permissions?since=1", 400, "application/json", `since`},
		{"GET", "/api/v1/packages/kudo/kafka/versions/9.9.9/permissions", 404, "application/json", `"NOT_FOUND"`},
		{"DELETE", "/api/v1/packages/kudo/kafka", 200, "application/json", `"deleted":["2.5.1_1.3.2","2.5.1_1.3.1"]`},
		{"DELETE", "/api/v1/packages/kudo/nope", 404, "application/json", `"NOT_FOUND"`},
		{"GET", "/api/v1/changes", 200, "application/json", `"next":3`},
		{"GET", "/api/v1/changes?since=2&limit=1", 200, "application/json", `"seq":3`},
		{"GET", "/api/v1/artifacts", 200, "application/json", `"reason":"not a package`},
		{"GET", "/api/v1/status", 200, "application/json", `"seq":7`},
		{"GET", "/api/v1/openapi.yaml", 200, "application/yaml", "openapi: 3.0.3"},
		{"GET", v + "/files/operator.yaml", 200, "application/yaml", "name: kafka"},
		{"GET", v + "/files/templates/deployment.yaml", 200, "application/yaml", "kind: Deployment"},
		{"GET", v + "/files/templates%2Fdeployment.yaml", 200, "application/yaml", "kind: Deployment"},
		{"GET", v + "/files/templates/config%20%252F%20odd.json", 200, "application/json", "{}"},
		{"GET", v + "/files/README.md", 200, "text/markdown; charset=utf-8", "# Kafka"},
		{"GET", v + "/files/icon.svg", 200, "image/svg+xml", "<svg"},
		{"GET", v + "/files/bin/tool", 200, "application/octet-stream", "\x01"},
		{"GET", v + "/files/missing.yaml", 404, "application/json", `"NOT_FOUND"`},
		{"GET", v + "/files/", 404, "application/json", `"NOT_FOUND"`},
		{"GET", "/api/v1/nope", 404, "application/json", `"NOT_FOUND"`},
		{"GET", "/api/v1/packages/", 404, "application/json", `"NOT_FOUND"`},
		{"GET", "/elsewhere/deep/path", 404, "application/json", `"NOT_FOUND"`},
		{"POST", "/api/v1/packages", 405, "application/json", `"METHOD_NOT_ALLOWED"`},
		{"PUT", "/api/v1/packages/kudo/kafka", 405, "application/json", `"METHOD_NOT_ALLOWED"`},
		{"GET", "/events", 405, "application/json", `"METHOD_NOT_ALLOWED"`},
	} {
		t.Run(tc.method+" "+tc.target, func(t *testing.T) {
			res := serve(t, newHandler(newFake(), nil, nil), tc.method, tc.target, nil)
			if res.status != tc.status {
				t.Fatalf("status = %d, want %d; body %s", res.status, tc.status, res.body)
			}
			if ct := res.header.Get("Content-Type"); ct != tc.contentType {
				t.Errorf("Content-Type = %q, want %q", ct, tc.contentType)
			}
			if !bytes.Contains(res.body, []byte(tc.body)) {
				t.Errorf("body %s does not contain %s", res.body, tc.body)
			}
			if bytes.Contains(res.body, []byte("null")) && strings.HasPrefix(tc.contentType, "application/json") {
				t.Errorf("body has null: %s", res.body)
			}
		})
	}
}

func TestMethodNotAllowedListsAllow(t *testing.T) {
	h := newHandler(newFake(), nil, nil)
	for target, want := range map[string]string{
		"/api/v1/packages":            "GET, HEAD",
		"/api/v1/packages/kudo/kafka": "GET, HEAD, DELETE",
		"/events":                     "POST",
		"/index.yaml":                 "GET, HEAD",
	} {
		res := serve(t, h, "PATCH", target, nil)
		if res.status != http.StatusMethodNotAllowed || res.header.Get("Allow") != want {
			t.Errorf("PATCH %s: %d, Allow %q; want 405, %q", target, res.status, res.header.Get("Allow"), want)
		}
	}
}

func TestFileHeaders(t *testing.T) {
	res := serve(t, newHandler(newFake(), nil, nil), "GET", "/api/v1/packages/kudo/kafka/versions/2.5.1_1.3.2/files/icon.svg", nil)
	for k, want := range map[string]string{
		"Content-Length":          fmt.Sprint(len(`<svg xmlns="http://www.w3.org/2000/svg"/>`)),
		"X-Content-Type-Options":  "nosniff",
		"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; sandbox",
	} {
		if got := res.header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
}

// chunkReader yields n chunks and checks, from the second one on, that the
// response already holds what was read before: the file is streamed.
type chunkReader struct {
	t       *testing.T
	rec     *httptest.ResponseRecorder
	n, read int
	sent    int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.read == c.n {
		return 0, io.EOF
	}
	if c.read > 0 && c.rec.Body.Len() == 0 {
		c.t.Errorf("chunk %d read before anything was written", c.read)
	}
	c.read++
	n := min(len(p), 1<<10)
	for i := range p[:n] {
		p[i] = 'x'
	}
	c.sent += n
	return n, nil
}

func (c *chunkReader) Close() error { return nil }

func TestFileIsStreamed(t *testing.T) {
	f := newFake()
	rec := httptest.NewRecorder()
	cr := &chunkReader{t: t, rec: rec, n: 64}
	f.fileReader = func() (io.ReadCloser, int64) { return cr, 64 << 10 }
	req := httptest.NewRequest("GET", "/api/v1/packages/kudo/kafka/versions/2.5.1_1.3.2/files/big.bin", nil)
	newHandler(f, nil, nil).ServeHTTP(rec, req)
	if rec.Code != 200 || rec.Body.Len() != 64<<10 || rec.Header().Get("Content-Length") != fmt.Sprint(64<<10) {
		t.Fatalf("status %d, %d bytes, Content-Length %s", rec.Code, rec.Body.Len(), rec.Header().Get("Content-Length"))
	}
}

func TestFileShortReadAbortsResponse(t *testing.T) {
	f := newFake()
	f.fileReader = func() (io.ReadCloser, int64) { return io.NopCloser(strings.NewReader("short")), 100 }
	var logs bytes.Buffer
	srv := httptest.NewServer(newHandler(f, nil, &logs))
	defer srv.Close()
	// The connection is closed: before the client saw the headers, or
	// before it read all that Content-Length promised.
	res, err := http.Get(srv.URL + "/api/v1/packages/kudo/kafka/versions/2.5.1_1.3.2/files/x.bin")
	if err == nil {
		defer res.Body.Close()
		_, err = io.ReadAll(res.Body)
	}
	if err == nil {
		t.Error("a short file was served as a complete one")
	}
	srv.Close() // waits for the handler, which logged
	if !strings.Contains(logs.String(), "response failed after it started") {
		t.Errorf("not logged: %s", logs.String())
	}
}

func TestErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		err           error
		status        int
		code          string
		showsMessage  bool
		logsRequestID bool
	}{
		{fmt.Errorf("package kudo/kafka: %w", catalog.ErrNotFound), 404, "NOT_FOUND", true, false},
		{fmt.Errorf("bad thing: %w", catalog.ErrInvalid), 400, "INVALID", true, false},
		{fmt.Errorf("namespace kudo: %w", catalog.ErrDenied), 403, "DENIED", true, false},
		{fmt.Errorf("dial tcp 10.1.2.3:5000: %w", catalog.ErrUnavailable), 503, "UNAVAILABLE", false, true},
		{errors.New("sql: database is locked at /var/lib/berth/catalog.db"), 500, "INTERNAL", false, true},
	} {
		t.Run(tc.code, func(t *testing.T) {
			f := newFake()
			f.err = tc.err
			var logs bytes.Buffer
			h := withRequestID(newHandler(f, nil, &logs))
			targets := []string{
				"/api/v1/packages/kudo/kafka", "/api/v1/packages/kudo/kafka/versions/1.0.0",
				"/api/v1/packages/kudo/kafka/versions/1.0.0/files/a.yaml", "/api/v1/packages/kudo/kafka/channels/stable/graph",
				"/api/v1/packages/kudo/kafka/upgrades?from=1.0.0", "/api/v1/packages/kudo/kafka/versions/1.0.0/permissions",
				"/api/v1/packages/kudo/kafka/versions/1.0.0/images", "/api/v1/packages/kudo/kafka/versions/1.0.0/installable",
			}
			if tc.status != 404 { // the other endpoints name nothing that could be missing
				targets = append(targets, "/api/v1/packages", "/api/v1/changes", "/api/v1/artifacts", "/api/v1/image-mirrors",
					"/api/v1/status", "/index.yaml", "/kudo/index.yaml")
			}
			for _, target := range targets {
				logs.Reset()
				res := serve(t, h, "GET", target, nil)
				if res.status != tc.status {
					t.Fatalf("%s: status %d, want %d", target, res.status, tc.status)
				}
				e := res.apiError(t)
				if e.Code != tc.code {
					t.Errorf("%s: code %s, want %s", target, e.Code, tc.code)
				}
				if shown := e.Message == tc.err.Error(); shown != tc.showsMessage {
					t.Errorf("%s: message %q; shows the error: %v, want %v", target, e.Message, shown, tc.showsMessage)
				}
				logged := strings.Contains(logs.String(), "request_id=req-1")
				if logged != tc.logsRequestID {
					t.Errorf("%s: logged with request id: %v, want %v: %s", target, logged, tc.logsRequestID, logs.String())
				}
				if tc.logsRequestID && !strings.Contains(string(res.body), `"requestId":"req-1"`) {
					t.Errorf("%s: no request id in %s", target, res.body)
				}
			}
		})
	}
}

// withRequestID sets the response header the server's middleware sets.
func withRequestID(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "req-1")
		h.ServeHTTP(w, r)
	})
}

func TestAccess(t *testing.T) {
	only := catalog.NamespaceAccess("kudo")
	t.Run("passed down", func(t *testing.T) {
		f := newFake()
		h := newHandler(f, fakeAuth{access: only}, nil)
		for _, target := range []string{
			"/api/v1/packages", "/api/v1/packages/kudo/kafka", "/api/v1/packages/kudo/kafka/versions/2.5.1_1.3.2",
			"/api/v1/packages/kudo/kafka/versions/2.5.1_1.3.2/files/operator.yaml",
			"/api/v1/packages/kudo/kafka/channels/stable/graph", "/api/v1/packages/kudo/kafka/upgrades?from=1.0.0",
			"/api/v1/artifacts", "/kudo/index.yaml",
			"/api/v1/packages/kudo/kafka/versions/2.5.1_1.3.2/images", "/api/v1/packages/kudo/kafka/versions/2.5.1_1.3.2/installable",
		} {
			if res := serve(t, h, "GET", target, nil); res.status != 200 {
				t.Fatalf("%s: status %d: %s", target, res.status, res.body)
			}
		}
		for _, a := range f.accesses {
			if a.All || a.Key != only.Key {
				t.Errorf("access %+v passed down, want %+v (calls %v)", a, only, f.calls)
			}
		}
		if len(f.accesses) != 11 {
			t.Errorf("%d calls with access, want 11: %v", len(f.accesses), f.calls)
		}
	})
	t.Run("changes filtered", func(t *testing.T) {
		res := serve(t, newHandler(newFake(), fakeAuth{access: only}, nil), "GET", "/api/v1/changes", nil)
		var c apiv1.Changes
		res.decode(t, &c)
		if len(c.Changes) != 2 || c.Next != 2 {
			t.Errorf("changes %+v next %d; want the 2 of kudo, next 2", c.Changes, c.Next)
		}
		for _, ch := range c.Changes {
			if ch.Namespace != "kudo" {
				t.Errorf("change of %s shown", ch.Namespace)
			}
		}
	})
	t.Run("status needs everything", func(t *testing.T) {
		f := newFake()
		res := serve(t, newHandler(f, fakeAuth{access: only}, nil), "GET", "/api/v1/status", nil)
		if res.status != 403 || res.apiError(t).Code != "DENIED" || strings.Contains(string(res.body), "seq") {
			t.Errorf("status with access to kudo only: %d %s, want 403 DENIED without counts", res.status, res.body)
		}
		if len(f.called()) != 0 {
			t.Errorf("catalog asked for counts it may not show: %v", f.called())
		}
	})
	t.Run("refused", func(t *testing.T) {
		f := newFake()
		h := newHandler(f, fakeAuth{pullErr: fmt.Errorf("token expired: %w", catalog.ErrDenied)}, nil)
		for _, target := range []string{"/api/v1/packages", "/api/v1/packages/kudo/kafka", "/api/v1/status", "/index.yaml", "/api/v1/changes"} {
			if res := serve(t, h, "GET", target, nil); res.status != 403 || res.apiError(t) != (apiv1.Error{Code: "DENIED", Message: "token expired: denied"}) {
				t.Errorf("%s: %d %s, want 403 DENIED: token expired: denied", target, res.status, res.body)
			}
		}
		if len(f.called()) != 0 {
			t.Errorf("catalog called although refused: %v", f.called())
		}
	})
	t.Run("delete refused", func(t *testing.T) {
		f := newFake()
		h := newHandler(f, fakeAuth{access: catalog.Access{All: true}, deleteErr: fmt.Errorf("no delete in kudo: %w", catalog.ErrDenied)}, nil)
		if res := serve(t, h, "DELETE", "/api/v1/packages/kudo/kafka", nil); res.status != 403 || res.apiError(t) != (apiv1.Error{Code: "DENIED", Message: "no delete in kudo: denied"}) {
			t.Errorf("%d %s, want 403 DENIED: no delete in kudo: denied", res.status, res.body)
		}
		if len(f.called()) != 0 {
			t.Errorf("catalog called although refused: %v", f.called())
		}
	})
}

func TestSearchPaging(t *testing.T) {
	f := newFake()
	h := newHandler(f, nil, nil)
	var names []string
	cursor := ""
	for page := 0; ; page++ {
		if page > 5 {
			t.Fatal("paging does not end")
		}
		target := "/api/v1/packages?limit=20"
		if cursor != "" {
			target += "&cursor=" + cursor
		}
		res := serve(t, h, "GET", target, nil)
		var sr apiv1.SearchResponse
		res.decode(t, &sr)
		for _, p := range sr.Packages {
			names = append(names, p.Name)
		}
		if sr.Next == "" {
			break
		}
		cursor = sr.Next
	}
	if len(names) != 45 || names[0] != "pkg000" || names[44] != "pkg044" {
		t.Errorf("paged through %d packages: %v", len(names), names)
	}
	var offsets []int
	for _, q := range f.queries {
		offsets = append(offsets, q.Offset)
	}
	if !slices.Equal(offsets, []int{0, 20, 40}) {
		t.Errorf("offsets %v, want [0 20 40]", offsets)
	}
}

func TestSearchNoMatchesHasEmptyFacets(t *testing.T) {
	f := newFake()
	f.total = 0
	res := serve(t, newHandler(f, nil, nil), "GET", "/api/v1/packages?q=nothing", nil)
	if want := `{"packages":[],"facets":{"format":{},"namespace":{},"verified":0},"total":0,"next":""}` + "\n"; string(res.body) != want {
		t.Errorf("body %s, want %s", res.body, want)
	}
}

func TestArtifactsPaging(t *testing.T) {
	f := newFake()
	h := newHandler(f, nil, nil)
	var sizes []int
	cursor := ""
	for {
		target := "/api/v1/artifacts?limit=20"
		if cursor != "" {
			target += "&cursor=" + cursor
		}
		var a apiv1.Artifacts
		serve(t, h, "GET", target, nil).decode(t, &a)
		sizes = append(sizes, len(a.Artifacts))
		if a.Next == "" || len(sizes) > 5 {
			break
		}
		cursor = a.Next
	}
	if !slices.Equal(sizes, []int{20, 20, 5}) {
		t.Errorf("page sizes %v, want [20 20 5]", sizes)
	}
	want := []string{"Unindexed(21,0)", "Unindexed(21,20)", "Unindexed(21,40)"}
	if got := f.called(); !slices.Equal(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}
}

// TestMountedUnderChi mounts the handler as berth's server does, under an
// outer chi router, and checks that routing and the outer route pattern (the
// access log's and metrics' route label) work.
func TestMountedUnderChi(t *testing.T) {
	h := httpapi.New(httpapi.Options{Catalog: newFake()})
	var pattern string
	outer := chi.NewRouter()
	outer.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r)
			pattern = chi.RouteContext(r.Context()).RoutePattern()
		})
	})
	outer.Handle("/api/v1/*", h)
	outer.Handle("/index.yaml", h)
	outer.Handle("/{namespace}/index.yaml", h)

	for target, want := range map[string]string{
		"/api/v1/packages/kudo/kafka": "/api/v1/packages/{namespace}/{name}",
		"/api/v1/packages/kudo/kafka/versions/2.5.1_1.3.2/files/templates/deployment.yaml": "/api/v1/packages/{namespace}/{name}/versions/{version}/files/*",
		"/kudo/index.yaml": "/{namespace}/index.yaml",
		"/index.yaml":      "/index.yaml",
	} {
		rec := httptest.NewRecorder()
		outer.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
		if rec.Code != 200 || pattern != want {
			t.Errorf("%s: status %d, pattern %q; want 200, %q", target, rec.Code, pattern, want)
		}
	}
}

func TestApprove(t *testing.T) {
	const target = "/api/v1/packages/kudo/kafka/versions/2.5.1_1.3.2/approval"
	fp := "sha256:" + strings.Repeat("a", 64)
	f := newFake()
	h := newHandler(f, fakeAuth{access: catalog.Access{All: true}}, nil)
	res := serve(t, h, "POST", target, []byte(`{"permissions":"`+fp+`"}`), "Content-Type", "application/json")
	var a apiv1.Approval
	if res.status != 201 {
		t.Fatalf("%d %s", res.status, res.body)
	}
	res.decode(t, &a)
	if a != (apiv1.Approval{Namespace: "kudo", Name: "kafka", Version: "2.5.1_1.3.2", Permissions: fp, By: "alice", At: t0}) {
		t.Errorf("approval %+v", a)
	}
	for _, tc := range []struct {
		name, target, body string
		header             []string
		auth               fakeAuth
		status             int
		says               string
	}{
		{"no body", target, "", nil, fakeAuth{}, 400, `{"permissions": "sha256:…"}`},
		{"not JSON", target, "sha256:aa", nil, fakeAuth{}, 400, `{"permissions": "sha256:…"}`},
		{"no fingerprint", target, `{"permission":"` + fp + `"}`, nil, fakeAuth{}, 400, `{"permissions": "sha256:…"}`},
		{"bad fingerprint", target, `{"permissions":"md5:1"}`, nil, fakeAuth{}, 400, `permissions "md5:1"`},
		{"other content type", target, `{"permissions":"` + fp + `"}`, []string{"Content-Type", "text/plain"}, fakeAuth{}, 415, "text/plain"},
		{"too large", target, `{"permissions":"` + strings.Repeat(" ", 5000) + `"}`, nil, fakeAuth{}, 413, "larger than 4096 bytes"},
		{"query", target + "?force=1", `{"permissions":"` + fp + `"}`, nil, fakeAuth{}, 400, "force"},
		{"bad version", "/api/v1/packages/kudo/kafka/versions/..%2Fx/approval", `{"permissions":"` + fp + `"}`, nil, fakeAuth{}, 400, "version"},
		{"not an admin", target, `{"permissions":"` + fp + `"}`, nil, fakeAuth{approveErr: fmt.Errorf("alice may not admin kudo/kafka: %w", catalog.ErrDenied)}, 403, "may not admin"},
		{"may not pull", target, `{"permissions":"` + fp + `"}`, nil, fakeAuth{approveErr: fmt.Errorf("package kudo/kafka: %w", catalog.ErrNotFound)}, 404, "package kudo/kafka"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			res := serve(t, newHandler(f, tc.auth, nil), "POST", tc.target, []byte(tc.body), tc.header...)
			if res.status != tc.status || !strings.Contains(res.apiError(t).Message, tc.says) {
				t.Errorf("%d %s, want %d saying %q", res.status, res.body, tc.status, tc.says)
			}
			if tc.status != 400 || tc.name != "bad fingerprint" {
				if called := f.called(); len(called) != 0 {
					t.Errorf("catalog called: %v", called)
				}
			}
		})
	}
}
