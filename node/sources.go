package node

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/signing"
	"github.com/berth-registry/berth/sources"
)

// openSources opens the tracker of the namespaces' package sources
// (docs/sources.md), when they list any: its store, in the catalog's
// PostgreSQL when replicas share one, else in <data>/sources.db; and
// berth's provenance key, sources.signingKey or else <data>/provenance.key,
// created on first start, whose password is $BERTH_SOURCES_KEY_PASSWORD.
// The leader runs it (startLeading). It publishes through the registry's
// own handler, not the server's, so it needs no credentials and every rule
// of the registry applies to what it pushes.
func (n *Node) openSources(ctx context.Context) error {
	cfg := n.cfg
	if len(cfg.TrackedSources()) == 0 {
		return nil
	}
	keyFile, keyKey := cfg.Sources.SigningKey, "sources.signingKey"
	if keyFile == "" {
		keyFile, keyKey = filepath.Join(cfg.Data, "provenance.key"), "data"
	}
	signer, err := signing.LoadOrCreateSigner(keyFile, []byte(os.Getenv(sources.KeyPasswordEnv)))
	if err != nil {
		return fmt.Errorf("%s: %w", keyKey, err)
	}
	var store sources.Store
	if cfg.Catalog.Postgres() {
		store, err = sources.OpenPostgres(ctx, cfg.Catalog.Database)
		if err != nil {
			err = fmt.Errorf("catalog.database: %w", err)
		}
	} else {
		store, err = sources.OpenSQLite(ctx, filepath.Join(cfg.Data, "sources.db"))
		if err != nil {
			err = fmt.Errorf("data: %s: %w", path.Join(cfg.Data, "sources.db"), err)
		}
	}
	if err != nil {
		return err
	}
	n.onClose(func() {
		if err := store.Close(); err != nil {
			n.log.Error("sources: close", "err", err)
		}
	})
	host := publicHost(cfg.Catalog.PublicURL, n.ln.Addr())
	builder := cfg.Catalog.PublicURL
	if builder == "" {
		scheme := "http"
		if cfg.HTTP.TLS.Enabled() {
			scheme = "https"
		}
		builder = scheme + "://" + host
	}
	t, err := sources.New(sources.Options{
		Config:       cfg,
		Store:        store,
		Signer:       signer,
		Registry:     n.reg,
		RegistryHost: host,
		BuilderID:    builder,
		Logger:       n.log,
		Metrics:      n.metrics,
		OnEvent: func(ctx context.Context, c apiv1.Change) {
			if err := n.cat.RecordSourceEvent(ctx, c); err != nil {
				n.log.Error("sources: record the event in the change feed", "namespace", c.Namespace, "package", c.Name, "err", err)
			}
		},
	})
	if err != nil {
		return err
	}
	n.sources = t
	return nil
}
