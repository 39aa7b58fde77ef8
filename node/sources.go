package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/httpapi"
	"github.com/berth-registry/berth/signing"
	"github.com/berth-registry/berth/sources"
	"github.com/berth-registry/berth/sources/webhook"
	"github.com/berth-registry/berth/ui"
)

// loadProvenanceKey loads berth's provenance key, when namespaces list
// sources: sources.signingKey, or else <data>/provenance.key, created on
// first start with its public half beside it, whose password is
// $BERTH_SOURCES_KEY_PASSWORD. It runs before the trust policy is loaded,
// so that a policy can name <data>/provenance.pub on the first start too.
func (n *Node) loadProvenanceKey(context.Context) error {
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
	n.provenanceKey = signer
	return nil
}

// openSources opens the tracker of the namespaces' package sources
// (docs/sources.md), when they list any: its store, <data>/sources.db or
// the catalog's PostgreSQL (openShared). It signs
// with the key loadProvenanceKey loaded. The leader runs it
// (startLeading). It publishes through the registry's own handler, not
// the server's, so it needs no credentials and every rule of the registry
// applies to what it pushes.
func (n *Node) openSources(ctx context.Context) error {
	cfg := n.cfg
	if n.provenanceKey == nil {
		return nil
	}
	store, err := openShared(ctx, n, "sources", "sources.db", sources.OpenPostgres, sources.OpenSQLite)
	if err != nil {
		return err
	}
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
		Signer:       n.provenanceKey,
		Registry:     n.reg,
		RegistryHost: host,
		BuilderID:    builder,
		Logger:       n.log,
		Metrics:      n.metrics,
		OnEvent: func(ctx context.Context, ch apiv1.Change) {
			if err := n.cat.RecordSourceEvent(ctx, ch); err != nil {
				n.log.Warn("sources: record the event in the change feed", "source", ch.Namespace+"/"+ch.Name, "status", ch.Status, "err", err)
			}
		},
	})
	if err != nil {
		return err
	}
	n.sources = t
	return nil
}

// sourcesAPI gives the catalog's API and the web UI the tracker and its
// webhook, or nothing when no namespace lists sources: a nil *Tracker in
// their interface would not be nil.
func (n *Node) sourcesAPI(api *httpapi.Options, web *ui.Options) {
	if n.sources == nil {
		return
	}
	api.Sources = n.sources
	api.SourcesWebhook = webhook.New(n.cfg, n.sources.Check, n.log)
	web.Sources = n.sources
}
