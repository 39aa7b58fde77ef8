package auth

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/storage"
)

// fakeAuthenticator maps the Authorization header to an identity.
type fakeAuthenticator map[string]Identity

func (f fakeAuthenticator) Authenticate(r *http.Request) (Identity, error) {
	switch h := r.Header.Get("Authorization"); h {
	case "":
		return AnonymousIdentity(), nil
	case "bad":
		return Identity{}, fmt.Errorf("wrong password: %w", ErrBadCredentials)
	case "throttled":
		return Identity{}, &RateLimitedError{RetryAfter: 2500 * time.Millisecond}
	case "broken":
		return Identity{}, fmt.Errorf("robot store: disk on fire at /var/lib/berth")
	default:
		id, ok := f[h]
		if !ok {
			return Identity{}, fmt.Errorf("unknown %q: %w", h, ErrBadCredentials)
		}
		return id, nil
	}
}

// The subjects of the tests, by the Authorization header that logs them in.
const (
	anonymous = ""
	alice     = "alice"  // owner of a/*
	bob       = "bob"    // owner of b/*
	puller    = "puller" // pull-only robot of a
	pusher    = "pusher" // push robot of a
	signer    = "signer" // pull and sign on a/*
	admin     = "admin"  // everything
)

var subjects = []string{anonymous, alice, bob, puller, pusher, signer, admin}

func robot(name string, actions ...Action) Identity {
	r := &Robot{Namespace: "a", Name: name, Scopes: []RobotScope{{Repositories: []string{"a/*"}, Actions: actions}}, ExpiresAt: time.Now().Add(time.Hour)}
	return Identity{Subject: r.Subject(), Robot: r}
}

var identities = fakeAuthenticator{
	alice:  {Subject: "user:alice"},
	bob:    {Subject: "user:bob", Groups: []string{"team-b"}},
	puller: robot("puller", Pull),
	pusher: robot("pusher", Pull, Push),
	signer: {Subject: "user:sam"},
	admin:  {Subject: "user:root"},
	// Tokens of alice: one for pulling a/app, one for the catalog, one for b/app.
	"alice-pull-token":    {Subject: "user:alice", Limited: true, Grants: []Grant{{Type: "repository", Name: "a/app", Actions: []string{"pull"}}}},
	"alice-catalog-token": {Subject: "user:alice", Limited: true, Grants: []Grant{{Type: "registry", Name: "catalog", Actions: []string{"*"}}}},
	"alice-b-token":       {Subject: "user:alice", Limited: true, Grants: []Grant{{Type: "repository", Name: "b/app", Actions: []string{"pull", "push"}}}},
	"anonymous-token":     {Subject: Anonymous, Limited: true},
	"anonymous-catalog":   {Subject: Anonymous, Limited: true, Grants: []Grant{{Type: "registry", Name: "catalog", Actions: []string{"*"}}}},
}

// may is what each subject may do, by namespace.
var may = map[string]map[string][]Action{
	anonymous: {},
	alice:     {"a": {Pull, Push, Delete}},
	bob:       {"b": {Pull, Push, Delete}},
	puller:    {"a": {Pull}},
	pusher:    {"a": {Pull, Push}},
	signer:    {"a": {Pull, Sign}},
	admin:     {"a": {Pull, Push, Delete}, "b": {Pull, Push, Delete}},
}

func testPolicy(t testing.TB) *Policy {
	t.Helper()
	cfg := &config.Auth{TokenTTL: time.Minute, Metrics: "admin", Robots: config.Robots{MaxExpiry: time.Hour}, Rules: []config.AuthRule{
		{Subjects: []string{"user:alice"}, Repositories: []string{"a/*"}, Actions: []string{"pull", "push", "delete"}},
		{Subjects: []string{"group:team-b"}, Repositories: []string{"b/*"}, Actions: []string{"pull", "push", "delete"}},
		{Subjects: []string{"user:sam"}, Repositories: []string{"a/*"}, Actions: []string{"pull", "sign"}},
		{Subjects: []string{"user:root"}, Repositories: []string{"*/*"}, Actions: []string{"admin"}},
	}}
	if err := cfg.Validate("auth"); err != nil {
		t.Fatal(err)
	}
	p, err := NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// env is a registry on in-memory storage behind Registry.
type env struct {
	raw     *registry.Registry
	gate    http.Handler
	audit   *bytes.Buffer
	metrics *Metrics
	// per repository: the blobs and the version every test manifest uses
	blobs   map[string]repoFixture
	counter int
}

type repoFixture struct {
	config, layer ocispec.Descriptor
	version       ocispec.Descriptor // tagged 1.0, a berth package
}

func newEnv(t testing.TB) *env {
	t.Helper()
	reg, err := registry.New(context.Background(), registry.Options{
		Storage:    &storage.Config{Driver: "inmemory"},
		HTTPSecret: "test",
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	e := &env{raw: reg, audit: &bytes.Buffer{}, metrics: NewMetrics(prometheus.NewRegistry()), blobs: map[string]repoFixture{}}
	e.gate = Registry(reg, RegistryOptions{
		Authenticator: identities,
		Policy:        testPolicy(t),
		Service:       "berth",
		Audit:         NewAuditor(e.audit),
		Metrics:       e.metrics,
	})
	for _, repo := range []string{"a/app", "b/app"} {
		f := repoFixture{
			config: e.putBlob(t, e.raw, "", repo, []byte(`{}`), ocispec.MediaTypeImageConfig),
			layer:  e.putBlob(t, e.raw, "", repo, []byte("layer"), ocispec.MediaTypeImageLayer),
		}
		pkgConfig := e.putBlob(t, e.raw, "", repo, []byte(`{"name":"app"}`), pkgformat.ConfigMediaType)
		content := e.putBlob(t, e.raw, "", repo, []byte("package"), pkgformat.ContentMediaType)
		pkg := ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest, ArtifactType: pkgformat.ArtifactType, Config: pkgConfig, Layers: []ocispec.Descriptor{content}}
		pkg.SchemaVersion = 2
		f.version = e.putManifest(t, e.raw, "", repo, "1.0", pkg, http.StatusCreated)
		e.blobs[repo] = f
	}
	return e
}

// do serves one request as the subject who, through h.
func do(h http.Handler, who, method, target, contentType string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, bytes.NewReader(body))
	if who != "" {
		req.Header.Set("Authorization", who)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", ocispec.MediaTypeImageManifest)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// putBlob uploads b to repo as who (POST, then PUT).
func (e *env) putBlob(tb testing.TB, h http.Handler, who, repo string, b []byte, mediaType string) ocispec.Descriptor {
	tb.Helper()
	d := digest.FromBytes(b)
	w := do(h, who, http.MethodPost, "/v2/"+repo+"/blobs/uploads/", "", nil)
	if w.Code != http.StatusAccepted {
		tb.Fatalf("%s: start upload to %s: %d %s", who, repo, w.Code, w.Body)
	}
	if w = do(h, who, http.MethodPut, w.Header().Get("Location")+"&digest="+d.String(), "application/octet-stream", b); w.Code != http.StatusCreated {
		tb.Fatalf("%s: upload to %s: %d %s", who, repo, w.Code, w.Body)
	}
	return ocispec.Descriptor{MediaType: mediaType, Digest: d, Size: int64(len(b))}
}

// image is a new image manifest of repo's blobs (unique to each call), with
// subject when it is set.
func (e *env) image(repo string, subject *ocispec.Descriptor) ocispec.Manifest {
	e.counter++
	f := e.blobs[repo]
	m := ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest, Config: f.config, Layers: []ocispec.Descriptor{f.layer}, Subject: subject,
		Annotations: map[string]string{"n": fmt.Sprint(e.counter)}}
	m.SchemaVersion = 2
	return m
}

// putManifest PUTs m under ref ("" for its digest) as who and requires want.
func (e *env) putManifest(tb testing.TB, h http.Handler, who, repo, ref string, m ocispec.Manifest, want int) ocispec.Descriptor {
	tb.Helper()
	b, _ := json.Marshal(m)
	d := digest.FromBytes(b)
	if ref == "" {
		ref = d.String()
	}
	if w := do(h, who, http.MethodPut, "/v2/"+repo+"/manifests/"+ref, ocispec.MediaTypeImageManifest, b); w.Code != want {
		tb.Fatalf("%s: PUT %s:%s = %d %s, want %d", who, repo, ref, w.Code, w.Body, want)
	}
	return ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: d, Size: int64(len(b))}
}

func allowed(who, repo string, action Action) bool {
	ns, _, _ := strings.Cut(repo, "/")
	return slices.Contains(may[who][ns], action)
}

// denied is the status of a denial for who.
func denied(who string) int {
	if who == anonymous {
		return http.StatusUnauthorized
	}
	return http.StatusForbidden
}

// request is one request of the matrix, made on repo.
type request struct {
	name   string
	action Action // what it needs; Sign when sign suffices for a push
	ok     int    // the status when allowed
	// make returns the method, path (after /v2/<repo>) and body, preparing
	// what the request acts on with the raw registry.
	make func(tb testing.TB, e *env, repo string) (method, path, contentType string, body []byte)
}

var requests = []request{
	{"GET manifest", Pull, http.StatusOK, func(_ testing.TB, _ *env, _ string) (string, string, string, []byte) {
		return http.MethodGet, "/manifests/1.0", "", nil
	}},
	{"HEAD manifest", Pull, http.StatusOK, func(_ testing.TB, e *env, repo string) (string, string, string, []byte) {
		return http.MethodHead, "/manifests/" + e.blobs[repo].version.Digest.String(), "", nil
	}},
	{"GET blob", Pull, http.StatusOK, func(_ testing.TB, e *env, repo string) (string, string, string, []byte) {
		return http.MethodGet, "/blobs/" + e.blobs[repo].layer.Digest.String(), "", nil
	}},
	{"HEAD blob", Pull, http.StatusOK, func(_ testing.TB, e *env, repo string) (string, string, string, []byte) {
		return http.MethodHead, "/blobs/" + e.blobs[repo].config.Digest.String(), "", nil
	}},
	{"GET tags", Pull, http.StatusOK, func(_ testing.TB, _ *env, _ string) (string, string, string, []byte) {
		return http.MethodGet, "/tags/list", "", nil
	}},
	{"GET referrers", Pull, http.StatusOK, func(_ testing.TB, e *env, repo string) (string, string, string, []byte) {
		return http.MethodGet, "/referrers/" + e.blobs[repo].version.Digest.String(), "", nil
	}},
	{"POST upload", Sign, http.StatusAccepted, func(_ testing.TB, _ *env, _ string) (string, string, string, []byte) {
		return http.MethodPost, "/blobs/uploads/", "", nil
	}},
	{"PUT manifest by tag", Push, http.StatusCreated, func(_ testing.TB, e *env, repo string) (string, string, string, []byte) {
		b, _ := json.Marshal(e.image(repo, nil))
		return http.MethodPut, fmt.Sprintf("/manifests/t%d", e.counter), ocispec.MediaTypeImageManifest, b
	}},
	{"PUT signature by cosign tag", Sign, http.StatusCreated, func(_ testing.TB, e *env, repo string) (string, string, string, []byte) {
		b, _ := json.Marshal(e.image(repo, nil))
		return http.MethodPut, "/manifests/sha256-" + e.blobs[repo].version.Digest.Encoded() + ".sig", ocispec.MediaTypeImageManifest, b
	}},
	{"PUT referrer by digest", Sign, http.StatusCreated, func(_ testing.TB, e *env, repo string) (string, string, string, []byte) {
		v := e.blobs[repo].version
		b, _ := json.Marshal(e.image(repo, &v))
		return http.MethodPut, "/manifests/" + digest.FromBytes(b).String(), ocispec.MediaTypeImageManifest, b
	}},
	{"DELETE manifest", Delete, http.StatusAccepted, func(tb testing.TB, e *env, repo string) (string, string, string, []byte) {
		d := e.putManifest(tb, e.raw, "", repo, "", e.image(repo, nil), http.StatusCreated)
		return http.MethodDelete, "/manifests/" + d.Digest.String(), "", nil
	}},
	{"DELETE blob", Delete, http.StatusAccepted, func(tb testing.TB, e *env, repo string) (string, string, string, []byte) {
		e.counter++
		d := e.putBlob(tb, e.raw, "", repo, []byte(fmt.Sprint("blob ", e.counter)), "application/octet-stream")
		return http.MethodDelete, "/blobs/" + d.Digest.String(), "", nil
	}},
}

// want is the status of r made by who on repo.
func (r request) want(who, repo string) int {
	switch {
	case r.action == Sign && (allowed(who, repo, Push) || allowed(who, repo, Sign)):
		return r.ok
	case allowed(who, repo, r.action):
		return r.ok
	case r.action == Push && allowed(who, repo, Sign):
		return http.StatusForbidden // the guard refuses a sign-only push of a tag
	}
	return denied(who)
}

// hiddenNames are the repositories who may not pull, of those the tests create.
func hiddenNames(who string) []string {
	var hidden []string
	for _, repo := range []string{"a/app", "b/app"} {
		if !allowed(who, repo, Pull) {
			hidden = append(hidden, repo)
		}
	}
	return hidden
}

// scan fails the test when w, answering who's request on self, names a
// repository who may not pull.
func scan(t *testing.T, who, self, what string, w *httptest.ResponseRecorder) {
	t.Helper()
	var text strings.Builder
	for k, vs := range w.Header() {
		fmt.Fprintln(&text, k, strings.Join(vs, " "))
	}
	text.Write(w.Body.Bytes())
	for _, name := range hiddenNames(who) {
		if name != self && strings.Contains(text.String(), name) {
			t.Errorf("%s: %s: the response names %s, which %s may not pull:\n%s", who, what, name, who, text.String())
		}
	}
}

// normalized is w with the request's own name replaced and the headers that
// differ between any two responses dropped.
func normalized(w *httptest.ResponseRecorder, name string) string {
	h := w.Header().Clone()
	h.Del("X-Request-Id")
	h.Del("Date")
	var b strings.Builder
	fmt.Fprintln(&b, w.Code)
	_ = h.Write(&b)
	b.Write(w.Body.Bytes())
	return strings.ReplaceAll(b.String(), name, "<name>")
}

func TestRegistryMatrix(t *testing.T) {
	e := newEnv(t)
	for _, who := range subjects {
		for _, repo := range []string{"a/app", "b/app"} {
			for _, r := range requests {
				method, path, ct, body := r.make(t, e, repo)
				w := do(e.gate, who, method, "/v2/"+repo+path, ct, body)
				what := fmt.Sprintf("%s %s on %s", r.name, path, repo)
				if want := r.want(who, repo); w.Code != want {
					t.Errorf("%q: %s = %d %s, want %d", who, what, w.Code, w.Body, want)
				}
				scan(t, who, repo, what, w)
				if allowed(who, repo, Pull) {
					continue
				}
				// What who may not pull answers as what was never created.
				ns, _, _ := strings.Cut(repo, "/")
				ghost := ns + "/never-created"
				g := do(e.gate, who, method, "/v2/"+ghost+path, ct, body)
				if got, want := normalized(g, ghost), normalized(w, repo); got != want {
					t.Errorf("%q: %s answers\n%s\nbut on a repository never created\n%s", who, what, want, got)
				}
			}
		}
	}
}

func TestRegistryBaseAndCatalog(t *testing.T) {
	e := newEnv(t)
	for _, repo := range []string{"a/two", "b/two", "b/three"} {
		e.blobs[repo] = e.blobs[repo[:1]+"/app"]
		e.putBlob(t, e.raw, "", repo, []byte(`{}`), ocispec.MediaTypeImageConfig)
		e.putBlob(t, e.raw, "", repo, []byte("layer"), ocispec.MediaTypeImageLayer)
		e.putManifest(t, e.raw, "", repo, "1.0", e.image(repo, nil), http.StatusCreated)
	}
	for _, tc := range []struct {
		who     string
		base    int
		catalog int
		repos   []string
	}{
		{anonymous, http.StatusUnauthorized, http.StatusUnauthorized, nil},
		{alice, http.StatusOK, http.StatusOK, []string{"a/app", "a/two"}},
		{bob, http.StatusOK, http.StatusOK, []string{"b/app", "b/three", "b/two"}},
		{puller, http.StatusOK, http.StatusOK, []string{"a/app", "a/two"}},
		{signer, http.StatusOK, http.StatusOK, []string{"a/app", "a/two"}},
		{admin, http.StatusOK, http.StatusOK, []string{"a/app", "a/two", "b/app", "b/three", "b/two"}},
		{"alice-pull-token", http.StatusOK, http.StatusUnauthorized, nil},
		{"alice-catalog-token", http.StatusOK, http.StatusOK, []string{"a/app", "a/two"}},
		// A token answers the ping, as distribution's token auth has it: the
		// client that fetched one anonymously must not be challenged again.
		{"anonymous-token", http.StatusOK, http.StatusUnauthorized, nil},
		{"anonymous-catalog", http.StatusOK, http.StatusOK, nil},
	} {
		if w := do(e.gate, tc.who, http.MethodGet, "/v2/", "", nil); w.Code != tc.base {
			t.Errorf("%q: GET /v2/ = %d, want %d", tc.who, w.Code, tc.base)
		}
		w := do(e.gate, tc.who, http.MethodGet, "/v2/_catalog", "", nil)
		var got struct{ Repositories []string }
		_ = json.Unmarshal(w.Body.Bytes(), &got)
		if w.Code != tc.catalog || !slices.Equal(got.Repositories, tc.repos) {
			t.Errorf("%q: GET /v2/_catalog = %d %s, want %d %v", tc.who, w.Code, w.Body, tc.catalog, tc.repos)
		}
		if tc.catalog == http.StatusUnauthorized && !strings.Contains(w.Header().Get("WWW-Authenticate"), `scope="registry:catalog:*"`) {
			t.Errorf("%q: GET /v2/_catalog challenge %q lacks the catalog scope", tc.who, w.Header().Get("WWW-Authenticate"))
		}
		if tc.who != anonymous && !strings.HasPrefix(tc.who, "alice-") && !strings.HasPrefix(tc.who, "anonymous-") {
			scan(t, tc.who, "", "GET /v2/_catalog", w)
		}
	}
	// Pages hold only visible repositories, and last may be any name.
	for _, tc := range []struct {
		query, link string
		repos       []string
	}{
		{"?n=1", `</v2/_catalog?last=b%2Fapp&n=1>; rel="next"`, []string{"b/app"}},
		{"?n=1&last=b/app", `</v2/_catalog?last=b%2Fthree&n=1>; rel="next"`, []string{"b/three"}},
		{"?n=2&last=a/two", `</v2/_catalog?last=b%2Fthree&n=2>; rel="next"`, []string{"b/app", "b/three"}},
		{"?n=5&last=b/app", "", []string{"b/three", "b/two"}},
	} {
		w := do(e.gate, bob, http.MethodGet, "/v2/_catalog"+tc.query, "", nil)
		var got struct{ Repositories []string }
		_ = json.Unmarshal(w.Body.Bytes(), &got)
		if w.Code != http.StatusOK || w.Header().Get("Link") != tc.link || !slices.Equal(got.Repositories, tc.repos) {
			t.Errorf("bob: GET /v2/_catalog%s = %d %q %s, want %q %v", tc.query, w.Code, w.Header().Get("Link"), w.Body, tc.link, tc.repos)
		}
	}
}

// A catalog token lists what its subject may pull, but pulls nothing: a
// pull needs the repository's own grant.
func TestRegistryCatalogTokenDoesNotPull(t *testing.T) {
	e := newEnv(t)
	w := do(e.gate, "alice-catalog-token", http.MethodGet, "/v2/a/app/manifests/1.0", "", nil)
	if w.Code != http.StatusUnauthorized || !strings.Contains(w.Header().Get("WWW-Authenticate"), `scope="repository:a/app:pull"`) {
		t.Fatalf("GET a/app manifest with a catalog token = %d %q, want a 401 challenge for its pull scope", w.Code, w.Header().Get("WWW-Authenticate"))
	}
}

func TestRegistryDenials(t *testing.T) {
	e := newEnv(t)
	const realm = `realm="http://example.com/auth/token",service="berth"`
	for _, tc := range []struct {
		who, method, path string
		header            map[string]string
		code              int
		challenge         string // WWW-Authenticate, when code is 401
		errCode, message  string
	}{
		{anonymous, "GET", "/v2/", nil, 401, "Bearer " + realm, "UNAUTHORIZED", "authentication required"},
		{anonymous, "GET", "/v2/nowhere", nil, 401, "Bearer " + realm, "UNAUTHORIZED", "authentication required"},
		{anonymous, "GET", "/v2/a/app/manifests/1.0", nil, 401, "Bearer " + realm + `,scope="repository:a/app:pull"`, "UNAUTHORIZED", "authentication required"},
		{anonymous, "HEAD", "/v2/b/app/blobs/sha256:" + strings.Repeat("0", 64), nil, 401, "Bearer " + realm + `,scope="repository:b/app:pull"`, "", ""},
		{anonymous, "PUT", "/v2/a/app/manifests/2.0", nil, 401, "Bearer " + realm + `,scope="repository:a/app:pull,push"`, "UNAUTHORIZED", "authentication required"},
		{anonymous, "POST", "/v2/a/app/blobs/uploads/", nil, 401, "Bearer " + realm + `,scope="repository:a/app:pull,push"`, "UNAUTHORIZED", ""},
		{anonymous, "DELETE", "/v2/a/app/manifests/1.0", nil, 401, "Bearer " + realm + `,scope="repository:a/app:delete"`, "UNAUTHORIZED", ""},
		{anonymous, "GET", "/v2/a/x/y/tags/list", nil, 401, "Bearer " + realm + `,scope="repository:a/x/y:pull"`, "UNAUTHORIZED", ""},
		{anonymous, "GET", "/v2/_catalog", nil, 401, "Bearer " + realm + `,scope="registry:catalog:*"`, "UNAUTHORIZED", "listing the catalog needs a login"},
		{anonymous, "GET", "/v2/a/app/tags/list", map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Host": "evil.example"}, 401, "Bearer " + realm + `,scope="repository:a/app:pull"`, "UNAUTHORIZED", ""},
		{"anonymous-token", "GET", "/v2/a/app/tags/list", nil, 401, "Bearer " + realm + `,scope="repository:a/app:pull",error="insufficient_scope"`, "UNAUTHORIZED", ""},
		{"bad", "GET", "/v2/a/app/tags/list", nil, 401, "Bearer " + realm + `,scope="repository:a/app:pull"`, "UNAUTHORIZED", "invalid credentials"},
		{"bad", "GET", "/v2/", nil, 401, "Bearer " + realm, "UNAUTHORIZED", "invalid credentials"},
		{"who-is-this", "GET", "/v2/", nil, 401, "Bearer " + realm, "UNAUTHORIZED", "invalid credentials"},
		{"throttled", "GET", "/v2/a/app/tags/list", nil, 429, "", "TOOMANYREQUESTS", "too many failed logins; retry in 3s"},
		{"broken", "GET", "/v2/a/app/tags/list", nil, 500, "", "UNKNOWN", "authentication failed"},
		// A token without the grant: a new token helps when the policy allows.
		{"alice-pull-token", "PUT", "/v2/a/app/manifests/2.0", nil, 401, "Bearer " + realm + `,scope="repository:a/app:pull,push",error="insufficient_scope"`, "UNAUTHORIZED", "the token does not grant repository:a/app:pull,push"},
		{"alice-pull-token", "GET", "/v2/a/other/tags/list", nil, 401, "Bearer " + realm + `,scope="repository:a/other:pull",error="insufficient_scope"`, "UNAUTHORIZED", ""},
		{"alice-pull-token", "GET", "/v2/_catalog", nil, 401, "Bearer " + realm + `,scope="registry:catalog:*",error="insufficient_scope"`, "UNAUTHORIZED", "the token does not grant registry:catalog:*"},
		// ... and 403 when the policy denies too.
		{"alice-b-token", "GET", "/v2/b/app/tags/list", nil, 403, "", "DENIED", "user:alice may not pull from repository b/app"},
		{alice, "GET", "/v2/b/app/manifests/1.0", nil, 403, "", "DENIED", "user:alice may not pull from repository b/app"},
		{alice, "PUT", "/v2/b/app/manifests/2.0", nil, 403, "", "DENIED", "user:alice may not push to repository b/app"},
		{alice, "POST", "/v2/b/app/blobs/uploads/", nil, 403, "", "DENIED", "user:alice may not push to repository b/app"},
		{puller, "DELETE", "/v2/a/app/blobs/sha256:" + strings.Repeat("0", 64), nil, 403, "", "DENIED", "robot:a+puller may not delete from repository a/app"},
		{signer, "DELETE", "/v2/a/app/manifests/1.0", nil, 403, "", "DENIED", "user:sam may not delete from repository a/app"},
		{pusher, "PATCH", "/v2/a/app/manifests/1.0", nil, 405, "", "", ""},
		{puller, "PATCH", "/v2/a/app/manifests/1.0", nil, 403, "", "DENIED", "robot:a+puller may not push to repository a/app"},
		{bob, "GET", "/v2/a/b/c/d/tags/list", nil, 403, "", "DENIED", "user:bob may not pull from repository a/b/c/d"},
	} {
		req := httptest.NewRequest(tc.method, tc.path, nil)
		if tc.who != "" {
			req.Header.Set("Authorization", tc.who)
		}
		for k, v := range tc.header {
			req.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		e.gate.ServeHTTP(w, req)
		what := fmt.Sprintf("%q: %s %s", tc.who, tc.method, tc.path)
		if w.Code != tc.code || w.Header().Get("WWW-Authenticate") != tc.challenge {
			t.Errorf("%s = %d %q %s, want %d %q", what, w.Code, w.Header().Get("WWW-Authenticate"), w.Body, tc.code, tc.challenge)
			continue
		}
		if w.Header().Get("Docker-Distribution-API-Version") != "registry/2.0" {
			t.Errorf("%s: no Docker-Distribution-API-Version header", what)
		}
		if tc.code == 429 && w.Header().Get("Retry-After") != "3" {
			t.Errorf("%s: Retry-After %q, want 3", what, w.Header().Get("Retry-After"))
		}
		if tc.method == "HEAD" || tc.errCode == "" {
			continue
		}
		var body struct {
			Errors []struct{ Code, Message string }
		}
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || len(body.Errors) != 1 || body.Errors[0].Code != tc.errCode || !strings.Contains(body.Errors[0].Message, tc.message) {
			t.Errorf("%s: body %s, want %s saying %q", what, w.Body, tc.errCode, tc.message)
		}
		if strings.Contains(w.Body.String(), "/var/lib") || strings.Contains(w.Body.String(), "rules[") {
			t.Errorf("%s: body %s tells the server's secrets", what, w.Body)
		}
	}
}

func TestRegistryConfiguredRealm(t *testing.T) {
	e := newEnv(t)
	h := Registry(e.raw, RegistryOptions{Authenticator: identities, Policy: testPolicy(t), Service: "reg.example", Realm: "https://auth.example/token"})
	w := do(h, anonymous, http.MethodGet, "/v2/a/app/tags/list", "", nil)
	if want := `Bearer realm="https://auth.example/token",service="reg.example",scope="repository:a/app:pull"`; w.Header().Get("WWW-Authenticate") != want {
		t.Errorf("challenge %q, want %q", w.Header().Get("WWW-Authenticate"), want)
	}
}

func TestRegistryAuthOff(t *testing.T) {
	e := newEnv(t)
	h := Registry(e.raw, RegistryOptions{Authenticator: identities})
	if h != http.Handler(e.raw) {
		t.Fatalf("Registry without a policy = %T, want the registry itself", h)
	}
}

func TestRegistryIdentityInContext(t *testing.T) {
	var got Identity
	h := Registry(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = IdentityFrom(r.Context()) }),
		RegistryOptions{Authenticator: identities, Policy: testPolicy(t)})
	do(h, puller, http.MethodGet, "/v2/a/app/tags/list", "", nil)
	if got.Subject != "robot:a+puller" {
		t.Errorf("identity downstream = %+v, want robot:a+puller", got)
	}
}

// auditEvents decodes the audit log.
func auditEvents(t *testing.T, b *bytes.Buffer) []Event {
	t.Helper()
	var events []Event
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if line == "" {
			continue
		}
		var e struct{ Subject, Action, Resource, Result, Reason string }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		events = append(events, Event{Subject: e.Subject, Action: e.Action, Resource: e.Resource, Result: e.Result, Reason: e.Reason})
	}
	b.Reset()
	return events
}

func TestRegistrySignOnlyAndAudit(t *testing.T) {
	e := newEnv(t)
	auditEvents(t, e.audit)
	v := e.blobs["a/app"].version
	sigTag := "sha256-" + v.Digest.Encoded() + ".sig"

	sig := e.putManifest(t, e.gate, signer, "a/app", sigTag, e.image("a/app", nil), http.StatusCreated)
	ref := e.putManifest(t, e.gate, signer, "a/app", "", e.image("a/app", &v), http.StatusCreated)
	var version ocispec.Manifest
	w := do(e.raw, "", http.MethodGet, "/v2/a/app/manifests/1.0", "", nil)
	_ = json.Unmarshal(w.Body.Bytes(), &version)
	version.Annotations = map[string]string{"another": "version"}
	var refused []Event
	for _, tc := range []struct {
		ref     string
		m       ocispec.Manifest
		message string
	}{
		{sigTag, version, "package version"},
		{"2.0", e.image("a/app", nil), "not tag 2.0"},
		{"1.0", e.image("a/app", nil), "not tag 1.0"},
		{"", e.image("a/app", nil), "has a subject"},
	} {
		b, _ := json.Marshal(tc.m)
		ref := cmp.Or(tc.ref, digest.FromBytes(b).String())
		w := do(e.gate, signer, http.MethodPut, "/v2/a/app/manifests/"+ref, ocispec.MediaTypeImageManifest, b)
		if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), `"code":"DENIED"`) || !strings.Contains(w.Body.String(), tc.message) {
			t.Errorf("signer: PUT a/app:%s = %d %s, want 403 DENIED saying %q", ref, w.Code, w.Body, tc.message)
		}
		refused = append(refused, Event{Subject: "user:sam", Action: "push", Resource: "a/app:" + ref, Result: ResultDenied,
			Reason: "allowed to sign, not to push: only signatures and referrers, never a package version or another tag"})
	}
	e.putManifest(t, e.gate, pusher, "a/app", "2.0", e.image("a/app", nil), http.StatusCreated)
	d2 := do(e.raw, "", http.MethodHead, "/v2/a/app/manifests/2.0", "", nil).Header().Get("Docker-Content-Digest")
	if w := do(e.gate, alice, http.MethodDelete, "/v2/a/app/manifests/"+d2, "", nil); w.Code != http.StatusAccepted {
		t.Fatalf("alice: DELETE a/app@%s = %d %s", d2, w.Code, w.Body)
	}
	do(e.gate, bob, http.MethodGet, "/v2/a/app/manifests/1.0", "", nil)

	want := []Event{
		{Subject: "user:sam", Action: "sign", Resource: "a/app@" + sig.Digest.String(), Result: ResultOK},
		{Subject: "user:sam", Action: "tag", Resource: "a/app:" + sigTag, Result: ResultOK},
		{Subject: "user:sam", Action: "sign", Resource: "a/app@" + ref.Digest.String(), Result: ResultOK},
	}
	want = append(want, refused...)
	want = append(want, []Event{
		{Subject: "robot:a+pusher", Action: "push", Resource: "a/app@" + d2, Result: ResultOK},
		{Subject: "robot:a+pusher", Action: "tag", Resource: "a/app:2.0", Result: ResultOK},
		{Subject: "user:alice", Action: "delete", Resource: "a/app@" + d2, Result: ResultOK},
		{Subject: "user:bob", Action: "pull", Resource: "a/app", Result: ResultDenied, Reason: "no rule allows user:bob (groups team-b) pull on a/app"},
	}...)
	if got := auditEvents(t, e.audit); !slices.Equal(got, want) {
		t.Errorf("audit events:\n%v\nwant\n%v", got, want)
	}
	if got := testutil.ToFloat64(e.metrics.decisions.WithLabelValues("sign", "allowed")); got != 6 {
		t.Errorf("sign decisions allowed = %v, want 6", got)
	}
	if got := testutil.ToFloat64(e.metrics.decisions.WithLabelValues("pull", "denied")); got != 1 {
		t.Errorf("pull decisions denied = %v, want 1", got)
	}
}
