// Package node assembles one berth process: the data-directory lock, auth,
// the cluster of replicas and its leadership, the embedded registry, the
// catalog, the OLM publisher, the maintenance loop and the HTTP server that
// serves them all, each started by one function of this package in the order
// the process starts it. New assembles berth serve, NewCatalog berth serve
// catalog (the catalog alone, indexing another registry); cmd/berth only
// parses flags and loads the configuration, and tests start nodes in process.
package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-registry/berth/approval"
	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/httpapi"
	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/coord"
	"github.com/berth-registry/berth/internal/datalock"
	"github.com/berth-registry/berth/internal/forwarded"
	"github.com/berth-registry/berth/internal/tlsreload"
	"github.com/berth-registry/berth/maintenance"
	"github.com/berth-registry/berth/membership"
	"github.com/berth-registry/berth/olm"
	"github.com/berth-registry/berth/permissions"
	"github.com/berth-registry/berth/quota"
	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/server"
	"github.com/berth-registry/berth/signing"
	"github.com/berth-registry/berth/sources"
	"github.com/berth-registry/berth/ui"
)

// Options are what a node takes besides its configuration. The zero value
// logs as cfg.Log says to standard error and registers the metrics in
// prometheus's default registry, as berth serve does.
type Options struct {
	// Logger is the node's log. Nil means cfg.Log's logger on os.Stderr.
	Logger *slog.Logger
	// Metrics is where the node registers its metrics and what /metrics
	// serves besides the HTTP server's own. Nil means prometheus's default
	// registry. A metric registers once per registry, so nodes that run
	// in one process (tests) each need one of their own.
	Metrics Metrics
}

// Metrics is a registry of metrics, as prometheus.NewRegistry returns.
type Metrics interface {
	prometheus.Registerer
	prometheus.Gatherer
}

// defaultMetrics is prometheus's default registry.
var defaultMetrics Metrics = struct {
	prometheus.Registerer
	prometheus.Gatherer
}{prometheus.DefaultRegisterer, prometheus.DefaultGatherer}

// Node is one berth process, assembled by New or NewCatalog: Serve runs
// it until its context ends, Close releases what it holds.
type Node struct {
	cfg     *config.Config
	log     *slog.Logger
	metrics Metrics
	// starting and startingAttrs are the line Serve logs first.
	starting      string
	startingAttrs []any

	// The parts, in the order they start. A split catalog has no
	// registry, dist, publisher or maintenance.
	secret  string
	trust   *signing.Policy
	access  *authParts
	cluster *cluster
	// quota is the ledger of what namespaces store (quota.go); the API
	// and the UI read it as a quota.Reader.
	quota     quota.Ledger
	quotaOpts *registry.QuotaOptions
	reg       *registry.Registry
	dist      *catalog.DistributionSource
	source    catalog.Source
	ln        net.Listener
	member    *membership.Member
	cat       *catalog.Catalog
	publisher atomic.Pointer[olm.Publisher]
	mt        *maintenance.Maintenance
	// sources is the tracker of the namespaces' package sources (nil when
	// none are listed), run by the leader.
	sources *sources.Tracker
	// provenanceKey is the key the tracker signs with (nil without sources).
	provenanceKey *signing.Signer
	srv           *server.Server

	// stopIndexing ends the catalog's work; Serve calls it when its
	// context ends, so that indexing stops while requests drain.
	stopIndexing func()
	// closers release the parts, in the order they started; Close runs
	// them in reverse.
	closers   []func()
	closeOnce sync.Once
}

// New assembles berth serve as cfg (filled by SetDefaults and validated)
// describes: it takes the data directory, opens every part and starts the
// background work (indexing, publishing, leadership), and listens on
// cfg.Addr. ctx bounds the start only. On an error, what was started is
// released; the error names the setting to change.
func New(ctx context.Context, cfg *config.Config, opts Options) (*Node, error) {
	n := newNode(cfg, opts)
	n.starting, n.startingAttrs = "starting", []any{"data", cfg.Data, "storage", cfg.Storage.Driver, "catalog", cfg.Catalog.DatabaseForLog()}
	return n.start(ctx,
		n.lockData,
		n.loadHTTPSecret,
		n.loadProvenanceKey,
		n.loadTrust,
		n.startAuth,
		n.joinCluster,
		n.openQuota,
		n.startRegistry,
		n.listen,
		n.joinReplicas,
		n.startCatalog,
		n.startPublisher,
		n.openSources,
		n.startMaintenance,
		n.startLeading,
		n.newServer,
	)
}

// NewCatalog assembles berth serve catalog: the catalog alone, indexing
// the registry at cfg.Catalog.Registry (required) and following it through
// the notifications it sends to /events. Otherwise it is as New.
func NewCatalog(ctx context.Context, cfg *config.Config, opts Options) (*Node, error) {
	n := newNode(cfg, opts)
	n.starting, n.startingAttrs = "starting catalog", []any{"data", cfg.Data, "registry", cfg.Catalog.Registry, "catalog", cfg.Catalog.DatabaseForLog()}
	return n.start(ctx,
		n.lockData,
		n.openRemoteSource,
		n.loadTrust,
		n.startAuth,
		n.joinCluster,
		n.startCatalog,
		n.newCatalogServer,
		n.listen,
	)
}

func newNode(cfg *config.Config, opts Options) *Node {
	n := &Node{cfg: cfg, log: opts.Logger, metrics: opts.Metrics, stopIndexing: func() {}}
	if n.log == nil {
		n.log = cfg.Log.NewLogger(os.Stderr)
	}
	if n.metrics == nil {
		n.metrics = defaultMetrics
	}
	return n
}

// start runs the steps in order; at the first error it releases what the
// earlier ones started.
func (n *Node) start(ctx context.Context, steps ...func(context.Context) error) (*Node, error) {
	for _, step := range steps {
		if err := step(ctx); err != nil {
			n.Close()
			return nil, err
		}
	}
	return n, nil
}

// onClose adds release to what Close runs.
func (n *Node) onClose(release func()) { n.closers = append(n.closers, release) }

// Addr is the address the node listens on: cfg.Addr, with the port the
// system chose for port 0.
func (n *Node) Addr() net.Addr { return n.ln.Addr() }

// Serve serves on the node's address until ctx ends, then stops as berth
// stops at SIGTERM: the catalog stops indexing, /readyz fails, and
// in-flight requests finish within cfg.ShutdownTimeout (server.Run). It
// returns an error if serving failed or requests were cut off, and stops
// too, returning an error wrapping membership.ErrConflict, when this
// replica must yield to another that disagrees with it. Close the
// node after.
func (n *Node) Serve(ctx context.Context) error {
	if n.member != nil {
		var release func()
		ctx, release = n.member.Bound(ctx)
		defer release()
	}
	stop := context.AfterFunc(ctx, n.stopIndexing)
	defer stop()
	n.log.Info(n.starting, n.startingAttrs...)
	if err := n.srv.Run(ctx, n.ln); err != nil {
		return err
	}
	return membership.Stopped(ctx)
}

// Close stops the node's background work and releases every part in the
// reverse of the order they started, the data directory last. The OLM
// publisher publishes what is pending and the catalog finishes indexing,
// each within cfg.ShutdownTimeout. Close may be called more than once.
func (n *Node) Close() {
	n.closeOnce.Do(func() {
		for i := len(n.closers) - 1; i >= 0; i-- {
			n.closers[i]()
		}
	})
}

// lockData takes the data directory, creating it, so that no other berth
// serve uses it while this one runs (internal/datalock).
func (n *Node) lockData(context.Context) error {
	if err := os.MkdirAll(n.cfg.Data, 0o755); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	unlock, err := datalock.Lock(n.cfg.Data)
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	n.onClose(func() { unlock() })
	return nil
}

// loadHTTPSecret reads the secret that signs upload state, creating it at
// the first start; replicas share it through registry.httpSecretFile.
func (n *Node) loadHTTPSecret(context.Context) error {
	secret, err := registry.LoadOrCreateSecret(n.cfg.Registry.HTTPSecretFile)
	if err != nil {
		return fmt.Errorf("registry.httpSecretFile: %w", err)
	}
	n.secret = secret
	return nil
}

// loadTrust reads the trust section: the keys and identities whose
// signatures berth verifies, and which namespaces require them.
func (n *Node) loadTrust(context.Context) error {
	policy, err := signing.NewPolicy("trust", n.cfg.Trust)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	n.trust = policy
	return nil
}

// startAuth builds the auth section's parts (auth.go); without one, berth
// is open and says so.
func (n *Node) startAuth(ctx context.Context) error {
	access, closeAuth, err := startAuth(ctx, n.cfg, n.log, n.metrics)
	if err != nil {
		return err
	}
	n.access = access
	n.onClose(closeAuth)
	return nil
}

// joinCluster joins the replicas that share the catalog's database
// (cluster.go); alone on SQLite, the node is its own cluster.
func (n *Node) joinCluster(ctx context.Context) error {
	cl, err := joinCluster(ctx, n.cfg, n.log, n.metrics)
	if err != nil {
		return err
	}
	n.cluster = cl
	n.onClose(cl.close)
	return nil
}

// startRegistry opens the embedded registry on the configured storage. A
// tag push is admitted when it meets the trust policy and the namespace's
// permission gate; pushes are charged to the namespaces' quotas. The
// catalog and the source are built after the registry they read; no event
// or push can come before the server starts, and by then both are set.
func (n *Node) startRegistry(ctx context.Context) error {
	reg, err := registry.New(ctx, registry.Options{
		Storage:        &n.cfg.Storage,
		HTTPSecret:     n.secret,
		AllowOverwrite: n.cfg.AllowOverwrite,
		AdmitTag: func(ctx context.Context, push registry.TagPush) error {
			if err := signing.Admit(ctx, catalog.SignatureFetcher(n.source), n.trust, push.Repo, push.Tag, push.Digest.String()); err != nil {
				return err
			}
			return n.cat.AdmitPermissions(ctx, push.Repo, push.Tag, push.MediaType, push.Payload)
		},
		OnEvent: func(e registry.Event) { n.cat.Notify(e) },
		Locks:   n.cluster.locks,
		Logger:  n.log,
		Metrics: n.metrics,
		Quota:   n.quotaOpts,
		// The catalog indexes a push from what the registry received: up
		// to 32 MiB of manifests and blobs of at most 8 MiB, under the
		// catalog's archive limit (registry.RecentOptions).
		Recent: &registry.RecentOptions{},
	})
	if err != nil {
		return err
	}
	n.onClose(func() { reg.Close() })
	n.reg = reg
	n.dist = catalog.NewDistributionSource(reg.Namespace(), reg.Referrers, reg.UntagDangling).ReadRecent(reg)
	n.source = n.dist
	return nil
}

// openRemoteSource is the split catalog's source: the registry at
// catalog.registry, read over the distribution API.
func (n *Node) openRemoteSource(context.Context) error {
	source, err := catalog.NewRemoteSource(n.cfg.Catalog.Registry, nil)
	if err != nil {
		return fmt.Errorf("catalog.registry: %w", err)
	}
	n.source = source
	return nil
}

// listen opens the node's address, cfg.Addr, serving TLS over it when
// http.tls is set: its files are read first (an error names the file and
// its setting), and again when they change (tlsreload).
func (n *Node) listen(context.Context) error {
	var tlsConfig *tls.Config
	if n.cfg.HTTP.TLS.Enabled() {
		r, err := tlsreload.New(n.cfg.HTTP.TLS, n.log)
		if err != nil {
			return err
		}
		tlsConfig = r.ServerConfig()
	}
	ln, err := net.Listen("tcp", n.cfg.Addr)
	if err != nil {
		return err
	}
	n.onClose(func() { ln.Close() })
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	n.ln = ln
	return nil
}

// joinReplicas checks, before the catalog reconciles and the server
// answers, that no live replica on the same storage or PostgreSQL catalog
// disagrees with this one on what they share, and renews this replica's
// records until Close (membership, docs/scale-out.md#what-berth-refuses).
// A conflict found later ends Serve, which returns it.
func (n *Node) joinReplicas(ctx context.Context) error {
	m, err := membership.Join(ctx, membership.ServeOptions(n.cfg, n.reg.StorageDriver(), n.ln.Addr().String(), n.secret, n.access.keyID, n.log))
	if err != nil {
		return err
	}
	n.member = m
	n.onClose(m.Leave)
	return nil
}

// startCatalog opens the catalog's store and starts following the source,
// verifying signatures against the trust policy. On berth's own registry,
// the namespaces' permission gates apply and every package whose versions
// change (on a shared store, also those other replicas change) is told to
// the OLM publisher. Indexing stops at Serve's end or Close; Close then
// waits for it within the shutdown timeout and closes the store.
func (n *Node) startCatalog(ctx context.Context) error {
	cfg := n.cfg
	var approvals catalog.GateRecords
	var onChange func(namespace, name string)
	if n.reg != nil {
		approvals = approval.New(n.reg.StorageDriver())
		// The OLM catalog publisher reads the catalog, which tells it of
		// changes; a change told before it starts is in its first rendering.
		onChange = func(ns, name string) {
			if p := n.publisher.Load(); p != nil {
				p.Changed(ns, name)
			}
		}
	}
	var storeChanges, catalogChanges func(namespace, name string)
	if n.cluster.elector != nil {
		storeChanges = onChange
	} else {
		catalogChanges = onChange
	}
	store, err := openStore(ctx, cfg, n.log, storeChanges)
	if err != nil {
		return fmt.Errorf("catalog.database: %w", err)
	}
	var locks coord.Locks
	if n.cluster.elector != nil {
		locks = n.cluster.locks
	}
	opts := catalog.Options{
		Store:             store,
		Source:            n.source,
		ReconcileInterval: cfg.Catalog.ReconcileInterval,
		SignatureInterval: cfg.Catalog.SignatureInterval,
		IndexTimeout:      cfg.Catalog.IndexTimeout,
		Logger:            n.log,
		Metrics:           n.metrics,
		Policy:            n.trust,
		OnChange:          catalogChanges,
		Elector:           n.cluster.elector,
		Signals:           n.cluster.signals,
		Locks:             locks,
	}
	if approvals != nil {
		opts.Approvals = approvals
		opts.RefuseWideningPermissions = func(ns string) bool { return cfg.NamespacePolicy(ns).RefuseWideningPermissions }
		opts.MaxUnapprovedRating = func(ns string) permissions.Rating {
			r, _ := cfg.NamespacePolicy(ns).MaxUnapproved() // Validate checked it
			return r
		}
	}
	cat, err := catalog.New(opts)
	if err != nil {
		store.Close()
		return err
	}
	n.cat = cat
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.stopIndexing = cancel
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		cat.Run(runCtx)
	}()
	n.onClose(func() {
		cancel()
		select {
		case <-stopped:
			if err := store.Close(); err != nil {
				n.log.Error("catalog: close", "err", err)
			}
		case <-time.After(cfg.ShutdownTimeout):
			n.log.Error("catalog: still indexing after the shutdown timeout; exiting", "timeout", cfg.ShutdownTimeout.String())
		}
	})
	return nil
}

// startPublisher starts keeping each namespace's OLM catalog image current
// (docs/olm.md), its bundle references on the public host; of several
// replicas, only the leader pushes. Close publishes what is pending, within
// the shutdown timeout, and ends its work.
func (n *Node) startPublisher(ctx context.Context) error {
	p, err := olm.NewPublisher(olm.PublisherOptions{
		Source:   n.cat,
		Registry: n.dist,
		Host:     publicHost(n.cfg.Catalog.PublicURL, n.ln.Addr()),
		Leader:   n.cluster.leads(),
		Logger:   n.log,
		Metrics:  n.metrics,
	})
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		p.Run(runCtx)
	}()
	n.publisher.Store(p)
	n.onClose(func() {
		flushCtx, done := context.WithTimeout(runCtx, n.cfg.ShutdownTimeout)
		if err := p.Flush(flushCtx); err != nil {
			n.log.Error("olm: publish at shutdown", "err", err)
		}
		done()
		cancel()
		<-stopped
	})
	return nil
}

// startMaintenance prepares retention and garbage collection (package
// maintenance): the leader runs them every gc.interval, and any node on
// demand through the admin API.
func (n *Node) startMaintenance(context.Context) error {
	mt, err := maintenance.New(maintenance.Options{Config: n.cfg, Registry: n.reg, Catalog: n.cat, Locks: n.cluster.locks, Logger: n.log, Metrics: n.metrics})
	if err != nil {
		return err
	}
	n.mt = mt
	return nil
}

// startLeading runs the leader's work while this node leads (cluster.go):
// the OLM publisher's catch-up on taking over, then the quotas' recomputes
// and purges, the package sources' checks and the maintenance loop.
func (n *Node) startLeading(ctx context.Context) error {
	n.onClose(startLeading(ctx, n.cluster, n.publisher.Load(), n.mt, n.reg.KeepQuotas, n.sources, n.log))
	return nil
}

// newServer builds the HTTP server of berth serve: the registry behind
// auth, the catalog's API, the robots API, the token service and the web
// UI, ready when the storage, the catalog (and the shared database) are.
func (n *Node) newServer(context.Context) error {
	opts, err := n.serverOptions()
	if err != nil {
		return err
	}
	a := n.access
	opts.Registry = a.registry(n.reg)
	opts.Admin = a.admin(n.mt.Handler())
	api := httpapi.Options{Catalog: n.cat, Authorizer: a.authorizer, Logger: n.log, RegistryURL: n.cfg.Catalog.PublicURL, Inventory: n.reg, OLM: n.publisher.Load(), Admin: a.admin, Quota: n.quota}
	web := ui.Options{Catalog: n.cat, Authorizer: a.authorizer, Sessions: a.sessions, Trust: n.trust, RegistryURL: n.cfg.Catalog.PublicURL, Logger: n.log, Quota: n.quota}
	n.sourcesAPI(&api, &web)
	opts.Catalog = httpapi.New(api)
	opts.UI = ui.New(web)
	opts.Ready = n.cluster.readyChecks(map[string]server.ReadyChecker{"storage": n.reg, "catalog": n.cat})
	n.srv = server.New(opts)
	return nil
}

// newCatalogServer builds the HTTP server of the split catalog: the
// catalog's API with /events for the registry's notifications, the robots
// API, the token service and the web UI, which name the indexed registry
// unless catalog.publicURL is set.
func (n *Node) newCatalogServer(context.Context) error {
	opts, err := n.serverOptions()
	if err != nil {
		return err
	}
	public := n.cfg.Catalog.PublicURL
	if public == "" {
		public = n.cfg.Catalog.Registry
	}
	a := n.access
	opts.Catalog = httpapi.New(httpapi.Options{Catalog: n.cat, Authorizer: a.authorizer, Logger: n.log, RegistryURL: public, Events: true, Admin: a.admin})
	opts.UI = ui.New(ui.Options{Catalog: n.cat, Authorizer: a.authorizer, Sessions: a.sessions, Trust: n.trust, RegistryURL: public, Logger: n.log})
	opts.Ready = n.cluster.readyChecks(map[string]server.ReadyChecker{"catalog": n.cat})
	n.srv = server.New(opts)
	return nil
}

// serverOptions are the server's options both kinds of node share: auth's
// routes and wrappers, the metrics, the shutdown timeout and the trusted
// proxies.
func (n *Node) serverOptions() (server.Options, error) {
	proxies, err := forwarded.ParseProxies(n.cfg.TrustedProxies)
	if err != nil {
		return server.Options{}, fmt.Errorf("trustedProxies: %w", err)
	}
	a := n.access
	return server.Options{
		Auth:            a.token,
		Robots:          a.robots,
		API:             a.api,
		Metrics:         a.metrics,
		Gatherer:        n.metrics,
		Logger:          n.log,
		ShutdownTimeout: n.cfg.ShutdownTimeout,
		TrustedProxies:  proxies,
	}, nil
}

// publicHost is the host[:port] that the OLM catalog images name bundle
// images on: catalog.publicURL's when set, else the address berth listens
// on, with localhost for an unspecified IP.
func publicHost(publicURL string, addr net.Addr) string {
	if u, err := url.Parse(publicURL); err == nil && u.Host != "" {
		return u.Host
	}
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}
