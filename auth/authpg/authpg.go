// Package authpg keeps berth's identity state in PostgreSQL, in the
// catalog's database (catalog.database), so that every replica reads the
// same: robot accounts, and the revocations of the tokens berth issued (UI
// sessions signed out, refresh tokens given back). A robot created or
// revoked through one replica is honoured or refused by every other at its
// next request. It implements auth.RobotStore and auth.Revocations; one
// process on SQLite keeps both in auth/robotdb instead. A robot's secret is
// never stored: only its SHA-256 (auth.Robot.SecretHash).
package authpg

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/internal/pgpool"
)

// maxConns is the pool size when the URL sets no pool_max_conns: a robot
// is read once per request that bears its credentials or a token of its,
// a revocation once per UI request with a session cookie and per refresh
// token redeemed.
const maxConns = 8

// schemaLock is the advisory lock that serialises the creation of the
// tables among replicas starting together.
const schemaLock = int64(0x6265727468726576) // "berthrev"

// schema creates the tables when absent. Times are UTC; revoked_at and
// last_used are NULL until the robot is revoked or first used.
const schema = `
CREATE TABLE IF NOT EXISTS auth_revocations (
	id    text PRIMARY KEY,        -- the token's jti
	until timestamptz NOT NULL     -- kept until then
);
CREATE TABLE IF NOT EXISTS auth_robots (
	namespace   text NOT NULL,
	name        text NOT NULL,
	description text NOT NULL,
	scopes      jsonb NOT NULL,    -- array of auth.RobotScope
	created_by  text NOT NULL,
	created_at  timestamptz NOT NULL,
	expires_at  timestamptz NOT NULL,
	revoked_at  timestamptz,
	last_used   timestamptz,
	secret_hash bytea NOT NULL,    -- SHA-256 of the secret
	PRIMARY KEY (namespace, name)
)`

// Store is an auth.RobotStore and auth.Revocations in PostgreSQL. It is
// safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
}

var (
	_ auth.RobotStore  = (*Store)(nil)
	_ auth.Revocations = (*Store)(nil)
)

// Open connects to the database at dsn (postgres://…) and creates the
// tables of robots and revocations when it has none. Errors name the host,
// never the password.
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgpool.Config(dsn, maxConns)
	if err != nil {
		return nil, fmt.Errorf("auth store: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("auth store: connect to PostgreSQL at %s: %w", cfg.ConnConfig.Host, err)
	}
	if err := pgpool.CreateSchema(ctx, pool, schemaLock, schema, nil); err != nil {
		pool.Close()
		return nil, fmt.Errorf("auth store: PostgreSQL at %s: %w", cfg.ConnConfig.Host, err)
	}
	return &Store{pool: pool}, nil
}

// Close closes the connections.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Create stores r; auth.ErrRobotExists when its name is taken, even by a
// revoked robot. r.SecretHash must be a SHA-256.
func (s *Store) Create(ctx context.Context, r *auth.Robot) error {
	scopes, err := r.StoredScopes()
	if err != nil {
		return fmt.Errorf("robots: create %s: %w", r.Username(), err)
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO auth_robots
	(namespace, name, description, scopes, created_by, created_at, expires_at, revoked_at, last_used, secret_hash)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING`,
		r.Namespace, r.Name, r.Description, scopes, r.CreatedBy,
		r.CreatedAt.UTC(), r.ExpiresAt.UTC(), nullTime(r.RevokedAt), nullTime(r.LastUsed), r.SecretHash)
	if err != nil {
		return fmt.Errorf("robots: create %s: %w", r.Username(), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w", r.Username(), auth.ErrRobotExists)
	}
	return nil
}

const columns = `namespace, name, description, scopes, created_by, created_at, expires_at, revoked_at, last_used, secret_hash`

// Get returns the robot, revoked or not; auth.ErrRobotNotFound when none.
func (s *Store) Get(ctx context.Context, namespace, name string) (*auth.Robot, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+columns+` FROM auth_robots WHERE namespace = $1 AND name = $2`, namespace, name)
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
// revoked and expired ones too, ordered by namespace and name (bytewise).
func (s *Store) List(ctx context.Context, namespace string) ([]*auth.Robot, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+columns+` FROM auth_robots
	WHERE $1 = '' OR namespace = $1 ORDER BY namespace COLLATE "C", name COLLATE "C"`, namespace)
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
		`UPDATE auth_robots SET revoked_at = coalesce(revoked_at, $3) WHERE namespace = $1 AND name = $2`, at.UTC())
}

// Touch records that the robot authenticated at at (an earlier time than
// the one recorded changes nothing); auth.ErrRobotNotFound when none.
func (s *Store) Touch(ctx context.Context, namespace, name string, at time.Time) error {
	return s.update(ctx, "touch", namespace, name,
		`UPDATE auth_robots SET last_used = greatest(last_used, $3) WHERE namespace = $1 AND name = $2`, at.UTC())
}

// update runs an UPDATE of the robot namespace+name, whose third parameter is at.
func (s *Store) update(ctx context.Context, what, namespace, name, query string, at time.Time) error {
	tag, err := s.pool.Exec(ctx, query, namespace, name, at)
	if err != nil {
		return fmt.Errorf("robots: %s %s+%s: %w", what, namespace, name, err)
	}
	if tag.RowsAffected() == 0 {
		return auth.RobotNotFound(namespace, name)
	}
	return nil
}

// RevokeToken records that the token id is revoked until until, dropping
// the records whose time has passed, so that the table holds only tokens
// that have not expired.
func (s *Store) RevokeToken(ctx context.Context, id string, until time.Time) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM auth_revocations WHERE until < now()`); err != nil {
		return fmt.Errorf("revocations: revoke: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO auth_revocations (id, until) VALUES ($1, $2)
	ON CONFLICT (id) DO UPDATE SET until = greatest(auth_revocations.until, excluded.until)`, id, until); err != nil {
		return fmt.Errorf("revocations: revoke: %w", err)
	}
	return nil
}

// TokenRevoked reports whether the token id was revoked.
func (s *Store) TokenRevoked(ctx context.Context, id string) (bool, error) {
	var revoked bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM auth_revocations WHERE id = $1)`, id).Scan(&revoked); err != nil {
		return false, fmt.Errorf("revocations: read: %w", err)
	}
	return revoked, nil
}

// Count is the number of robots stored, revoked and expired ones too.
func (s *Store) Count(ctx context.Context) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM auth_robots`).Scan(&n); err != nil {
		return 0, fmt.Errorf("robots: count: %w", err)
	}
	return n, nil
}

// nullTime is t, or NULL when t is zero.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// scan reads the robots of rows and closes them.
func scan(rows pgx.Rows) ([]*auth.Robot, error) {
	defer rows.Close()
	out := []*auth.Robot{}
	for rows.Next() {
		r := &auth.Robot{}
		var scopes []byte
		var revoked, used *time.Time
		if err := rows.Scan(&r.Namespace, &r.Name, &r.Description, &scopes, &r.CreatedBy,
			&r.CreatedAt, &r.ExpiresAt, &revoked, &used, &r.SecretHash); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(scopes, &r.Scopes); err != nil {
			return nil, fmt.Errorf("robot %s: scopes: %w", r.Username(), err)
		}
		r.CreatedAt, r.ExpiresAt = r.CreatedAt.UTC(), r.ExpiresAt.UTC()
		if revoked != nil {
			r.RevokedAt = revoked.UTC()
		}
		if used != nil {
			r.LastUsed = used.UTC()
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
