package auth_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/httpapi"
	"github.com/berth-registry/berth/catalog/sqlite"
	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/pkgformat"
)

// testPolicy: alice owns a/*, bob owns b/*, reader pulls a/* but not
// a/aardvark-vault, anyone pulls pub/*, root administers everything.
func testPolicy(t testing.TB) *auth.Policy {
	t.Helper()
	p, err := auth.NewPolicy(&config.Auth{
		Public: []string{"pub"},
		Rules: []config.AuthRule{
			{Subjects: []string{"user:alice"}, Repositories: []string{"a/*"}, Actions: []string{"admin"}},
			{Subjects: []string{"user:bob"}, Repositories: []string{"b/*"}, Actions: []string{"admin"}},
			{Subjects: []string{"user:reader"}, Repositories: []string{"a/*"}, Actions: []string{"pull"}},
			{Subjects: []string{"user:reader"}, Repositories: []string{"a/aardvark-vault"}, Actions: []string{"pull"}, Effect: "deny"},
			{Subjects: []string{"user:root"}, Repositories: []string{"*/*"}, Actions: []string{"admin"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeAuthenticator takes "Authorization: Bearer SUBJECT" for the user
// SUBJECT; "Bearer bad" is bad credentials and "Bearer flood" rate limited.
type fakeAuthenticator struct{}

func (fakeAuthenticator) Authenticate(r *http.Request) (auth.Identity, error) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch {
	case !ok:
		return auth.AnonymousIdentity(), nil
	case tok == "bad":
		return auth.Identity{}, errors.Join(errors.New("no user mallory"), auth.ErrBadCredentials)
	case tok == "flood":
		return auth.Identity{}, &auth.RateLimitedError{RetryAfter: 1500 * time.Millisecond}
	case tok == "broken":
		return auth.Identity{}, errors.New("htpasswd file unreadable: /etc/secret")
	}
	return auth.Identity{Subject: "user:" + tok}, nil
}

// emptySource is a registry that holds nothing.
type emptySource struct{}

func (emptySource) Repositories(context.Context) ([]string, error) { return nil, nil }
func (emptySource) Tags(context.Context, string) ([]catalog.TagRef, error) {
	return nil, catalog.ErrNotFound
}
func (emptySource) Resolve(context.Context, string, string) (string, error) {
	return "", catalog.ErrNotFound
}
func (emptySource) Manifest(context.Context, string, string) (string, []byte, error) {
	return "", nil, catalog.ErrNotFound
}
func (emptySource) Blob(context.Context, string, string) (io.ReadCloser, error) {
	return nil, catalog.ErrNotFound
}
func (emptySource) Referrers(context.Context, string, string) ([]ocispec.Descriptor, error) {
	return nil, nil
}
func (emptySource) DeleteRepository(context.Context, string) error { return catalog.ErrNotFound }

func entry(ns, name, tag string, status string) *catalog.Entry {
	e := &catalog.Entry{
		Namespace: ns, Name: name, Tag: tag, Status: status, Indexed: time.Unix(1700000000, 0).UTC(),
		Digest: digest.FromString(ns + name + tag + status).String(),
	}
	if status != apiv1.StatusIndexed {
		e.Reason = "not a package"
		return e
	}
	e.Metadata = &pkgformat.Metadata{
		SchemaVersion: pkgformat.MetadataSchemaVersion, Name: name, Version: tag, Format: pkgformat.Helm,
		Description: "A package.", Channels: []pkgformat.Channel{{Name: "stable"}}, Files: []pkgformat.FileInfo{{Path: "Chart.yaml", Size: 10}},
	}
	e.Content = apiv1.Content{Digest: digest.FromString("content" + ns + name + tag).String(), Size: 100, MediaType: pkgformat.HelmChartContentMediaType}
	e.Files = []catalog.FileEntry{{Path: "Chart.yaml", Size: 10}}
	return e
}

// catalogAPI serves a catalog of a/aardvark, a/aardvark-vault, a/axolotl
// (not a package), b/bison, b/bobcat (not a package) and pub/puffin, but
// for the packages without, under testPolicy, behind auth.API.
func catalogAPI(t *testing.T, without ...string) http.Handler {
	t.Helper()
	h, _ := catalogAPIStore(t, without...)
	return h
}

// catalogAPIStore is catalogAPI, with the store it serves.
func catalogAPIStore(t *testing.T, without ...string) (http.Handler, *sqlite.Store) {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, t.TempDir()+"/catalog.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	for _, e := range []*catalog.Entry{
		entry("a", "aardvark", "1.0.0", apiv1.StatusIndexed), entry("a", "aardvark", "2.0.0", apiv1.StatusIndexed),
		entry("a", "aardvark-vault", "1.0.0", apiv1.StatusIndexed),
		entry("a", "axolotl", "latest", apiv1.StatusIgnored),
		entry("b", "bison", "1.0.0", apiv1.StatusIndexed), entry("b", "bison", "2.0.0", apiv1.StatusIndexed),
		entry("b", "bobcat", "latest", apiv1.StatusInvalid),
		entry("pub", "puffin", "1.0.0", apiv1.StatusIndexed),
	} {
		if slices.Contains(without, e.Namespace+"/"+e.Name) {
			continue
		}
		if _, err := store.Put(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	cat, err := catalog.New(catalog.Options{Store: store, Source: emptySource{}})
	if err != nil {
		t.Fatal(err)
	}
	p := testPolicy(t)
	api := httpapi.New(httpapi.Options{Catalog: cat, Authorizer: auth.CatalogAuthorizer{Policy: p}})
	return auth.API(auth.APIOptions{Authenticator: fakeAuthenticator{}, Policy: p})(api), store
}

type exchange struct {
	status int
	header http.Header
	body   string
}

func do(h http.Handler, method, target, subject string) exchange {
	req := httptest.NewRequest(method, "http://berth.example"+target, nil)
	if subject != "" {
		req.Header.Set("Authorization", "Bearer "+subject)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return exchange{rec.Code, rec.Result().Header, rec.Body.String()}
}

// TestCatalogHidesWhatCannotBePulled runs every read of the catalog API as
// subjects that see part of the catalog, and checks that no body or header
// names a package they may not pull, and that a hidden package answers as
// it would if it had never been created.
func TestCatalogHidesWhatCannotBePulled(t *testing.T) {
	h := catalogAPI(t)
	lists := []string{
		"/api/v1/packages", "/api/v1/packages?q=a", "/api/v1/packages?q=b", "/api/v1/packages?namespace=b",
		"/api/v1/packages?namespace=a&sort=updated", "/api/v1/packages?q=bison", "/api/v1/packages?q=aardvark",
		"/api/v1/changes", "/api/v1/artifacts", "/api/v1/artifacts?limit=1",
		"/index.yaml", "/a/index.yaml", "/b/index.yaml", "/api/helm/index.yaml", "/api/helm/a/index.yaml", "/api/helm/b/index.yaml",
	}
	// What each package path asks; %s is namespace/name.
	paths := []string{
		"/api/v1/packages/%s", "/api/v1/packages/%s/versions/1.0.0", "/api/v1/packages/%s/versions/1.0.0/files/Chart.yaml",
		"/api/v1/packages/%s/channels/stable/graph", "/api/v1/packages/%s/upgrades?from=1.0.0",
		"/api/helm/%s/NAME-1.0.0.tgz",
	}
	for _, tc := range []struct {
		subject string
		sees    []string // packages that must show in the full listing
		hidden  []string
	}{
		{"", []string{"pub/puffin"}, []string{"a/aardvark", "a/aardvark-vault", "a/axolotl", "b/bison", "b/bobcat"}},
		{"alice", []string{"a/aardvark", "a/aardvark-vault", "pub/puffin"}, []string{"b/bison", "b/bobcat"}},
		{"bob", []string{"b/bison", "pub/puffin"}, []string{"a/aardvark", "a/aardvark-vault", "a/axolotl"}},
		{"reader", []string{"a/aardvark", "pub/puffin"}, []string{"a/aardvark-vault", "b/bison", "b/bobcat"}},
	} {
		name := tc.subject
		if name == "" {
			name = "anonymous"
		}
		t.Run(name, func(t *testing.T) {
			hiddenRE := hiddenNames(tc.hidden)
			full := do(h, "GET", "/api/v1/packages", tc.subject)
			for _, p := range tc.sees {
				if !strings.Contains(full.body, `"name":"`+p[strings.Index(p, "/")+1:]+`"`) {
					t.Errorf("the listing lacks %s: %s", p, full.body)
				}
			}
			for _, target := range lists {
				res := do(h, "GET", target, tc.subject)
				if res.status != http.StatusOK {
					t.Errorf("GET %s: %d %s", target, res.status, res.body)
				}
				if leak := findLeak(hiddenRE, res); leak != "" {
					t.Errorf("GET %s names %s: %s", target, leak, res.body)
				}
			}
			never := catalogAPI(t, tc.hidden...)
			for _, hidden := range tc.hidden {
				for _, path := range paths {
					target := packagePath(path, hidden)
					if got, want := do(h, "GET", target, tc.subject), do(never, "GET", target, tc.subject); !sameAnswer(got, want) {
						t.Errorf("GET %s: %d %q %v\nnever created: %d %q %v", target, got.status, got.body, got.header, want.status, want.body, want.header)
					}
				}
				target := packagePath(paths[0], hidden)
				if got, want := do(h, "DELETE", target, tc.subject), do(never, "DELETE", target, tc.subject); got.status/100 != 4 || !sameAnswer(got, want) {
					t.Errorf("DELETE %s: %d %q; never created: %d %q", target, got.status, got.body, want.status, want.body)
				}
			}
		})
	}
}

func packagePath(format, pkg string) string {
	_, name, _ := strings.Cut(pkg, "/")
	return strings.ReplaceAll(strings.Replace(format, "%s", pkg, 1), "NAME", name)
}

// hiddenNames matches the names of the packages hidden, as whole names.
func hiddenNames(pkgs []string) *regexp.Regexp {
	var alts []string
	for _, p := range pkgs {
		_, name, _ := strings.Cut(p, "/")
		alts = append(alts, regexp.QuoteMeta(name))
	}
	return regexp.MustCompile(`(^|[^a-z0-9-])(` + strings.Join(alts, "|") + `)($|[^a-z0-9-])`)
}

// findLeak returns a hidden name the exchange holds in its body or headers.
func findLeak(re *regexp.Regexp, res exchange) string {
	if m := re.FindStringSubmatch(res.body); m != nil {
		return m[2]
	}
	for k, vs := range res.header {
		for _, v := range vs {
			if m := re.FindStringSubmatch(k + ": " + v); m != nil {
				return m[2]
			}
		}
	}
	return ""
}

// sameAnswer reports whether two exchanges are the same.
func sameAnswer(got, want exchange) bool {
	return got.status == want.status && got.body == want.body && reflect.DeepEqual(got.header, want.header)
}

func TestCatalogAuthorizer(t *testing.T) {
	p := testPolicy(t)
	ctxOf := func(subject string) context.Context {
		return auth.WithIdentity(context.Background(), auth.Identity{Subject: subject})
	}
	a := auth.CatalogAuthorizer{Policy: p}
	for _, tc := range []struct {
		subject, ns, name string
		pull              bool
		deleteErr         error
	}{
		{"user:alice", "a", "x", true, nil},
		{"user:alice", "b", "x", false, catalog.ErrNotFound},
		{"user:reader", "a", "x", true, catalog.ErrDenied},
		{"user:reader", "a", "aardvark-vault", false, catalog.ErrNotFound},
		{"user:root", "zz", "x", true, nil},
		{"anonymous", "pub", "x", true, catalog.ErrDenied},
		{"anonymous", "a", "x", false, catalog.ErrNotFound},
	} {
		access, err := a.Pullable(ctxOf(tc.subject))
		if err != nil {
			t.Fatal(err)
		}
		if got := access.Allows(tc.ns, tc.name); got != tc.pull {
			t.Errorf("%s: Allows(%s/%s) = %v, want %v", tc.subject, tc.ns, tc.name, got, tc.pull)
		}
		err = a.MayDelete(ctxOf(tc.subject), tc.ns, tc.name)
		if tc.deleteErr == nil && err != nil || tc.deleteErr != nil && !errors.Is(err, tc.deleteErr) {
			t.Errorf("%s: MayDelete(%s/%s) = %v, want %v", tc.subject, tc.ns, tc.name, err, tc.deleteErr)
		}
		// Every subject here that may delete administers, so approves too.
		by, err := a.MayApprove(ctxOf(tc.subject), tc.ns, tc.name)
		if tc.deleteErr == nil && (err != nil || by != tc.subject) || tc.deleteErr != nil && !errors.Is(err, tc.deleteErr) {
			t.Errorf("%s: MayApprove(%s/%s) = %q, %v, want %v", tc.subject, tc.ns, tc.name, by, err, tc.deleteErr)
		}
	}
	deleter, err := auth.NewPolicy(&config.Auth{Rules: []config.AuthRule{{Subjects: []string{"user:dan"}, Repositories: []string{"a/*"}, Actions: []string{"pull", "push", "delete"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (auth.CatalogAuthorizer{Policy: deleter}).MayApprove(ctxOf("user:dan"), "a", "x"); !errors.Is(err, catalog.ErrDenied) {
		t.Errorf("one who may push and delete but not administer approves: %v", err)
	}
	for _, tc := range []struct {
		a       auth.CatalogAuthorizer
		subject string
		want    error
	}{
		{auth.CatalogAuthorizer{Policy: deleter}, "user:dan", nil},
		{a, "user:reader", catalog.ErrDenied},
		{a, "anonymous", catalog.ErrNotFound},
	} {
		if err := tc.a.MayPush(ctxOf(tc.subject), "a", "x"); tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: MayPush(a/x) = %v, want %v", tc.subject, err, tc.want)
		}
	}
	if access, _ := a.Pullable(ctxOf("user:root")); !access.All {
		t.Errorf("root's access is not All")
	}
	alice, _ := a.Pullable(ctxOf("user:alice"))
	bob, _ := a.Pullable(ctxOf("user:bob"))
	if alice.Key == "" || alice.Key == bob.Key {
		t.Errorf("keys of alice %q and bob %q", alice.Key, bob.Key)
	}
	if access, _ := (auth.CatalogAuthorizer{}).Pullable(ctxOf("anonymous")); !access.All {
		t.Error("a nil policy does not allow everything")
	}
	if err := (auth.CatalogAuthorizer{}).MayDelete(ctxOf("anonymous"), "a", "x"); err != nil {
		t.Errorf("a nil policy refuses a delete: %v", err)
	}
}
