package catalog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/prometheus/client_golang/prometheus"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/berth-registry/berth/approval"
	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/sqlite"
	"github.com/berth-registry/berth/coord"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/signing"
	"github.com/berth-registry/berth/storage"
)

// fixtures is the shared fixture tree (see its README).
const fixtures = "../../shared/fixtures"

// env is a real registry (in-memory storage, behind an httptest server) with a
// catalog on a SQLite store following it in process.
type env struct {
	t     testing.TB
	ctx   context.Context
	opts  envOptions
	reg   *registry.Registry
	host  string
	path  string // the SQLite file
	store catalog.Store
	cat   *catalog.Catalog
	// current is the catalog the registry's events go to; stop ends it.
	current atomic.Pointer[catalog.Catalog]
	stop    func()
}

type envOptions struct {
	// lose drops every registry event, as a crash would: only the
	// reconciler can then bring the catalog up to date.
	lose bool
	// source, when set, wraps the catalog's source.
	source func(catalog.Source) catalog.Source
	// policy is the catalog's trust policy.
	policy *signing.Policy
	// split reads the registry over HTTP (RemoteSource), and passes events
	// on as distribution's webhooks would: without their Subject.
	split bool
	// metrics registers the catalog's metrics.
	metrics prometheus.Registerer
	// admit is the registry's tag admission.
	admit func(ctx context.Context, push registry.TagPush) error
	// indexTimeout is the catalog's IndexTimeout.
	indexTimeout time.Duration
	// elector is the catalog's Elector; with one, start does not wait for
	// a reconciliation.
	elector coord.Elector
	// gated is a namespace whose versions may not ask for permissions
	// beyond those admitted for their package name without an approval;
	// approvals and allowances are kept in the registry's storage.
	gated string
	// signals and queueSize are the catalog's Signals and QueueSize.
	signals   coord.Signals
	queueSize int
}

func newEnv(t testing.TB, opts envOptions) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e := &env{t: t, ctx: ctx, opts: opts}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg, err := registry.New(ctx, registry.Options{
		Storage:        &storage.Config{Driver: "inmemory"},
		HTTPSecret:     "test",
		AllowOverwrite: func(ns string) bool { return ns == "scratch" },
		AdmitTag: func(ctx context.Context, push registry.TagPush) error {
			if opts.admit != nil {
				if err := opts.admit(ctx, push); err != nil {
					return err
				}
			}
			if cat := e.current.Load(); cat != nil && opts.gated != "" {
				return cat.AdmitPermissions(ctx, push.Repo, push.Tag, push.MediaType, push.Payload)
			}
			return nil
		},
		OnEvent: func(ev registry.Event) {
			if cat := e.current.Load(); cat != nil && !opts.lose {
				if opts.split {
					ev.Subject = ""
				}
				cat.Notify(ev)
			}
		},
		Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(reg)
	e.reg, e.host = reg, strings.TrimPrefix(srv.URL, "http://")
	e.path = filepath.Join(t.TempDir(), "catalog.db")
	t.Cleanup(func() {
		e.stop()
		cancel()
		srv.Close()
		reg.Close()
	})
	e.start(opts.policy)
	return e
}

// start opens the store and runs a catalog on it with policy, and waits for
// its start-up reconciliation.
func (e *env) start(policy *signing.Policy) {
	e.t.Helper()
	store, err := sqlite.Open(e.ctx, e.path)
	if err != nil {
		e.t.Fatal(err)
	}
	var src catalog.Source = catalog.NewDistributionSource(e.reg.Namespace(), e.reg.Referrers, e.reg.UntagDangling)
	if e.opts.split {
		if src, err = catalog.NewRemoteSource("http://"+e.host, nil); err != nil {
			e.t.Fatal(err)
		}
	}
	if e.opts.source != nil {
		src = e.opts.source(src)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts := catalog.Options{Store: store, Source: src, ReconcileInterval: -1, Logger: quiet, Policy: policy, Metrics: e.opts.metrics, IndexTimeout: e.opts.indexTimeout, Elector: e.opts.elector,
		Signals: e.opts.signals, QueueSize: e.opts.queueSize}
	if e.opts.gated != "" {
		opts.Approvals = approval.New(e.reg.StorageDriver())
		opts.RefuseWideningPermissions = func(ns string) bool { return ns == e.opts.gated }
	}
	cat, err := catalog.New(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.store, e.cat = store, cat
	e.current.Store(cat)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		cat.Run(ctx)
	}()
	e.stop = func() {
		cancel()
		<-done
		store.Close()
	}
	if e.opts.elector == nil {
		e.waitReconciled(1)
	}
}

// restart stops the catalog, as a shutdown does, and starts another on the
// same store and registry with policy.
func (e *env) restart(policy *signing.Policy) {
	e.t.Helper()
	e.current.Store(nil)
	e.stop()
	e.start(policy)
}

// waitReconciled waits until at least n reconciliations have finished.
func (e *env) waitReconciled(n int64) {
	e.t.Helper()
	e.waitFor("reconciliation", func() bool {
		st, err := e.cat.Status(e.ctx)
		return err == nil && st.Reconcile.Runs >= n
	})
}

// waitFor polls cond until it holds, failing the test after 10 seconds.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *env) repo(name string) *remote.Repository {
	e.t.Helper()
	r, err := remote.NewRepository(e.host + "/" + name)
	if err != nil {
		e.t.Fatal(err)
	}
	r.PlainHTTP = true
	return r
}

// blob describes and uploads one blob.
func (e *env) blob(repo *remote.Repository, mediaType string, b []byte) ocispec.Descriptor {
	e.t.Helper()
	d := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(b), Size: int64(len(b))}
	if err := repo.Blobs().Push(e.ctx, d, bytes.NewReader(b)); err != nil && !strings.Contains(err.Error(), "exists") {
		e.t.Fatal(err)
	}
	return d
}

// pushManifest uploads a manifest and tags it; it returns its digest.
func (e *env) pushManifest(repoName, tag, mediaType string, manifest []byte) string {
	e.t.Helper()
	repo := e.repo(repoName)
	d := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(manifest), Size: int64(len(manifest))}
	if err := repo.PushReference(e.ctx, d, bytes.NewReader(manifest), tag); err != nil {
		e.t.Fatalf("push %s:%s: %v", repoName, tag, err)
	}
	return d.Digest.String()
}

// pushArtifact uploads config and layers and tags an image manifest made of them.
func (e *env) pushArtifact(repoName, tag, artifactType, configMediaType string, config []byte, layers ...layer) string {
	e.t.Helper()
	return e.pushManifest(repoName, tag, ocispec.MediaTypeImageManifest, e.manifestOf(repoName, artifactType, layer{configMediaType, config}, layers...))
}

// manifestOf uploads config and layers to repoName and returns an image
// manifest made of them.
func (e *env) manifestOf(repoName, artifactType string, config layer, layers ...layer) []byte {
	e.t.Helper()
	repo := e.repo(repoName)
	m := ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest, ArtifactType: artifactType, Config: e.blob(repo, config.mediaType, config.data), Layers: []ocispec.Descriptor{}}
	m.SchemaVersion = 2
	for _, l := range layers {
		m.Layers = append(m.Layers, e.blob(repo, l.mediaType, l.data))
	}
	b, err := json.Marshal(m)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

type layer struct {
	mediaType string
	data      []byte
}

// pushPackage pushes a package as berth push does; it returns the package.
func (e *env) pushPackage(namespace string, p *pkgformat.Package) string {
	e.t.Helper()
	d, err := e.tryPushPackage(namespace, p)
	if err != nil {
		e.t.Fatalf("push %s/%s:%s: %v", namespace, p.Metadata.Name, p.Metadata.Version, err)
	}
	return d
}

// tryPushPackage pushes a package as pushPackage does, and returns the
// registry's refusal of its tag.
func (e *env) tryPushPackage(namespace string, p *pkgformat.Package) (string, error) {
	e.t.Helper()
	repo, d, manifest := e.uploadPackage(namespace, p)
	return d.Digest.String(), repo.PushReference(e.ctx, d, bytes.NewReader(manifest), pkgformat.Tag(p.Metadata.Version))
}

// uploadPackage uploads a package's blobs to namespace/name, as berth push
// does before its manifest, and returns the repository, and the manifest
// and its descriptor.
func (e *env) uploadPackage(namespace string, p *pkgformat.Package) (*remote.Repository, ocispec.Descriptor, []byte) {
	e.t.Helper()
	art, err := p.Artifact()
	if err != nil {
		e.t.Fatal(err)
	}
	repo := e.repo(namespace + "/" + p.Metadata.Name)
	e.blob(repo, art.ConfigDesc.MediaType, art.Config)
	e.blob(repo, art.ContentDesc.MediaType, art.Content)
	return repo, ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(art.Manifest), Size: int64(len(art.Manifest))}, art.Manifest
}

// load reads a fixture package directory.
func load(t *testing.T, dir string) *pkgformat.Package {
	t.Helper()
	p, err := pkgformat.Load(filepath.Join(fixtures, dir), pkgformat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// loadRepository reads every version of an OLM fixture package.
func loadRepository(t *testing.T, dir string) []*pkgformat.Package {
	t.Helper()
	ps, err := pkgformat.LoadRepository(filepath.Join(fixtures, dir), pkgformat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// entry returns the catalog's entry for a tag, or nil.
func (e *env) entry(ns, name, tag string) *catalog.Entry {
	en, err := e.store.Entry(e.ctx, ns, name, tag)
	if err != nil {
		return nil
	}
	return en
}
