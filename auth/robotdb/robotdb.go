// Package robotdb keeps berth's robot accounts in a SQLite file of their own
// (auth.robots.database, default <data>/auth.db), on the pure-Go driver the
// catalog uses (modernc.org/sqlite), in WAL mode. It implements
// auth.RobotStore. A robot's secret is never stored: only its SHA-256
// (auth.Robot.SecretHash).
//
// The schema is versioned with PRAGMA user_version: Open applies the steps
// of migrations a file lacks, and refuses a file written by a newer berth.
package robotdb

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/berth-registry/berth/auth"
)

// Store is an auth.RobotStore in one SQLite file. It is safe for concurrent use.
type Store struct {
	file string
	// writer has one connection, so that writes are serialised in this
	// process; reader is a pool of query-only connections.
	writer, reader *sql.DB
}

var _ auth.RobotStore = (*Store)(nil)

// migrations are the schema's steps: step i takes the file from user_version
// i to i+1. Steps are only ever appended.
var migrations = []string{
	`CREATE TABLE robots (
		namespace   TEXT NOT NULL,
		name        TEXT NOT NULL,
		description TEXT NOT NULL,
		scopes      TEXT NOT NULL,    -- JSON array of auth.RobotScope
		created_by  TEXT NOT NULL,
		created_at  INTEGER NOT NULL, -- Unix nanoseconds, UTC
		expires_at  INTEGER NOT NULL,
		revoked_at  INTEGER NOT NULL, -- 0 while not revoked
		last_used   INTEGER NOT NULL, -- 0 until first used
		secret_hash BLOB NOT NULL,    -- SHA-256 of the secret
		PRIMARY KEY (namespace, name)
	) WITHOUT ROWID`,
}

// busyTimeoutMillis is how long a connection waits for a lock another process holds.
const busyTimeoutMillis = 10000

// Open opens the robot store in the SQLite file at file, creating it and its
// directory (mode 0700) when absent and bringing an older schema up to date.
func Open(ctx context.Context, file string) (*Store, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, fmt.Errorf("robots: open %s: %w", file, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("robots: open %s: %w", file, err)
	}
	s := &Store{file: file}
	if s.writer, err = sql.Open("sqlite", dsn(abs, false)); err != nil {
		return nil, fmt.Errorf("robots: open %s: %w", file, err)
	}
	s.writer.SetMaxOpenConns(1)
	if err := migrate(ctx, s.writer); err != nil {
		s.writer.Close()
		return nil, fmt.Errorf("robots: open %s: %w", file, err)
	}
	if err := os.Chmod(abs, 0o600); err != nil {
		s.writer.Close()
		return nil, fmt.Errorf("robots: open %s: %w", file, err)
	}
	if s.reader, err = sql.Open("sqlite", dsn(abs, true)); err != nil {
		s.writer.Close()
		return nil, fmt.Errorf("robots: open %s: %w", file, err)
	}
	return s, nil
}

// dsn is the data source name of the file at path (see catalog/sqlite).
func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeoutMillis))
	q.Add("_pragma", "synchronous(NORMAL)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Set("_txlock", "immediate")
	}
	u := url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}
	return u.String()
}

// migrate applies the steps of migrations the file lacks, in one transaction.
func migrate(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // sql.ErrTxDone after Commit
	var version int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("not a robot database: %w", err)
	}
	if version > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this berth's (%d)", version, len(migrations))
	}
	for _, step := range migrations[version:] {
		if _, err := tx.ExecContext(ctx, step); err != nil {
			return fmt.Errorf("migrate schema from version %d: %w", version, err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, len(migrations))); err != nil {
		return err
	}
	return tx.Commit()
}

// Close closes the store's connections.
func (s *Store) Close() error {
	if err := errors.Join(s.reader.Close(), s.writer.Close()); err != nil {
		return fmt.Errorf("robots: close %s: %w", s.file, err)
	}
	return nil
}

// Create stores r; auth.ErrRobotExists when its name is taken, even by a
// revoked robot. r.SecretHash must be a SHA-256.
func (s *Store) Create(ctx context.Context, r *auth.Robot) error {
	if len(r.SecretHash) != sha256.Size {
		return fmt.Errorf("robots: create %s: the secret hash is %d bytes, not a SHA-256", r.Username(), len(r.SecretHash))
	}
	scopes, err := json.Marshal(r.Scopes)
	if err != nil {
		return fmt.Errorf("robots: create %s: %w", r.Username(), err)
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("robots: create %s: %w", r.Username(), err)
	}
	defer tx.Rollback() // sql.ErrTxDone after Commit
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM robots WHERE namespace = ? AND name = ?`, r.Namespace, r.Name).Scan(&n); err != nil {
		return fmt.Errorf("robots: create %s: %w", r.Username(), err)
	}
	if n > 0 {
		return fmt.Errorf("%s: %w", r.Username(), auth.ErrRobotExists)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO robots
	(namespace, name, description, scopes, created_by, created_at, expires_at, revoked_at, last_used, secret_hash)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.Namespace, r.Name, r.Description, string(scopes), r.CreatedBy,
		encodeTime(r.CreatedAt), encodeTime(r.ExpiresAt), encodeTime(r.RevokedAt), encodeTime(r.LastUsed), r.SecretHash); err != nil {
		return fmt.Errorf("robots: create %s: %w", r.Username(), err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("robots: create %s: %w", r.Username(), err)
	}
	return nil
}

const columns = `namespace, name, description, scopes, created_by, created_at, expires_at, revoked_at, last_used, secret_hash`

// Get returns the robot, revoked or not; auth.ErrRobotNotFound when none.
func (s *Store) Get(ctx context.Context, namespace, name string) (*auth.Robot, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+columns+` FROM robots WHERE namespace = ? AND name = ?`, namespace, name)
	if err != nil {
		return nil, fmt.Errorf("robots: get %s+%s: %w", namespace, name, err)
	}
	robots, err := scan(rows)
	if err != nil {
		return nil, fmt.Errorf("robots: get %s+%s: %w", namespace, name, err)
	}
	if len(robots) == 0 {
		return nil, fmt.Errorf("%s%s+%s: %w", auth.RobotUserPrefix, namespace, name, auth.ErrRobotNotFound)
	}
	return robots[0], nil
}

// List returns the robots of namespace, every namespace's when it is "",
// revoked and expired ones too, ordered by namespace and name.
func (s *Store) List(ctx context.Context, namespace string) ([]*auth.Robot, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+columns+` FROM robots
	WHERE ? = '' OR namespace = ? ORDER BY namespace, name`, namespace, namespace)
	if err != nil {
		return nil, fmt.Errorf("robots: list: %w", err)
	}
	robots, err := scan(rows)
	if err != nil {
		return nil, fmt.Errorf("robots: list: %w", err)
	}
	return robots, nil
}

// Revoke marks the robot revoked at at; auth.ErrRobotNotFound when none.
// Revoking a revoked robot keeps its first revocation time.
func (s *Store) Revoke(ctx context.Context, namespace, name string, at time.Time) error {
	return s.update(ctx, "revoke", namespace, name,
		`UPDATE robots SET revoked_at = CASE revoked_at WHEN 0 THEN ? ELSE revoked_at END WHERE namespace = ? AND name = ?`,
		encodeTime(at), namespace, name)
}

// Touch records that the robot authenticated at at (an earlier time than
// the one recorded changes nothing); auth.ErrRobotNotFound when none.
func (s *Store) Touch(ctx context.Context, namespace, name string, at time.Time) error {
	return s.update(ctx, "touch", namespace, name,
		`UPDATE robots SET last_used = max(last_used, ?) WHERE namespace = ? AND name = ?`,
		encodeTime(at), namespace, name)
}

// update runs an UPDATE of one robot.
func (s *Store) update(ctx context.Context, what, namespace, name, query string, args ...any) error {
	res, err := s.writer.ExecContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("robots: %s %s+%s: %w", what, namespace, name, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err != nil {
			return fmt.Errorf("robots: %s %s+%s: %w", what, namespace, name, err)
		}
		return fmt.Errorf("%s%s+%s: %w", auth.RobotUserPrefix, namespace, name, auth.ErrRobotNotFound)
	}
	return nil
}

// scan reads the robots of rows and closes them.
func scan(rows *sql.Rows) ([]*auth.Robot, error) {
	defer rows.Close()
	out := []*auth.Robot{}
	for rows.Next() {
		r := &auth.Robot{}
		var scopes string
		var created, expires, revoked, used int64
		if err := rows.Scan(&r.Namespace, &r.Name, &r.Description, &scopes, &r.CreatedBy,
			&created, &expires, &revoked, &used, &r.SecretHash); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(scopes), &r.Scopes); err != nil {
			return nil, fmt.Errorf("robot %s: scopes: %w", r.Username(), err)
		}
		r.CreatedAt, r.ExpiresAt, r.RevokedAt, r.LastUsed = decodeTime(created), decodeTime(expires), decodeTime(revoked), decodeTime(used)
		out = append(out, r)
	}
	return out, rows.Err()
}

// encodeTime is t in Unix nanoseconds, 0 for the zero time.
func encodeTime(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// decodeTime reverses encodeTime, in UTC.
func decodeTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
