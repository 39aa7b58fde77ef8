package client

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	"oras.land/oras-go/v2/registry/remote/credentials"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/permissions"
	"github.com/berth-registry/berth/pkgformat"
)

// catalogServer serves h on a loopback address and returns its host:port.
func catalogServer(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// newTestCatalog returns a Catalog for server with no credentials and,
// unless opts has an HTTP client, one that does not retry, so that 5xx
// answers fail at once.
func newTestCatalog(t *testing.T, server string, opts Options) *Catalog {
	t.Helper()
	if opts.Credentials == nil {
		opts.Credentials = credentials.NewMemoryStore()
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	c, err := NewCatalog(server, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// writeDoc writes v as a JSON answer with the given status.
func writeDoc(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", apiv1.MediaTypeJSON)
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func TestNewCatalogURL(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		server    string
		plainHTTP *bool
		want      string // "" when NewCatalog must fail
	}{
		{"localhost:5000", nil, "http://localhost:5000/api/v1"},
		{"127.0.0.1:5000", nil, "http://127.0.0.1:5000/api/v1"},
		{"[::1]:5000", nil, "http://[::1]:5000/api/v1"},
		{"berth.example.com", nil, "https://berth.example.com/api/v1"},
		{"berth.example.com:5000", &yes, "http://berth.example.com:5000/api/v1"},
		{"localhost:5000", &no, "https://localhost:5000/api/v1"},
		{"https://berth.example.com", nil, "https://berth.example.com/api/v1"},
		{"https://berth.example.com/", &yes, "https://berth.example.com/api/v1"},
		{"http://localhost:5000/berth/api/v1/", &no, "http://localhost:5000/berth/api/v1"},
		{"http://proxy.example.com/berth", nil, "http://proxy.example.com/berth/api/v1"},
		{"", nil, ""},
		{"berth.example.com/api", nil, ""},
		{"berth.example.com:0", nil, ""},
		{"berth example.com", nil, ""},
		{"ftp://berth.example.com", nil, ""},
		{"https://user:secret@berth.example.com", nil, ""},
		{"https://berth.example.com/?q=1", nil, ""},
		{"https://berth.example.com/#top", nil, ""},
		{"https:///api/v1", nil, ""},
	}
	for _, tt := range tests {
		c, err := NewCatalog(tt.server, Options{PlainHTTP: tt.plainHTTP, Credentials: credentials.NewMemoryStore()})
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("NewCatalog(%q) = %s, want an error", tt.server, c.base)
		case tt.want == "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "want host[:port] or http(s)://host[:port][/path]")):
			t.Errorf("NewCatalog(%q): %v, want ErrInvalid saying what is wanted", tt.server, err)
		case tt.want != "" && err != nil:
			t.Errorf("NewCatalog(%q): %v", tt.server, err)
		case tt.want != "" && c.base != tt.want:
			t.Errorf("NewCatalog(%q) = %s, want %s", tt.server, c.base, tt.want)
		}
	}
}

func TestCatalogSearch(t *testing.T) {
	updated := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	want := &apiv1.SearchResponse{
		Packages: []apiv1.PackageSummary{{
			Namespace: "kudo", Name: "kafka", Version: "2.5.1_1.3.2", Format: pkgformat.KUDO,
			Description: "Apache Kafka", Digest: "sha256:" + strings.Repeat("a", 64), Updated: updated, Verified: true,
		}},
		Facets: apiv1.Facets{Format: map[string]int{"kudo": 1}, Namespace: map[string]int{"kudo": 1}},
		Total:  4,
		Next:   "c2",
	}
	var got *http.Request
	server := catalogServer(t, func(w http.ResponseWriter, r *http.Request) {
		got = r
		writeDoc(w, http.StatusOK, want)
	})
	c := newTestCatalog(t, server, Options{UserAgent: "berth-test/1"})
	verified := false
	res, err := c.Search(context.Background(), SearchOptions{
		Query: "kafka streams", Namespace: "kudo", Format: pkgformat.KUDO, Channel: "stable",
		Provides: "kafka.kudo.dev/Kafka", KubeVersion: "1.29", Verified: &verified, Sort: apiv1.SortUpdated,
		Limit: 1, Cursor: "c1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res, want) {
		t.Errorf("Search = %+v, want %+v", res, want)
	}
	wantQuery := url.Values{
		"q": {"kafka streams"}, "namespace": {"kudo"}, "format": {"kudo"}, "channel": {"stable"},
		"provides": {"kafka.kudo.dev/Kafka"}, "kubeVersion": {"1.29"}, "verified": {"false"}, "sort": {"updated"},
		"limit": {"1"}, "cursor": {"c1"},
	}
	if got.URL.Path != "/api/v1/packages" || !reflect.DeepEqual(got.URL.Query(), wantQuery) {
		t.Errorf("request %s, want /api/v1/packages?%s", got.URL, wantQuery.Encode())
	}
	if ua, accept := got.Header.Get("User-Agent"), got.Header.Get("Accept"); ua != "berth-test/1" || accept != "application/json" {
		t.Errorf("User-Agent %q, Accept %q", ua, accept)
	}

	// The zero options send no parameters and the default User-Agent.
	c = newTestCatalog(t, server, Options{})
	if _, err := c.Search(context.Background(), SearchOptions{Limit: -1}); err != nil {
		t.Fatal(err)
	}
	if got.URL.RawQuery != "" || got.Header.Get("User-Agent") != DefaultUserAgent {
		t.Errorf("zero options: query %q, User-Agent %q", got.URL.RawQuery, got.Header.Get("User-Agent"))
	}
}

func TestCatalogPackageVersionUpgrades(t *testing.T) {
	pkg := &apiv1.Package{
		Namespace: "kudo", Name: "kafka", Format: pkgformat.KUDO, LatestVersion: "1.0.0+b1", DefaultChannel: "stable",
		Versions: []apiv1.VersionSummary{{Version: "1.0.0+b1", Digest: "sha256:" + strings.Repeat("b", 64)}},
		Channels: []apiv1.Channel{{Name: "stable", Head: "1.0.0+b1", Versions: []string{"1.0.0+b1"}}},
	}
	version := &apiv1.Version{
		Namespace: "kudo", Name: "kafka", Version: "1.0.0+b1", Digest: pkg.Versions[0].Digest, Format: pkgformat.KUDO,
		PullReference: "localhost/kudo/kafka@" + pkg.Versions[0].Digest,
		Metadata:      pkgformat.Metadata{Name: "kafka", Version: "1.0.0+b1", Format: pkgformat.KUDO, Files: []pkgformat.FileInfo{{Path: "operator.yaml", Size: 10}}},
		Files:         []pkgformat.FileInfo{{Path: "operator.yaml", Size: 10}},
		Signatures:    []apiv1.Signature{{Digest: "sha256:" + strings.Repeat("c", 64), KeyID: "k1", Verified: true, Kind: "tag"}},
	}
	upgrades := &apiv1.Upgrades{From: "0.9.0", Channel: "stable", Head: "1.0.0+b1", Next: []string{"1.0.0+b1"}, Path: []string{"1.0.0+b1"}}
	graph := &apiv1.Graph{
		Namespace: "kudo", Name: "kafka", Channel: "stable", Head: "1.0.0+b1",
		Nodes: []apiv1.GraphNode{{Version: "0.9.0", Rating: permissions.Low}, {Version: "1.0.0+b1", Rating: permissions.Critical}},
		Edges: []apiv1.GraphEdge{{From: "0.9.0", To: "1.0.0+b1", Kind: apiv1.EdgeSemver, WidensPermissions: true}},
	}
	perms := &apiv1.Permissions{
		Namespace: "kudo", Name: "kafka", Version: "1.0.0+b1", From: "0.9.0",
		Review: &permissions.Review{Rating: permissions.High, Rules: []permissions.Rule{{Scope: permissions.Cluster, Rule: pkgformat.PolicyRule{Resources: []string{"secrets"}, Verbs: []string{"get"}}, Text: "get secrets, across the cluster"}}, Findings: []permissions.Finding{{Rating: permissions.High, Text: "may read Secrets across the cluster"}}},
		Change: &permissions.Change{From: permissions.Low, To: permissions.High, Added: []permissions.Grant{{Scope: permissions.Cluster, Resource: "secrets", Verb: "get"}}, Removed: []permissions.Grant{}, Widens: true, RatingWidens: true},
	}
	var mu sync.Mutex
	var requests []string
	server := catalogServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests = append(requests, r.URL.RequestURI())
		mu.Unlock()
		switch r.URL.Path {
		case "/api/v1/packages/kudo/kafka":
			writeDoc(w, http.StatusOK, pkg)
		case "/api/v1/packages/kudo/kafka/versions/1.0.0_b1":
			writeDoc(w, http.StatusOK, version)
		case "/api/v1/packages/kudo/kafka/upgrades":
			writeDoc(w, http.StatusOK, upgrades)
		case "/api/v1/packages/kudo/kafka/channels/stable/graph":
			writeDoc(w, http.StatusOK, graph)
		case "/api/v1/packages/kudo/kafka/versions/1.0.0_b1/permissions":
			writeDoc(w, http.StatusOK, perms)
		default:
			http.NotFound(w, r)
		}
	})
	ctx := context.Background()
	c := newTestCatalog(t, server, Options{})

	gotPkg, err := c.Package(ctx, "kudo", "kafka")
	if err != nil || !reflect.DeepEqual(gotPkg, pkg) {
		t.Errorf("Package = %+v, %v; want %+v", gotPkg, err, pkg)
	}
	for _, v := range []string{"1.0.0+b1", "1.0.0_b1"} {
		got, err := c.Version(ctx, "kudo", "kafka", v)
		if err != nil || !reflect.DeepEqual(got, version) {
			t.Errorf("Version(%q) = %+v, %v; want %+v", v, got, err, version)
		}
	}
	gotUp, err := c.Upgrades(ctx, "kudo", "kafka", "0.9.0", "stable")
	if err != nil || !reflect.DeepEqual(gotUp, upgrades) {
		t.Errorf("Upgrades = %+v, %v; want %+v", gotUp, err, upgrades)
	}
	if _, err := c.Upgrades(ctx, "kudo", "kafka", "0.9.0+1", ""); err != nil {
		t.Errorf("Upgrades without channel: %v", err)
	}
	gotGraph, err := c.Graph(ctx, "kudo", "kafka", "stable")
	if err != nil || !reflect.DeepEqual(gotGraph, graph) {
		t.Errorf("Graph = %+v, %v; want %+v", gotGraph, err, graph)
	}
	gotPerms, err := c.Permissions(ctx, "kudo", "kafka", "1.0.0+b1", "0.9.0")
	if err != nil || !reflect.DeepEqual(gotPerms, perms) {
		t.Errorf("Permissions = %+v, %v; want %+v", gotPerms, err, perms)
	}
	if _, err := c.Permissions(ctx, "kudo", "kafka", "1.0.0+b1", "../x"); !errors.Is(err, ErrInvalid) {
		t.Errorf("Permissions from a bad version: %v, want ErrInvalid", err)
	}
	want := []string{
		"/api/v1/packages/kudo/kafka",
		"/api/v1/packages/kudo/kafka/versions/1.0.0_b1",
		"/api/v1/packages/kudo/kafka/versions/1.0.0_b1",
		"/api/v1/packages/kudo/kafka/upgrades?channel=stable&from=0.9.0",
		"/api/v1/packages/kudo/kafka/upgrades?from=0.9.0%2B1",
		"/api/v1/packages/kudo/kafka/channels/stable/graph",
		"/api/v1/packages/kudo/kafka/versions/1.0.0_b1/permissions?from=0.9.0",
	}
	if !reflect.DeepEqual(requests, want) {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(requests, "\n"), strings.Join(want, "\n"))
	}
}

func TestCatalogErrors(t *testing.T) {
	apiError := func(status int, errs ...apiv1.Error) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) { writeDoc(w, status, apiv1.Errors{Errors: errs}) }
	}
	raw := func(status int, contentType, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			if contentType != "" {
				w.Header().Set("Content-Type", contentType)
			}
			w.WriteHeader(status)
			w.Write([]byte(body))
		}
	}
	tests := []struct {
		name    string
		handler http.HandlerFunc
		kind    error
		msg     string // the whole message; {url} stands for the endpoint's URL
	}{
		{"not found", apiError(404, apiv1.Error{Code: "NOT_FOUND", Message: "package kudo/kafka has no version 9.9.9"}),
			ErrNotFound, "kudo/kafka: not found: package kudo/kafka has no version 9.9.9"},
		{"invalid with detail", apiError(400, apiv1.Error{Code: "INVALID", Message: "bad limit", Detail: "want 1 to 500"}),
			ErrInvalid, "kudo/kafka: invalid: bad limit: want 1 to 500"},
		{"denied", apiError(403, apiv1.Error{Code: "DENIED", Message: "namespace kudo is private"}),
			ErrDenied, "kudo/kafka: denied: namespace kudo is private (log in as someone allowed to do this: berth login {host})"},
		{"unavailable", apiError(503, apiv1.Error{Code: "UNAVAILABLE", Message: "the catalog is starting"}),
			ErrUnavailable, "kudo/kafka: unavailable: the catalog is starting"},
		{"internal, two errors", apiError(500, apiv1.Error{Code: "INTERNAL", Message: "database is locked"}, apiv1.Error{Code: "INTERNAL"}),
			ErrRegistry, "kudo/kafka: registry error: database is locked; internal"},
		{"unknown code by status", apiError(401, apiv1.Error{Code: "UNAUTHORIZED", Message: "log in first"}),
			ErrUnauthorized, "kudo/kafka: unauthorized: log in first (run berth login {host})"},
		{"rate limited", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "42")
			writeDoc(w, http.StatusTooManyRequests, apiv1.Errors{Errors: []apiv1.Error{{Code: "TOO_MANY_REQUESTS", Message: "slow down"}}})
		}, ErrRateLimited, "kudo/kafka: too many failed logins, retry in 42s"},
		{"non-JSON 502", raw(502, "text/html; charset=utf-8", "<html>\n<body>\x1b[31mBad Gateway</body></html>"),
			ErrUnavailable, `kudo/kafka: unavailable: {url} answered 502 Bad Gateway with a text/html body, not a berth API error: "<html> <body> [31mBad Gateway</body></html>"`},
		{"non-JSON 404", raw(404, "text/plain", "404 page not found\n"),
			ErrRegistry, `kudo/kafka: registry error: {url} answered 404 Not Found with a text/plain body, not a berth API error: "404 page not found" (does this server run the berth catalog API?)`},
		{"empty 500", raw(500, "", ""),
			ErrRegistry, `kudo/kafka: registry error: {url} answered 500 Internal Server Error with an empty body, not a berth API error`},
		{"JSON without errors", raw(409, "application/json", `{"errors":[]}`),
			ErrRegistry, `kudo/kafka: registry error: {url} answered 409 Conflict with an application/json body, not a berth API error: "{\"errors\":[]}"`},
		{"200 that is not JSON", raw(200, "text/html", "<html>berth web UI</html>"),
			ErrRegistry, `kudo/kafka: registry error: {url} answered with a text/html body, not a berth catalog API document: invalid character '<' looking for beginning of value`},
		{"200 with trailing data", raw(200, "application/json", `{"name":"kafka"} {}`),
			ErrRegistry, `kudo/kafka: registry error: {url} answered with an application/json body, not a berth catalog API document: invalid character '{' after top-level value`},
		{"too large", func(w http.ResponseWriter, _ *http.Request) {
			w.Write([]byte(`{"name":"`))
			w.Write([]byte(strings.Repeat("x", maxCatalogResponse)))
			w.Write([]byte(`"}`))
		}, ErrTooLarge, "kudo/kafka: too large: the answer of {url} is larger than 32 MiB"},
		{"basic auth without credentials", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("WWW-Authenticate", `Basic realm="berth"`)
			w.WriteHeader(http.StatusUnauthorized)
		}, ErrUnauthorized, "kudo/kafka: unauthorized: http://{host}/api/v1 asks for credentials and none are stored for its host (run berth login {host})"},
		{"token refused", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/token" {
				writeDoc(w, http.StatusUnauthorized, apiv1.Errors{Errors: []apiv1.Error{{Code: "UNAUTHORIZED", Message: "anonymous access is disabled"}}})
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="http://`+r.Host+`/token",service="berth"`)
			w.WriteHeader(http.StatusUnauthorized)
		}, ErrUnauthorized, "kudo/kafka: unauthorized: anonymous access is disabled (UNAUTHORIZED, HTTP 401) (run berth login {host})"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			server := catalogServer(t, tt.handler)
			c := newTestCatalog(t, server, Options{})
			_, err := c.Package(context.Background(), "kudo", "kafka")
			if !errors.Is(err, tt.kind) {
				t.Errorf("error %v does not wrap %v", err, tt.kind)
			}
			msg := strings.NewReplacer("{url}", "http://"+server+"/api/v1/packages/kudo/kafka", "{host}", server).Replace(tt.msg)
			if err == nil || err.Error() != msg {
				t.Errorf("error:\n%v\nwant:\n%s", err, msg)
			}
		})
	}
}

func TestCatalogUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := ln.Addr().String()
	ln.Close()
	c := newTestCatalog(t, server, Options{})
	_, err = c.Search(context.Background(), SearchOptions{Query: "kafka"})
	want := "search: cannot reach the berth server at http://" + server + "/api/v1: dial tcp " + server + ": connect: connection refused"
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant:\n%s", err, want)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Package(ctx, "kudo", "kafka"); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
}

func TestCatalogInvalidArguments(t *testing.T) {
	server := catalogServer(t, func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("unexpected request %s", r.URL)
	})
	c := newTestCatalog(t, server, Options{})
	ctx := context.Background()
	tests := []struct {
		call func() error
		want string
	}{
		{func() error { _, err := c.Package(ctx, "Kudo", "kafka"); return err }, `Kudo/kafka: invalid: namespace "Kudo" must be lower case`},
		{func() error { _, err := c.Package(ctx, "kudo", ""); return err }, `kudo/: invalid: empty name`},
		{func() error { _, err := c.Package(ctx, "kudo", "../x"); return err }, `kudo/../x: invalid: name "../x" is not a valid OCI path component`},
		{func() error { _, err := c.Version(ctx, "kudo", "kafka", "1.0/0"); return err }, `kudo/kafka: invalid: version "1.0/0" is not a valid tag`},
		{func() error { _, err := c.Version(ctx, "kudo", "kafka", ""); return err }, `kudo/kafka: invalid: version is empty`},
		{func() error { _, err := c.Upgrades(ctx, "kudo", "kafka", "", ""); return err }, `kudo/kafka: invalid: from: version is empty`},
		{func() error { _, err := c.Upgrades(ctx, "kudo", "kafka x", "1.0.0", ""); return err }, `kudo/kafka x: invalid: name "kafka x" is not a valid OCI path component`},
	}
	for _, tt := range tests {
		err := tt.call()
		if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("error %v, want ErrInvalid starting %q", err, tt.want)
		}
	}
}

func TestCatalogSearchAll(t *testing.T) {
	summary := func(name string) apiv1.PackageSummary {
		return apiv1.PackageSummary{Namespace: "ns", Name: name, Version: "1.0.0", Format: pkgformat.Helm}
	}
	facets := apiv1.Facets{Format: map[string]int{"helm": 5}}
	pages := map[string]apiv1.SearchResponse{
		"":   {Packages: []apiv1.PackageSummary{summary("a"), summary("b")}, Facets: facets, Total: 5, Next: "p2"},
		"p2": {Packages: []apiv1.PackageSummary{summary("b"), summary("c"), summary("d")}, Facets: facets, Total: 5, Next: "p3"},
		"p3": {Packages: []apiv1.PackageSummary{summary("e")}, Facets: facets, Total: 5},
		// Broken servers.
		"loop":  {Packages: []apiv1.PackageSummary{summary("a")}, Next: "loop"},
		"empty": {Packages: []apiv1.PackageSummary{}, Next: "more"},
	}
	var queries []string
	server := catalogServer(t, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		queries = append(queries, q.Encode())
		writeDoc(w, http.StatusOK, pages[q.Get("cursor")])
	})
	c := newTestCatalog(t, server, Options{})
	ctx := context.Background()

	res, err := c.SearchAll(ctx, SearchOptions{Format: pkgformat.Helm, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range res.Packages {
		names = append(names, p.Name)
	}
	if strings.Join(names, " ") != "a b c d e" || res.Total != 5 || res.Next != "" || !reflect.DeepEqual(res.Facets, facets) {
		t.Errorf("SearchAll = %v, total %d, next %q, facets %v", names, res.Total, res.Next, res.Facets)
	}
	wantQueries := []string{"format=helm&limit=3", "cursor=p2&format=helm&limit=3", "cursor=p3&format=helm&limit=3"}
	if !reflect.DeepEqual(queries, wantQueries) {
		t.Errorf("queries %q, want %q", queries, wantQueries)
	}

	for cursor, want := range map[string]string{
		"loop":  `search: registry error: http://` + server + `/api/v1 sent cursor "loop" twice`,
		"empty": `search: registry error: http://` + server + `/api/v1 sent an empty page with a next cursor`,
	} {
		_, err := c.SearchAll(ctx, SearchOptions{Cursor: cursor})
		if !errors.Is(err, ErrRegistry) || err.Error() != want {
			t.Errorf("SearchAll from %q: %v, want %s", cursor, err, want)
		}
	}
}

func TestCatalogInventory(t *testing.T) {
	d1, d2 := digest.FromString("one"), digest.FromString("two")
	taken := time.Date(2026, 11, 23, 18, 45, 11, 0, time.UTC)
	doc := func(v any) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/api/v1/inventory" || r.Method != http.MethodGet {
				t.Errorf("%s %s", r.Method, r.URL.Path)
			}
			writeDoc(w, http.StatusOK, v)
		}
	}
	for _, tc := range []struct {
		name        string
		handler     http.HandlerFunc
		want        map[string][]digest.Digest
		kind        error // the error wraps it; nil: no error
		unsupported bool  // the error wraps errors.ErrUnsupported
	}{
		{"inventory", doc(apiv1.Inventory{MediaType: apiv1.InventoryMediaType, Taken: taken, Repositories: map[string][]digest.Digest{"a/b": {d1, d2}, "c/d": {}}}),
			map[string][]digest.Digest{"a/b": {d1, d2}, "c/d": {}}, nil, false},
		{"nothing pullable", doc(map[string]any{"mediaType": apiv1.InventoryMediaType, "taken": taken, "repositories": map[string]any{}}),
			map[string][]digest.Digest{}, nil, false},
		{"null repositories", doc(map[string]any{"mediaType": apiv1.InventoryMediaType, "taken": taken, "repositories": nil}),
			map[string][]digest.Digest{}, nil, false},
		{"plain registry", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte("404 page not found\n"))
		}, nil, ErrRegistry, true},
		{"berth without the endpoint", func(w http.ResponseWriter, _ *http.Request) {
			writeDoc(w, http.StatusNotFound, apiv1.Errors{Errors: []apiv1.Error{{Code: "NOT_FOUND", Message: "no endpoint /api/v1/inventory: not found"}}})
		}, nil, ErrNotFound, true},
		{"split mode", func(w http.ResponseWriter, _ *http.Request) {
			writeDoc(w, http.StatusNotImplemented, apiv1.Errors{Errors: []apiv1.Error{{Code: "NOT_IMPLEMENTED", Message: "berth serve catalog has no storage"}}})
		}, nil, ErrRegistry, true},
		{"denied", func(w http.ResponseWriter, _ *http.Request) {
			writeDoc(w, http.StatusForbidden, apiv1.Errors{Errors: []apiv1.Error{{Code: "DENIED", Message: "token expired"}}})
		}, nil, ErrDenied, false},
		{"internal", func(w http.ResponseWriter, _ *http.Request) {
			writeDoc(w, http.StatusInternalServerError, apiv1.Errors{Errors: []apiv1.Error{{Code: "INTERNAL", Message: "internal error"}}})
		}, nil, ErrRegistry, false},
		{"another document", doc(apiv1.Status{Packages: 3}), nil, ErrRegistry, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server := catalogServer(t, tc.handler)
			cl, err := New(Options{Credentials: credentials.NewMemoryStore(), HTTPClient: &http.Client{}})
			if err != nil {
				t.Fatal(err)
			}
			c, err := cl.Catalog(server)
			if err != nil {
				t.Fatal(err)
			}
			inv, err := c.Inventory(context.Background())
			if tc.kind == nil {
				if err != nil {
					t.Fatal(err)
				}
				if inv.MediaType != apiv1.InventoryMediaType || !inv.Taken.Equal(taken) || !reflect.DeepEqual(inv.Repositories, tc.want) {
					t.Errorf("inventory %+v, want repositories %v", inv, tc.want)
				}
				return
			}
			if !errors.Is(err, tc.kind) || errors.Is(err, errors.ErrUnsupported) != tc.unsupported {
				t.Errorf("error %v: wraps %v: %t, unsupported: %t; want %t, %t", err, tc.kind, errors.Is(err, tc.kind), errors.Is(err, errors.ErrUnsupported), true, tc.unsupported)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "inventory: ") {
				t.Errorf("error %q does not start with the operation", err)
			}
		})
	}
}
