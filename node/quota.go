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
// uploads: in the catalog's PostgreSQL when replicas share one, so that
// they share one count, else in <data>/quota.db, a file of its own beside
// the catalog's, whose schema the catalog versions alone. It registers the
// quota metrics.
func (n *Node) openQuota(ctx context.Context) error {
	cfg := n.cfg
	opts := quota.Options{Limit: func(ns string) int64 { return int64(cfg.NamespacePolicy(ns).Quota) }}
	for _, ns := range cfg.Namespaces {
		if !config.IsGlob(ns.Name) {
			opts.Named = append(opts.Named, ns.Name)
		}
	}
	var l quota.Ledger
	var err error
	if cfg.Catalog.Postgres() {
		l, err = quota.OpenPostgres(ctx, cfg.Catalog.Database, opts)
		if err != nil {
			err = fmt.Errorf("catalog.database: %w", err)
		}
	} else {
		l, err = quota.OpenSQLite(ctx, filepath.Join(cfg.Data, "quota.db"), opts)
		if err != nil {
			err = fmt.Errorf("data: %s: %w", path.Join(cfg.Data, "quota.db"), err)
		}
	}
	if err != nil {
		return err
	}
	n.onClose(func() {
		if err := l.Close(); err != nil {
			n.log.Error("quota: close", "err", err)
		}
	})
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
