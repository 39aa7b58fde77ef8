// Package pgpool parses the PostgreSQL URL of catalog.database into a pgx
// pool configuration, the one way every user of the database reads it, and
// holds what they share on a pool: LISTEN, and the creation of their tables
// under an advisory lock.
package pgpool

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Config parses dsn (postgres://…), which may set pgx's pool parameters
// such as pool_max_conns; without pool_max_conns the pool holds at most
// maxConns connections. Its error never quotes the URL, which may hold a
// password.
func Config(dsn string, maxConns int32) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's message may quote the URL, password and all.
		return nil, errors.New("the PostgreSQL URL cannot be parsed; want postgres://user:password@host:port/database?sslmode=...")
	}
	if u, err := url.Parse(dsn); err != nil || !u.Query().Has("pool_max_conns") {
		cfg.MaxConns = maxConns
	}
	return cfg, nil
}

// Listen LISTENs on channel and calls fn with the payload of each
// notification until ctx ends, on a connection taken from pool for good (it
// never goes back). When the connection fails it reports why to failed and
// connects again after retry; notifications sent meanwhile are lost.
func Listen(ctx context.Context, pool *pgxpool.Pool, channel string, retry time.Duration, failed func(error), fn func(payload string)) {
	for ctx.Err() == nil {
		err := listenOnce(ctx, pool, channel, fn)
		if ctx.Err() != nil {
			return
		}
		failed(err)
		select {
		case <-ctx.Done():
		case <-time.After(retry):
		}
	}
}

// listenOnce listens on one connection until it fails or ctx ends.
func listenOnce(ctx context.Context, pool *pgxpool.Pool, channel string, fn func(payload string)) error {
	pooled, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := pooled.Hijack()
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		fn(n.Payload)
	}
}

// CreateSchema runs schema (CREATE … IF NOT EXISTS statements), then fn
// when it is not nil, in one transaction under the transaction advisory
// lock lock, so that replicas starting together create the tables one at a
// time.
func CreateSchema(ctx context.Context, pool *pgxpool.Pool, lock int64, schema string, fn func(pgx.Tx) error) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) // pgx.ErrTxClosed after Commit
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lock); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, schema); err != nil {
		return fmt.Errorf("create the tables: %w", err)
	}
	if fn != nil {
		if err := fn(tx); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// Numbered rewrites the ? parameters of query, as SQLite and database/sql
// write them, to PostgreSQL's $1, $2, …, for stores that share their
// statements between the two.
func Numbered(query string) string {
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
