// Package registry embeds distribution's registry (handlers.App) and adds what
// berth needs around it: package version immutability and a tag admission
// hook, the OCI 1.1 referrers API (which distribution lacks), events about
// tags and manifests, a readiness check on the storage, and distribution's
// logs routed into berth's slog logger.
package registry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/distribution/distribution/v3"
	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/api/errcode"
	"github.com/distribution/distribution/v3/registry/handlers"
	registrymiddleware "github.com/distribution/distribution/v3/registry/middleware/registry"
	storagedriver "github.com/distribution/distribution/v3/registry/storage/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-registry/berth/coord"
	"github.com/berth-registry/berth/internal/groupsync"
	"github.com/berth-registry/berth/storage"
)

// middlewareName is the name berth's guard is registered under with
// distribution's registry middleware.
const middlewareName = "berth"

func init() {
	if err := registrymiddleware.Register(middlewareName, initGuard); err != nil {
		panic(err)
	}
}

// Options configure a Registry.
type Options struct {
	// Storage selects and configures the blob storage.
	Storage *storage.Config
	// HTTPSecret signs upload state; replicas behind one load balancer must share it.
	HTTPSecret string
	// AllowOverwrite reports whether package version tags in a namespace may
	// be re-pointed to another digest. Nil means never.
	AllowOverwrite func(namespace string) bool
	// OnEvent, when set, is called after every tag write, tag removal,
	// manifest deletion and push of a manifest with a subject, before the
	// client gets its response. It must not block.
	OnEvent func(Event)
	// AdmitTag, when set, is asked before a package manifest (a berth package
	// or a Helm chart) pushed by tag is stored, after the immutability check.
	// An error refuses the push with an OCI DENIED error (HTTP 403) whose
	// message is the error's text. Pushes of one tag are serialised, so no
	// other push of repo:tag runs meanwhile. It is not asked for other
	// manifests, nor for pushes by digest.
	AdmitTag func(ctx context.Context, push TagPush) error
	// Logger receives distribution's own logs. Nil means slog.Default().
	Logger *slog.Logger
	// Locks, when set, are the locks that pushes of one tag and garbage
	// collections take, shared by the replicas of one storage
	// (coord.Postgres), so that exactly one of two pushes of a version
	// through different replicas wins and no collection deletes what a
	// push on another replica is writing. Nil means locks of this process.
	// Collections read what writes made live meanwhile in the locks'
	// journals (coord.Journals), or in journals of this process when the
	// locks keep none.
	Locks coord.Locks
	// Metrics, when set, receives berth_registry_flush_wait_seconds.
	Metrics prometheus.Registerer
	// Quota, when set, charges pushes to their namespace's quota and
	// bounds uploads (quota.go, uploads.go); its PurgeAfter also governs
	// distribution's purge of the uploads its ledger does not know.
	Quota *QuotaOptions
	// Recent, when set, bounds the manifests and small blobs the registry
	// keeps of what it has just received, for the catalog to index a push
	// from (RecentManifest, RecentBlob). Nil keeps none.
	Recent *RecentOptions
}

// Registry is an OCI distribution registry serving /v2/.
type Registry struct {
	app    *handlers.App
	guard  *guard
	driver storagedriver.StorageDriver
	log    *slog.Logger
	// files answers blob and manifest reads from disk; nil unless the
	// storage is the filesystem driver.
	files *fileServer
	// gc caches what garbage collections parsed (gc.go); gcBeforeSweep,
	// set by tests, runs between a collection's mark and its sweep, and
	// gcSweeping under the sweep's lock, once it marked what its journal
	// names.
	gc            gcState
	gcBeforeSweep func()
	gcSweeping    func()
	// syncer flushes the filesystem driver's file system before a push is
	// answered (durable.go); nil for other drivers and where syncfs(2) is
	// missing, which keep distribution's per-file syncs.
	syncer flusher
}

// flusher puts what was written to the storage's file system on disk
// (groupsync.Syncer).
type flusher interface {
	Sync() error
	Close() error
}

var _ http.Handler = (*Registry)(nil)

// New builds a registry on the configured storage. It returns an error when
// the storage driver cannot be created from the configuration.
func New(ctx context.Context, opts Options) (*Registry, error) {
	if opts.Storage == nil {
		return nil, errors.New("registry: no storage configured")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	bridgeLogs(logger)

	driverName, params, err := opts.Storage.Distribution()
	if err != nil {
		return nil, err
	}
	g := &guard{allowOverwrite: opts.AllowOverwrite, admitTag: opts.AdmitTag, onEvent: opts.OnEvent, log: logger,
		locks: opts.Locks}
	if g.locks == nil {
		g.locks = &coord.Local{}
	}
	g.journals = journalsOf(g.locks)
	if opts.Recent != nil {
		g.recent = newRecentContent(*opts.Recent)
	}
	if g.allowOverwrite == nil {
		g.allowOverwrite = func(string) bool { return false }
	}

	cfg := &configuration.Configuration{
		Storage: configuration.Storage{
			driverName: params,
			"delete":   configuration.Parameters{"enabled": true},
			"redirect": configuration.Parameters{"disable": opts.Storage.DisableRedirect},
		},
		Middleware: map[string][]configuration.Middleware{
			"registry": {{Name: middlewareName, Options: configuration.Parameters{"guard": g}}},
		},
	}
	// No blob descriptor cache (distribution's cache.blobdescriptor): any
	// replica may collect garbage at some point of its storage's life, and
	// a process's cache would go on listing a blob a collection deleted, so
	// that a manifest that references it would be accepted.
	cfg.HTTP.Secret = opts.HTTPSecret
	// distribution's configuration parser defaults this to 1000; built in
	// code it would be 0, and every /v2/_catalog?n= request would be refused.
	cfg.Catalog.MaxEntries = pageMaxEntries
	// Layers may point at URLs (non-distributable layers); berth never fetches
	// them, so any http(s) URL is accepted, as the OCI conformance suite expects.
	cfg.Validation.Manifests.URLs.Allow = []string{"^https?://"}
	// An index may be pushed with only some of its platforms' manifests,
	// as berth mirror import pushes one exported with --platform: its bytes,
	// and so the digest packages name, stay those of the whole index. A pull
	// for a platform left behind fails; garbage collection (gc.go) skips
	// the manifests an index names but the repository lacks.
	cfg.Validation.Manifests.Indexes.Platforms = "none"

	// On the filesystem driver, pushes are flushed once per request
	// (durable.go), where syncfs(2) exists (groupsync.New fails only where
	// it does not); elsewhere distribution's per-file syncs stay.
	var syncer *groupsync.Syncer
	if root := opts.Storage.Filesystem.RootDirectory; opts.Storage.Driver == "filesystem" {
		if s, err := groupsync.New(root); err == nil {
			syncer = s
			cfg.Middleware["storage"] = []configuration.Middleware{{Name: durableMiddleware, Options: configuration.Parameters{"rootdirectory": root}}}
		}
	}

	if opts.Quota != nil {
		q := &quotas{QuotaOptions: *opts.Quota, log: logger}
		if q.PurgeAfter <= 0 {
			q.PurgeAfter = DefaultPurgeAfter
		}
		if q.Grace <= 0 {
			q.Grace = DefaultGCGrace
		}
		if q.RecomputeEvery <= 0 {
			q.RecomputeEvery = 5 * time.Second
		}
		g.quota = q
		// distribution's own purge, by the time an upload started, keeps
		// deleting the uploads the ledger does not know (those of a berth
		// before quotas), at the same age rather than its 7 days.
		cfg.Storage["maintenance"] = configuration.Parameters{"uploadpurging": map[any]any{
			"enabled": true, "age": q.PurgeAfter.String(), "interval": purgeInterval(q.PurgeAfter).String(), "dryrun": false,
		}}
	}

	app, err := newApp(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("registry: storage %s: %w", opts.Storage.Driver, err)
	}
	r := &Registry{app: app, guard: g, driver: g.driver, log: logger}
	if g.quota != nil {
		g.quota.driver = g.driver
	}
	if syncer != nil {
		r.syncer = syncer
		if opts.Metrics != nil {
			r.syncer = newTimedFlusher(syncer, opts.Metrics)
		}
	}
	if opts.Storage.Driver == "filesystem" {
		r.files = newFileServer(opts.Storage.Filesystem.RootDirectory)
	}
	return r, nil
}

// newApp turns the panics with which distribution reports bad configuration into errors.
func newApp(ctx context.Context, cfg *configuration.Configuration) (app *handlers.App, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return handlers.NewApp(ctx, cfg), nil
}

// ServeHTTP serves the OCI distribution API under /v2/, with the referrers
// API. Manifest PUTs by tag are serialised per repository and tag, so that
// the immutability check, the admission hook and the tag write that follows
// them are one step. Writes into a namespace's OLM catalog, which only
// berth writes, are refused (ReservedWrite). The pagination parameters of
// listings are checked before distribution sees them, and server errors
// (5xx) reach the client without their details, which can name paths of
// the server's filesystem.
func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	sw := &serverErrorWriter{ResponseWriter: w}
	r.serve(sw, req)
	sw.finish(r.log, req)
}

// serve answers blob and manifest reads from disk where it can (fileServer),
// and routes the rest to the referrers API or to distribution, after
// refusing a client's write into a reserved repository (ReservedWrite).
func (r *Registry) serve(w http.ResponseWriter, req *http.Request) {
	if r.files != nil && r.files.serve(w, req) {
		return
	}
	route := ParseRoute(req)
	if r.guard.quota != nil {
		req = withClientSubject(req)
	}
	err := checkPagination(req)
	if err == nil {
		err = ReservedWrite(route, req.Method)
	}
	if err != nil {
		w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
		_ = errcode.ServeJSON(w, err)
		return
	}
	if repo, ref, ok := referrersPath(req.URL.Path); ok {
		r.serveReferrers(w, req, repo, ref)
		return
	}
	if req.Method == http.MethodPut || req.Method == http.MethodDelete {
		if _, _, ok := manifestPath(req.URL.Path); ok {
			// A manifest write runs to its end once begun, even if the client
			// hangs up: cancelled half way on a remote storage, it could leave
			// a tag written whose event was never sent, which the catalog
			// would miss until its next reconciliation.
			req = req.WithContext(context.WithoutCancel(req.Context()))
		}
	}
	if req.Method == http.MethodPut {
		if repo, ref, ok := manifestPath(req.URL.Path); ok {
			if !strings.Contains(ref, ":") {
				unlock, err := r.guard.lockTag(req.Context(), repo, ref)
				if err != nil {
					w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
					_ = errcode.ServeJSON(w, err)
					return
				}
				defer unlock()
			}
		}
	}
	next := r.serveApp
	if r.syncer != nil && (req.Method == http.MethodPut || req.Method == http.MethodPost) {
		next = func(w http.ResponseWriter, req *http.Request) { r.serveDurably(w, req, r.serveApp) }
	}
	if r.guard.quota != nil && writesUpload(route, req.Method) {
		r.serveUpload(w, req, route, next)
		return
	}
	next(w, req)
}

// writesUpload reports whether a request of method on route opens or
// writes to an upload.
func writesUpload(route Route, method string) bool {
	switch route.Kind {
	case RouteUploadStart:
		return method == http.MethodPost
	case RouteUpload:
		return method == http.MethodPatch || method == http.MethodPut
	}
	return false
}

// serveApp hands req to distribution; a manifest PUT's response gets the
// OCI-Subject header of what it stored.
func (r *Registry) serveApp(w http.ResponseWriter, req *http.Request) {
	if req.Method == http.MethodPut {
		if _, _, ok := manifestPath(req.URL.Path); ok {
			w, req = withPushResult(w, req)
		}
	}
	r.app.ServeHTTP(w, req)
}

// Namespace is the registry's view of its repositories, for in-process readers.
func (r *Registry) Namespace() distribution.Namespace { return r.guard.namespace }

// StorageDriver is the registry's storage, for what berth keeps beside
// the registry's content (package approval), outside distribution's tree.
func (r *Registry) StorageDriver() storagedriver.StorageDriver { return r.driver }

// Ready reports whether the storage answers within timeout.
func (r *Registry) Ready(ctx context.Context, timeout time.Duration) error {
	return storage.Check(ctx, r.driver, timeout)
}

// Close stops the registry's background work (upload purging).
func (r *Registry) Close() error {
	err := r.app.Shutdown()
	if r.syncer != nil {
		err = errors.Join(err, r.syncer.Close())
	}
	return err
}

// manifestPath splits /v2/<repo>/manifests/<reference>.
func manifestPath(p string) (repo, ref string, ok bool) {
	rest, ok := strings.CutPrefix(p, "/v2/")
	if !ok {
		return "", "", false
	}
	i := strings.LastIndex(rest, "/manifests/")
	if i <= 0 {
		return "", "", false
	}
	return rest[:i], rest[i+len("/manifests/"):], true
}

// LoadOrCreateSecret returns the secret kept in file, creating the file with a
// new random secret (mode 0600) when it does not exist yet.
func LoadOrCreateSecret(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err == nil {
		if s := strings.TrimSpace(string(b)); s != "" {
			return s, nil
		}
		return "", fmt.Errorf("%s: empty secret", file)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	secret := hex.EncodeToString(buf)
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return "", err
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return LoadOrCreateSecret(file) // another process created it first
	}
	if err != nil {
		return "", err
	}
	if _, err := f.WriteString(secret + "\n"); err != nil {
		f.Close()
		return "", err
	}
	return secret, f.Close()
}
