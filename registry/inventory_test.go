package registry

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/distribution/distribution/v3"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/storage"
)

// takeInventory collects what Registry.Inventory reports, failing the test
// if a repository comes twice or its digests are not ordered and unique.
func takeInventory(t *testing.T, reg *Registry, allow func(string) bool) map[string][]digest.Digest {
	t.Helper()
	got := map[string][]digest.Digest{}
	var order []string
	err := reg.Inventory(context.Background(), allow, func(repo string, ds []digest.Digest) error {
		if _, dup := got[repo]; dup {
			t.Errorf("repository %s reported twice", repo)
		}
		if !slices.IsSorted(ds) || len(slices.Compact(slices.Clone(ds))) != len(ds) {
			t.Errorf("%s: digests not ordered and unique: %v", repo, ds)
		}
		got[repo] = ds
		order = append(order, repo)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.IsSorted(order) {
		t.Errorf("repositories reported in the order %v", order)
	}
	return got
}

// inventoryFixture pushes to reg:
//
//	a/one: an image tagged 1.0.0 (config, layer), a referrer of it pushed
//	  by digest, an index tagged multi over the image and a second image
//	  (config, layer2), and a manifest that is then deleted;
//	a/two: an image tagged 1.0.0 with the same config and layer as a/one's;
//	b/three: an image tagged 2.0.0 of its own config and layer.
//
// It returns what each repository must hold.
func inventoryFixture(t *testing.T, h http.Handler) map[string][]digest.Digest {
	t.Helper()
	want := map[string][]digest.Digest{}

	b := pushBlobs(t, h, "a/one")
	img := mustPut(t, h, "a/one", "1.0.0", b.image(nil, "", "", nil))
	ref := mustPut(t, h, "a/one", "", b.image(&img, "application/vnd.example.sig", "", nil))
	layer2 := putBlob(t, h, "a/one", ocispec.MediaTypeImageLayer, []byte("layer two"))
	second := b.image(nil, "", "", nil)
	second.Layers = []ocispec.Descriptor{layer2}
	img2 := mustPut(t, h, "a/one", "", second)
	idx := mustPut(t, h, "a/one", "multi", ocispec.Index{
		Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{img, img2},
	})
	gone := mustPut(t, h, "a/one", "gone", b.image(nil, "", "", map[string]string{"gone": "yes"}))
	if resp := do(h, http.MethodDelete, "/v2/a/one/manifests/"+gone.Digest.String(), "", nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delete %s: %s", gone.Digest, resp.Status)
	}
	want["a/one"] = digestSet(b.config.Digest, b.emptyConfig.Digest, b.layer.Digest, layer2.Digest, img.Digest, ref.Digest, img2.Digest, idx.Digest)

	b2 := pushBlobs(t, h, "a/two")
	img = mustPut(t, h, "a/two", "1.0.0", b2.image(nil, "", "", nil))
	want["a/two"] = digestSet(b2.config.Digest, b2.emptyConfig.Digest, b2.layer.Digest, img.Digest)

	config := putBlob(t, h, "b/three", ocispec.MediaTypeImageConfig, []byte(`{"b":3}`))
	layer := putBlob(t, h, "b/three", ocispec.MediaTypeImageLayer, []byte("layer three"))
	img = mustPut(t, h, "b/three", "2.0.0", ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		Config: config, Layers: []ocispec.Descriptor{layer},
	})
	want["b/three"] = digestSet(config.Digest, layer.Digest, img.Digest)
	return want
}

// digestSet returns ds ordered and without duplicates, as an inventory lists them.
func digestSet(ds ...digest.Digest) []digest.Digest {
	return slices.Compact(sorted(ds...))
}

func TestInventory(t *testing.T) {
	for name, cfg := range map[string]func(t *testing.T) *storage.Config{
		"inmemory":   func(*testing.T) *storage.Config { return nil },
		"filesystem": func(t *testing.T) *storage.Config { return onDisk(t.TempDir()) },
	} {
		t.Run(name, func(t *testing.T) {
			reg := newRegistry(t, Options{Storage: cfg(t)})
			if got := takeInventory(t, reg, nil); len(got) != 0 {
				t.Errorf("empty registry: %v", got)
			}
			want := inventoryFixture(t, reg)
			if got := takeInventory(t, reg, nil); !maps.EqualFunc(got, want, slices.Equal) {
				t.Errorf("inventory\n got %v\nwant %v", got, want)
			}
			if !slices.ContainsFunc(want["a/two"], func(d digest.Digest) bool { return slices.Contains(want["a/one"], d) }) {
				t.Fatal("the fixture shares no blob between a/one and a/two")
			}

			onlyA := func(repo string) bool { return strings.HasPrefix(repo, "a/") }
			got := takeInventory(t, reg, onlyA)
			delete(want, "b/three")
			if !maps.EqualFunc(got, want, slices.Equal) {
				t.Errorf("inventory of a/*\n got %v\nwant %v", got, want)
			}
			if got := takeInventory(t, reg, func(string) bool { return false }); len(got) != 0 {
				t.Errorf("inventory allowing nothing: %v", got)
			}
		})
	}
}

// openingNamespace records the repositories opened through it.
type openingNamespace struct {
	distribution.Namespace
	opened []string
}

func (n *openingNamespace) Repository(ctx context.Context, name reference.Named) (distribution.Repository, error) {
	n.opened = append(n.opened, name.Name())
	return n.Namespace.Repository(ctx, name)
}

func TestInventoryReadsOnlyAllowedRepositories(t *testing.T) {
	reg := newRegistry(t, Options{})
	inventoryFixture(t, reg)
	ns := &openingNamespace{Namespace: reg.Namespace()}
	var reported []string
	err := inventory(context.Background(), ns, func(repo string) bool { return repo == "a/two" }, func(repo string, _ []digest.Digest) error {
		reported = append(reported, repo)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(reported, []string{"a/two"}) || !slices.Equal(ns.opened, []string{"a/two"}) {
		t.Errorf("reported %v, opened %v; want only a/two", reported, ns.opened)
	}
}

func TestInventoryPagesThroughRepositories(t *testing.T) {
	reg := newRegistry(t, Options{})
	b := pushBlobs(t, reg, "ns/r000")
	var want []string
	for i := range inventoryPage + 5 {
		repo := fmt.Sprintf("ns/r%03d", i)
		if i > 0 {
			// mount the blobs, as a client pushing the same content would
			for _, d := range []ocispec.Descriptor{b.config, b.layer} {
				if resp := do(reg, http.MethodPost, "/v2/"+repo+"/blobs/uploads/?from=ns/r000&mount="+d.Digest.String(), "", nil); resp.StatusCode != http.StatusCreated {
					t.Fatalf("mount into %s: %s", repo, resp.Status)
				}
			}
		}
		mustPut(t, reg, repo, "1.0.0", ocispec.Manifest{
			Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
			Config: b.config, Layers: []ocispec.Descriptor{b.layer},
		})
		want = append(want, repo)
	}
	got := takeInventory(t, reg, nil)
	if repos := slices.Sorted(maps.Keys(got)); !slices.Equal(repos, want) {
		t.Fatalf("%d repositories, want %d: %v", len(repos), len(want), repos)
	}
	for _, repo := range want[1:] {
		if len(got[repo]) != 3 || !slices.Contains(got[repo], b.layer.Digest) {
			t.Errorf("%s holds %v, want the mounted config and layer and the manifest", repo, got[repo])
		}
	}
}

func TestInventoryStopsAtCallbackError(t *testing.T) {
	reg := newRegistry(t, Options{})
	inventoryFixture(t, reg)
	stop := errors.New("stop")
	calls := 0
	err := reg.Inventory(context.Background(), nil, func(string, []digest.Digest) error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("err %v after %d calls, want stop after 1", err, calls)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := reg.Inventory(ctx, nil, func(string, []digest.Digest) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

func TestGuardedManifestsEnumerate(t *testing.T) {
	reg := newRegistry(t, Options{})
	b := pushBlobs(t, reg, "a/one")
	img := mustPut(t, reg, "a/one", "1.0.0", b.image(nil, "", "", nil))
	named, _ := reference.WithName("a/one")
	repo, err := reg.Namespace().Repository(context.Background(), named)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := repo.Manifests(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, guarded := ms.(*guardedManifests); !guarded {
		t.Fatalf("manifest service %T is not the guard's", ms)
	}
	var got []digest.Digest
	if err := ms.(distribution.ManifestEnumerator).Enumerate(context.Background(), func(d digest.Digest) error {
		got = append(got, d)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []digest.Digest{img.Digest}) {
		t.Errorf("enumerated %v, want %v", got, img.Digest)
	}
}
