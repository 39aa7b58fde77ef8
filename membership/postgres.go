package membership

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/berth-registry/berth/internal/pgpool"
)

// maxConns is the size of the pool: one heartbeat at a time.
const maxConns = 2

// schemaLock is the advisory lock that serialises the creation of the
// tables among replicas starting together.
const schemaLock = int64(0x62657274686d656d) // "berthmem"

// schema creates the catalog's identity, one row made by the first replica,
// and the replicas' records, one row per replica.
const schema = `CREATE TABLE IF NOT EXISTS berth_catalog_identity (
	one     boolean PRIMARY KEY DEFAULT true CHECK (one),
	id      text NOT NULL,
	created timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS berth_replicas (
	replica  text PRIMARY KEY,
	host     text NOT NULL,
	pid      integer NOT NULL,
	addr     text NOT NULL,
	storage  text NOT NULL,
	settings jsonb NOT NULL,   -- setting name → fingerprint, never a secret
	started  timestamptz NOT NULL,
	renewed  timestamptz NOT NULL
)`

// dbPlace keeps the records in the PostgreSQL catalog, whose clock judges
// their age.
type dbPlace struct {
	pool    *pgxpool.Pool
	host    string
	catalog string
}

var _ place = (*dbPlace)(nil)

// openDB connects to the PostgreSQL catalog at dsn, creates the tables
// when they are missing and returns the catalog's id. Errors name the
// host, never the password.
func openDB(ctx context.Context, dsn string) (*dbPlace, string, error) {
	cfg, err := pgpool.Config(dsn, maxConns)
	if err != nil {
		return nil, "", fmt.Errorf("membership: catalog.database: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, "", fmt.Errorf("membership: connect to PostgreSQL at %s: %w", cfg.ConnConfig.Host, err)
	}
	id, err := catalogID(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, "", fmt.Errorf("membership: PostgreSQL at %s: %w", cfg.ConnConfig.Host, err)
	}
	return &dbPlace{pool: pool, host: cfg.ConnConfig.Host, catalog: "postgres:" + id}, id, nil
}

// catalogID creates the tables and the catalog's identity if missing, and
// reads the identity.
func catalogID(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	var id string
	err := pgpool.CreateSchema(ctx, pool, schemaLock, schema, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO berth_catalog_identity (id) VALUES ($1) ON CONFLICT DO NOTHING`, randomID()); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT id FROM berth_catalog_identity`).Scan(&id)
	})
	return id, err
}

func (d *dbPlace) close() { d.pool.Close() }

func (d *dbPlace) String() string { return "the table berth_replicas of PostgreSQL at " + d.host }

func (d *dbPlace) renew(ctx context.Context, r *record) error {
	settings, err := json.Marshal(r.Settings)
	if err != nil {
		return err
	}
	return d.pool.QueryRow(ctx, `INSERT INTO berth_replicas (replica, host, pid, addr, storage, settings, started, renewed)
		VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, now())
		ON CONFLICT (replica) DO UPDATE SET host = excluded.host, pid = excluded.pid, addr = excluded.addr,
			storage = excluded.storage, settings = excluded.settings, started = excluded.started, renewed = now()
		RETURNING renewed`,
		r.Replica, r.Host, r.PID, r.Addr, r.Storage, string(settings), r.Started).Scan(&r.Renewed)
}

// records reads every row; every replica on the database shares its
// catalog, so the rows carry this one's.
func (d *dbPlace) records(ctx context.Context) ([]record, error) {
	rows, err := d.pool.Query(ctx, `SELECT replica, host, pid, addr, storage, settings::text, started, renewed,
		extract(epoch FROM now() - renewed)::float8 FROM berth_replicas`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []record
	for rows.Next() {
		var (
			r        record
			settings string
			age      float64
		)
		if err := rows.Scan(&r.Replica, &r.Host, &r.PID, &r.Addr, &r.Storage, &settings, &r.Started, &r.Renewed, &age); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(settings), &r.Settings); err != nil {
			return nil, fmt.Errorf("the settings of replica %s: %w", r.Replica, err)
		}
		r.Catalog, r.age = d.catalog, time.Duration(age*float64(time.Second))
		out = append(out, r)
	}
	return out, rows.Err()
}

func (d *dbPlace) remove(ctx context.Context, replica string) error {
	_, err := d.pool.Exec(ctx, `DELETE FROM berth_replicas WHERE replica = $1`, replica)
	return err
}
