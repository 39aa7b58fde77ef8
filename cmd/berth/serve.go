package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/berth-registry/berth/approval"
	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/httpapi"
	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/coord"
	"github.com/berth-registry/berth/internal/datalock"
	"github.com/berth-registry/berth/internal/forwarded"
	"github.com/berth-registry/berth/membership"
	"github.com/berth-registry/berth/olm"
	"github.com/berth-registry/berth/permissions"
	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/server"
	"github.com/berth-registry/berth/signing"
	"github.com/berth-registry/berth/ui"
)

func newServeCmd() *cobra.Command {
	var flags serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run berth: the registry /v2/, the catalog /api/v1/, /api/helm/ and /index.yaml, /healthz, /readyz, /metrics and the web UI / on one port",
		Long: `Run berth's registry and catalog in one process. With no configuration it
listens on :5000 and keeps everything under ./data (filesystem blob storage and
a SQLite catalog).

Settings come from the YAML file named by --config (or BERTH_CONFIG), then from
BERTH_* environment variables (log.level is BERTH_LOG_LEVEL, storage.s3.bucket is
BERTH_STORAGE_S3_BUCKET), then from the flags. See docs/configuration.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := flags.load(cmd)
			if err != nil {
				return err
			}
			return serve(cmd, cfg)
		},
	}
	flags.register(cmd)

	var registryURL string
	catalogCmd := &cobra.Command{
		Use:   "catalog",
		Short: "Run only the catalog, indexing the registry at --registry",
		Long: `Run berth's catalog on its own: /api/v1/, /api/helm/, /index.yaml, /healthz,
/readyz and /metrics. It reads packages from any OCI registry over the
distribution API and follows it through distribution's notification webhooks,
which the registry sends to POST /events on this server; it also reconciles
with the registry at start and every catalog.reconcileInterval, so lost events
are repaired.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := flags.load(cmd)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("registry") {
				cfg.Catalog.Registry = registryURL
			}
			if cfg.Catalog.Registry == "" {
				return errors.New("catalog.registry: required by berth serve catalog (--registry http(s)://host[:port])")
			}
			if err := cfg.Validate(); err != nil {
				return fmt.Errorf("config: %w", err)
			}
			return serveSplitCatalog(cmd, cfg)
		},
	}
	flags.register(catalogCmd)
	catalogCmd.Flags().StringVar(&registryURL, "registry", "", "base URL of the registry to index, http(s)://host[:port] (env BERTH_CATALOG_REGISTRY)")
	cmd.AddCommand(catalogCmd)
	return cmd
}

// serveFlags are the flags every serve command has.
type serveFlags struct {
	addr, data, file string
}

func (f *serveFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.addr, "addr", ":5000", "listen address, host:port (env BERTH_ADDR)")
	cmd.Flags().StringVar(&f.data, "data", "./data", "data directory (env BERTH_DATA)")
	cmd.Flags().StringVar(&f.file, "config", "", "YAML configuration file (env BERTH_CONFIG)")
}

// load reads the configuration file and environment, applies the flags, fills
// defaults and validates.
func (f *serveFlags) load(cmd *cobra.Command) (*config.Config, error) {
	file := f.file
	if !cmd.Flags().Changed("config") {
		file = os.Getenv("BERTH_CONFIG")
	}
	cfg, err := config.Load(file, os.Environ())
	if err != nil {
		return nil, err
	}
	if cmd.Flags().Changed("addr") {
		cfg.Addr = f.addr
	}
	if cmd.Flags().Changed("data") {
		cfg.Data = f.data
	}
	if cfg.Data != "" {
		if cfg.Data, err = filepath.Abs(cfg.Data); err != nil {
			return nil, fmt.Errorf("data: %w", err)
		}
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return cfg, nil
}

func serve(cmd *cobra.Command, cfg *config.Config) error {
	ctx := cmd.Context()
	log := cfg.Log.NewLogger(cmd.ErrOrStderr())
	if err := os.MkdirAll(cfg.Data, 0o755); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	unlock, err := datalock.Lock(cfg.Data)
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	defer unlock()
	secret, err := registry.LoadOrCreateSecret(cfg.Registry.HTTPSecretFile)
	if err != nil {
		return fmt.Errorf("registry.httpSecretFile: %w", err)
	}
	policy, err := signing.NewPolicy("trust", cfg.Trust)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	access, closeAuth, err := startAuth(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeAuth()
	cl, err := joinCluster(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer cl.close()
	// The catalog and the source are built after the registry they read; no
	// event or push can come before the server starts, and by then both are set.
	var (
		cat    *catalog.Catalog
		source *catalog.DistributionSource
	)
	reg, err := registry.New(ctx, registry.Options{
		Storage:        &cfg.Storage,
		HTTPSecret:     secret,
		AllowOverwrite: cfg.AllowOverwrite,
		AdmitTag: func(ctx context.Context, push registry.TagPush) error {
			if err := signing.Admit(ctx, catalog.SignatureFetcher(source), policy, push.Repo, push.Tag, push.Digest.String()); err != nil {
				return err
			}
			return cat.AdmitPermissions(ctx, push.Repo, push.Tag, push.MediaType, push.Payload)
		},
		OnEvent:         func(e registry.Event) { cat.Notify(e) },
		Locks:           cl.locks,
		CollectsGarbage: cfg.GC.Interval > 0,
		Logger:          log,
		Metrics:         prometheus.DefaultRegisterer,
	})
	if err != nil {
		return err
	}
	defer reg.Close()
	source = catalog.NewDistributionSource(reg.Namespace(), reg.Referrers, reg.UntagDangling)
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	// Before the catalog reconciles and the server answers: no topology
	// that breaks berth's promises serves (docs/scale-out.md).
	ctx, member, err := membership.Join(ctx, membership.ServeOptions(cfg, reg.StorageDriver(), secret, ln.Addr().String(), log))
	if err != nil {
		return err
	}
	defer member.Leave()
	// The OLM catalog publisher reads the catalog, which tells it of
	// changes; a change told before it starts is in its first rendering.
	var publisher atomic.Pointer[olm.Publisher]
	cat, stop, err := startCatalog(ctx, cfg, cl, source, policy, approval.New(reg.StorageDriver()), log, func(ns, name string) {
		if p := publisher.Load(); p != nil {
			p.Changed(ns, name)
		}
	})
	if err != nil {
		return err
	}
	defer stop()
	pub, stopPublisher, err := startPublisher(ctx, cfg, cl, cat, source, publicHost(cfg.Catalog.PublicURL, ln.Addr()), log)
	if err != nil {
		return err
	}
	publisher.Store(pub)
	defer stopPublisher()
	var mt *maintenance
	if cfg.GC.Interval > 0 {
		if mt, err = newMaintenance(cfg, reg, cat, log, prometheus.DefaultRegisterer); err != nil {
			return err
		}
	}
	stopLeading := startLeading(ctx, cl, pub, mt, log)
	defer stopLeading()

	proxies, err := forwarded.ParseProxies(cfg.TrustedProxies)
	if err != nil {
		return fmt.Errorf("trustedProxies: %w", err)
	}
	srv := server.New(server.Options{
		Registry:        access.registry(reg),
		Catalog:         httpapi.New(httpapi.Options{Catalog: cat, Authorizer: access.authorizer, Logger: log, RegistryURL: cfg.Catalog.PublicURL, Inventory: reg, OLM: pub}),
		Auth:            access.token,
		Robots:          access.robots,
		UI:              ui.New(ui.Options{Catalog: cat, Authorizer: access.authorizer, Sessions: access.sessions, Trust: policy, RegistryURL: cfg.Catalog.PublicURL, Logger: log}),
		API:             access.api,
		Metrics:         access.metrics,
		Ready:           cl.readyChecks(map[string]server.ReadyChecker{"storage": reg, "catalog": cat}),
		Logger:          log,
		ShutdownTimeout: cfg.ShutdownTimeout,
		TrustedProxies:  proxies,
	})
	log.Info("starting", "data", cfg.Data, "storage", cfg.Storage.Driver, "catalog", cfg.Catalog.DatabaseForLog())
	if err := srv.Run(ctx, ln); err != nil {
		return err
	}
	return membership.Stopped(ctx)
}

func serveSplitCatalog(cmd *cobra.Command, cfg *config.Config) error {
	ctx := cmd.Context()
	log := cfg.Log.NewLogger(cmd.ErrOrStderr())
	if err := os.MkdirAll(cfg.Data, 0o755); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	unlock, err := datalock.Lock(cfg.Data)
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	defer unlock()
	source, err := catalog.NewRemoteSource(cfg.Catalog.Registry, nil)
	if err != nil {
		return fmt.Errorf("catalog.registry: %w", err)
	}
	policy, err := signing.NewPolicy("trust", cfg.Trust)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	access, closeAuth, err := startAuth(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeAuth()
	cl, err := joinCluster(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer cl.close()
	cat, stop, err := startCatalog(ctx, cfg, cl, source, policy, nil, log, nil)
	if err != nil {
		return err
	}
	defer stop()
	public := cfg.Catalog.PublicURL
	if public == "" {
		public = cfg.Catalog.Registry
	}
	proxies, err := forwarded.ParseProxies(cfg.TrustedProxies)
	if err != nil {
		return fmt.Errorf("trustedProxies: %w", err)
	}
	srv := server.New(server.Options{
		Catalog:         httpapi.New(httpapi.Options{Catalog: cat, Authorizer: access.authorizer, Logger: log, RegistryURL: public, Events: true}),
		Auth:            access.token,
		Robots:          access.robots,
		UI:              ui.New(ui.Options{Catalog: cat, Authorizer: access.authorizer, Sessions: access.sessions, Trust: policy, RegistryURL: public, Logger: log}),
		API:             access.api,
		Metrics:         access.metrics,
		Ready:           cl.readyChecks(map[string]server.ReadyChecker{"catalog": cat}),
		Logger:          log,
		ShutdownTimeout: cfg.ShutdownTimeout,
		TrustedProxies:  proxies,
	})
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	log.Info("starting catalog", "data", cfg.Data, "registry", cfg.Catalog.Registry, "catalog", cfg.Catalog.DatabaseForLog())
	return srv.Run(ctx, ln)
}

// startCatalog opens the catalog's store and starts following source,
// verifying signatures against policy, telling onChange of each package
// whose versions change (on a shared store, also those other replicas
// change). With approvals (berth's own registry), the namespaces' permission
// gates apply. stop ends the catalog's work and closes the store.
func startCatalog(ctx context.Context, cfg *config.Config, cl *cluster, source catalog.Source, policy *signing.Policy, approvals catalog.GateRecords, log *slog.Logger, onChange func(namespace, name string)) (*catalog.Catalog, func(), error) {
	var storeChanges, catalogChanges func(namespace, name string)
	if cl.elector != nil {
		storeChanges = onChange
	} else {
		catalogChanges = onChange
	}
	store, err := openStore(ctx, cfg, log, storeChanges)
	if err != nil {
		return nil, nil, fmt.Errorf("catalog.database: %w", err)
	}
	var locks coord.Locks
	if cl.elector != nil {
		locks = cl.locks
	}
	opts := catalog.Options{
		Store:             store,
		Source:            source,
		ReconcileInterval: cfg.Catalog.ReconcileInterval,
		SignatureInterval: cfg.Catalog.SignatureInterval,
		IndexTimeout:      cfg.Catalog.IndexTimeout,
		Logger:            log,
		Metrics:           prometheus.DefaultRegisterer,
		Policy:            policy,
		OnChange:          catalogChanges,
		Elector:           cl.elector,
		Signals:           cl.signals,
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
		return nil, nil, err
	}
	// Indexing stops at the shutdown signal, while requests drain: a
	// version pushed meanwhile is indexed by the reconciliation at start.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopOnSignal := context.AfterFunc(ctx, cancel)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		cat.Run(runCtx)
	}()
	return cat, func() {
		stopOnSignal()
		cancel()
		select {
		case <-stopped:
			if err := store.Close(); err != nil {
				log.Error("catalog: close", "err", err)
			}
		case <-time.After(cfg.ShutdownTimeout):
			log.Error("catalog: still indexing after the shutdown timeout; exiting", "timeout", cfg.ShutdownTimeout.String())
		}
	}, nil
}

// startPublisher starts keeping each namespace's OLM catalog image current
// (docs/olm.md), its bundle references on host; of several replicas, only
// the leader pushes. stop publishes what is pending, within the shutdown
// timeout, and ends its work.
func startPublisher(ctx context.Context, cfg *config.Config, cl *cluster, cat *catalog.Catalog, reg olm.Registry, host string, log *slog.Logger) (*olm.Publisher, func(), error) {
	p, err := olm.NewPublisher(olm.PublisherOptions{Source: cat, Registry: reg, Host: host, Leader: cl.leads(), Logger: log, Metrics: prometheus.DefaultRegisterer})
	if err != nil {
		return nil, nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		p.Run(runCtx)
	}()
	return p, func() {
		flushCtx, done := context.WithTimeout(runCtx, cfg.ShutdownTimeout)
		if err := p.Flush(flushCtx); err != nil {
			log.Error("olm: publish at shutdown", "err", err)
		}
		done()
		cancel()
		<-stopped
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
