package sources

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/internal/pgpool"
	"github.com/berth-registry/berth/internal/sqlitedb"
	"github.com/berth-registry/berth/pkgsource"
)

// State is what the leader knows of one tracked source: the status the
// replicas serve, and what its next check compares with.
type State struct {
	// Key is the source's namespace and package.
	Key config.SourceKey `json:"-"`
	// Spec identifies the source's settings the state is of (kind, URL,
	// ref, dir, format): a source whose settings change starts afresh.
	Spec      string    `json:"spec"`
	LastCheck time.Time `json:"lastCheck"`
	NextCheck time.Time `json:"nextCheck"`
	// Resolved is what the last check resolved (a ref, commit, ETag or
	// digest), for the next conditional check; unused for a tag pattern.
	Resolved pkgsource.Resolved `json:"resolved"`
	// Handled is the revision last built for good: published, found
	// already published, or refused for a reason a retry does not change.
	// A check that resolves it again builds nothing.
	Handled string `json:"handled,omitempty"`
	// HandledError is the failure of Handled, nil when it was published:
	// the last error of every check that resolves Handled again.
	HandledError *apiv1.SourceError `json:"handledError,omitempty"`
	// Refs are the tags of a tag pattern, with the version each became.
	Refs          []apiv1.SourceRef    `json:"refs,omitempty"`
	LastPublished *apiv1.SourceVersion `json:"lastPublished,omitempty"`
	LastError     *apiv1.SourceError   `json:"lastError,omitempty"`
}

// Store keeps the states of the tracked sources and the checks asked for,
// shared by the replicas: the leader checks and writes, any replica reads
// and asks.
type Store interface {
	// States returns the state of every source that has one.
	States(ctx context.Context) ([]State, error)
	// Save writes the states, in one transaction.
	Save(ctx context.Context, states ...State) error
	// Request records that a check of key was asked for at the time at
	// (Unix nanoseconds); a later request replaces an earlier one.
	Request(ctx context.Context, key config.SourceKey, at int64) error
	// Requests returns the checks asked for, with when.
	Requests(ctx context.Context) (map[config.SourceKey]int64, error)
	// Done forgets the request of key if it was made at or before at.
	Done(ctx context.Context, key config.SourceKey, at int64) error
	Close() error
}

// tables are the store's tables, in both databases. source_states holds
// each source's State as JSON; source_requests the checks asked for, in
// Unix nanoseconds, which the leader polls (it is empty most of the time).
const tables = `
CREATE TABLE IF NOT EXISTS source_states (
	namespace text NOT NULL,
	package   text NOT NULL,
	state     text NOT NULL,
	PRIMARY KEY (namespace, package)
);
CREATE TABLE IF NOT EXISTS source_requests (
	namespace text NOT NULL,
	package   text NOT NULL,
	requested bigint NOT NULL,
	PRIMARY KEY (namespace, package)
)`

// schemaLock is the advisory lock that serialises the creation of the
// tables among replicas starting together.
const schemaLock = int64(0x6265727468737263) // "berthsrc"

// sqlStore is the Store of both databases, through database/sql.
type sqlStore struct {
	// writer runs the writes, reader the reads (one pool on PostgreSQL).
	writer, reader *sql.DB
	// dollar numbers the parameters $1, $2, … (PostgreSQL) instead of ?.
	dollar bool
	close  func() error
}

var _ Store = (*sqlStore)(nil)

// OpenSQLite opens the store of one node in the SQLite file at path (berth
// serve keeps it in <data>/sources.db), creating it when absent.
func OpenSQLite(ctx context.Context, path string) (Store, error) {
	writer, reader, err := sqlitedb.Open(ctx, path, sqlitedb.Options{DirMode: 0o755, Migrations: []string{tables}})
	if err != nil {
		return nil, fmt.Errorf("sources store: %w", err)
	}
	return &sqlStore{writer: writer, reader: reader,
		close: func() error { return errors.Join(reader.Close(), writer.Close()) }}, nil
}

// OpenPostgres opens the store replicas share in the PostgreSQL database
// at dsn (catalog.database), creating its tables when absent. Errors name
// the host, never the password.
func OpenPostgres(ctx context.Context, dsn string) (Store, error) {
	cfg, err := pgpool.Config(dsn, 4)
	if err != nil {
		return nil, fmt.Errorf("sources store: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("sources store: connect to PostgreSQL at %s: %w", cfg.ConnConfig.Host, err)
	}
	if err := pgpool.CreateSchema(ctx, pool, schemaLock, tables, nil); err != nil {
		pool.Close()
		return nil, fmt.Errorf("sources store: PostgreSQL at %s: %w", cfg.ConnConfig.Host, err)
	}
	db := stdlib.OpenDBFromPool(pool)
	return &sqlStore{writer: db, reader: db, dollar: true, close: func() error {
		err := db.Close()
		pool.Close()
		return err
	}}, nil
}

// q rewrites the ? of query for PostgreSQL.
func (s *sqlStore) q(query string) string {
	if !s.dollar {
		return query
	}
	return pgpool.Numbered(query)
}

func (s *sqlStore) States(ctx context.Context) ([]State, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT namespace, package, state FROM source_states ORDER BY namespace, package`)
	if err != nil {
		return nil, fmt.Errorf("sources store: %w", err)
	}
	defer rows.Close()
	var out []State
	for rows.Next() {
		var st State
		var doc string
		if err := rows.Scan(&st.Key.Namespace, &st.Key.Package, &doc); err != nil {
			return nil, fmt.Errorf("sources store: %w", err)
		}
		if err := json.Unmarshal([]byte(doc), &st); err != nil {
			return nil, fmt.Errorf("sources store: the state of %s/%s: %w", st.Key.Namespace, st.Key.Package, err)
		}
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sources store: %w", err)
	}
	return out, nil
}

func (s *sqlStore) Save(ctx context.Context, states ...State) error {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sources store: %w", err)
	}
	defer tx.Rollback() // sql.ErrTxDone after Commit
	query := s.q(`INSERT INTO source_states (namespace, package, state) VALUES (?, ?, ?)
		ON CONFLICT (namespace, package) DO UPDATE SET state = excluded.state`)
	for _, st := range states {
		doc, err := json.Marshal(st)
		if err != nil {
			return fmt.Errorf("sources store: the state of %s/%s: %w", st.Key.Namespace, st.Key.Package, err)
		}
		if _, err := tx.ExecContext(ctx, query, st.Key.Namespace, st.Key.Package, string(doc)); err != nil {
			return fmt.Errorf("sources store: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sources store: %w", err)
	}
	return nil
}

func (s *sqlStore) Request(ctx context.Context, key config.SourceKey, at int64) error {
	_, err := s.writer.ExecContext(ctx, s.q(`INSERT INTO source_requests (namespace, package, requested) VALUES (?, ?, ?)
		ON CONFLICT (namespace, package) DO UPDATE SET requested = excluded.requested`), key.Namespace, key.Package, at)
	if err != nil {
		return fmt.Errorf("sources store: %w", err)
	}
	return nil
}

func (s *sqlStore) Requests(ctx context.Context) (map[config.SourceKey]int64, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT namespace, package, requested FROM source_requests`)
	if err != nil {
		return nil, fmt.Errorf("sources store: %w", err)
	}
	defer rows.Close()
	out := map[config.SourceKey]int64{}
	for rows.Next() {
		var k config.SourceKey
		var at int64
		if err := rows.Scan(&k.Namespace, &k.Package, &at); err != nil {
			return nil, fmt.Errorf("sources store: %w", err)
		}
		out[k] = at
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sources store: %w", err)
	}
	return out, nil
}

func (s *sqlStore) Done(ctx context.Context, key config.SourceKey, at int64) error {
	_, err := s.writer.ExecContext(ctx, s.q(`DELETE FROM source_requests WHERE namespace = ? AND package = ? AND requested <= ?`), key.Namespace, key.Package, at)
	if err != nil {
		return fmt.Errorf("sources store: %w", err)
	}
	return nil
}

func (s *sqlStore) Close() error { return s.close() }
