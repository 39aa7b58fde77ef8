package registry

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"

	"github.com/berth-registry/berth/storage"
)

// newRecentRegistry serves a registry on in-memory storage that keeps what
// it receives within o.
func newRecentRegistry(t *testing.T, o RecentOptions) (*Registry, string) {
	t.Helper()
	reg, err := New(context.Background(), Options{
		Storage:    &storage.Config{Driver: "inmemory"},
		HTTPSecret: "test",
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Recent:     &o,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(reg)
	t.Cleanup(func() { srv.Close(); reg.Close() })
	return reg, srv.URL
}

// TestRecentKeepsWhatWasPushed: a manifest accepted and a blob uploaded
// whole in the request that commits it are kept, with their bytes; a blob
// sent in a request before the one that commits it, one over MaxBlob, and
// those of a registry without Options.Recent are not; a deleted manifest or
// blob, or the repository removed, are forgotten.
func TestRecentKeepsWhatWasPushed(t *testing.T) {
	reg, base := newRecentRegistry(t, RecentOptions{MaxBlob: 100})
	m := manifest(t, base, "kudo/kafka", "content of the package", berthPkg)
	if status, e := putManifest(t, base, "kudo/kafka", "1.0.0", m); status != http.StatusCreated {
		t.Fatalf("push: %d %v", status, e)
	}
	md := digest.FromBytes(m)
	content := []byte("content of the package")
	cd := digest.FromBytes(content)
	if mt, payload, ok := reg.RecentManifest("kudo/kafka", md); !ok || !bytes.Equal(payload, m) || mt != "application/vnd.oci.image.manifest.v1+json" {
		t.Fatalf("RecentManifest = %q, %d bytes, %v; want the manifest pushed", mt, len(payload), ok)
	}
	if b, ok := reg.RecentBlob("kudo/kafka", cd); !ok || !bytes.Equal(b, content) {
		t.Fatalf("RecentBlob = %q, %v; want the content pushed", b, ok)
	}
	for _, tc := range []struct{ name, repo string }{{"another repository", "kudo/other"}, {"a manifest's digest as a blob", "kudo/kafka"}} {
		d := cd
		if tc.name == "a manifest's digest as a blob" {
			d = md
		}
		if _, ok := reg.RecentBlob(tc.repo, d); ok {
			t.Errorf("%s: RecentBlob found %s", tc.name, d)
		}
	}

	big := bytes.Repeat([]byte("x"), 101)
	pushBlob(t, base, "kudo/kafka", "", big)
	if _, ok := reg.RecentBlob("kudo/kafka", digest.FromBytes(big)); ok {
		t.Error("a blob over MaxBlob is kept")
	}
	chunked := []byte("sent in a PATCH, committed by a PUT")
	loc := startUpload(t, base, "kudo/kafka")
	req, _ := http.NewRequest(http.MethodPatch, loc, bytes.NewReader(chunked))
	loc = accepted(t, base, req)
	if status, body, err := send(http.MethodPut, withDigest(loc, digest.FromBytes(chunked)), nil); err != nil || status != http.StatusCreated {
		t.Fatalf("PUT of a chunked upload: %d %s %v", status, body, err)
	}
	if _, ok := reg.RecentBlob("kudo/kafka", digest.FromBytes(chunked)); ok {
		t.Error("a blob whose bytes came before the request that committed it is kept")
	}

	if status, body, err := send(http.MethodDelete, fmt.Sprintf("%s/v2/kudo/kafka/blobs/%s", base, cd), nil); err != nil || status != http.StatusAccepted {
		t.Fatalf("DELETE blob: %d %s %v", status, body, err)
	}
	if _, ok := reg.RecentBlob("kudo/kafka", cd); ok {
		t.Error("a deleted blob is still kept")
	}
	if status, body, err := send(http.MethodDelete, fmt.Sprintf("%s/v2/kudo/kafka/manifests/%s", base, md), nil); err != nil || status != http.StatusAccepted {
		t.Fatalf("DELETE manifest: %d %s %v", status, body, err)
	}
	if _, _, ok := reg.RecentManifest("kudo/kafka", md); ok {
		t.Error("a deleted manifest is still kept")
	}

	m2 := manifest(t, base, "kudo/zk", "another package", berthPkg)
	if status, e := putManifest(t, base, "kudo/zk", "1.0.0", m2); status != http.StatusCreated {
		t.Fatalf("push: %d %v", status, e)
	}
	named, _ := reference.WithName("kudo/zk")
	if err := reg.Namespace().(interface {
		Remove(context.Context, reference.Named) error
	}).Remove(context.Background(), named); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := reg.RecentManifest("kudo/zk", digest.FromBytes(m2)); ok {
		t.Error("a removed repository's manifest is still kept")
	}

	plain := newTestRegistry(t)
	m3 := manifest(t, plain.URL, "kudo/kafka", "content", berthPkg)
	if status, e := putManifest(t, plain.URL, "kudo/kafka", "1.0.0", m3); status != http.StatusCreated {
		t.Fatalf("push: %d %v", status, e)
	}
	if _, _, ok := plain.Config.Handler.(*Registry).RecentManifest("kudo/kafka", digest.FromBytes(m3)); ok {
		t.Error("a registry without Options.Recent keeps manifests")
	}
}

// TestRecentContentBounds: the least recently used entries go first when
// there are more than Entries or more bytes than Bytes, and entries older
// than recentMaxAge are no longer served.
func TestRecentContentBounds(t *testing.T) {
	key := func(i int) recentKey { return recentKey{repo: "ns/p", digest: digest.FromString(fmt.Sprint(i))} }
	held := func(c *recentContent, n int) []int {
		var out []int
		for i := range n {
			if _, _, ok := c.get(key(i)); ok {
				out = append(out, i)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		opts RecentOptions
		// sizes of the entries added in turn, after which entry 0 is read
		sizes []int
		want  []int
	}{
		{name: "by count", opts: RecentOptions{Entries: 2}, sizes: []int{1, 1, 1}, want: []int{0, 2}},
		{name: "by bytes", opts: RecentOptions{Bytes: 40}, sizes: []int{10, 10, 20, 10}, want: []int{0, 2, 3}},
		{name: "larger than every byte", opts: RecentOptions{Bytes: 40}, sizes: []int{10, 41}, want: []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newRecentContent(tc.opts)
			for i, n := range tc.sizes {
				c.add(key(i), "", make([]byte, n))
				if i == 1 {
					c.get(key(0)) // 0 is used again: 1 is now the least recently used
				}
			}
			if got := held(c, len(tc.sizes)); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("held %v, want %v", got, tc.want)
			}
			total := int64(0)
			for _, el := range c.byKey {
				total += int64(len(el.Value.(*recentEntry).data))
			}
			if total != c.held || c.held > c.bytes || c.order.Len() > c.entries {
				t.Errorf("held %d bytes (counted %d) in %d entries; bounds %d bytes, %d entries", c.held, total, c.order.Len(), c.bytes, c.entries)
			}
		})
	}

	now := time.Now()
	c := newRecentContent(RecentOptions{})
	c.now = func() time.Time { return now }
	c.add(key(0), "", []byte("x"))
	now = now.Add(recentMaxAge + time.Second)
	if _, _, ok := c.get(key(0)); ok || c.held != 0 {
		t.Errorf("an entry older than %s is served (%v) or held (%d bytes)", recentMaxAge, ok, c.held)
	}
}

// TestUploadBufferBudget: uploads being received buffer no more than Bytes
// together, and give their bytes back when they end.
func TestUploadBufferBudget(t *testing.T) {
	c := newRecentContent(RecentOptions{Bytes: 40, MaxBlob: 10})
	a, b := newUploadBuffer(c, 0), newUploadBuffer(c, 0)
	if newUploadBuffer(c, 5) != nil {
		t.Error("an upload taken up with bytes in it is buffered")
	}
	a.keep(make([]byte, 10))
	b.keep(make([]byte, 5))
	if got := c.bufferedBytes.Load(); got != 15 {
		t.Errorf("buffered %d bytes, want 15", got)
	}
	b.keep(make([]byte, 6)) // past MaxBlob, which Bytes/4 caps at 10
	if !b.off || c.bufferedBytes.Load() != 10 {
		t.Errorf("an upload past MaxBlob still buffers (off %v, %d bytes buffered)", b.off, c.bufferedBytes.Load())
	}
	a.commit("ns/p", digest.FromString("a"), 10)
	if c.bufferedBytes.Load() != 0 || c.held != 10 {
		t.Errorf("after the commit: %d bytes buffered, %d held; want 0 and 10", c.bufferedBytes.Load(), c.held)
	}
	full := newRecentContent(RecentOptions{Bytes: 8}) // 2 bytes a blob at most
	var uploads []*uploadBuffer
	for range 4 {
		u := newUploadBuffer(full, 0)
		u.keep(make([]byte, 2))
		uploads = append(uploads, u)
	}
	fifth := newUploadBuffer(full, 0)
	fifth.keep(make([]byte, 1)) // 9 of 8 bytes: the fifth gives up
	if !fifth.off || full.bufferedBytes.Load() != 8 {
		t.Errorf("an upload past the budget still buffers (off %v, %d bytes buffered)", fifth.off, full.bufferedBytes.Load())
	}
	for _, u := range uploads {
		u.drop()
	}
	if full.bufferedBytes.Load() != 0 {
		t.Errorf("%d bytes still buffered once every upload ended", full.bufferedBytes.Load())
	}
}
