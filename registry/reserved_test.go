package registry

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/distribution/distribution/v3"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/olm"
)

// putInProcess stores an image manifest of one layer under tag in repo
// through the registry's namespace, as berth writes what it generates, and
// returns the manifest's descriptor and the layer's.
func putInProcess(t *testing.T, reg *Registry, repo, tag string, layer []byte) (manifest, blob ocispec.Descriptor) {
	t.Helper()
	ctx := context.Background()
	r := repository(t, reg, repo)
	config, err := r.Blobs(ctx).Put(ctx, ocispec.MediaTypeImageConfig, []byte(`{}`))
	if err != nil {
		t.Fatalf("in-process config blob into %s: %v", repo, err)
	}
	blob, err = r.Blobs(ctx).Put(ctx, ocispec.MediaTypeImageLayer, layer)
	if err != nil {
		t.Fatalf("in-process layer blob into %s: %v", repo, err)
	}
	m := ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest, Config: config, Layers: []ocispec.Descriptor{blob}}
	m.SchemaVersion = 2
	payload, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	mf, desc, err := distribution.UnmarshalManifest(ocispec.MediaTypeImageManifest, payload)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := r.Manifests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ms.Put(ctx, mf, distribution.WithTag(tag)); err != nil {
		t.Fatalf("in-process manifest push to %s:%s: %v", repo, tag, err)
	}
	if err := r.Tags(ctx).Tag(ctx, tag, desc); err != nil {
		t.Fatalf("in-process tag %s:%s: %v", repo, tag, err)
	}
	return desc, blob
}

// TestCatalogRepositoryIsWrittenByBerthAlone refuses every client write into
// a namespace's OLM catalog repository, without auth, and serves its reads;
// berth's own writes through the namespace go through, and the
// repositories beside it are not reserved.
func TestCatalogRepositoryIsWrittenByBerthAlone(t *testing.T) {
	reg := newRegistry(t, Options{})
	repo := olm.CatalogRepository("team")
	putInProcess(t, reg, repo, olm.CatalogTag, []byte("catalog layer v1"))
	// Again, as every rebuild of the catalog re-points its tag.
	mf, layer := putInProcess(t, reg, repo, olm.CatalogTag, []byte("catalog layer v2"))
	other := putBlob(t, reg, "team/app", ocispec.MediaTypeImageLayer, []byte("a package's layer"))
	m := ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest, Config: layer, Layers: []ocispec.Descriptor{layer}}
	m.SchemaVersion = 2
	image, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	mount := "?" + url.Values{"mount": {other.Digest.String()}, "from": {"team/app"}}.Encode()
	uploads := "/v2/" + repo + "/blobs/uploads/"
	upload := uploads + "0d6a3a6e-5d46-4a3c-9d1f-0d9f3b1c8f7e?_state=x"

	for _, tc := range []struct {
		method, target string
		body           []byte
	}{
		{http.MethodPost, uploads, nil},
		{http.MethodPost, uploads + mount, nil},
		{http.MethodPost, uploads + "?digest=" + digest.FromString("x").String(), []byte("x")},
		{http.MethodGet, upload, nil},
		{http.MethodPatch, upload, []byte("x")},
		{http.MethodPut, upload + "&digest=" + digest.FromString("x").String(), []byte("x")},
		{http.MethodDelete, upload, nil},
		{http.MethodPut, "/v2/" + repo + "/manifests/" + olm.CatalogTag, image},
		{http.MethodPut, "/v2/" + repo + "/manifests/other", image},
		{http.MethodPut, "/v2/" + repo + "/manifests/" + digest.FromBytes(image).String(), image},
		{http.MethodDelete, "/v2/" + repo + "/manifests/" + olm.CatalogTag, nil},
		{http.MethodDelete, "/v2/" + repo + "/manifests/" + mf.Digest.String(), nil},
		{http.MethodDelete, "/v2/" + repo + "/blobs/" + layer.Digest.String(), nil},
		{http.MethodPost, "/v2/" + repo + "/manifests/" + olm.CatalogTag, image},
	} {
		resp := do(reg, tc.method, tc.target, ocispec.MediaTypeImageManifest, tc.body)
		body, _ := io.ReadAll(resp.Body)
		var e ociErrors
		_ = json.Unmarshal(body, &e)
		if resp.StatusCode != http.StatusForbidden || len(e.Errors) != 1 || e.Errors[0].Code != "DENIED" ||
			!strings.Contains(e.Errors[0].Message, "team/olm/catalog is namespace team's OLM catalog, which berth generates") ||
			!strings.Contains(e.Errors[0].Message, "docs/olm.md") {
			t.Errorf("%s %s = %s %s, want 403 DENIED naming team's OLM catalog", tc.method, tc.target, resp.Status, body)
		}
	}

	for _, tc := range []struct {
		method, target string
	}{
		{http.MethodGet, "/v2/" + repo + "/manifests/" + olm.CatalogTag},
		{http.MethodHead, "/v2/" + repo + "/manifests/" + olm.CatalogTag},
		{http.MethodGet, "/v2/" + repo + "/manifests/" + mf.Digest.String()},
		{http.MethodGet, "/v2/" + repo + "/blobs/" + layer.Digest.String()},
		{http.MethodHead, "/v2/" + repo + "/blobs/" + layer.Digest.String()},
		{http.MethodGet, "/v2/" + repo + "/tags/list"},
		{http.MethodGet, "/v2/" + repo + "/referrers/" + mf.Digest.String()},
		{http.MethodGet, "/v2/_catalog"},
	} {
		req := httptest.NewRequest(tc.method, tc.target, nil)
		req.Header.Set("Accept", ocispec.MediaTypeImageManifest)
		w := httptest.NewRecorder()
		reg.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Errorf("%s %s = %d %s, want 200", tc.method, tc.target, w.Code, w.Body)
		}
	}
	srv := httptest.NewServer(reg)
	defer srv.Close()
	if d := tagDigest(t, srv.URL, repo, olm.CatalogTag); d != mf.Digest {
		t.Errorf("after the refused writes, %s:%s = %s, want berth's %s", repo, olm.CatalogTag, d, mf.Digest)
	}

	// A mount from the catalog repository is a read of it: without auth, allowed.
	w := do(reg, http.MethodPost, "/v2/team/app/blobs/uploads/?"+url.Values{"mount": {layer.Digest.String()}, "from": {repo}}.Encode(), "", nil)
	if w.StatusCode != http.StatusCreated {
		t.Errorf("mount of %s from %s into team/app = %s, want 201", layer.Digest, repo, w.Status)
	}
	// A package named olm would hold the catalog in its path: no push.
	resp := do(reg, http.MethodPost, "/v2/team/olm/blobs/uploads/", "", nil)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), `team/olm: package name \"olm\" is reserved: \u003cnamespace\u003e/olm/catalog is the namespace's OLM catalog image`) {
		t.Errorf("upload start into team/olm = %s %s, want 403 saying the name olm is reserved", resp.Status, body)
	}
	// Only a namespace's catalog repository and the package name olm are reserved.
	for _, r := range []string{"team/catalog", "olm/catalog", "team/olm/catalogs", "team/olm/catalog/x", "a/team/olm/catalog"} {
		if w := do(reg, http.MethodPost, "/v2/"+r+"/blobs/uploads/", "", nil); w.StatusCode != http.StatusAccepted {
			t.Errorf("upload start into %s = %s, want 202", r, w.Status)
		}
	}
}

func TestReservedWrite(t *testing.T) {
	const d = "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	catalog := olm.CatalogRepository("team")
	for _, tc := range []struct {
		route  Route
		method string
		refuse bool
	}{
		{Route{Kind: RouteUploadStart, Repository: catalog}, http.MethodPost, true},
		{Route{Kind: RouteUpload, Repository: catalog, Reference: "u"}, http.MethodGet, true},
		{Route{Kind: RouteUpload, Repository: catalog, Reference: "u"}, http.MethodPatch, true},
		{Route{Kind: RouteManifest, Repository: catalog, Reference: "latest"}, http.MethodPut, true},
		{Route{Kind: RouteManifest, Repository: catalog, Reference: d}, http.MethodDelete, true},
		{Route{Kind: RouteManifest, Repository: catalog, Reference: "latest"}, http.MethodPatch, true},
		{Route{Kind: RouteBlob, Repository: catalog, Reference: d}, http.MethodDelete, true},
		{Route{Kind: RouteManifest, Repository: catalog, Reference: "latest"}, http.MethodGet, false},
		{Route{Kind: RouteManifest, Repository: catalog, Reference: "latest"}, http.MethodHead, false},
		{Route{Kind: RouteBlob, Repository: catalog, Reference: d}, http.MethodGet, false},
		{Route{Kind: RouteTags, Repository: catalog}, http.MethodGet, false},
		{Route{Kind: RouteReferrers, Repository: catalog, Reference: d}, http.MethodGet, false},
		{Route{Kind: RouteReferrers, Repository: catalog, Reference: d}, http.MethodPut, false},
		{Route{Kind: RouteManifest, Repository: "team/catalog", Reference: "latest"}, http.MethodPut, false},
		{Route{Kind: RouteManifest, Repository: "Team/olm/catalog", Reference: "latest"}, http.MethodPut, false},
		// A package named olm would hold the catalog in its path: no
		// push, but the delete of one stored before.
		{Route{Kind: RouteUploadStart, Repository: "team/olm"}, http.MethodPost, true},
		{Route{Kind: RouteManifest, Repository: "team/olm", Reference: "1.0.0"}, http.MethodPut, true},
		{Route{Kind: RouteManifest, Repository: "team/olm", Reference: d}, http.MethodDelete, false},
		{Route{Kind: RouteBlob, Repository: "team/olm", Reference: d}, http.MethodDelete, false},
		{Route{Kind: RouteManifest, Repository: "team/olm", Reference: "1.0.0"}, http.MethodGet, false},
		{Route{Kind: RouteUploadStart, Repository: "team/olmx"}, http.MethodPost, false},
		{Route{Kind: RouteUploadStart, Repository: "olm/app"}, http.MethodPost, false},
		{Route{Kind: RouteCatalog}, http.MethodGet, false},
		{Route{}, http.MethodDelete, false},
	} {
		err := ReservedWrite(tc.route, tc.method)
		if (err != nil) != tc.refuse {
			t.Errorf("ReservedWrite(%+v, %s) = %v, want refused %v", tc.route, tc.method, err, tc.refuse)
		}
	}
}
