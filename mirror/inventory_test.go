package mirror

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry/remote/credentials"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/httpapi"
	"github.com/berth-registry/berth/catalog/sqlite"
	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/client/registrytest"
	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/server"
	"github.com/berth-registry/berth/storage"
)

var invQuiet = slog.New(slog.DiscardHandler)

// invBerth starts berth's registry on in-memory storage and serves it
// twice: as berth serve does, with the catalog API and its inventory
// route (full), and as a registry alone, whose /api/v1/ answers 404
// (bare). wrap, when not nil, wraps the bare server's handler.
func invBerth(t *testing.T, wrap func(http.Handler) http.Handler) (full, bare string) {
	t.Helper()
	ctx := context.Background()
	reg, err := registry.New(ctx, registry.Options{Storage: &storage.Config{Driver: "inmemory"}, HTTPSecret: "test", Logger: invQuiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	cat, err := catalog.New(catalog.Options{Store: store, Source: catalog.NewDistributionSource(reg.Namespace(), reg.Referrers, reg.UntagDangling), Logger: invQuiet})
	if err != nil {
		t.Fatal(err)
	}
	serve := func(h http.Handler) string {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "http://")
	}
	api := httpapi.New(httpapi.Options{Catalog: cat, Inventory: reg, Logger: invQuiet})
	full = serve(server.New(server.Options{Registry: reg, Catalog: api, Logger: invQuiet}).Handler())
	var h http.Handler = server.New(server.Options{Registry: reg, Logger: invQuiet}).Handler()
	if wrap != nil {
		h = wrap(h)
	}
	return full, serve(h)
}

func invClient(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.New(client.Options{Credentials: credentials.NewMemoryStore(), HTTPClient: &http.Client{}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// invPusher pushes test content to one registry and records what each
// repository must then hold.
type invPusher struct {
	t    *testing.T
	c    *client.Client
	host string
	want map[string]map[digest.Digest]bool
}

func (p *invPusher) push(repo, tag, mediaType string, data []byte) ocispec.Descriptor {
	p.t.Helper()
	desc := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}
	r := p.c.Repository(p.host, repo)
	var err error
	if tag != "" {
		err = r.PushReference(context.Background(), desc, bytes.NewReader(data), tag)
	} else {
		err = r.Push(context.Background(), desc, bytes.NewReader(data))
	}
	if err != nil {
		p.t.Fatalf("push %s to %s: %v", desc.Digest, repo, err)
	}
	if p.want[repo] == nil {
		p.want[repo] = map[digest.Digest]bool{}
	}
	p.want[repo][desc.Digest] = true
	return desc
}

func (p *invPusher) blob(repo, data string) ocispec.Descriptor {
	return p.push(repo, "", ocispec.MediaTypeImageLayer, []byte(data))
}

func (p *invPusher) manifest(repo, tag string, config ocispec.Descriptor, subject *ocispec.Descriptor, artifactType string, layers ...ocispec.Descriptor) ocispec.Descriptor {
	p.t.Helper()
	config.MediaType = ocispec.MediaTypeImageConfig
	if artifactType != "" {
		config.MediaType = ocispec.MediaTypeEmptyJSON
	}
	b, err := json.Marshal(ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		ArtifactType: artifactType, Config: config, Layers: layers, Subject: subject,
	})
	if err != nil {
		p.t.Fatal(err)
	}
	return p.push(repo, tag, ocispec.MediaTypeImageManifest, b)
}

func (p *invPusher) index(repo, tag string, manifests ...ocispec.Descriptor) ocispec.Descriptor {
	p.t.Helper()
	b, err := json.Marshal(ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: manifests})
	if err != nil {
		p.t.Fatal(err)
	}
	return p.push(repo, tag, ocispec.MediaTypeImageIndex, b)
}

// wanted is what each repository must hold, as an inventory lists it.
func (p *invPusher) wanted() map[string][]digest.Digest {
	out := map[string][]digest.Digest{}
	for repo, set := range p.want {
		out[repo] = slices.Sorted(maps.Keys(set))
	}
	return out
}

// invFixture pushes to host, in kudo/kafka: an image tagged 1.0.0, its
// cosign signature under sha256-<hex>.sig, a referrer of it pushed by
// digest and a referrer of that referrer, and an index tagged multi over
// the image and a second, untagged image (with a non-distributable layer
// when foreign is set: distribution refuses them unless configured to take
// them, as berth is); in olm/etcd an image tagged 0.9.4 sharing a layer
// with kafka's.
func invFixture(t *testing.T, c *client.Client, host string, foreign bool) *invPusher {
	t.Helper()
	p := &invPusher{t: t, c: c, host: host, want: map[string]map[digest.Digest]bool{}}
	const kafka, etcd = "kudo/kafka", "olm/etcd"
	shared := p.blob(kafka, "shared layer")
	img := p.manifest(kafka, "1.0.0", p.blob(kafka, `{"kafka":1}`), nil, "", shared)
	p.manifest(kafka, "sha256-"+img.Digest.Encoded()+".sig", p.blob(kafka, `{"sig":1}`), nil, "", p.blob(kafka, "signature"))
	empty := p.blob(kafka, "{}")
	sbom := p.manifest(kafka, "", empty, &img, "application/vnd.example.sbom", p.blob(kafka, "sbom"))
	p.manifest(kafka, "", empty, &sbom, "application/vnd.example.sbom.sig", p.blob(kafka, "sbom signature"))
	layers := []ocispec.Descriptor{p.blob(kafka, "layer two")}
	if foreign {
		layers = append(layers, ocispec.Descriptor{
			MediaType: ocispec.MediaTypeImageLayerNonDistributableGzip, //nolint:staticcheck // a non-distributable layer on purpose
			Digest:    digest.FromString("elsewhere"), Size: 9, URLs: []string{"https://example.com/layer"},
		})
	}
	img2 := p.manifest(kafka, "", p.blob(kafka, `{"kafka":2}`), nil, "", layers...)
	p.index(kafka, "multi", img, img2)

	p.push(etcd, "", ocispec.MediaTypeImageLayer, []byte("shared layer"))
	p.manifest(etcd, "0.9.4", p.blob(etcd, `{"etcd":1}`), nil, "", shared)
	return p
}

func TestTakeInventoryBerthAndWalkAgree(t *testing.T) {
	c := invClient(t)
	full, bare := invBerth(t, nil)
	want := invFixture(t, c, full, true).wanted()

	for _, tc := range []struct{ name, host string }{{"berth route", full}, {"walk", bare}} {
		t.Run(tc.name, func(t *testing.T) {
			var seen []int
			before := time.Now().Add(-time.Second)
			inv, err := TakeInventory(context.Background(), c, tc.host, func(n int) { seen = append(seen, n) })
			if err != nil {
				t.Fatal(err)
			}
			if inv.MediaType != InventoryMediaType || inv.Registry != tc.host || inv.Taken.Before(before) {
				t.Errorf("inventory %s, taken %s", inv.Registry, inv.Taken)
			}
			if !maps.EqualFunc(inv.Repositories, want, slices.Equal) {
				t.Errorf("repositories\n got %v\nwant %v", inv.Repositories, want)
			}
			if len(seen) == 0 || seen[len(seen)-1] != len(want) {
				t.Errorf("progress %v, want it to end at %d", seen, len(want))
			}
		})
	}
}

func TestTakeInventoryWalksPlainRegistry(t *testing.T) {
	c := invClient(t)
	host := registrytest.New(t, nil)
	p := invFixture(t, c, host, false)
	// distribution has no referrers API: oras-go indexed the referrers
	// under the tags of the referrers tag schema (sha256-<hex>), indexes
	// that the walk finds too.
	r := c.Repository(host, "kudo/kafka")
	fallbacks := 0
	err := r.Tags(context.Background(), "", func(tags []string) error {
		for _, tag := range tags {
			if len(tag) != len("sha256-")+64 || !strings.HasPrefix(tag, "sha256-") {
				continue
			}
			desc, err := r.Resolve(context.Background(), tag)
			if err != nil {
				return err
			}
			p.want["kudo/kafka"][desc.Digest] = true
			fallbacks++
		}
		return nil
	})
	if err != nil || fallbacks != 2 {
		t.Fatalf("%d referrers tags (%v), want those of the image and of its referrer", fallbacks, err)
	}
	want := p.wanted()
	inv, err := TakeInventory(context.Background(), c, host, nil)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Registry != host || !maps.EqualFunc(inv.Repositories, want, slices.Equal) {
		t.Errorf("inventory of %s\n got %v\nwant %v", inv.Registry, inv.Repositories, want)
	}
}

// TestTakeInventoryRouteSeesUntagged checks the documented difference: the
// berth route lists what the storage holds, the walk what tags reach.
func TestTakeInventoryRouteSeesUntagged(t *testing.T) {
	c := invClient(t)
	full, bare := invBerth(t, nil)
	p := &invPusher{t: t, c: c, host: full, want: map[string]map[digest.Digest]bool{}}
	layer := p.blob("olm/etcd", "layer")
	tagged := p.manifest("olm/etcd", "1.0.0", p.blob("olm/etcd", `{"v":1}`), nil, "", layer)
	untagged := p.manifest("olm/etcd", "", p.blob("olm/etcd", `{"v":2}`), nil, "", layer)
	fromRoute, err := TakeInventory(context.Background(), c, full, nil)
	if err != nil {
		t.Fatal(err)
	}
	walked, err := TakeInventory(context.Background(), c, bare, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := fromRoute.Repositories["olm/etcd"]; !slices.Contains(r, untagged.Digest) || !slices.Contains(r, tagged.Digest) {
		t.Errorf("the route lists %v, want the untagged manifest %s too", r, untagged.Digest)
	}
	if w := walked.Repositories["olm/etcd"]; slices.Contains(w, untagged.Digest) || !slices.Contains(w, tagged.Digest) {
		t.Errorf("the walk lists %v, want %s and not the untagged %s", w, tagged.Digest, untagged.Digest)
	}
}

func TestTakeInventoryDoesNotWalkWhenRefused(t *testing.T) {
	var walked atomic.Int32
	host := registrytest.New(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/api/v1/inventory" {
				w.Header().Set("Content-Type", apiv1.MediaTypeJSON)
				w.WriteHeader(http.StatusForbidden)
				json.NewEncoder(w).Encode(apiv1.Errors{Errors: []apiv1.Error{{Code: "DENIED", Message: "token expired"}}})
				return
			}
			walked.Add(1)
			next.ServeHTTP(w, r)
		})
	})
	_, err := TakeInventory(context.Background(), invClient(t), host, nil)
	if !errors.Is(err, client.ErrDenied) || !strings.Contains(err.Error(), host) {
		t.Errorf("error %v, want one naming %s and wrapping ErrDenied", err, host)
	}
	if walked.Load() != 0 {
		t.Errorf("%d requests to /v2/ after the route refused", walked.Load())
	}
}

func TestTakeInventoryBoundsRequests(t *testing.T) {
	var inFlight, most atomic.Int32
	_, bare := invBerth(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(2 * time.Millisecond)
			next.ServeHTTP(w, r)
		})
	})
	c := invClient(t)
	p := &invPusher{t: t, c: c, host: bare, want: map[string]map[digest.Digest]bool{}}
	for i := range 12 {
		repo := fmt.Sprintf("ns/r%02d", i)
		config := p.blob(repo, "{}")
		for j := range 3 {
			p.manifest(repo, fmt.Sprintf("1.0.%d", j), config, nil, "", p.blob(repo, fmt.Sprintf("layer %d %d", i, j)))
		}
	}
	most.Store(0)
	inv, err := TakeInventory(context.Background(), c, bare, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.EqualFunc(inv.Repositories, p.wanted(), slices.Equal) {
		t.Errorf("repositories\n got %v\nwant %v", inv.Repositories, p.wanted())
	}
	if m := most.Load(); m > invConcurrency || m < 2 {
		t.Errorf("at most %d requests in flight, want 2..%d", m, invConcurrency)
	}
}

func TestTakeInventoryCapsManifests(t *testing.T) {
	c := invClient(t)
	huge := bytes.Repeat([]byte(" "), client.MaxManifestSize+1)
	huge[0] = '{'
	huge[len(huge)-1] = '}'
	_, bare := invBerth(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v2/big/huge/manifests/1.0.0" && r.Method == http.MethodGet {
				w.Header().Set("Content-Type", ocispec.MediaTypeImageManifest)
				w.Header().Set("Docker-Content-Digest", digest.FromBytes(huge).String())
				w.Header().Set("Content-Length", fmt.Sprint(len(huge)))
				w.Write(huge)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	p := &invPusher{t: t, c: c, host: bare, want: map[string]map[digest.Digest]bool{}}
	p.manifest("big/huge", "1.0.0", p.blob("big/huge", "{}"), nil, "", p.blob("big/huge", "layer"))
	_, err := TakeInventory(context.Background(), c, bare, nil)
	if !errors.Is(err, client.ErrTooLarge) || !strings.Contains(err.Error(), "big/huge") {
		t.Errorf("error %v, want ErrTooLarge naming big/huge", err)
	}
}

func TestTakeInventoryUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	host := strings.TrimPrefix(srv.URL, "http://")
	srv.Close()
	if _, err := TakeInventory(context.Background(), invClient(t), host, nil); err == nil || !strings.Contains(err.Error(), host) {
		t.Errorf("error %v, want one naming %s", err, host)
	}
}

const (
	invD1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	invD2 = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

func TestReadInventory(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string
		want map[string][]digest.Digest
		err  []string // the error contains each
	}{
		{"valid", `{"mediaType":"` + InventoryMediaType + `","registry":"r.example","taken":"2026-11-23T18:45:11Z","repositories":{"a/b":["` + invD1 + `"],"c/d":[]}}`,
			map[string][]digest.Digest{"a/b": {invD1}, "c/d": {}}, nil},
		{"unknown fields tolerated", `{"mediaType":"` + InventoryMediaType + `","taken":"2026-11-23T18:45:11Z","repositories":{"a/b":["` + invD1 + `"]},"future":{"x":1}}`,
			map[string][]digest.Digest{"a/b": {invD1}}, nil},
		{"digests ordered", `{"mediaType":"` + InventoryMediaType + `","repositories":{"a/b":["` + invD2 + `","` + invD1 + `","` + invD2 + `"]}}`,
			map[string][]digest.Digest{"a/b": {invD1, invD2}}, nil},
		{"no repositories", `{"mediaType":"` + InventoryMediaType + `"}`, map[string][]digest.Digest{}, nil},
		{"not JSON", "repositories: {}\n", nil, []string{"not an inventory document"}},
		{"trailing data", `{"mediaType":"` + InventoryMediaType + `"} {}`, nil, []string{"not an inventory document"}},
		{"wrong media type", `{"mediaType":"application/vnd.berth.mirror.manifest.v1+json","repositories":{}}`, nil, []string{"mediaType", ManifestMediaType, InventoryMediaType}},
		{"no media type", `{"repositories":{"a/b":[]}}`, nil, []string{`mediaType ""`}},
		{"bad digest", `{"mediaType":"` + InventoryMediaType + `","repositories":{"a/b":["` + invD1 + `"],"c/d":["sha256:xyz"]}}`, nil, []string{"repository c/d", `"sha256:xyz"`}},
		{"bad repository", `{"mediaType":"` + InventoryMediaType + `","repositories":{"A/B":["` + invD1 + `"]}}`, nil, []string{`repository "A/B"`}},
		{"digests not a list", `{"mediaType":"` + InventoryMediaType + `","repositories":{"a/b":"` + invD1 + `"}}`, nil, []string{"not an inventory document"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "inv.json")
			if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			inv, d, err := ReadInventory(path)
			if tc.err != nil {
				if err == nil {
					t.Fatalf("read %+v, want an error", inv)
				}
				for _, s := range append(tc.err, path) {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not contain %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d != digest.FromString(tc.file) {
				t.Errorf("digest %s, want the file's %s", d, digest.FromString(tc.file))
			}
			if !maps.EqualFunc(inv.Repositories, tc.want, slices.Equal) {
				t.Errorf("repositories %v, want %v", inv.Repositories, tc.want)
			}
		})
	}
	if _, _, err := ReadInventory(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestWriteInventory(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "inv.json")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	inv := &Inventory{Registry: "r.example:5000", Taken: time.Date(2026, 11, 23, 18, 45, 11, 0, time.UTC), Repositories: map[string][]digest.Digest{
		"a/b": {invD2, invD1}, "c/d": nil,
	}}
	d, err := WriteInventory(path, inv)
	if err != nil {
		t.Fatal(err)
	}
	if inv.MediaType != "" || !slices.Equal(inv.Repositories["a/b"], []digest.Digest{invD2, invD1}) {
		t.Errorf("WriteInventory changed its argument: %+v", inv)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if d != digest.FromBytes(data) || !bytes.HasSuffix(data, []byte("}\n")) || !bytes.Contains(data, []byte("\n  \"repositories\": {")) {
		t.Errorf("wrote %s (digest %s)", data, d)
	}
	got, rd, err := ReadInventory(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]digest.Digest{"a/b": {invD1, invD2}, "c/d": {}}
	if rd != d || got.MediaType != InventoryMediaType || got.Registry != inv.Registry || !got.Taken.Equal(inv.Taken) || !maps.EqualFunc(got.Repositories, want, slices.Equal) {
		t.Errorf("read back %+v (digest %s), want %v (digest %s)", got, rd, want, d)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left in the directory: %v", entries)
	}

	for name, bad := range map[string]*Inventory{
		"wrong media type": {MediaType: ManifestMediaType},
		"bad digest":       {Repositories: map[string][]digest.Digest{"a/b": {"sha256:xyz"}}},
	} {
		if _, err := WriteInventory(path, bad); err == nil {
			t.Errorf("%s: written", name)
		}
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(again, data) {
		t.Errorf("a refused write changed the file: %s", again)
	}
	if _, err := WriteInventory(filepath.Join(dir, "missing", "inv.json"), inv); err == nil {
		t.Error("written into a missing directory")
	}
}

func TestInventoryOf(t *testing.T) {
	created := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	m := &Manifest{MediaType: ManifestMediaType, Source: "src.example", Created: created, Versions: []Version{
		{Repository: "kudo/kafka", Tag: "1.0.0", Digest: invD1, Needs: []digest.Digest{invD2, invD1}},
		{Repository: "kudo/kafka", Tag: "1.1.0", Digest: invD2, Needs: []digest.Digest{invD2}},
		{Repository: "olm/etcd", Tag: "0.9.4", Digest: invD1, Needs: []digest.Digest{invD1}},
	}}
	inv := InventoryOf(m)
	want := map[string][]digest.Digest{"kudo/kafka": {invD1, invD2}, "olm/etcd": {invD1}}
	if inv.MediaType != InventoryMediaType || inv.Registry != "" || !inv.Taken.Equal(created) || !maps.EqualFunc(inv.Repositories, want, slices.Equal) {
		t.Errorf("InventoryOf = %+v, want repositories %v taken %s", inv, want, created)
	}
	if empty := InventoryOf(&Manifest{}); empty.Repositories == nil || len(empty.Repositories) != 0 {
		t.Errorf("InventoryOf(empty) = %+v", empty)
	}
	path := filepath.Join(t.TempDir(), "inv.json")
	if _, err := WriteInventory(path, inv); err != nil {
		t.Errorf("the inventory of an archive cannot be written: %v", err)
	}
}
