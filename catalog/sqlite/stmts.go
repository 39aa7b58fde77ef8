package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// maxPrepared bounds the statements the writer keeps prepared: the write
// path's queries are a fixed set well under it.
const maxPrepared = 64

// writeTx is a write transaction whose queries run as statements the writer
// prepared once, instead of being parsed again by SQLite on every call (a
// rebuild spent about a third of the store's CPU time in sqlite3Prepare). A
// query seen for the first time runs unprepared and is prepared after the
// transaction, when the writer's single connection is free again.
type writeTx struct {
	*sql.Tx
	stmts *stmtCache
}

// stmtCache is the writer's prepared statements, by query. The write lock
// (Store.writeMu) serialises its use.
type stmtCache struct {
	prepared map[string]*sql.Stmt
	// wanted are the queries run unprepared since the last prepare.
	wanted []string
}

func newStmtCache() *stmtCache {
	return &stmtCache{prepared: make(map[string]*sql.Stmt)}
}

// stmt returns the transaction's statement of query, or nil when query is
// not prepared yet (it is then prepared after the transaction).
func (tx *writeTx) stmt(ctx context.Context, query string) *sql.Stmt {
	st, ok := tx.stmts.prepared[query]
	if !ok {
		if len(tx.stmts.prepared)+len(tx.stmts.wanted) < maxPrepared {
			tx.stmts.wanted = append(tx.stmts.wanted, query)
		}
		return nil
	}
	return tx.StmtContext(ctx, st)
}

// ExecContext is sql.Tx's, through a prepared statement.
func (tx *writeTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := tx.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return tx.Tx.ExecContext(ctx, query, args...)
}

// QueryContext is sql.Tx's, through a prepared statement.
func (tx *writeTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := tx.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return tx.Tx.QueryContext(ctx, query, args...)
}

// QueryRowContext is sql.Tx's, through a prepared statement.
func (tx *writeTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := tx.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return tx.Tx.QueryRowContext(ctx, query, args...)
}

// prepare prepares on db, the writer, the queries run unprepared since the
// last call; it must be called outside a transaction. A query that fails to
// prepare stays unprepared: it failed or will fail in its transaction too.
func (c *stmtCache) prepare(ctx context.Context, db *sql.DB) {
	for _, q := range c.wanted {
		if _, ok := c.prepared[q]; ok {
			continue
		}
		if st, err := db.PrepareContext(ctx, q); err == nil {
			c.prepared[q] = st
		}
	}
	c.wanted = c.wanted[:0]
}

// close closes the prepared statements.
func (c *stmtCache) close() error { return closeStmts(c.prepared) }

// closeStmts closes and forgets the statements of prepared.
func closeStmts(prepared map[string]*sql.Stmt) error {
	var first error
	for q, st := range prepared {
		if err := st.Close(); err != nil && first == nil {
			first = err
		}
		delete(prepared, q)
	}
	return first
}

// readStmts runs queries on the reader pool as statements prepared once,
// which each connection of the pool prepares on its first use of them.
type readStmts struct {
	db       *sql.DB
	mu       sync.Mutex
	prepared map[string]*sql.Stmt
}

func newReadStmts(db *sql.DB) *readStmts {
	return &readStmts{db: db, prepared: make(map[string]*sql.Stmt)}
}

// stmt returns the statement of query, preparing it on first use, or nil
// when it cannot be prepared or maxPrepared are already.
func (r *readStmts) stmt(ctx context.Context, query string) *sql.Stmt {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st, ok := r.prepared[query]; ok {
		return st
	}
	if len(r.prepared) >= maxPrepared {
		return nil
	}
	st, err := r.db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	r.prepared[query] = st
	return st
}

// QueryContext is sql.DB's, through a prepared statement.
func (r *readStmts) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := r.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return r.db.QueryContext(ctx, query, args...)
}

// QueryRowContext is sql.DB's, through a prepared statement.
func (r *readStmts) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := r.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return r.db.QueryRowContext(ctx, query, args...)
}

// close closes the prepared statements.
func (r *readStmts) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return closeStmts(r.prepared)
}
