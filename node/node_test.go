package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/prometheus/client_golang/prometheus"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/content/memory"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/internal/datalock"
	"github.com/berth-registry/berth/internal/pgtest"
	"github.com/berth-registry/berth/membership"
	"github.com/berth-registry/berth/pkgformat"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// testConfig is berth serve's default configuration on a free loopback
// port, its data in data.
func testConfig(t *testing.T, data string, edit func(*config.Config)) *config.Config {
	t.Helper()
	cfg := &config.Config{Addr: "127.0.0.1:0", Data: data, ShutdownTimeout: 10 * time.Second}
	if edit != nil {
		edit(cfg)
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// running is a node serving in the background of a test.
type running struct {
	*Node
	url    string
	log    *syncBuffer
	cancel context.CancelFunc
	served chan error
}

// start assembles a node with New and serves it until stop, with metrics
// of its own and its log kept for the test.
func start(t *testing.T, cfg *config.Config) *running { return startWith(t, New, cfg) }

// startWith is start with New or NewCatalog.
func startWith(t *testing.T, assemble func(context.Context, *config.Config, Options) (*Node, error), cfg *config.Config) *running {
	t.Helper()
	log := &syncBuffer{}
	n, err := assemble(context.Background(), cfg, Options{Logger: slog.New(slog.NewTextHandler(log, nil)), Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Node: n, url: "http://" + n.Addr().String(), log: log, cancel: cancel, served: make(chan error, 1)}
	go func() { r.served <- n.Serve(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop ends Serve as SIGTERM does, then closes the node; it fails the
// test if serving failed or the node did not stop within 30s.
func (r *running) stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.served:
		if err != nil {
			t.Errorf("Serve: %v\n%s", err, r.log)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("Serve did not return within 30s of its context's end\n%s", r.log)
	}
	r.Close()
}

// get fetches path and returns its status and body.
func (r *running) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(r.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// waitFor polls path until it answers 200 and returns the body.
func (r *running) waitFor(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := r.get(t, path)
		if code == http.StatusOK {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %d %s after 20s, want 200\n%s", path, code, body, r.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *running) repo(t *testing.T, name string) *remote.Repository {
	t.Helper()
	repo, err := remote.NewRepository(strings.TrimPrefix(r.url, "http://") + "/" + name)
	if err != nil {
		t.Fatal(err)
	}
	repo.PlainHTTP = true
	return repo
}

// helloChart is the Helm chart of pkgformat's test data as berth push
// makes it, in a memory store tagged with its version.
func helloChart(t *testing.T) (*pkgformat.Package, *pkgformat.Artifact, *memory.Store) {
	t.Helper()
	p, err := pkgformat.Load(filepath.Join("..", "pkgformat", "testdata", "hello-chart"), pkgformat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	art, err := p.Artifact()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	store := memory.New()
	manifest := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(art.Manifest), Size: int64(len(art.Manifest))}
	for _, b := range []struct {
		desc ocispec.Descriptor
		data []byte
	}{{art.ConfigDesc, art.Config}, {art.ContentDesc, art.Content}, {manifest, art.Manifest}} {
		if err := store.Push(ctx, b.desc, bytes.NewReader(b.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Tag(ctx, manifest, pkgformat.Tag(p.Metadata.Version)); err != nil {
		t.Fatal(err)
	}
	return p, art, store
}

// pull copies repo:tag with oras-go and returns the content layer.
func pull(t *testing.T, repo *remote.Repository, tag string, art *pkgformat.Artifact) []byte {
	t.Helper()
	ctx := context.Background()
	dst := memory.New()
	if _, err := oras.Copy(ctx, repo, tag, dst, tag, oras.DefaultCopyOptions); err != nil {
		t.Fatalf("pull %s:%s: %v", repo.Reference.Repository, tag, err)
	}
	b, err := content.FetchAll(ctx, dst, art.ContentDesc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestNode starts berth serve in process, pushes and pulls a chart with
// oras-go, finds it in the catalog, and stops: Serve returns at its
// context's end and Close frees the data directory.
func TestNode(t *testing.T) {
	data := t.TempDir()
	n := start(t, testConfig(t, data, nil))

	if _, err := datalock.Lock(data); !errors.Is(err, datalock.ErrInUse) {
		t.Errorf("locking the data directory of a running node: %v, want ErrInUse", err)
	}
	code, body := n.get(t, "/readyz")
	if code != http.StatusOK || !strings.Contains(body, `"storage"`) || !strings.Contains(body, `"catalog"`) {
		t.Errorf("/readyz: %d %s, want 200 checking storage and catalog", code, body)
	}

	p, art, src := helloChart(t)
	tag := pkgformat.Tag(p.Metadata.Version)
	repo := n.repo(t, "team/"+p.Metadata.Name)
	if _, err := oras.Copy(context.Background(), src, tag, repo, tag, oras.DefaultCopyOptions); err != nil {
		t.Fatalf("push: %v", err)
	}
	if got := pull(t, repo, tag, art); !bytes.Equal(got, art.Content) {
		t.Errorf("pulled %d bytes of content, want the %d pushed", len(got), len(art.Content))
	}
	var pkg struct {
		Name     string `json:"name"`
		Versions []struct {
			Version string `json:"version"`
		} `json:"versions"`
	}
	if err := json.Unmarshal([]byte(n.waitFor(t, "/api/v1/packages/team/"+p.Metadata.Name)), &pkg); err != nil {
		t.Fatal(err)
	}
	if pkg.Name != p.Metadata.Name || len(pkg.Versions) != 1 || pkg.Versions[0].Version != tag {
		t.Errorf("catalog entry %+v, want %s with version %s", pkg, p.Metadata.Name, tag)
	}

	n.stop(t)
	for _, line := range []string{"msg=starting ", `msg="berth serving"`, `msg="shutting down"`, "msg=stopped"} {
		if !strings.Contains(n.log.String(), line) {
			t.Errorf("log has no %s line:\n%s", line, n.log)
		}
	}
	release, err := datalock.Lock(data)
	if err != nil {
		t.Fatalf("the data directory after Close: %v, want it free", err)
	}
	release()
	if _, err := net.Dial("tcp", n.Addr().String()); err == nil {
		t.Errorf("%s still accepts connections after Close", n.Addr())
	}
}

// TestCatalogNode starts berth serve catalog in process on the registry of
// another node: it indexes what that registry holds and serves the catalog,
// but no registry of its own.
func TestCatalogNode(t *testing.T) {
	reg := start(t, testConfig(t, t.TempDir(), nil))
	p, _, src := helloChart(t)
	tag := pkgformat.Tag(p.Metadata.Version)
	if _, err := oras.Copy(context.Background(), src, tag, reg.repo(t, "team/"+p.Metadata.Name), tag, oras.DefaultCopyOptions); err != nil {
		t.Fatalf("push: %v", err)
	}

	cat := startWith(t, NewCatalog, testConfig(t, t.TempDir(), func(c *config.Config) { c.Catalog.Registry = reg.url }))
	cat.waitFor(t, "/api/v1/packages/team/"+p.Metadata.Name+"/versions/"+tag)
	if code, body := cat.get(t, "/readyz"); code != http.StatusOK || !strings.Contains(body, `"catalog"`) || strings.Contains(body, `"storage"`) {
		t.Errorf("/readyz: %d %s, want 200 checking the catalog and no storage", code, body)
	}
	if code, _ := cat.get(t, "/v2/"); code != http.StatusNotFound {
		t.Errorf("/v2/ of a split catalog: %d, want 404", code)
	}
	cat.stop(t)
	if !strings.Contains(cat.log.String(), `msg="starting catalog"`) {
		t.Errorf("log has no starting catalog line:\n%s", cat.log)
	}
}

// TestNodeRefusals: a node that cannot start says which setting to change
// and releases what it took, so that a corrected start succeeds.
func TestNodeRefusals(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		name string
		edit func(*config.Config)
		want string
	}{
		{"address in use", func(c *config.Config) { c.Addr = busy.Addr().String() }, "address already in use"},
		{"HTTP secret file is a directory", func(c *config.Config) { c.Registry.HTTPSecretFile = c.Data }, "registry.httpSecretFile:"},
		{"bad trusted proxy", func(c *config.Config) { c.TrustedProxies = []string{"not-a-cidr"} }, "trustedProxies:"},
		{"TLS certificate missing", func(c *config.Config) {
			c.HTTP.TLS = config.TLS{Certificate: c.Data + "/none.crt", Key: c.Data + "/none.key"}
		}, "http.tls.certificate: stat "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			cfg := testConfig(t, data, nil)
			tc.edit(cfg)
			n, err := New(context.Background(), cfg, Options{Logger: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry()})
			if err == nil {
				n.Close()
				t.Fatalf("New started, want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error containing %q", err, tc.want)
			}
			release, err := datalock.Lock(data)
			if err != nil {
				t.Fatalf("the data directory after a failed start: %v, want it free", err)
			}
			release()
		})
	}
}

// TestNodeSecond: a second node on a running node's data directory is
// refused, naming the directory.
func TestNodeSecond(t *testing.T) {
	data := t.TempDir()
	start(t, testConfig(t, data, nil))
	_, err := New(context.Background(), testConfig(t, data, nil), Options{Logger: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry()})
	if !errors.Is(err, datalock.ErrInUse) || !strings.HasPrefix(err.Error(), "data: ") {
		t.Fatalf("a second node on %s: %v, want data: ...ErrInUse", data, err)
	}
}

// TestTwoReplicas runs two nodes in one process as two replicas: one
// PostgreSQL catalog, one storage. What is pushed through one is in the
// catalog and pullable through the other, and exactly one leads.
func TestTwoReplicas(t *testing.T) {
	db := pgtest.Database(t)
	shared := t.TempDir()
	replica := func(c *config.Config) {
		c.Catalog.Database = db
		c.Storage.Filesystem.RootDirectory = filepath.Join(shared, "registry")
		c.Registry.HTTPSecretFile = filepath.Join(shared, "http-secret")
	}
	a := start(t, testConfig(t, t.TempDir(), replica))
	b := start(t, testConfig(t, t.TempDir(), replica))

	for _, r := range []*running{a, b} {
		if body := r.waitFor(t, "/readyz"); !strings.Contains(body, `"database"`) {
			t.Errorf("%s/readyz: %s, want the database checked", r.url, body)
		}
	}
	p, art, src := helloChart(t)
	tag := pkgformat.Tag(p.Metadata.Version)
	if _, err := oras.Copy(context.Background(), src, tag, a.repo(t, "team/"+p.Metadata.Name), tag, oras.DefaultCopyOptions); err != nil {
		t.Fatalf("push through a: %v", err)
	}
	b.waitFor(t, "/api/v1/packages/team/"+p.Metadata.Name+"/versions/"+tag)
	if got := pull(t, b.repo(t, "team/"+p.Metadata.Name), tag, art); !bytes.Equal(got, art.Content) {
		t.Errorf("pulled %d bytes through b, want the %d pushed through a", len(got), len(art.Content))
	}

	deadline := time.Now().Add(20 * time.Second)
	for {
		var leaders int
		for _, r := range []*running{a, b} {
			if _, body := r.get(t, "/metrics"); strings.Contains(body, "\nberth_leader 1\n") {
				leaders++
			}
		}
		if leaders == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d replicas say berth_leader 1 after 20s, want 1", leaders)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestNodeRefusesADisagreeingReplica: a node with a SQLite catalog of its
// own on the storage of a running one is refused before it serves, naming
// the setting to change (membership); the running one serves on.
func TestNodeRefusesADisagreeingReplica(t *testing.T) {
	shared := t.TempDir()
	replica := func(c *config.Config) {
		c.Storage.Filesystem.RootDirectory = shared
		c.Replicas.HeartbeatInterval = 100 * time.Millisecond
	}
	a := start(t, testConfig(t, t.TempDir(), replica))
	_, err := New(context.Background(), testConfig(t, t.TempDir(), replica), Options{Logger: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry()})
	if !errors.Is(err, membership.ErrConflict) || !strings.Contains(err.Error(), "set catalog.database: postgres://") {
		t.Fatalf("a second node on the storage of a running one: %v, want membership.ErrConflict saying to set catalog.database", err)
	}
	a.waitFor(t, "/readyz")
}

// syncBuffer is a log the node writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestPublicHost(t *testing.T) {
	for _, tc := range []struct {
		publicURL, addr, want string
	}{
		{"https://berth.example.com", "0.0.0.0:5000", "berth.example.com"},
		{"http://berth.example.com:8080", "127.0.0.1:5000", "berth.example.com:8080"},
		{"", "127.0.0.1:5000", "127.0.0.1:5000"},
		{"", "0.0.0.0:5000", "localhost:5000"},
		{"", "[::]:5000", "localhost:5000"},
		{"", "[::1]:5001", "[::1]:5001"},
		{"", "10.0.0.7:443", "10.0.0.7:443"},
	} {
		addr, err := net.ResolveTCPAddr("tcp", tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := publicHost(tc.publicURL, addr); got != tc.want {
			t.Errorf("publicHost(%q, %s) = %q, want %q", tc.publicURL, tc.addr, got, tc.want)
		}
	}
}
