package node

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/postgres"
	"github.com/berth-registry/berth/catalog/sqlite"
	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/coord"
	"github.com/berth-registry/berth/maintenance"
	"github.com/berth-registry/berth/olm"
	"github.com/berth-registry/berth/server"
	"github.com/berth-registry/berth/sources"
)

// cluster is how this process works with the other replicas that share its
// catalog's database (docs/scale-out.md): alone on SQLite, it is its own
// leader and its locks are mutexes; on PostgreSQL, it takes locks and
// competes for the leadership there.
type cluster struct {
	locks coord.Locks
	// elector is nil when the process is alone: it always leads; signals,
	// nil too then, carry requests between replicas.
	elector coord.Elector
	signals coord.Signals
	// ready checks the shared database, nil when there is none.
	ready server.ReadyChecker
	close func()
}

// joinCluster returns the coordination of cfg's catalog database; on
// PostgreSQL, berth_leader tells in metrics whether this process leads.
func joinCluster(ctx context.Context, cfg *config.Config, log *slog.Logger, metrics prometheus.Registerer) (*cluster, error) {
	if !cfg.Catalog.Postgres() {
		return &cluster{locks: &coord.Local{}, close: func() {}}, nil
	}
	pg, err := coord.OpenPostgres(ctx, cfg.Catalog.Database, log)
	if err != nil {
		return nil, fmt.Errorf("catalog.database: %w", err)
	}
	leader := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "berth_leader",
		Help: "1 while this replica leads: runs the catalog's reconciler and signature passes, garbage collection and the OLM publisher's pushes.",
	}, func() float64 {
		if pg.Leader() {
			return 1
		}
		return 0
	})
	if err := metrics.Register(leader); err != nil {
		pg.Close()
		return nil, err
	}
	return &cluster{locks: pg, elector: pg, signals: pg, ready: pg, close: func() {
		metrics.Unregister(leader)
		pg.Close()
	}}, nil
}

// leads reports whether this process leads now; nil when it is alone.
func (c *cluster) leads() func() bool {
	if c.elector == nil {
		return nil
	}
	return c.elector.Leader
}

// lead runs fn for each term this process leads, until ctx ends; alone,
// it runs fn once.
func (c *cluster) lead(ctx context.Context, fn func(ctx context.Context)) {
	if c.elector == nil {
		fn(ctx)
		return
	}
	c.elector.Lead(ctx, fn)
}

// readyChecks adds the database to the server's readiness checks.
func (c *cluster) readyChecks(checks map[string]server.ReadyChecker) map[string]server.ReadyChecker {
	if c.ready != nil {
		checks["database"] = c.ready
	}
	return checks
}

// openStore opens the catalog's store: PostgreSQL, whose every change
// (this replica's and the others') reaches onChange, or SQLite, whose
// changes the catalog reports itself.
func openStore(ctx context.Context, cfg *config.Config, log *slog.Logger, onChange func(namespace, name string)) (catalog.Store, error) {
	if cfg.Catalog.Postgres() {
		return postgres.Open(ctx, cfg.Catalog.Database, postgres.Options{Logger: log, OnChange: onChange})
	}
	return sqlite.Open(ctx, cfg.Catalog.Database)
}

// startLeading runs the work of the leader while this process leads: on
// taking over from another replica, the OLM publisher checks against the
// registry what it rendered as a follower and pushes what is missing; then
// keepQuotas recomputes the namespaces' usage and purges abandoned uploads
// (registry.KeepQuotas), the tracker, when there is one, checks the
// package sources (sources.Tracker.Run), and retention and garbage
// collection run every gc.interval (mt.Loop). stop ends it, once the
// checks in progress ended.
func startLeading(ctx context.Context, cl *cluster, pub *olm.Publisher, mt *maintenance.Maintenance, keepQuotas func(context.Context), tracker *sources.Tracker, log *slog.Logger) (stop func()) {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		cl.lead(runCtx, func(ctx context.Context) {
			if cl.elector != nil {
				if err := pub.Refresh(ctx); err != nil && ctx.Err() == nil {
					log.Error("olm: publish on taking the leadership", "err", err)
				}
			}
			go keepQuotas(ctx)
			tracked := make(chan struct{})
			go func() {
				defer close(tracked)
				if tracker != nil {
					tracker.Run(ctx)
				}
			}()
			mt.Loop(ctx)
			<-ctx.Done()
			<-tracked
		})
	}()
	return func() {
		cancel()
		<-done
	}
}
