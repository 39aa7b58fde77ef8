package auth

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/distribution/distribution/v3"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/olm"
	"github.com/berth-registry/berth/registry"
)

// generatedLayer is the layer of the images putGenerated stores, in no
// other repository.
const generatedLayer = "configs layer"

// putGenerated stores an image under tag in repo in process, through the
// registry's namespace, as berth writes a namespace's OLM catalog.
func putGenerated(t *testing.T, reg *registry.Registry, repo, tag string) {
	t.Helper()
	ctx := context.Background()
	named, err := reference.WithName(repo)
	if err != nil {
		t.Fatal(err)
	}
	r, err := reg.Namespace().Repository(ctx, named)
	if err != nil {
		t.Fatal(err)
	}
	m := ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest}
	m.SchemaVersion = 2
	for i, b := range [][]byte{[]byte(`{}`), []byte(generatedLayer)} {
		d, err := r.Blobs(ctx).Put(ctx, ocispec.MediaTypeImageLayer, b)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			d.MediaType, m.Config = ocispec.MediaTypeImageConfig, d
		} else {
			m.Layers = append(m.Layers, d)
		}
	}
	payload, _ := json.Marshal(m)
	mf, desc, err := distribution.UnmarshalManifest(m.MediaType, payload)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := r.Manifests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ms.Put(ctx, mf); err != nil {
		t.Fatal(err)
	}
	if err := r.Tags(ctx).Tag(ctx, tag, desc); err != nil {
		t.Fatal(err)
	}
}

// TestRegistryOLMCatalog serves a namespace's OLM catalog to those who may
// pull every package of the namespace, lists it only to them, lets no one
// write it, whatever they may do elsewhere, and mounts nothing from it for
// those who may not pull it.
func TestRegistryOLMCatalog(t *testing.T) {
	e := newEnv(t)
	repo := olm.CatalogRepository("a")
	putGenerated(t, e.raw, repo, olm.CatalogTag)

	// Reads: those with pull on a/* (users, robots, signers, admins).
	for _, tc := range []struct {
		who       string
		want      int
		challenge string // the scope a 401 asks for
	}{
		{alice, http.StatusOK, ""},
		{puller, http.StatusOK, ""},
		{pusher, http.StatusOK, ""},
		{signer, http.StatusOK, ""},
		{admin, http.StatusOK, ""},
		{bob, http.StatusForbidden, ""},
		{anonymous, http.StatusUnauthorized, "repository:a/olm/catalog:pull"},
		// alice may pull it, but her token grants a/app alone.
		{"alice-pull-token", http.StatusUnauthorized, "repository:a/olm/catalog:pull"},
		{"alice-catalog-token", http.StatusUnauthorized, "repository:a/olm/catalog:pull"},
	} {
		for _, path := range []string{"/manifests/" + olm.CatalogTag, "/tags/list"} {
			w := do(e.gate, tc.who, http.MethodGet, "/v2/"+repo+path, "", nil)
			if w.Code != tc.want || tc.challenge != "" && !strings.Contains(w.Header().Get("WWW-Authenticate"), `scope="`+tc.challenge+`"`) {
				t.Errorf("%q: GET %s%s = %d %q %s, want %d %s", tc.who, repo, path, w.Code, w.Header().Get("WWW-Authenticate"), w.Body, tc.want, tc.challenge)
			}
		}
	}
	if !strings.Contains(e.audit.String(), "a/olm/catalog is namespace a's OLM catalog: pull needs pull on every package of a; the rules do not let user:bob (groups team-b) pull every package of a") {
		t.Errorf("bob's refused pull is not audited with the catalog's rule:\n%s", e.audit)
	}

	// Writes: no one, with 403 DENIED naming the rule, even anonymous
	// callers, whom logging in would not help.
	blob := e.blobs["a/app"].layer.Digest.String()
	manifest, _ := json.Marshal(e.image("a/app", nil))
	for _, tc := range []struct {
		method, path string
		body         []byte
	}{
		{http.MethodPost, "/blobs/uploads/", nil},
		{http.MethodPost, "/blobs/uploads/?" + url.Values{"mount": {blob}, "from": {"a/app"}}.Encode(), nil},
		{http.MethodPatch, "/blobs/uploads/0d6a3a6e-5d46-4a3c-9d1f-0d9f3b1c8f7e", []byte("x")},
		{http.MethodPut, "/manifests/" + olm.CatalogTag, manifest},
		{http.MethodPut, "/manifests/sha256-" + e.blobs["a/app"].version.Digest.Encoded() + ".sig", manifest},
		{http.MethodDelete, "/manifests/" + olm.CatalogTag, nil},
		{http.MethodDelete, "/blobs/" + blob, nil},
	} {
		for _, who := range []string{admin, alice, pusher, signer, bob, anonymous, "alice-b-token"} {
			w := do(e.gate, who, tc.method, "/v2/"+repo+tc.path, ocispec.MediaTypeImageManifest, tc.body)
			if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), `"DENIED"`) ||
				!strings.Contains(w.Body.String(), "a/olm/catalog is namespace a's OLM catalog, which berth generates") {
				t.Errorf("%q: %s %s%s = %d %s, want 403 DENIED naming a's OLM catalog", who, tc.method, repo, tc.path, w.Code, w.Body)
			}
		}
	}
	if w := do(e.gate, admin, http.MethodGet, "/v2/"+repo+"/tags/list", "", nil); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `["latest"]`) {
		t.Errorf("after the refused writes, %s tags = %d %s, want latest alone", repo, w.Code, w.Body)
	}

	// A mount from it is a pull of it: bob's is ignored, admin's mounts.
	mount := "?" + url.Values{"mount": {digest.FromString(generatedLayer).String()}, "from": {repo}}.Encode()
	for who, want := range map[string]int{bob: http.StatusAccepted, admin: http.StatusCreated} {
		if w := do(e.gate, who, http.MethodPost, "/v2/b/new/blobs/uploads/"+mount, "", nil); w.Code != want {
			t.Errorf("%s: mount from %s into b/new = %d %s, want %d", who, repo, w.Code, w.Body, want)
		}
	}

	// Listing: only those who may pull it see it.
	for _, tc := range []struct {
		who   string
		repos []string
	}{
		{alice, []string{"a/app", repo}},
		{puller, []string{"a/app", repo}},
		{"alice-catalog-token", []string{"a/app", repo}},
		{bob, []string{"b/app"}},
		{admin, []string{"a/app", repo, "b/app"}},
	} {
		w := do(e.gate, tc.who, http.MethodGet, "/v2/_catalog", "", nil)
		var got struct{ Repositories []string }
		_ = json.Unmarshal(w.Body.Bytes(), &got)
		if w.Code != http.StatusOK || !slices.Equal(got.Repositories, tc.repos) {
			t.Errorf("%q: GET /v2/_catalog = %d %s, want %v", tc.who, w.Code, w.Body, tc.repos)
		}
	}
}
