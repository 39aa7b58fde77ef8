package mirror

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	mathrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	orasauth "oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/client/registrytest"
	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/storage"
)

// The size of the blob TestImportResumesWithinABlob interrupts and of
// the chunks it goes in. The measurements of docs/mirror.md ran it at
// 100 MiB (-resume-size=104857600), and with -resume-chunk=1099511627776
// for the blob sent in one request, as before chunked uploads (when the
// test fails, saying how much more that sends).
var (
	resumeSize  = flag.Int64("resume-size", 48<<20, "size of the blob TestImportResumesWithinABlob interrupts")
	resumeChunk = flag.Int64("resume-chunk", 4<<20, "chunk size of TestImportResumesWithinABlob")
)

// meter counts the request body bytes a registry reads and, once a
// request has brought an upload to offset cutAt (when > 0), calls cut: an
// import killed when that much of a blob is in.
type meter struct {
	read     atomic.Int64
	cutAt    atomic.Int64
	mu       sync.Mutex
	cut      func()
	inFlight sync.WaitGroup
}

func (m *meter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.inFlight.Add(1)
		defer m.inFlight.Done()
		if r.Body != nil {
			from, _, _ := strings.Cut(r.Header.Get("Content-Range"), "-")
			start, _ := strconv.ParseInt(from, 10, 64)
			r.Body = &meterBody{ReadCloser: r.Body, m: m, at: start}
		}
		h.ServeHTTP(w, r)
	})
}

// arm cuts when the count reaches at (0: never).
func (m *meter) arm(at int64, cut func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cutAt.Store(at)
	m.cut = cut
}

type meterBody struct {
	io.ReadCloser
	m  *meter
	at int64 // the upload's offset
}

func (b *meterBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.m.read.Add(int64(n))
	b.at += int64(n)
	if cut := b.m.cutAt.Load(); cut > 0 && b.at >= cut {
		b.m.mu.Lock()
		if b.m.cut != nil {
			b.m.cut()
		}
		b.m.mu.Unlock()
	}
	return n, err
}

// randomBytes are n bytes made from seed.
func randomBytes(n int64, seed uint64) []byte {
	b := make([]byte, n)
	r := mathrand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	r.Read(b)
	return b
}

// imageArchive writes an archive of one version, repository "ops/big" tag
// "1.0.0", an image of one layer; it returns the archive's path.
func imageArchive(t *testing.T, layer []byte) string {
	return layerArchive(t, layer, "1.0.0")
}

// layerArchive writes an archive of versions of repository "ops/big", one
// per tag, each an image of its own config and the one layer they share;
// it returns the archive's path.
func layerArchive(t *testing.T, layer []byte, tags ...string) string {
	t.Helper()
	lay := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayer, Digest: digest.FromBytes(layer), Size: int64(len(layer))}
	path := filepath.Join(t.TempDir(), "big.tar")
	w, err := CreateArchive(path, ArchiveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	m := &Manifest{SchemaVersion: 1, MediaType: ManifestMediaType, Source: "berth.example:5000", Created: created}
	add := func(desc ocispec.Descriptor, data []byte, manifest bool) {
		if _, err := w.Add(context.Background(), desc, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		m.Content = append(m.Content, Entry{Digest: desc.Digest, Size: desc.Size, MediaType: desc.MediaType, Carried: true, Manifest: manifest})
	}
	add(lay, layer, false)
	var index ocispec.Index
	for i, tag := range tags {
		config := []byte("{}")
		if i > 0 {
			config = []byte(`{"tag":"` + tag + `"}`)
		}
		cfg := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: digest.FromBytes(config), Size: int64(len(config))}
		body, err := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest, Config: cfg, Layers: []ocispec.Descriptor{lay}})
		if err != nil {
			t.Fatal(err)
		}
		man := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(body), Size: int64(len(body))}
		add(cfg, config, false)
		add(man, body, true)
		needs := []digest.Digest{cfg.Digest, lay.Digest, man.Digest}
		slices.Sort(needs)
		m.Versions = append(m.Versions, Version{Repository: "ops/big", Tag: tag, Digest: man.Digest, Needs: needs})
		index.Manifests = append(index.Manifests, man)
	}
	slices.SortFunc(m.Content, func(a, b Entry) int { return strings.Compare(string(a.Digest), string(b.Digest)) })
	if err := w.Finish(index, m, nil); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestImportSharedLayerOnce: versions imported at once that share a layer
// sent in chunks push it once, whatever the order they reach it in: two
// uploads of one blob would take each other's journal entry up and break
// each other's ranges.
func TestImportSharedLayerOnce(t *testing.T) {
	size, chunk := int64(8<<20), int64(1<<20)
	layer := randomBytes(size, 2)
	path := layerArchive(t, layer, "1.0.0", "1.0.1", "1.0.2", "1.0.3")
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			m := &meter{}
			host := tg.start(t, m.wrap)
			sum, err := Import(context.Background(), openArchive(t, path), ImportOptions{Client: testClient(t), Target: host,
				ChunkSize: chunk, StateDir: filepath.Join(t.TempDir(), "state"), Concurrency: 4})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Versions != 4 || len(sum.Failed) != 0 || sum.Blobs != 5 {
				t.Fatalf("import: %+v, want 4 versions and 5 blobs (the layer once, 4 configs)", sum)
			}
			if read := m.read.Load(); read > size+size/2 {
				t.Errorf("the target read %d bytes for a shared layer of %d", read, size)
			}
		})
	}
}

func testClient(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.New(client.Options{Credentials: credentials.NewMemoryStore()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// onDisk are the options of a berth registry on the filesystem, as berth
// serve runs it.
func onDisk(t testing.TB) registry.Options {
	return registry.Options{Storage: &storage.Config{Driver: "filesystem", Filesystem: storage.Filesystem{RootDirectory: t.TempDir()}}}
}

// targets start berth's registry (on disk) and distribution's (in memory) and distribution's behind wrap.
var targets = []struct {
	name  string
	start func(t *testing.T, wrap func(http.Handler) http.Handler) string
}{
	{"berth", func(t *testing.T, wrap func(http.Handler) http.Handler) string {
		return registrytest.NewBerth(t, onDisk(t), wrap)
	}},
	{"distribution", func(t *testing.T, wrap func(http.Handler) http.Handler) string { return registrytest.New(t, wrap) }},
}

// TestImportResumesWithinABlob kills an import when the target has read
// 30 % and then 70 % of a blob and runs it again: each rerun sends what the
// target lacks, with less than a chunk more, and the last one completes
// the blob, whose digest the target checked.
func TestImportResumesWithinABlob(t *testing.T) {
	size, chunk := *resumeSize, *resumeChunk
	layer := randomBytes(size, 1)
	path := imageArchive(t, layer)
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			m := &meter{}
			host := tg.start(t, m.wrap)
			c := testClient(t)
			state := filepath.Join(t.TempDir(), "state")
			var logs bytes.Buffer
			run := func(cutAt int64) (*Summary, error) {
				a := openArchive(t, path)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				m.arm(cutAt, cancel)
				return Import(ctx, a, ImportOptions{Client: c, Target: host, ChunkSize: chunk, StateDir: state, Concurrency: 1,
					Log: slog.New(slog.NewTextHandler(&logs, nil))})
			}
			for _, frac := range []int64{30, 70} {
				_, err := run(size * frac / 100)
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("import killed at %d%%: %v, want context canceled", frac, err)
				}
				// A process killed is gone at once, but the target may take
				// a moment to notice; a rerun comes later than that.
				m.inFlight.Wait()
				if n := journalFiles(t, state); n != 1 {
					t.Errorf("after the kill at %d%% the journal holds %d files, want 1", frac, n)
				}
			}
			before := m.read.Load()
			sum, err := run(0)
			if err != nil {
				t.Fatal(err)
			}
			total := m.read.Load()
			sent := total - before
			t.Logf("%s: after kills at 30%% and 70%% of %d bytes the rerun sent %d bytes (%.1f%%), %d resumed; all runs sent %d (%.1f%%)",
				tg.name, size, sent, 100*float64(sent)/float64(size), sum.BytesResumed, total, 100*float64(total)/float64(size))
			if sum.Versions != 1 || len(sum.Failed) != 0 {
				t.Fatalf("rerun: %+v", sum)
			}
			// Each kill may lose the chunk in flight, no more.
			if total > size+2*chunk {
				t.Errorf("the three runs sent %d bytes of a blob of %d: more than a chunk per kill again", total, size)
			}
			if sent > size*30/100+2*chunk {
				t.Errorf("the rerun sent %d bytes; the target held 70%% of %d, give or take a chunk per kill", sent, size)
			}
			if sum.BytesResumed < size*70/100-2*chunk {
				t.Errorf("summary says %d bytes resumed, want at least %d", sum.BytesResumed, size*70/100-2*chunk)
			}
			if !strings.Contains(logs.String(), "resuming an interrupted upload") {
				t.Errorf("the log does not say the upload was resumed:\n%s", logs.String())
			}
			if fi, err := os.Stat(state); err != nil {
				t.Error(err)
			} else if fi.Mode().Perm() != 0o700 {
				t.Errorf("state directory mode %v, want 0700", fi.Mode().Perm())
			}
			checkBlob(t, c, host, "ops/big", layer)
			if n := journalFiles(t, state); n != 0 {
				t.Errorf("the journal holds %d files after the blob completed", n)
			}
		})
	}
}

// checkBlob fetches the blob of data from the target and compares it.
func checkBlob(t *testing.T, c *client.Client, host, repo string, data []byte) {
	t.Helper()
	rc, err := c.Repository(host, repo).Blobs().Fetch(context.Background(), descOf(data))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("the target's blob differs: %d bytes, want %d", len(got), len(data))
	}
}

func journalFiles(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// bytesSource serves one blob from memory.
type bytesSource []byte

func (b bytesSource) open(context.Context, string, ocispec.Descriptor) (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(b)), nil
}

// TestUploadJournalProblems puts a blob whose journal entry cannot be
// used as it is: each is sent whole, from zero, or resumed and then sent
// again from zero when the target refuses the digest, and the log says so.
func TestUploadJournalProblems(t *testing.T) {
	const chunk, size = 1 << 10, 3<<10 + 17
	data := randomBytes(size, 2)
	desc := descOf(data)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the journal's other host got %s %s", r.Method, r.URL)
	}))
	defer other.Close()
	// opened opens an upload in the target holding body and returns its
	// first Location.
	opened := func(t *testing.T, c *client.Client, host string, body []byte) string {
		s := &session{u: &uploader{chunk: chunk, log: slog.New(slog.DiscardHandler)}, repo: c.Repository(host, "ops/app"), host: host, name: "ops/app", desc: desc}
		up, err := s.start(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(body) > 0 {
			h := http.Header{"Content-Type": {"application/octet-stream"}, "Content-Range": {fmt.Sprintf("0-%d", len(body)-1)}}
			if _, err := s.do(context.Background(), http.MethodPatch, up.next, bytes.NewReader(body), int64(len(body)), h, http.StatusAccepted); err != nil {
				t.Fatal(err)
			}
		}
		return up.first
	}
	entry := func(host, loc string) string {
		b, _ := json.Marshal(journalEntry{Target: host, Repository: "ops/app", Digest: desc.Digest, Location: loc})
		return string(b)
	}
	cases := []struct {
		name string
		// file is the journal file's content for the target host.
		file     func(t *testing.T, c *client.Client, host string) string
		wantSent int64
		wantLog  string
	}{
		{"corrupt journal file", func(*testing.T, *client.Client, string) string { return `{"target": ` }, size, "starting it again from zero"},
		{"location of another host", func(_ *testing.T, _ *client.Client, host string) string {
			return entry(host, other.URL+"/v2/ops/app/blobs/uploads/abc")
		}, size, "not the target"},
		{"location outside the repository's uploads", func(_ *testing.T, _ *client.Client, host string) string {
			return entry(host, "http://"+host+"/v2/ops/other/blobs/uploads/abc")
		}, size, "not an upload of ops/app"},
		{"entry of another blob", func(_ *testing.T, _ *client.Client, host string) string {
			b, _ := json.Marshal(journalEntry{Target: host, Repository: "ops/app", Digest: digest.FromString("x"), Location: "http://" + host + "/v2/ops/app/blobs/uploads/abc"})
			return string(b)
		}, size, "records"},
		{"upload gone", func(_ *testing.T, _ *client.Client, host string) string {
			return entry(host, "http://"+host+"/v2/ops/app/blobs/uploads/6f1c3b36-7c1a-4a4e-9c43-0d5b9d2b8e11")
		}, size, "starting it again from zero"},
		{"offset beyond the blob", func(t *testing.T, c *client.Client, host string) string {
			return entry(host, opened(t, c, host, randomBytes(size+100, 3)))
		}, size, "holds 3189 bytes of a blob of 3089"},
		{"upload holding other bytes", func(t *testing.T, c *client.Client, host string) string {
			return entry(host, opened(t, c, host, randomBytes(2000, 4)))
		}, size - 2000 + size, "refused the upload's digest"},
	}
	for _, tg := range targets {
		for _, tc := range cases {
			t.Run(tg.name+"/"+tc.name, func(t *testing.T) {
				m := &meter{}
				host := tg.start(t, m.wrap)
				c := testClient(t)
				dir := t.TempDir()
				j := &journal{dir: dir}
				if err := os.WriteFile(j.file(host, "ops/app", desc.Digest), []byte(tc.file(t, c, host)), 0o600); err != nil {
					t.Fatal(err)
				}
				var logs bytes.Buffer
				up := newUploader(chunk, dir, slog.New(slog.NewTextHandler(&logs, nil)))
				tgt := &target{c: c, host: host, counts: &counters{}, progress: &Progress{}, up: up}
				m.arm(0, nil)
				if err := tgt.putBlob(context.Background(), c.Repository(host, "ops/app"), "ops/app", desc, bytesSource(data), nil); err != nil {
					t.Fatal(err)
				}
				if got := tgt.counts.bytes.Load(); got != tc.wantSent {
					t.Errorf("sent %d bytes, want %d", got, tc.wantSent)
				}
				if got := tgt.progress.BytesDone.Load(); got != size {
					t.Errorf("progress says %d bytes done, want %d", got, size)
				}
				if got := up.resumed.Load(); got != 0 {
					t.Errorf("%d bytes counted as resumed; every byte was sent", got)
				}
				if !strings.Contains(logs.String(), tc.wantLog) {
					t.Errorf("the log does not say %q:\n%s", tc.wantLog, logs.String())
				}
				checkBlob(t, c, host, "ops/app", data)
				if n := journalFiles(t, dir); n != 0 {
					t.Errorf("the journal holds %d files after the blob completed", n)
				}
			})
		}
	}
}

// TestUploadRangeHeader reads the Range header of an upload's status.
func TestUploadRangeHeader(t *testing.T) {
	for _, tc := range []struct {
		h    string
		want int64
		ok   bool
	}{
		{"0-1023", 1024, true}, {"bytes=0-99", 100, true}, {"0-0", 0, true},
		{"0--1", 0, false}, {"5-10", 0, false}, {"", 0, false}, {"0-x", 0, false},
	} {
		got, err := rangeEnd(tc.h)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("rangeEnd(%q) = %d, %v; want %d, ok %v", tc.h, got, err, tc.want, tc.ok)
		}
	}
}

// BenchmarkUploadBigBlob pushes a 128 MiB blob into berth's registry on
// disk over loopback, in one request and in chunks.
func BenchmarkUploadBigBlob(b *testing.B) {
	const size = 128 << 20
	data := randomBytes(size, 5)
	host := registrytest.NewBerth(b, onDisk(b), nil)
	c, err := client.New(client.Options{Credentials: credentials.NewMemoryStore()})
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []struct {
		name  string
		chunk int64
	}{{"monolithic", 0}, {"chunked-32MiB", 32 << 20}, {"chunked-8MiB", 8 << 20}} {
		b.Run(mode.name, func(b *testing.B) {
			b.SetBytes(size)
			for i := range b.N {
				// A new blob each time, which the target lacks.
				b.StopTimer()
				binary.BigEndian.PutUint64(data, mathrand.Uint64())
				desc := descOf(data)
				b.StartTimer()
				tgt := &target{c: c, host: host, counts: &counters{}, progress: &Progress{}}
				if mode.chunk > 0 {
					tgt.up = newUploader(mode.chunk, "", nil)
				}
				name := fmt.Sprintf("bench/%s-%d", strings.ToLower(mode.name), i)
				if err := tgt.putBlob(context.Background(), c.Repository(host, name), name, desc, bytesSource(data), nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestUploadSurvivesTokenExpiry expires the bearer token in the middle of
// a chunked upload: the PATCH refused (its body cannot be sent again)
// is taken up at the target's offset with a new token, and nothing is
// sent twice.
func TestUploadSurvivesTokenExpiry(t *testing.T) {
	const chunk, size = 1 << 10, 5<<10 + 3
	data := randomBytes(size, 6)
	var token, patches atomic.Int64
	host := registrytest.New(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/token" {
				fmt.Fprintf(w, `{"token": "t%d"}`, token.Load())
				return
			}
			expire := r.Method == http.MethodPatch && patches.Add(1) == 3
			if expire {
				token.Add(1)
			}
			if r.Header.Get("Authorization") != fmt.Sprintf("Bearer t%d", token.Load()) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="http://`+r.Host+`/token",service="test"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	c := testClient(t)
	var logs bytes.Buffer
	up := newUploader(chunk, t.TempDir(), slog.New(slog.NewTextHandler(&logs, nil)))
	tgt := &target{c: c, host: host, counts: &counters{}, progress: &Progress{}, up: up}
	if err := tgt.putBlob(context.Background(), c.Repository(host, "ops/app"), "ops/app", descOf(data), bytesSource(data), nil); err != nil {
		t.Fatal(err)
	}
	if token.Load() != 1 {
		t.Fatalf("the token expired %d times, want 1", token.Load())
	}
	if !strings.Contains(logs.String(), "taking up the upload again") {
		t.Errorf("the log does not say the upload was taken up again:\n%s", logs.String())
	}
	if got := tgt.counts.bytes.Load(); got != size {
		t.Errorf("sent %d bytes, want %d", got, size)
	}
	if got := tgt.progress.BytesDone.Load(); got != size {
		t.Errorf("progress says %d bytes done, want %d", got, size)
	}
	checkBlob(t, c, host, "ops/app", data)
}

// bearerAuthn is a token endpoint and an auth.Authenticator: the token
// of user U in generation G is "G-U"; bumping the generation expires
// every token issued.
type bearerAuthn struct{ gen atomic.Int64 }

func (b *bearerAuthn) Authenticate(r *http.Request) (auth.Identity, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return auth.AnonymousIdentity(), nil
	}
	gen, user, ok := strings.Cut(strings.TrimPrefix(h, "Bearer "), "-")
	if !ok || gen != strconv.FormatInt(b.gen.Load(), 10) {
		return auth.Identity{}, fmt.Errorf("token %q: %w", h, auth.ErrBadCredentials)
	}
	return auth.Identity{Subject: "user:" + user}, nil
}

func (b *bearerAuthn) serveToken(w http.ResponseWriter, r *http.Request) {
	user, _, _ := r.BasicAuth()
	fmt.Fprintf(w, `{"token": "%d-%s"}`, b.gen.Load(), user)
}

// fixedBinder binds uploads as berth's Authn does, under a key every
// "replica" of the test shares.
type fixedBinder struct{}

func (fixedBinder) BindUpload(uuid, subject string) string {
	return digest.FromString("key\x00" + uuid + "\x00" + subject).Encoded()[:22]
}

// TestUploadOwnerRule runs chunked uploads through berth's auth gate: an
// upload alice's killed import left is resumed by alice once her tokens
// have expired (the owner binding names her, not a token), and refused to
// admin, whose run then sends the blob from zero.
func TestUploadOwnerRule(t *testing.T) {
	const chunk, size = 64 << 10, 1<<20 + 5
	data := randomBytes(size, 8)
	desc := descOf(data)
	policy, err := auth.NewPolicy(&config.Auth{Rules: []config.AuthRule{{Subjects: []string{"user:alice", "user:admin"}, Repositories: []string{"a/*"}, Actions: []string{"admin"}}}})
	if err != nil {
		t.Fatal(err)
	}
	authn := &bearerAuthn{}
	m := &meter{}
	host := registrytest.NewBerth(t, onDisk(t), func(h http.Handler) http.Handler {
		gate := auth.Registry(m.wrap(h), auth.RegistryOptions{Authenticator: authn, Policy: policy, Uploads: fixedBinder{}})
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/auth/token" {
				authn.serveToken(w, r)
				return
			}
			gate.ServeHTTP(w, r)
		})
	})
	as := func(user string) *client.Client {
		store := credentials.NewMemoryStore()
		if err := store.Put(context.Background(), host, orasauth.Credential{Username: user, Password: "pw"}); err != nil {
			t.Fatal(err)
		}
		c, err := client.New(client.Options{Credentials: store})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	alice, admin := as("alice"), as("admin")
	state := t.TempDir()

	// alice's import, killed when the target holds 40 % of the blob.
	ctx, cancel := context.WithCancel(context.Background())
	m.arm(size*40/100, cancel)
	tgt := &target{c: alice, host: host, counts: &counters{}, progress: &Progress{}, up: newUploader(chunk, state, slog.New(slog.DiscardHandler))}
	if err := tgt.putBlob(ctx, alice.Repository(host, "a/app"), "a/app", desc, bytesSource(data), nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("alice's killed upload: %v, want context canceled", err)
	}
	m.inFlight.Wait()
	m.arm(0, nil)
	adminState := t.TempDir()
	ents, err := os.ReadDir(state)
	if err != nil || len(ents) != 1 {
		t.Fatalf("journal: %v, %v; want one file", ents, err)
	}
	b, err := os.ReadFile(filepath.Join(state, ents[0].Name()))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(adminState, ents[0].Name()), b, 0o600); err != nil {
		t.Fatal(err)
	}

	// Every token expires. admin holds the journal of alice's upload: the
	// gate answers as for an upload that does not exist, and admin sends
	// the blob from zero; then alice's rerun resumes her upload.
	authn.gen.Add(1)
	open := func() (io.ReadCloser, error) { return bytesSource(data).open(context.Background(), "", desc) }
	for _, tc := range []struct {
		who     string
		c       *client.Client
		dir     string
		maxSent int64
		log     string
	}{
		{"admin", admin, adminState, size, "starting it again from zero"},
		{"alice", alice, state, size - size*40/100 + chunk, "resuming an interrupted upload"},
	} {
		var logs bytes.Buffer
		var progress atomic.Int64
		u := newUploader(chunk, tc.dir, slog.New(slog.NewTextHandler(&logs, nil)))
		before := m.read.Load()
		if _, err := u.put(context.Background(), tc.c.Repository(host, "a/app"), host, "a/app", desc, open, &progress); err != nil {
			t.Fatalf("%s: %v", tc.who, err)
		}
		if sent := m.read.Load() - before; sent > tc.maxSent || !strings.Contains(logs.String(), tc.log) {
			t.Errorf("%s sent %d bytes of %d, want at most %d and a log saying %q:\n%s", tc.who, sent, size, tc.maxSent, tc.log, logs.String())
		}
	}
	checkBlob(t, alice, host, "a/app", data)
}
