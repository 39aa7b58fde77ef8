package httpapi_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/httpapi"
	"github.com/berth-registry/berth/catalog/sqlite"
	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/olm"
	"github.com/berth-registry/berth/pkgformat"
)

// imageDigest is the digest the image fixtures pin.
var imageDigest = "sha256:" + strings.Repeat("d", 64)

// realCatalog is a catalog on a SQLite store holding olm/etcd 1.0.0, which
// runs three images and has an OLM bundle image; its source reads nothing.
func realCatalog(t *testing.T) *catalog.Catalog {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	e := &catalog.Entry{
		Namespace: "olm", Name: "etcd", Tag: "1.0.0", Digest: "sha256:" + strings.Repeat("e", 64),
		Status: apiv1.StatusIndexed, Indexed: t0,
		Metadata: &pkgformat.Metadata{
			SchemaVersion: pkgformat.MetadataSchemaVersion, Name: "etcd", Version: "1.0.0", Format: pkgformat.OLM,
			Images: []pkgformat.Image{
				{Reference: "docker.io/library/busybox:1.36", Found: []string{"CSV deployment etcd-operator, init container wait"}, Mutable: true},
				{Reference: "quay.io/org/etcd-operator@" + imageDigest, Found: []string{"CSV spec.relatedImages (operator)"}},
				{Reference: "quay.io/org/etcd@@x", Found: []string{"CSV spec.relatedImages (etcd)"}, Problem: "not a reference"},
			},
			ImagesIncomplete: "a container names its image by a value the defaults leave empty",
		},
		Content: apiv1.Content{Digest: "sha256:" + strings.Repeat("c", 64), Size: 10, MediaType: pkgformat.ContentMediaType},
		OLM:     &olm.BundleRecord{Digest: "sha256:" + strings.Repeat("b", 64), Name: "etcd.v1.0.0"},
	}
	if _, err := store.Put(ctx, e); err != nil {
		t.Fatal(err)
	}
	src, err := catalog.NewRemoteSource("http://127.0.0.1:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.New(catalog.Options{Store: store, Source: src, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// adminHeader makes the test's admin gate let a request through.
const adminHeader = "X-Test-Admin"

// testGate is an admin gate that admits requests with adminHeader.
func testGate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(adminHeader) == "" {
			http.Error(w, "not admin", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func TestVersionImages(t *testing.T) {
	cat := realCatalog(t)
	h := httpapi.New(httpapi.Options{Catalog: cat, Logger: slog.New(slog.DiscardHandler), Admin: testGate})
	body := `{"mirrors": [{"source": "quay.io/org", "mirror": "berth.example/mirror/org"}, {"source": "docker.io", "mirror": "berth.example/hub"}]}`
	if res := serve(t, h, "PUT", "/api/v1/image-mirrors", []byte(body), "Content-Type", "application/json", adminHeader, "1"); res.status != 200 {
		t.Fatalf("PUT image mirrors: %d %s", res.status, res.body)
	}
	res := serve(t, h, "GET", "/api/v1/packages/olm/etcd/versions/1.0.0/images", nil)
	if res.status != 200 {
		t.Fatalf("GET images: %d %s", res.status, res.body)
	}
	var got apiv1.VersionImages
	res.decode(t, &got)
	want := []apiv1.VersionImage{
		{Reference: "berth.example/olm/etcd@sha256:" + strings.Repeat("b", 64), Repository: "berth.example/olm/etcd",
			Digest: "sha256:" + strings.Repeat("b", 64), Found: []string{catalog.BundleImageFound}},
		{Reference: "docker.io/library/busybox:1.36", Repository: "docker.io/library/busybox", Tag: "1.36", Mutable: true,
			Found: []string{"CSV deployment etcd-operator, init container wait"}, Mirror: "berth.example/hub/library/busybox:1.36"},
		{Reference: "quay.io/org/etcd-operator@" + imageDigest, Repository: "quay.io/org/etcd-operator", Digest: imageDigest,
			Found: []string{"CSV spec.relatedImages (operator)"}, Mirror: "berth.example/mirror/org/etcd-operator@" + imageDigest},
		{Reference: "quay.io/org/etcd@@x", Found: []string{"CSV spec.relatedImages (etcd)"}, Problem: "not a reference"},
	}
	if fmt.Sprint(got.Images) != fmt.Sprint(want) {
		t.Errorf("images\n got %+v\nwant %+v", got.Images, want)
	}
	if got.Incomplete == "" || got.Version != "1.0.0" {
		t.Errorf("version %q incomplete %q, want 1.0.0 and the reason", got.Version, got.Incomplete)
	}

	// Access is as the version's: forbidden is answered as unknown.
	hidden := httpapi.New(httpapi.Options{Catalog: cat, Authorizer: fakeAuth{access: catalog.NamespaceAccess("kudo")}})
	for _, target := range []string{"/api/v1/packages/olm/etcd/versions/1.0.0/images", "/api/v1/packages/olm/etcd/versions/1.0.0/installable"} {
		if res := serve(t, hidden, "GET", target, nil); res.status != 404 {
			t.Errorf("%s without access: %d, want 404", target, res.status)
		}
	}
	if res := serve(t, h, "GET", "/api/v1/packages/olm/etcd/versions/2.0.0/images", nil); res.status != 404 {
		t.Errorf("images of an unknown version: %d, want 404", res.status)
	}
}

func TestSearchByImage(t *testing.T) {
	h := httpapi.New(httpapi.Options{Catalog: realCatalog(t), Logger: slog.New(slog.DiscardHandler)})
	for _, tc := range []struct {
		image string
		total int
	}{
		{"quay.io/org/etcd-operator", 1},
		{"quay.io/org/etcd-operator@" + imageDigest, 1},
		{"quay.io/org/etcd-operator:latest", 0},
		{"busybox", 1},
		{"busybox:1.36", 1},
		{"busybox:1.35", 0},
		{"quay.io/org", 0},
		{"quay.io/org/etcd", 0}, // named only by a reference that does not parse
	} {
		res := serve(t, h, "GET", "/api/v1/packages?image="+tc.image, nil)
		var sr apiv1.SearchResponse
		res.decode(t, &sr)
		if res.status != 200 || sr.Total != tc.total {
			t.Errorf("image=%s: %d, total %d, want %d", tc.image, res.status, sr.Total, tc.total)
		}
	}
}

func TestSearchByImageRefusesBadReferences(t *testing.T) {
	h := newHandler(newFake(), nil, nil)
	for _, image := range []string{"quay.io/org/img@@x", "Quay.io/ORG/img", "img:", "quay.io/org/img@sha256:short", strings.Repeat("a", 600), "a b"} {
		res := serve(t, h, "GET", "/api/v1/packages?image="+strings.ReplaceAll(image, " ", "%20"), nil)
		if res.status != 400 {
			t.Errorf("image=%q: %d, want 400", image, res.status)
			continue
		}
		if e := res.apiError(t); e.Code != "INVALID" || !strings.Contains(e.Message, "image") {
			t.Errorf("image=%q: %+v, want INVALID naming the parameter", image, e)
		}
	}
}

func TestPutImageMirrorsRefusesBadDocuments(t *testing.T) {
	many := func(n int) string {
		var b strings.Builder
		b.WriteString(`{"mirrors": [`)
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"source": "quay.io/many/r%d", "mirror": "localhost:5000/m"}`, i)
		}
		b.WriteString("]}")
		return b.String()
	}
	for _, tc := range []struct {
		name, body  string
		contentType string
		status      int
		message     string // contained in the error's message
	}{
		{"not a full name", `{"mirrors": [{"source": "org/img", "mirror": "localhost:5000/x"}]}`, "", 400, "mirrors[0].source"},
		{"host alone without a dot", `{"mirrors": [{"source": "nginx", "mirror": "localhost:5000/x"}]}`, "", 400, "mirrors[0].source"},
		{"tag in the source", `{"mirrors": [{"source": "quay.io/a", "mirror": "localhost:5000/a"}, {"source": "quay.io/org/img:1.0", "mirror": "localhost:5000/x"}]}`, "", 400, "mirrors[1].source"},
		{"url as mirror", `{"mirrors": [{"source": "quay.io/org", "mirror": "https://mirror.example/x"}]}`, "", 400, "mirrors[0].mirror"},
		{"empty mirror", `{"mirrors": [{"source": "quay.io/org", "mirror": ""}]}`, "", 400, "mirrors[0].mirror"},
		{"source twice", `{"mirrors": [{"source": "quay.io/a", "mirror": "localhost:5000/a"}, {"source": "quay.io/a", "mirror": "localhost:5000/b"}]}`, "", 400, "mirrors[1].source"},
		{"unknown field", `{"mirrors": [{"source": "quay.io/a", "mirror": "localhost:5000/a", "priority": 1}]}`, "", 400, "priority"},
		{"not JSON", `mirrors: []`, "", 400, "the body must be"},
		{"two documents", `{"mirrors": []} {"mirrors": []}`, "", 400, "more than one document"},
		{"too many", many(catalog.MaxImageMirrors + 1), "", 400, "limit"},
		{"too large", `{"mirrors": [], "pad": "` + strings.Repeat("x", 7_000_000) + `"}`, "", 413, "larger than"},
		{"not JSON media type", `{"mirrors": []}`, "text/plain", 415, "application/json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := httpapi.New(httpapi.Options{Catalog: realCatalog(t), Logger: slog.New(slog.DiscardHandler), Admin: testGate})
			ct := tc.contentType
			if ct == "" {
				ct = "application/json"
			}
			res := serve(t, h, "PUT", "/api/v1/image-mirrors", []byte(tc.body), "Content-Type", ct, adminHeader, "1")
			if res.status != tc.status {
				t.Fatalf("status %d, want %d: %s", res.status, tc.status, res.body)
			}
			if e := res.apiError(t); !strings.Contains(e.Message, tc.message) {
				t.Errorf("message %q does not contain %q", e.Message, tc.message)
			}
			// Nothing of a refused document is recorded.
			var ms apiv1.ImageMirrors
			serve(t, h, "GET", "/api/v1/image-mirrors", nil).decode(t, &ms)
			if len(ms.Mirrors) != 0 {
				t.Errorf("mirrors recorded after a refusal: %v", ms.Mirrors)
			}
		})
	}
}

// TestImageMirrorsAuth runs the endpoints behind berth's own auth: any
// caller the catalog API answers may read them, only an administrator of
// everything write them.
func TestImageMirrorsAuth(t *testing.T) {
	policy, err := auth.NewPolicy(&config.Auth{Rules: []config.AuthRule{
		{Subjects: []string{"user:reader"}, Repositories: []string{"a/*"}, Actions: []string{"pull"}},
		{Subjects: []string{"user:owner"}, Repositories: []string{"a/*"}, Actions: []string{"admin"}},
		{Subjects: []string{"user:root"}, Repositories: []string{"*/*"}, Actions: []string{"admin"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	api := auth.API(auth.APIOptions{Authenticator: bearerSubject{}, Policy: policy})
	h := api(httpapi.New(httpapi.Options{
		Catalog: realCatalog(t), Authorizer: auth.CatalogAuthorizer{Policy: policy}, Logger: slog.New(slog.DiscardHandler),
		Admin: auth.AdminGate(policy, "recording image mirrors is for administrators"),
	}))
	body := []byte(`{"mirrors": [{"source": "quay.io/org", "mirror": "localhost:5000/mirror/org"}]}`)
	for _, tc := range []struct {
		method, user string
		status       int
	}{
		{"PUT", "", 401},
		{"PUT", "reader", 403},
		{"PUT", "owner", 403}, // admin of a namespace, not of everything
		{"PUT", "root", 200},
		{"GET", "reader", 200},
		{"GET", "", 200}, // the list names registries, no package
	} {
		header := []string{"Content-Type", "application/json"}
		if tc.user != "" {
			header = append(header, "Authorization", "Bearer "+tc.user)
		}
		var b []byte
		if tc.method == "PUT" {
			b = body
		}
		res := serve(t, h, tc.method, "/api/v1/image-mirrors", b, header...)
		if res.status != tc.status {
			t.Errorf("%s as %q: %d, want %d: %s", tc.method, tc.user, res.status, tc.status, res.body)
		}
		if tc.status == 200 && !strings.Contains(string(res.body), `"localhost:5000/mirror/org"`) {
			t.Errorf("%s as %q: %s, want the mirror", tc.method, tc.user, res.body)
		}
	}

	// Without an admin gate nobody may record mirrors.
	open := httpapi.New(httpapi.Options{Catalog: realCatalog(t)})
	if res := serve(t, open, "PUT", "/api/v1/image-mirrors", body, "Content-Type", "application/json"); res.status != 501 {
		t.Errorf("PUT without an admin gate: %d, want 501", res.status)
	}
}

// bearerSubject authenticates "Authorization: Bearer NAME" as user NAME.
type bearerSubject struct{}

func (bearerSubject) Authenticate(r *http.Request) (auth.Identity, error) {
	name, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return auth.AnonymousIdentity(), nil
	}
	return auth.Identity{Subject: "user:" + name, Expires: time.Now().Add(time.Hour)}, nil
}
