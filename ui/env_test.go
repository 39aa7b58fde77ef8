package ui_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/sqlite"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/storage"
	"github.com/berth-registry/berth/ui"
)

// fixtures is the shared fixture tree (see its README).
const fixtures = "../../shared/fixtures"

// env is a real registry (in-memory storage, behind an httptest server)
// with a catalog on SQLite following it in process.
type env struct {
	t     testing.TB
	ctx   context.Context
	host  string
	cat   *catalog.Catalog
	store catalog.Store
}

func newEnv(t testing.TB) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var current atomic.Pointer[catalog.Catalog]
	reg, err := registry.New(ctx, registry.Options{
		Storage:    &storage.Config{Driver: "inmemory"},
		HTTPSecret: "test",
		OnEvent: func(ev registry.Event) {
			if c := current.Load(); c != nil {
				c.Notify(ev)
			}
		},
		Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(reg)
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.New(catalog.Options{
		Store: store, Source: catalog.NewDistributionSource(reg.Namespace(), reg.Referrers, reg.UntagDangling),
		ReconcileInterval: -1, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	current.Store(cat)
	done := make(chan struct{})
	go func() {
		defer close(done)
		cat.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		store.Close()
		srv.Close()
		reg.Close()
	})
	return &env{t: t, ctx: ctx, host: strings.TrimPrefix(srv.URL, "http://"), cat: cat, store: store}
}

// push pushes a package as berth push does and waits until it is indexed.
func (e *env) push(namespace string, p *pkgformat.Package) {
	e.t.Helper()
	art, err := p.Artifact()
	if err != nil {
		e.t.Fatal(err)
	}
	repoName := namespace + "/" + p.Metadata.Name
	repo, err := remote.NewRepository(e.host + "/" + repoName)
	if err != nil {
		e.t.Fatal(err)
	}
	repo.PlainHTTP = true
	for _, b := range []struct {
		desc ocispec.Descriptor
		data []byte
	}{{art.ConfigDesc, art.Config}, {art.ContentDesc, art.Content}} {
		if err := repo.Blobs().Push(e.ctx, b.desc, bytes.NewReader(b.data)); err != nil && !strings.Contains(err.Error(), "exists") {
			e.t.Fatal(err)
		}
	}
	d := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(art.Manifest), Size: int64(len(art.Manifest))}
	if err := repo.PushReference(e.ctx, d, bytes.NewReader(art.Manifest), pkgformat.Tag(p.Metadata.Version)); err != nil {
		e.t.Fatalf("push %s:%s: %v", repoName, p.Metadata.Version, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := e.cat.Version(e.ctx, catalog.Access{All: true}, namespace, p.Metadata.Name, p.Metadata.Version)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s:%s not indexed: %v", repoName, p.Metadata.Version, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// load reads a fixture package directory.
func load(t testing.TB, dir string) *pkgformat.Package {
	t.Helper()
	p, err := pkgformat.Load(filepath.Join(fixtures, dir), pkgformat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// loadRepository reads every version of an OLM fixture package.
func loadRepository(t testing.TB, dir string) []*pkgformat.Package {
	t.Helper()
	ps, err := pkgformat.LoadRepository(filepath.Join(fixtures, dir), pkgformat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// build makes a package of files; version is the plain format's.
func build(t testing.TB, name, version string, files map[string]string) *pkgformat.Package {
	t.Helper()
	var fs []pkgformat.File
	for path, data := range files {
		fs = append(fs, pkgformat.File{Path: path, Mode: 0o644, Data: []byte(data)})
	}
	p, err := pkgformat.New(fs, pkgformat.Options{Name: name, Version: version})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// get requests path from h as the server would, and returns the response
// and its body.
func get(t testing.TB, h http.Handler, path string, mod ...func(*http.Request)) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for _, m := range mod {
		m(req)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result(), rec.Body.String()
}

// newUI returns the UI of e's catalog with opts (Catalog set).
func newUI(e *env, opts ui.Options) http.Handler {
	opts.Catalog = e.cat
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return ui.New(opts)
}
