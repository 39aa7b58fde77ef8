// Package revokepg keeps the revocations of the tokens berth issued (UI
// sessions signed out, refresh tokens given back) in PostgreSQL, in the
// catalog's database (catalog.database), so that every replica refuses a
// token any of them revoked. It implements auth.Revocations; one process on
// SQLite keeps them in auth/robotdb instead.
package revokepg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/internal/pgpool"
)

// maxConns is the pool size when the URL sets no pool_max_conns: a
// revocation is read once per UI request with a session cookie and per
// refresh token redeemed.
const maxConns = 4

// schemaLock is the advisory lock that serialises the creation of the table
// among replicas starting together.
const schemaLock = int64(0x6265727468726576) // "berthrev"

// schema creates the table: one row per revoked token, kept until the
// token's expiry.
const schema = `CREATE TABLE IF NOT EXISTS auth_revocations (
	id    text PRIMARY KEY,        -- the token's jti
	until timestamptz NOT NULL     -- kept until then
)`

// Store is an auth.Revocations in PostgreSQL. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
}

var _ auth.Revocations = (*Store)(nil)

// Open connects to the database at dsn (postgres://…) and creates the
// table of revocations when it has none. Errors name the host, never the
// password.
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgpool.Config(dsn, maxConns)
	if err != nil {
		return nil, fmt.Errorf("revocations: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("revocations: connect to PostgreSQL at %s: %w", cfg.ConnConfig.Host, err)
	}
	tx, err := pool.Begin(ctx)
	if err == nil {
		defer tx.Rollback(ctx) // pgx.ErrTxClosed after Commit
		if _, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, schemaLock); err == nil {
			if _, err = tx.Exec(ctx, schema); err == nil {
				err = tx.Commit(ctx)
			}
		}
	}
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("revocations: create the table in PostgreSQL at %s: %w", cfg.ConnConfig.Host, err)
	}
	return &Store{pool: pool}, nil
}

// Close closes the connections.
func (s *Store) Close() { s.pool.Close() }

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
