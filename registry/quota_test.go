package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/internal/pgtest"
	"github.com/berth-registry/berth/quota"
	"github.com/berth-registry/berth/storage"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// testLimits are the quotas of the quota tests: team-a 1000 bytes, one 1
// byte, and every glob-* namespace 500 bytes of its own.
func testLimits(ns string) int64 {
	switch {
	case ns == "team-a":
		return 1000
	case ns == "one":
		return 1
	case strings.HasPrefix(ns, "glob-"):
		return 500
	}
	return 0
}

// ledgers open a ledger of each kind.
var ledgers = map[string]func(t *testing.T) quota.Ledger{
	"sqlite": func(t *testing.T) quota.Ledger {
		l, err := quota.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "quota.db"), quota.Options{Limit: testLimits})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	},
	"postgres": func(t *testing.T) quota.Ledger {
		l, err := quota.OpenPostgres(context.Background(), pgtest.Database(t), quota.Options{Limit: testLimits})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	},
}

// quotaRegistry is a registry on disk under root with quotas in l: uploads
// of at most 2000 bytes, 2 open per subject.
func quotaRegistry(t *testing.T, l quota.Ledger, root string) *Registry {
	return newRegistry(t, Options{Storage: onDisk(root), Quota: &QuotaOptions{
		Ledger: l, Limit: testLimits, MaxUploadSize: 2000, MaxUploadsPerSubject: 2, IdleTimeout: time.Minute,
		PurgeAfter: time.Hour, Grace: time.Millisecond,
	}})
}

// request serves one request with the given body, of unknown length when
// streaming, and returns the status and body.
func request(h http.Handler, method, target string, body []byte, streaming bool, header ...string) (*http.Response, string) {
	req := httptest.NewRequest(method, target, bytes.NewReader(body))
	if streaming {
		req.ContentLength = -1
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	resp := w.Result()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// open starts an upload of repo and returns its location.
func open(t *testing.T, h http.Handler, repo string) string {
	t.Helper()
	resp, body := request(h, http.MethodPost, "/v2/"+repo+"/blobs/uploads/", nil, false)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("open an upload of %s: %s %s", repo, resp.Status, body)
	}
	return resp.Header.Get("Location")
}

// withDigest is the upload location loc with digest d.
func withDigest(loc string, d digest.Digest) string {
	sep := "?"
	if strings.Contains(loc, "?") {
		sep = "&"
	}
	return loc + sep + "digest=" + d.String()
}

// blobOf is n bytes of fill.
func blobOf(n int, fill byte) []byte { return bytes.Repeat([]byte{fill}, n) }

// uploadsLeft lists what stays in the _uploads directories under root.
func uploadsLeft(t *testing.T, root string) []string {
	t.Helper()
	var left []string
	err := filepath.WalkDir(filepath.Join(root, "docker/registry/v2/repositories"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if dir, _ := filepath.Split(p); filepath.Base(dir) == "_uploads" {
			left = append(left, p)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return left
}

// TestQuotaRefusals pushes what the quotas and upload bounds refuse, on
// each ledger: each refusal has its OCI error, nothing stored before is
// lost, the refused blob is not linked and no upload is left behind.
func TestQuotaRefusals(t *testing.T) {
	type refusal struct {
		status int
		code   string
		// message is a regular prefix of the error's message.
		message string
		// refused is the blob that must not be linked in repo.
		refused digest.Digest
	}
	cases := []struct {
		name string
		repo string
		push func(t *testing.T, h http.Handler, repo string, used int64) refusal
	}{
		{"over quota by Content-Length", "team-a/app", func(t *testing.T, h http.Handler, repo string, used int64) refusal {
			b := blobOf(900, 'x')
			resp, body := request(h, http.MethodPatch, open(t, h, repo), b, false)
			return refusal{resp.StatusCode, body, overQuota("team-a", used, 1000, 900), digest.FromBytes(b)}
		}},
		{"over quota by Content-Length, monolithic", "team-a/app", func(t *testing.T, h http.Handler, repo string, used int64) refusal {
			b := blobOf(900, 'm')
			resp, body := request(h, http.MethodPost, withDigest("/v2/"+repo+"/blobs/uploads/", digest.FromBytes(b)), b, false)
			return refusal{resp.StatusCode, body, overQuota("team-a", used, 1000, 900), digest.FromBytes(b)}
		}},
		{"over quota at commit", "team-a/app", func(t *testing.T, h http.Handler, repo string, used int64) refusal {
			// Two uploads that each fit, streamed: the second to commit
			// finds the first's bytes charged.
			a, b := blobOf(500, 'a'), blobOf(500, 'b')
			la, lb := open(t, h, repo), open(t, h, repo)
			resp, _ := request(h, http.MethodPatch, la, a, true)
			la = resp.Header.Get("Location")
			resp, _ = request(h, http.MethodPatch, lb, b, true)
			lb = resp.Header.Get("Location")
			if resp, body := request(h, http.MethodPut, withDigest(la, digest.FromBytes(a)), nil, false); resp.StatusCode != http.StatusCreated {
				t.Fatalf("first commit: %s %s", resp.Status, body)
			}
			resp, body := request(h, http.MethodPut, withDigest(lb, digest.FromBytes(b)), nil, false)
			return refusal{resp.StatusCode, body, overQuota("team-a", used+500, 1000, 500), digest.FromBytes(b)}
		}},
		{"over quota by a cross-repository mount", "team-a/app", func(t *testing.T, h http.Handler, repo string, used int64) refusal {
			src := putBlob(t, h, "free/src", ocispec.MediaTypeImageLayer, blobOf(900, 'c'))
			resp, body := request(h, http.MethodPost, "/v2/"+repo+"/blobs/uploads/?from=free/src&mount="+src.Digest.String(), nil, false)
			return refusal{resp.StatusCode, body, overQuota("team-a", used, 1000, 900), src.Digest}
		}},
		{"a manifest over quota", "team-a/app", func(t *testing.T, h http.Handler, repo string, used int64) refusal {
			layer := putBlob(t, h, repo, ocispec.MediaTypeImageLayer, blobOf(int(1000-used-10), 'l'))
			m := ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
				Config: ocispec.Descriptor{MediaType: ocispec.MediaTypeEmptyJSON, Digest: digest.FromString("{}"), Size: 2}, Layers: []ocispec.Descriptor{layer}}
			b, resp := putJSON(t, h, repo, "v2", m)
			body, _ := io.ReadAll(resp.Body)
			if get, _ := request(h, http.MethodGet, "/v2/"+repo+"/manifests/v2", nil, false); get.StatusCode != http.StatusNotFound {
				t.Errorf("the refused manifest is stored: GET %s", get.Status)
			}
			return refusal{resp.StatusCode, string(body), overQuota("team-a", used+layer.Size, 1000, int64(len(b))), ""}
		}},
		{"beyond maxSize by Content-Length", "free/app", func(t *testing.T, h http.Handler, repo string, used int64) refusal {
			b := blobOf(2001, 's')
			resp, body := request(h, http.MethodPatch, open(t, h, repo), b, false)
			return refusal{resp.StatusCode, body, "this upload is at least 2KiB (2001 bytes), beyond registry.uploads.maxSize, 2KiB (2000 bytes)", digest.FromBytes(b)}
		}},
		{"beyond maxSize by a streaming body", "free/app", func(t *testing.T, h http.Handler, repo string, used int64) refusal {
			b := blobOf(64<<10, 'z')
			resp, body := request(h, http.MethodPatch, open(t, h, repo), b, true)
			return refusal{resp.StatusCode, body, "this upload is at least ", digest.FromBytes(b)}
		}},
		{"too many uploads", "free/app", func(t *testing.T, h http.Handler, repo string, used int64) refusal {
			open(t, h, repo)
			open(t, h, repo)
			resp, body := request(h, http.MethodPost, "/v2/"+repo+"/blobs/uploads/", nil, false)
			return refusal{resp.StatusCode, body, "192.0.2.1 has 2 uploads open, the most registry.uploads.maxConcurrentPerSubject allows is 2", ""}
		}},
		{"a quota of 1 byte", "one/app", func(t *testing.T, h http.Handler, repo string, used int64) refusal {
			b := blobOf(2, 'o')
			resp, body := request(h, http.MethodPut, withDigest(open(t, h, repo), digest.FromBytes(b)), b, false)
			return refusal{resp.StatusCode, body, overQuota("one", 0, 1, 2), digest.FromBytes(b)}
		}},
		{"a glob's quota is each namespace's own", "glob-y/app", func(t *testing.T, h http.Handler, repo string, used int64) refusal {
			// glob-x is filled; glob-y, under the same glob entry, has room.
			putBlob(t, h, "glob-x/app", "", blobOf(200, 'g'))
			putBlob(t, h, repo, "", blobOf(200, 'g'))
			b := blobOf(200, 'h')
			resp, body := request(h, http.MethodPut, withDigest(open(t, h, repo), digest.FromBytes(b)), b, false)
			return refusal{resp.StatusCode, body, overQuota("glob-y", used+200, 500, 200), digest.FromBytes(b)}
		}},
	}
	statusOf := map[string]int{"DENIED": http.StatusForbidden, "SIZE_INVALID": http.StatusBadRequest, "TOOMANYREQUESTS": http.StatusTooManyRequests}
	for store, newLedger := range ledgers {
		for _, tc := range cases {
			t.Run(store+"/"+tc.name, func(t *testing.T) {
				root := t.TempDir()
				l := newLedger(t)
				reg := quotaRegistry(t, l, root)
				// What the namespace stored before, where the quota lets it:
				// the empty config and a manifest.
				var kept ocispec.Descriptor
				var used int64
				if tc.repo != "one/app" {
					kept = putBlob(t, reg, tc.repo, ocispec.MediaTypeEmptyJSON, []byte("{}"))
					mustPut(t, reg, tc.repo, "v1", json.RawMessage(emptyManifest))
					used = kept.Size + int64(len(emptyManifest))
				}
				got := tc.push(t, reg, tc.repo, used)
				var e ociErrors
				if err := json.Unmarshal([]byte(got.code), &e); err != nil || len(e.Errors) != 1 {
					t.Fatalf("response %d %q is not one OCI error", got.status, got.code)
				}
				code := e.Errors[0].Code
				if statusOf[code] == 0 || got.status != statusOf[code] || !strings.HasPrefix(e.Errors[0].Message, got.message) {
					t.Fatalf("refusal = %d %s %q, want the status of its code and a message starting %q", got.status, code, e.Errors[0].Message, got.message)
				}
				if got.refused != "" {
					if resp, _ := request(reg, http.MethodHead, "/v2/"+tc.repo+"/blobs/"+got.refused.String(), nil, false); resp.StatusCode != http.StatusNotFound {
						t.Errorf("the refused blob is linked: HEAD %s", resp.Status)
					}
				}
				if kept.Size > 0 {
					if resp, _ := request(reg, http.MethodGet, "/v2/"+tc.repo+"/blobs/"+kept.Digest.String(), nil, false); resp.StatusCode != http.StatusOK {
						t.Errorf("what was stored before is gone: GET %s", resp.Status)
					}
				}
				if code != "TOOMANYREQUESTS" {
					if left := uploadsLeft(t, root); len(left) > 0 {
						t.Errorf("uploads left behind: %v", left)
					}
				}
			})
		}
	}
}

// emptyManifest is the manifest the refusal tests store first: an image
// of the empty config and no layers.
const emptyManifest = `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},"layers":[]}`

// overQuota is the start of the message of a refusal over quota.
func overQuota(ns string, used, limit, needed int64) string {
	return fmt.Sprintf("namespace %s is over its quota: %s used of %s, this upload needs %s more", ns, quota.FormatBytes(used), quota.FormatBytes(limit), quota.FormatBytes(needed))
}

// TestDeleteAndGCGiveBytesBack: a manifest delete marks its namespace, and
// the recompute gives back what no manifest references any more; a
// collection marks every namespace; what two images share is counted once.
func TestDeleteAndGCGiveBytesBack(t *testing.T) {
	for store, newLedger := range ledgers {
		t.Run(store, func(t *testing.T) {
			ctx := context.Background()
			l := newLedger(t)
			reg := quotaRegistry(t, l, t.TempDir())
			shared := putBlob(t, reg, "free/app", ocispec.MediaTypeImageLayer, blobOf(100, 's'))
			config := putBlob(t, reg, "free/app", ocispec.MediaTypeImageConfig, []byte("{}"))
			own := putBlob(t, reg, "free/app", ocispec.MediaTypeImageLayer, blobOf(50, 'o'))
			m1 := ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest, Config: config, Layers: []ocispec.Descriptor{shared}}
			m2 := ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest, Config: config, Layers: []ocispec.Descriptor{shared, own}}
			d1, d2 := mustPut(t, reg, "free/app", "v1", m1), mustPut(t, reg, "free/app", "v2", m2)
			usage := func() int64 {
				t.Helper()
				u, err := l.Usage(ctx, "free")
				if err != nil {
					t.Fatal(err)
				}
				return u.UsedBytes
			}
			all := shared.Size + config.Size + own.Size + d1.Size + d2.Size
			if got := usage(); got != all {
				t.Fatalf("usage after the pushes = %d, want %d", got, all)
			}
			if resp, body := request(reg, http.MethodDelete, "/v2/free/app/manifests/"+d2.Digest.String(), nil, false); resp.StatusCode != http.StatusAccepted {
				t.Fatalf("delete: %s %s", resp.Status, body)
			}
			if dirty, err := l.Dirty(ctx); err != nil || fmt.Sprint(dirty) != "[free]" {
				t.Fatalf("dirty after a delete = %v, %v", dirty, err)
			}
			time.Sleep(5 * time.Millisecond) // beyond the grace
			if err := reg.RecomputeQuota(ctx, "free"); err != nil {
				t.Fatal(err)
			}
			if got, want := usage(), shared.Size+config.Size+d1.Size; got != want {
				t.Fatalf("usage after the delete = %d, want %d", got, want)
			}
			if dirty, _ := l.Dirty(ctx); len(dirty) != 0 {
				t.Errorf("still dirty after the recompute: %v", dirty)
			}
			// Untagged, v1 goes at the next collection, and its bytes with it.
			if resp, body := request(reg, http.MethodDelete, "/v2/free/app/manifests/v1", nil, false); resp.StatusCode != http.StatusAccepted {
				t.Fatalf("untag: %s %s", resp.Status, body)
			}
			rep, err := reg.CollectGarbage(ctx, GCOptions{Grace: time.Millisecond})
			if err != nil || rep.Manifests != 1 {
				t.Fatalf("collection: %+v, %v", rep, err)
			}
			if dirty, _ := l.Dirty(ctx); fmt.Sprint(dirty) != "[free]" {
				t.Fatalf("dirty after a collection = %v", dirty)
			}
			if err := reg.RecomputeQuota(ctx, "free"); err != nil {
				t.Fatal(err)
			}
			if got := usage(); got != 0 {
				t.Fatalf("usage after the collection = %d, want 0", got)
			}
		})
	}
}

// TestRecomputeKeepsPushesInFlight: a blob uploaded within the grace, whose
// manifest has not come, stays charged; the backfill counts what was
// pushed without a ledger.
func TestRecomputeKeepsPushesInFlightAndBackfills(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	before := newRegistry(t, Options{Storage: onDisk(root)})
	config := putBlob(t, before, "team-a/app", ocispec.MediaTypeImageConfig, []byte("{}"))
	d := mustPut(t, before, "team-a/app", "v1", ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest, Config: config})
	before.Close()

	l := ledgers["sqlite"](t)
	reg := newRegistry(t, Options{Storage: onDisk(root), Quota: &QuotaOptions{Ledger: l, Grace: time.Hour, RecomputeEvery: 10 * time.Millisecond}})
	inFlight := putBlob(t, reg, "team-a/app", ocispec.MediaTypeImageLayer, blobOf(70, 'f'))
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); reg.KeepQuotas(runCtx) }()
	defer func() { stop(); <-done }()
	want := config.Size + d.Size + inFlight.Size
	deadline := time.Now().Add(10 * time.Second)
	for {
		u, err := l.Usage(ctx, "team-a")
		if err != nil {
			t.Fatal(err)
		}
		if dirty, _ := l.Dirty(ctx); u.UsedBytes == want && len(dirty) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("usage = %d, want %d once backfilled", u.UsedBytes, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPurgeUploads: an upload not written to for purgeAfter is deleted
// with what it stored; one written to since is kept.
func TestPurgeUploads(t *testing.T) {
	for store, newLedger := range ledgers {
		t.Run(store, func(t *testing.T) {
			ctx := context.Background()
			root := t.TempDir()
			l := newLedger(t)
			reg := quotaRegistry(t, l, root)
			abandoned := open(t, reg, "free/app")
			if resp, body := request(reg, http.MethodPatch, abandoned, blobOf(100, 'p'), false); resp.StatusCode != http.StatusAccepted {
				t.Fatalf("patch: %s %s", resp.Status, body)
			}
			if n, err := reg.PurgeUploads(ctx, time.Now()); err != nil || n != 0 {
				t.Fatalf("purge of a fresh upload: %d, %v", n, err)
			}
			if left := uploadsLeft(t, root); len(left) != 1 {
				t.Fatalf("uploads before the purge = %v, want one", left)
			}
			n, err := reg.PurgeUploads(ctx, time.Now().Add(time.Hour+time.Second))
			if err != nil || n != 1 {
				t.Fatalf("purge after purgeAfter: %d, %v; want 1", n, err)
			}
			if left := uploadsLeft(t, root); len(left) != 0 {
				t.Errorf("uploads after the purge: %v", left)
			}
			if u, _ := l.Usage(ctx, "free"); u.OpenUploads != 0 {
				t.Errorf("open uploads after the purge = %d", u.OpenUploads)
			}
			if resp, _ := request(reg, http.MethodPut, withDigest(abandoned, digest.FromBytes(blobOf(100, 'p'))), nil, false); resp.StatusCode == http.StatusCreated {
				t.Error("a purged upload committed")
			}
		})
	}
}

// BenchmarkPushUnderQuota pushes a blob and a manifest without quotas,
// and with a SQLite ledger in a namespace at 99% of its quota, in memory
// and on the filesystem (whose pushes wait for syncfs).
func BenchmarkPushUnderQuota(b *testing.B) {
	for _, st := range []string{"inmemory", "filesystem"} {
		for _, withQuota := range []bool{false, true} {
			opts := Options{Storage: &storage.Config{Driver: "inmemory"}}
			if st == "filesystem" {
				opts.Storage = onDisk(b.TempDir())
			}
			if withQuota {
				l, err := quota.OpenSQLite(context.Background(), filepath.Join(b.TempDir(), "quota.db"), quota.Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { l.Close() })
				if _, err := l.Charge(context.Background(), quota.Push{Namespace: "bench", Item: quota.Item{Digest: "sha256:filler", Size: 99 << 30}, Limit: 0}); err != nil {
					b.Fatal(err)
				}
				opts.Quota = &QuotaOptions{Ledger: l, Limit: func(string) int64 { return 100 << 30 }, MaxUploadsPerSubject: 32, IdleTimeout: time.Minute}
			}
			reg := newRegistry(b, opts)
			const repo = "bench/app"
			blobs := pushBlobs(b, reg, repo)
			i := 0
			b.Run(fmt.Sprintf("storage=%s/quota=%t", st, withQuota), func(b *testing.B) {
				for b.Loop() {
					i++
					m := blobs.image(nil, "", "", nil)
					m.Layers = []ocispec.Descriptor{putBlob(b, reg, repo, ocispec.MediaTypeImageLayer, fmt.Appendf(nil, "layer %d", i))}
					mustPut(b, reg, repo, fmt.Sprintf("1.0.%d", i), m)
				}
			})
		}
	}
}

// TestLedgerUnavailableKeepsTheUpload: when the ledger cannot be asked, a
// write to an upload is refused as UNAVAILABLE, and the upload stays for
// the client to try again.
func TestLedgerUnavailableKeepsTheUpload(t *testing.T) {
	root := t.TempDir()
	l := ledgers["sqlite"](t)
	reg := quotaRegistry(t, l, root)
	loc := open(t, reg, "team-a/app")
	l.Close()
	resp, body := request(reg, http.MethodPatch, loc, blobOf(10, 'u'), false)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "UNAVAILABLE") {
		t.Fatalf("PATCH with the ledger closed: %s %s", resp.Status, body)
	}
	if left := uploadsLeft(t, root); len(left) != 1 {
		t.Errorf("uploads = %v, want the one opened", left)
	}
}
