package sources

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/internal/gittest"
	"github.com/berth-registry/berth/internal/pgtest"
	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/signing"
	"github.com/berth-registry/berth/storage"
)

// quiet drops the logs of the registry and the trackers.
var quiet = slog.New(slog.DiscardHandler)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// The provenance key of the package's tests, made once: its scrypt
// encryption is slow.
var (
	keyOnce   sync.Once
	keySigner *signing.Signer
	keyErr    error
)

func testSigner(t testing.TB) *signing.Signer {
	t.Helper()
	keyOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sources-key-")
		if err != nil {
			keyErr = err
			return
		}
		keySigner, keyErr = signing.LoadOrCreateSigner(filepath.Join(dir, "provenance.key"), []byte("test"))
		os.RemoveAll(dir)
	})
	if keyErr != nil {
		t.Fatal(keyErr)
	}
	return keySigner
}

// env is a tracker over a real registry on a temporary filesystem.
type env struct {
	t     testing.TB
	cfg   *config.Config
	store Store
	reg   *registry.Registry
	tr    *Tracker

	mu     sync.Mutex
	events []apiv1.Change
}

// newEnv makes a tracker of the sources of ns "team" (each with
// AllowPrivate, as the test servers are on loopback unless edit says).
func newEnv(t testing.TB, edit func(*config.Config), srcs ...config.Source) *env {
	t.Helper()
	return newEnvWith(t, nil, edit, srcs...)
}

// newEnvWith is newEnv with the registry's options edited by reg.
func newEnvWith(t testing.TB, reg func(*registry.Options), edit func(*config.Config), srcs ...config.Source) *env {
	t.Helper()
	cfg := &config.Config{Data: t.TempDir()}
	cfg.SetDefaults()
	cfg.Sources.AllowPrivate = true
	cfg.Namespaces = []config.Namespace{{Name: "team", Sources: srcs}}
	if edit != nil {
		edit(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	opts := registry.Options{
		Storage:        &storage.Config{Driver: "filesystem", Filesystem: storage.Filesystem{RootDirectory: filepath.Join(cfg.Data, "registry")}},
		HTTPSecret:     "test",
		AllowOverwrite: cfg.AllowOverwrite,
		Logger:         quiet,
	}
	if reg != nil {
		reg(&opts)
	}
	r, err := registry.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	store, err := OpenSQLite(ctx, filepath.Join(cfg.Data, "sources.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	e := &env{t: t, cfg: cfg, store: store, reg: r}
	e.tr = e.tracker(store)
	return e
}

// tracker is another tracker of e's sources and registry over store.
func (e *env) tracker(store Store) *Tracker {
	e.t.Helper()
	tr, err := New(Options{
		Config: e.cfg, Store: store, Signer: testSigner(e.t), Registry: e.reg,
		RegistryHost: "berth.test", BuilderID: "https://berth.test", Logger: quiet,
		OnEvent: func(_ context.Context, c apiv1.Change) {
			e.mu.Lock()
			e.events = append(e.events, c)
			e.mu.Unlock()
		},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return tr
}

// check checks the source of pkg once, as Run does.
func (e *env) check(pkg string) apiv1.Source {
	e.t.Helper()
	s := e.tr.byKey[config.SourceKey{Namespace: "team", Package: pkg}]
	if s == nil {
		e.t.Fatalf("no source of %s", pkg)
	}
	e.tr.check(context.Background(), s)
	e.tr.flush(context.Background())
	return e.status(pkg)
}

func (e *env) status(pkg string) apiv1.Source {
	e.t.Helper()
	all, err := e.tr.Status(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	for _, s := range all {
		if s.Package == pkg {
			return s
		}
	}
	e.t.Fatalf("no status of %s in %+v", pkg, all)
	return apiv1.Source{}
}

// takeEvents returns the events since the last call.
func (e *env) takeEvents() []apiv1.Change {
	e.mu.Lock()
	defer e.mu.Unlock()
	ev := e.events
	e.events = nil
	return ev
}

// tags lists the tags of team/pkg, without cosign's.
func (e *env) tags(pkg string) []string {
	e.t.Helper()
	var out []string
	err := e.tr.client.Repository("berth.test", "team/"+pkg).Tags(context.Background(), "", func(tags []string) error {
		for _, tag := range tags {
			if filepath.Ext(tag) != ".sig" && filepath.Ext(tag) != ".att" {
				out = append(out, tag)
			}
		}
		return nil
	})
	if err != nil && !isNotFound(err) {
		e.t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// verified reports whether team/pkg:tag has a signature berth's key
// verifies.
func (e *env) verified(pkg, tag string) bool {
	e.t.Helper()
	key, err := signing.ParsePublicKey(e.tr.PublicKey())
	if err != nil {
		e.t.Fatal(err)
	}
	rep, err := e.tr.client.VerifyKeys(context.Background(), client.Reference{Registry: "berth.test", Namespace: "team", Name: pkg, Tag: tag}, []signing.Key{key})
	if err != nil {
		e.t.Fatal(err)
	}
	return rep.Verified()
}

// gitRepo is a git repository served by git http-backend on loopback.
type gitRepo struct {
	t        testing.TB
	work     string
	url      string
	authURL  string
	password string
}

func newGitRepo(t testing.TB, files map[string]string) *gitRepo {
	t.Helper()
	gittest.Require(t)
	root := t.TempDir()
	work := filepath.Join(root, "repo")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	gittest.Run(t, work, "init", "-q", "-b", "main")
	r := &gitRepo{t: t, work: work, password: "s3cret-pw"}
	r.commit(files)
	r.url = gittest.Server(t, root, "") + "/repo"
	r.authURL = gittest.Server(t, root, r.password) + "/repo"
	return r
}

// commit writes files and commits them.
func (r *gitRepo) commit(files map[string]string) string {
	r.t.Helper()
	for name, body := range files {
		p := filepath.Join(r.work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	return gittest.CommitAll(r.t, r.work, "change")
}

func (r *gitRepo) git(args ...string) string {
	r.t.Helper()
	return gittest.Run(r.t, r.work, args...)
}

// chart is the files of a Helm chart.
func chart(name, version, values string) map[string]string {
	return map[string]string{
		"chart/Chart.yaml":  "apiVersion: v2\nname: " + name + "\nversion: " + version + "\n",
		"chart/values.yaml": values,
	}
}

// tarball is a gzipped tar of files.
func tarball(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, files[n]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
