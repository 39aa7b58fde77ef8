package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/pkgformat"
)

// withImages sets the images of an entry, each reference as written.
func withImages(refs ...string) func(*catalog.Entry) {
	return func(e *catalog.Entry) {
		for _, r := range refs {
			e.Metadata.Images = append(e.Metadata.Images, pkgformat.Image{Reference: r, Found: []string{"test"}})
		}
	}
}

// imageDigest is the digest the image fixtures of the suite pin.
var imageDigest = digestOf("image")

func testImageSearch(t *testing.T, h *harness) {
	h.put(
		pkg("a", "etcd", "1.0.0", withImages("quay.io/org/etcd:3.5", "quay.io/org/etcd-operator@"+imageDigest)),
		pkg("a", "etcd", "2.0.0", withImages("quay.io/org/etcd:3.6")),
		pkg("b", "web", "1.0.0", withImages("docker.io/library/nginx:1.25", "quay.io/org/etcd:3.6")),
		pkg("b", "bad", "1.0.0", func(e *catalog.Entry) {
			e.Metadata.Images = []pkgformat.Image{{Reference: "quay.io/org/etcd@@x", Found: []string{"test"}, Problem: "not a reference"}}
		}),
		pkg("c", "none", "1.0.0"),
	)
	image := func(repo, tag, digest string) catalog.Query {
		return catalog.Query{Image: catalog.ImageRef{Repository: repo, Tag: tag, Digest: digest}}
	}
	cases := []struct {
		name string
		q    catalog.Query
		want []string
	}{
		{"repository of several versions", image("quay.io/org/etcd", "", ""), []string{"a/etcd", "b/web"}},
		{"tag of an older version", image("quay.io/org/etcd", "3.5", ""), []string{"a/etcd"}},
		{"tag of both", image("quay.io/org/etcd", "3.6", ""), []string{"a/etcd", "b/web"}},
		{"unknown tag", image("quay.io/org/etcd", "9", ""), nil},
		{"digest", image("quay.io/org/etcd-operator", "", imageDigest), []string{"a/etcd"}},
		{"digest of another repository", image("quay.io/org/etcd", "", imageDigest), nil},
		{"repository is not a prefix", image("quay.io/org", "", ""), nil},
		{"normalised name", image("docker.io/library/nginx", "", ""), []string{"b/web"}},
		{"unknown repository", image("ghcr.io/x/y", "", ""), nil},
		{"with another filter", catalog.Query{Namespace: "b", Image: catalog.ImageRef{Repository: "quay.io/org/etcd"}}, []string{"b/web"}},
	}
	check := func(when string) {
		t.Helper()
		for _, tc := range cases {
			tc.q.Access = all
			res := h.search(tc.q)
			if got := names(res.Packages); !sameSet(got, tc.want) || res.Total != len(tc.want) {
				t.Errorf("%s, %s: Search = %v (total %d), want %v", when, tc.name, got, res.Total, tc.want)
			}
		}
	}
	check("after put")
	h.restart()
	check("after reopen")

	// The filter follows the versions: removing the only version that ran
	// 3.5 removes the package from its answer.
	h.del("a", "etcd", "1.0.0")
	res := h.search(catalog.Query{Access: all, Image: catalog.ImageRef{Repository: "quay.io/org/etcd", Tag: "3.5"}})
	if got := names(res.Packages); len(got) != 0 {
		t.Errorf("after deleting the version that ran etcd:3.5, Search = %v, want none", got)
	}
}

func testImageMirrors(t *testing.T, h *harness) {
	if got, err := h.store.ImageMirrors(h.ctx); err != nil || len(got) != 0 {
		t.Fatalf("ImageMirrors of an empty store = %v, %v; want none", got, err)
	}
	first := []apiv1.ImageMirror{
		{Source: "quay.io/org", Mirror: "mirror.example:5000/mirror/org"},
		{Source: "docker.io/library/nginx", Mirror: "mirror.example:5000/nginx"},
	}
	if err := h.store.PutImageMirrors(h.ctx, first); err != nil {
		t.Fatalf("PutImageMirrors: %v", err)
	}
	// A second put merges by source: it replaces quay.io/org and adds ghcr.io.
	if err := h.store.PutImageMirrors(h.ctx, []apiv1.ImageMirror{
		{Source: "quay.io/org", Mirror: "localhost:5000/q"},
		{Source: "ghcr.io", Mirror: "localhost:5000/ghcr"},
	}); err != nil {
		t.Fatalf("PutImageMirrors: %v", err)
	}
	want := []apiv1.ImageMirror{
		{Source: "docker.io/library/nginx", Mirror: "mirror.example:5000/nginx"},
		{Source: "ghcr.io", Mirror: "localhost:5000/ghcr"},
		{Source: "quay.io/org", Mirror: "localhost:5000/q"},
	}
	get := func(s catalog.Store, when string) {
		t.Helper()
		got, err := s.ImageMirrors(h.ctx)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: ImageMirrors = %v, %v; want %v", when, got, err, want)
		}
	}
	get(h.store, "after two puts")

	// Another replica on the same database sees the same list.
	other := h.reopen(t)
	t.Cleanup(func() { other.Close() })
	get(other, "another store on the same database")

	for _, bad := range [][]apiv1.ImageMirror{
		{{Source: "nginx", Mirror: "localhost:5000/x"}},
		{{Source: "quay.io/org/img:1.0", Mirror: "localhost:5000/x"}},
		{{Source: "quay.io/org", Mirror: "not a host/x"}},
		{{Source: "quay.io/a", Mirror: "localhost:5000/a"}, {Source: "quay.io/a", Mirror: "localhost:5000/b"}},
	} {
		if err := h.store.PutImageMirrors(h.ctx, bad); !errors.Is(err, catalog.ErrInvalid) {
			t.Errorf("PutImageMirrors(%v) = %v, want ErrInvalid", bad, err)
		}
	}
	get(h.store, "after refused puts")

	// The limit counts what would be recorded, not only the request.
	many := make([]apiv1.ImageMirror, catalog.MaxImageMirrors-len(want)+1)
	for i := range many {
		many[i] = apiv1.ImageMirror{Source: fmt.Sprintf("quay.io/many/r%d", i), Mirror: "localhost:5000/m"}
	}
	if err := h.store.PutImageMirrors(h.ctx, many); !errors.Is(err, catalog.ErrInvalid) || !strings.Contains(err.Error(), "limit") {
		t.Errorf("PutImageMirrors past the limit = %v, want ErrInvalid naming the limit", err)
	}
	get(h.store, "after a put past the limit")

	h.restart()
	get(h.store, "after reopen")
}

// testImageMirrorsConcurrent has two stores on one database set mirrors at
// once: both sets are recorded.
func testImageMirrorsConcurrent(t *testing.T, h *harness) {
	other := h.reopen(t)
	t.Cleanup(func() { other.Close() })
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, s := range []catalog.Store{h.store, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				m := apiv1.ImageMirror{Source: fmt.Sprintf("quay.io/s%d/r%d", i, j), Mirror: "localhost:5000/m"}
				if err := s.PutImageMirrors(h.ctx, []apiv1.ImageMirror{m}); err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("PutImageMirrors: %v", err)
	}
	got, err := h.store.ImageMirrors(h.ctx)
	if err != nil || len(got) != 40 {
		t.Errorf("ImageMirrors = %d mirrors, %v; want 40", len(got), err)
	}
}
