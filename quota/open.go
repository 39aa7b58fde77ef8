package quota

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/berth-registry/berth/internal/pgpool"
	"github.com/berth-registry/berth/internal/sqlitedb"
)

// OpenSQLite opens the ledger of one node in the SQLite file at path
// (berth serve keeps it in <data>/quota.db, a file of its own: the catalog's
// file versions its schema by itself), creating it when absent. Its one
// writer serialises charges.
func OpenSQLite(ctx context.Context, path string, opts Options) (Ledger, error) {
	writer, reader, err := sqlitedb.Open(ctx, path, sqlitedb.Options{DirMode: 0o755, Migrations: []string{tables}})
	if err != nil {
		return nil, fmt.Errorf("quota ledger: %w", err)
	}
	return &ledger{writer: writer, reader: reader, opts: opts, now: time.Now,
		close: func() error { return errors.Join(reader.Close(), writer.Close()) }}, nil
}

// maxConns is the pool size when the URL sets no pool_max_conns: one
// transaction per blob committed, manifest pushed and upload opened.
const maxConns = 8

// schemaLock is the advisory lock that serialises the creation of the
// tables among replicas starting together.
const schemaLock = int64(0x6265727468717461) // "berthqta"

// OpenPostgres opens the ledger that replicas share in the PostgreSQL
// database at dsn (catalog.database), creating its tables when absent.
// A charge locks its namespace's total row (SELECT … FOR UPDATE), and an
// upload's opening its subject's transaction advisory lock, so that the
// replicas count one at a time. Errors name the host, never the password.
func OpenPostgres(ctx context.Context, dsn string, opts Options) (Ledger, error) {
	cfg, err := pgpool.Config(dsn, maxConns)
	if err != nil {
		return nil, fmt.Errorf("quota ledger: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("quota ledger: connect to PostgreSQL at %s: %w", cfg.ConnConfig.Host, err)
	}
	if err := pgpool.CreateSchema(ctx, pool, schemaLock, tables, nil); err != nil {
		pool.Close()
		return nil, fmt.Errorf("quota ledger: PostgreSQL at %s: %w", cfg.ConnConfig.Host, err)
	}
	db := stdlib.OpenDBFromPool(pool)
	return &ledger{writer: db, reader: db, opts: opts, now: time.Now,
		d: dialect{dollar: true, forUpdate: " FOR UPDATE", lockSubject: `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`},
		close: func() error {
			err := db.Close()
			pool.Close()
			return err
		}}, nil
}
