// Package robotdb keeps berth's robot accounts, and the revocations of the
// tokens it issued, in a SQLite file of their own (auth.robots.database,
// default <data>/auth.db), on the pure-Go driver the catalog uses
// (modernc.org/sqlite), in WAL mode. It implements auth.RobotStore and
// auth.Revocations. A robot's secret is never stored: only its SHA-256
// (auth.Robot.SecretHash).
//
// The schema is versioned with PRAGMA user_version: Open applies the steps
// of migrations a file lacks, and refuses a file written by a newer berth.
package robotdb

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/internal/sqlitedb"
)

// Store is an auth.RobotStore in one SQLite file. It is safe for concurrent use.
type Store struct {
	file string
	// writer has one connection, so that writes are serialised in this
	// process; reader is a pool of query-only connections.
	writer, reader *sql.DB
}

var (
	_ auth.RobotStore  = (*Store)(nil)
	_ auth.Revocations = (*Store)(nil)
)

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
	`CREATE TABLE revocations (
		id    TEXT NOT NULL PRIMARY KEY, -- the token's jti
		until INTEGER NOT NULL           -- Unix nanoseconds, UTC: kept until then
	) WITHOUT ROWID`,
}

// Open opens the robot store in the SQLite file at file, creating it and its
// directory (mode 0700) when absent and bringing an older schema up to date.
// The file is mode 0600.
func Open(ctx context.Context, file string) (*Store, error) {
	writer, reader, err := sqlitedb.Open(ctx, file, sqlitedb.Options{DirMode: 0o700, FileMode: 0o600, Migrations: migrations})
	if err != nil {
		return nil, fmt.Errorf("robots: open %s: %w", file, err)
	}
	return &Store{file: file, writer: writer, reader: reader}, nil
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
	scopes, err := r.StoredScopes()
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
		r.Namespace, r.Name, r.Description, scopes, r.CreatedBy,
		sqlitedb.EncodeTime(r.CreatedAt), sqlitedb.EncodeTime(r.ExpiresAt), sqlitedb.EncodeTime(r.RevokedAt), sqlitedb.EncodeTime(r.LastUsed), r.SecretHash); err != nil {
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
		return nil, auth.RobotNotFound(namespace, name)
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
		sqlitedb.EncodeTime(at), namespace, name)
}

// Touch records that the robot authenticated at at (an earlier time than
// the one recorded changes nothing); auth.ErrRobotNotFound when none.
func (s *Store) Touch(ctx context.Context, namespace, name string, at time.Time) error {
	return s.update(ctx, "touch", namespace, name,
		`UPDATE robots SET last_used = max(last_used, ?) WHERE namespace = ? AND name = ?`,
		sqlitedb.EncodeTime(at), namespace, name)
}

// RevokeToken records that the token id is revoked until until, dropping
// the records whose time has passed, so that the table holds only tokens
// that have not expired.
func (s *Store) RevokeToken(ctx context.Context, id string, until time.Time) error {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("revocations: revoke: %w", err)
	}
	defer tx.Rollback() // sql.ErrTxDone after Commit
	if _, err := tx.ExecContext(ctx, `DELETE FROM revocations WHERE until < ?`, sqlitedb.EncodeTime(time.Now())); err != nil {
		return fmt.Errorf("revocations: revoke: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO revocations (id, until) VALUES (?, ?)
	ON CONFLICT (id) DO UPDATE SET until = max(until, excluded.until)`, id, sqlitedb.EncodeTime(until)); err != nil {
		return fmt.Errorf("revocations: revoke: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("revocations: revoke: %w", err)
	}
	return nil
}

// TokenRevoked reports whether the token id was revoked.
func (s *Store) TokenRevoked(ctx context.Context, id string) (bool, error) {
	var n int
	if err := s.reader.QueryRowContext(ctx, `SELECT count(*) FROM revocations WHERE id = ?`, id).Scan(&n); err != nil {
		return false, fmt.Errorf("revocations: read: %w", err)
	}
	return n > 0, nil
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
		return auth.RobotNotFound(namespace, name)
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
		r.CreatedAt, r.ExpiresAt, r.RevokedAt, r.LastUsed = sqlitedb.DecodeTime(created), sqlitedb.DecodeTime(expires), sqlitedb.DecodeTime(revoked), sqlitedb.DecodeTime(used)
		out = append(out, r)
	}
	return out, rows.Err()
}
