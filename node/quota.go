package node

import (
	"context"
	"fmt"
	"path"
	"path/filepath"

	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/quota"
	"github.com/berth-registry/berth/registry"
)

// openQuota opens the ledger of the namespaces' quotas and the open
// uploads, <data>/quota.db or the catalog's PostgreSQL (openShared), so
// that replicas share one count. It registers the quota metrics.
func (n *Node) openQuota(ctx context.Context) error {
	cfg := n.cfg
	opts := quota.Options{Limit: func(ns string) int64 { return int64(cfg.NamespacePolicy(ns).Quota) }}
	for _, ns := range cfg.Namespaces {
		if !config.IsGlob(ns.Name) {
			opts.Named = append(opts.Named, ns.Name)
		}
	}
	l, err := openShared(ctx, n, "quota", "quota.db",
		func(ctx context.Context, dsn string) (quota.Ledger, error) { return quota.OpenPostgres(ctx, dsn, opts) },
		func(ctx context.Context, file string) (quota.Ledger, error) { return quota.OpenSQLite(ctx, file, opts) })
	if err != nil {
		return err
	}
	metrics, err := quota.NewMetrics(n.metrics, l)
	if err != nil {
		return err
	}
	u := cfg.Registry.Uploads
	n.quota = l
	n.quotaOpts = &registry.QuotaOptions{
		Ledger:               l,
		Limit:                opts.Limit,
		MaxUploadSize:        int64(u.MaxSize),
		MaxUploadsPerSubject: u.MaxConcurrentPerSubject,
		IdleTimeout:          u.IdleTimeout,
		PurgeAfter:           u.PurgeAfter,
		Grace:                cfg.GC.Grace,
		Metrics:              metrics,
	}
	return nil
}

// openShared opens a store of berth's own that replicas must share: in
// the catalog's PostgreSQL when they share one, else in <data>/<file>, a
// SQLite file beside the catalog's, whose schema the catalog versions
// alone. Errors name the setting (catalog.database or data). The node
// closes the store when it closes, logging a failure under name.
func openShared[S interface{ Close() error }](ctx context.Context, n *Node, name, file string,
	postgres func(ctx context.Context, dsn string) (S, error), sqlite func(ctx context.Context, file string) (S, error)) (S, error) {
	cfg := n.cfg
	var s S
	var err error
	if cfg.Catalog.Postgres() {
		if s, err = postgres(ctx, cfg.Catalog.Database); err != nil {
			return s, fmt.Errorf("catalog.database: %w", err)
		}
	} else if s, err = sqlite(ctx, filepath.Join(cfg.Data, file)); err != nil {
		return s, fmt.Errorf("data: %s: %w", path.Join(cfg.Data, file), err)
	}
	n.onClose(func() {
		if err := s.Close(); err != nil {
			n.log.Error(name+": close", "err", err)
		}
	})
	return s, nil
}
