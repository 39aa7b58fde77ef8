package registry

import (
	"context"
	"fmt"
	"io"
	"io/fs"
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
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/coord"
	"github.com/berth-registry/berth/storage"
)

// age sets the modification time of every file under dir to d ago, as if it
// had all been written then.
func age(t *testing.T, dir string, d time.Duration) {
	t.Helper()
	then := time.Now().Add(-d)
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, then, then)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// status is the status of a GET of target, accepting OCI manifests.
func status(h http.Handler, target string) int {
	req := httptest.NewRequest(http.MethodGet, target, nil)
	req.Header.Set("Accept", ocispec.MediaTypeImageManifest+", "+ocispec.MediaTypeImageIndex)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Code
}

func TestCollectGarbage(t *testing.T) {
	dir := t.TempDir()
	reg := newRegistry(t, Options{Storage: onDisk(dir)})
	const repo = "team/app"
	b := pushBlobs(t, reg, repo)
	withLayer := func(layer string, subject *ocispec.Descriptor) ocispec.Manifest {
		m := b.image(subject, "", "", nil)
		m.Layers = []ocispec.Descriptor{putBlob(t, reg, repo, ocispec.MediaTypeImageLayer, []byte(layer))}
		return m
	}
	// Live: a tagged image, an index tagged and the image it lists, a
	// signature of the tagged image.
	tagged := mustPut(t, reg, repo, "1.0.0", withLayer("a", nil))
	child := mustPut(t, reg, repo, "", withLayer("d", nil))
	mustPut(t, reg, repo, "multi", ocispec.Index{Versioned: b.image(nil, "", "", nil).Versioned, MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{child}})
	sig := mustPut(t, reg, repo, "", withLayer("e", &tagged))
	// Dead: an untagged image, a signature of it, a blob no manifest lists.
	untagged := mustPut(t, reg, repo, "", withLayer("b", nil))
	deadSig := mustPut(t, reg, repo, "", withLayer("f", &untagged))
	orphan := putBlob(t, reg, repo, ocispec.MediaTypeImageLayer, []byte("c"))
	age(t, dir, 2*time.Hour)
	// Young: a blob uploaded for a push in progress, an untagged image just pushed.
	inFlight := putBlob(t, reg, repo, ocispec.MediaTypeImageLayer, []byte("g"))
	young := mustPut(t, reg, repo, "", withLayer("h", nil))

	ctx := context.Background()
	dead := []digest.Digest{untagged.Digest, deadSig.Digest}
	// b.layer too: every image here has a layer of its own.
	deadBlobs := []digest.Digest{b.layer.Digest, digest.FromString("b"), digest.FromString("f"), orphan.Digest, untagged.Digest, deadSig.Digest}
	var deadBytes int64
	for _, d := range deadBlobs {
		fi, err := os.Stat(filepath.Join(dir, blobDataPath(d)))
		if err != nil {
			t.Fatal(err)
		}
		deadBytes += fi.Size()
	}
	want := GCReport{Manifests: len(dead), Blobs: len(deadBlobs), Bytes: deadBytes}

	dry, err := reg.CollectGarbage(ctx, GCOptions{Grace: time.Hour, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if dry.Manifests != want.Manifests || dry.Blobs != want.Blobs || dry.Bytes != want.Bytes || !dry.DryRun {
		t.Errorf("dry run: %+v, want %+v", dry, want)
	}
	if code := status(reg, "/v2/"+repo+"/manifests/"+untagged.Digest.String()); code != http.StatusOK {
		t.Fatalf("a dry run deleted a manifest: GET = %d", code)
	}

	rep, err := reg.CollectGarbage(ctx, GCOptions{Grace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Manifests != want.Manifests || rep.Blobs != want.Blobs || rep.Bytes != want.Bytes || rep.DryRun {
		t.Errorf("collection: %+v, want %+v", rep, want)
	}
	for _, d := range dead {
		if code := status(reg, "/v2/"+repo+"/manifests/"+d.String()); code != http.StatusNotFound {
			t.Errorf("dead manifest %s: GET = %d, want 404", d, code)
		}
	}
	for _, d := range deadBlobs {
		if _, err := os.Stat(filepath.Join(dir, blobDataPath(d))); !os.IsNotExist(err) {
			t.Errorf("dead blob %s: still stored (%v)", d, err)
		}
	}
	for name, ref := range map[string]string{"tagged": "1.0.0", "index": "multi", "index's image": child.Digest.String(),
		"signature": sig.Digest.String(), "young image": young.Digest.String()} {
		if code := status(reg, "/v2/"+repo+"/manifests/"+ref); code != http.StatusOK {
			t.Errorf("%s %s: GET = %d, want 200", name, ref, code)
		}
	}
	for _, layer := range []string{"a", "d", "e", "h", "g"} {
		if code := status(reg, "/v2/"+repo+"/blobs/"+digest.FromString(layer).String()); code != http.StatusOK {
			t.Errorf("live blob %q: GET = %d, want 200", layer, code)
		}
	}
	if code := status(reg, "/v2/"+repo+"/blobs/"+inFlight.Digest.String()); code != http.StatusOK {
		t.Errorf("the blob of a push in progress: GET = %d, want 200", code)
	}
	if _, idx, _ := listReferrers(t, reg, repo, tagged.Digest.String(), ""); len(idx.Manifests) != 1 {
		t.Errorf("referrers of the tagged image: %v, want its signature", idx.Manifests)
	}

	// Nothing is left to collect.
	again, err := reg.CollectGarbage(ctx, GCOptions{Grace: time.Hour})
	if err != nil || again.Manifests != 0 || again.Blobs != 0 {
		t.Errorf("second collection: %+v, %v; want nothing", again, err)
	}
}

// TestCollectGarbageMarksAgainBeforeSweeping pushes, between the mark and
// the sweep, a manifest that references an old blob no manifest referenced
// when the mark read the storage: the sweep must keep it.
func TestCollectGarbageMarksAgainBeforeSweeping(t *testing.T) {
	dir := t.TempDir()
	reg := newRegistry(t, Options{Storage: onDisk(dir)})
	const repo = "team/app"
	b := pushBlobs(t, reg, repo)
	reused := putBlob(t, reg, repo, ocispec.MediaTypeImageLayer, []byte("reused"))
	age(t, dir, 2*time.Hour)
	reg.gcBeforeSweep = func() {
		m := b.image(nil, "", "", nil)
		m.Layers = []ocispec.Descriptor{reused}
		mustPut(t, reg, repo, "2.0.0", m)
	}
	rep, err := reg.CollectGarbage(context.Background(), GCOptions{Grace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if code := status(reg, "/v2/"+repo+"/blobs/"+reused.Digest.String()); code != http.StatusOK {
		t.Fatalf("the blob of a manifest pushed during the collection: GET = %d (report %+v)", code, rep)
	}
	if _, err := os.Stat(filepath.Join(dir, blobDataPath(reused.Digest))); err != nil {
		t.Fatalf("the blob of a manifest pushed during the collection was deleted (report %+v)", rep)
	}
}

func TestCollectGarbageRefusesUnreadableManifests(t *testing.T) {
	dir := t.TempDir()
	reg := newRegistry(t, Options{Storage: onDisk(dir)})
	const repo = "team/app"
	b := pushBlobs(t, reg, repo)
	m := mustPut(t, reg, repo, "1.0.0", b.image(nil, "", "", nil))
	orphan := putBlob(t, reg, repo, ocispec.MediaTypeImageLayer, []byte("orphan"))
	age(t, dir, 2*time.Hour)
	// The manifest's stored bytes are damaged on disk.
	if err := os.WriteFile(filepath.Join(dir, blobDataPath(m.Digest)), []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := reg.CollectGarbage(context.Background(), GCOptions{Grace: time.Hour})
	if err == nil {
		t.Fatal("collected with a manifest it cannot read")
	}
	if want := fmt.Sprint(m.Digest); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name %s", err, want)
	}
	if _, err := os.Stat(filepath.Join(dir, blobDataPath(orphan.Digest))); err != nil {
		t.Errorf("a refused collection deleted a blob: %v", err)
	}
}

func TestCollectGarbageKeepsUntaggedAsLongAsTheirNamespaceSays(t *testing.T) {
	dir := t.TempDir()
	reg := newRegistry(t, Options{Storage: onDisk(dir)})
	untagged := map[string]ocispec.Descriptor{}
	for _, repo := range []string{"keep/app", "team/app"} {
		untagged[repo] = mustPut(t, reg, repo, "", pushBlobs(t, reg, repo).image(nil, "", "", nil))
	}
	age(t, dir, 2*time.Hour)
	rep, err := reg.CollectGarbage(context.Background(), GCOptions{Grace: time.Hour, KeepUntagged: func(repo string) time.Duration {
		if strings.HasPrefix(repo, "keep/") {
			return 24 * time.Hour
		}
		return 0
	}})
	if err != nil {
		t.Fatal(err)
	}
	if code := status(reg, "/v2/keep/app/manifests/"+untagged["keep/app"].Digest.String()); code != http.StatusOK || rep.Manifests != 1 {
		t.Errorf("keep/app's untagged manifest, 2h old, kept 24h: GET = %d; %d manifests deleted, want 1", code, rep.Manifests)
	}
	if code := status(reg, "/v2/team/app/manifests/"+untagged["team/app"].Digest.String()); code != http.StatusNotFound {
		t.Errorf("team/app's untagged manifest, 2h old: GET = %d, want 404", code)
	}
}

// TestCollectGarbageKeepsWhatIsLinkedWhileItSweeps uploads again, or
// mounts from another repository, a blob the collection found dead, while
// its sweep holds the lock: the write waits for the sweep, so the client's
// 201 means the blob is there, and the manifest that references it is
// accepted.
func TestCollectGarbageKeepsWhatIsLinkedWhileItSweeps(t *testing.T) {
	const repo, from = "team/app", "other/src"
	for _, tc := range []struct {
		name string
		// link starts, before the collection, the write to run during its
		// sweep, and returns it.
		link func(t *testing.T, reg *Registry, old []byte) func() *http.Response
	}{
		{"upload", func(t *testing.T, reg *Registry, old []byte) func() *http.Response {
			resp := do(reg, http.MethodPost, "/v2/"+repo+"/blobs/uploads/", "", nil)
			loc, err := resp.Location()
			if resp.StatusCode != http.StatusAccepted || err != nil {
				t.Fatalf("blob upload start: %s %v", resp.Status, err)
			}
			q := loc.Query()
			q.Set("digest", digest.FromBytes(old).String())
			loc.RawQuery = q.Encode()
			return func() *http.Response {
				return do(reg, http.MethodPut, loc.RequestURI(), "application/octet-stream", old)
			}
		}},
		{"mount", func(t *testing.T, reg *Registry, old []byte) func() *http.Response {
			return func() *http.Response {
				return do(reg, http.MethodPost, "/v2/"+repo+"/blobs/uploads/?from="+from+"&mount="+digest.FromBytes(old).String(), "", nil)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			reg := newRegistry(t, Options{Storage: onDisk(dir)})
			b := pushBlobs(t, reg, repo)
			mustPut(t, reg, repo, "1.0.0", b.image(nil, "", "", nil))
			old := []byte("pushed long ago, referenced by nothing")
			layer := putBlob(t, reg, from, ocispec.MediaTypeImageLayer, old)
			age(t, dir, 2*time.Hour)
			link := tc.link(t, reg, old)
			done := make(chan *http.Response, 1)
			reg.gcSweeping = func() {
				go func() { done <- link() }()
				select {
				case resp := <-done:
					t.Errorf("the %s ended (%s) while the sweep held the lock", tc.name, resp.Status)
					done <- resp
				case <-time.After(200 * time.Millisecond):
				}
			}
			if _, err := reg.CollectGarbage(context.Background(), GCOptions{Grace: time.Hour}); err != nil {
				t.Fatal(err)
			}
			resp := <-done
			switch {
			case resp.StatusCode == http.StatusAccepted && tc.name == "mount":
				// The sweep deleted the blob before the mount looked for
				// it: the registry opened an upload instead, and the
				// client uploads.
				putBlob(t, reg, repo, ocispec.MediaTypeImageLayer, old)
			case resp.StatusCode != http.StatusCreated:
				t.Fatalf("%s during the sweep: %s", tc.name, resp.Status)
			}
			m := b.image(nil, "", "", nil)
			m.Layers = []ocispec.Descriptor{layer}
			if _, resp := putJSON(t, reg, repo, "2.0.0", m); resp.StatusCode != http.StatusCreated {
				body, _ := io.ReadAll(resp.Body)
				t.Fatalf("manifest of a blob the client got %d for: %s %s", http.StatusCreated, resp.Status, body)
			}
		})
	}
}

// withoutGCLock are locks that take everything but gcLock, as the
// registry's writes were before every replica took it: the baseline of
// BenchmarkPush.
type withoutGCLock struct{ coord.Locks }

func (l withoutGCLock) RLock(ctx context.Context, keys ...string) (func(), error) {
	keys = slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return k == gcLock })
	if len(keys) == 0 {
		return func() {}, nil
	}
	return l.Locks.RLock(ctx, keys...)
}

// BenchmarkPush measures the push of a small package by tag (a layer
// uploaded, POST and PUT, then its manifest PUT), whose layer commit and
// manifest write hold gcLock shared, against the same push without
// gcLock, on coord.Local, in memory and on disk, one push at a time and
// GOMAXPROCS at once.
func BenchmarkPush(b *testing.B) {
	for _, st := range []string{"inmemory", "filesystem"} {
		for _, gc := range []bool{true, false} {
			cfg := &storage.Config{Driver: "inmemory"}
			if st == "filesystem" {
				cfg = onDisk(b.TempDir())
			}
			var locks coord.Locks = &coord.Local{}
			if !gc {
				locks = withoutGCLock{locks}
			}
			reg := newRegistry(b, Options{Storage: cfg, Locks: locks})
			const repo = "bench/app"
			blobs := pushBlobs(b, reg, repo)
			var n atomic.Int64
			push := func(b *testing.B) {
				i := n.Add(1)
				m := blobs.image(nil, "", "", nil)
				m.Layers = []ocispec.Descriptor{putBlob(b, reg, repo, ocispec.MediaTypeImageLayer, fmt.Appendf(nil, "layer %d", i))}
				mustPut(b, reg, repo, fmt.Sprintf("1.0.%d", i), m)
			}
			name := fmt.Sprintf("storage=%s/gclock=%t", st, gc)
			b.Run(name+"/serial", func(b *testing.B) {
				for b.Loop() {
					push(b)
				}
			})
			b.Run(name+"/parallel", func(b *testing.B) {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						push(b)
					}
				})
			})
		}
	}
}
