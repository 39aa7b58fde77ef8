package quota

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/berth-registry/berth/internal/pgpool"
)

// Options are what a ledger reads from the configuration.
type Options struct {
	// Limit is the quota of a namespace in bytes, 0 for none
	// (config.NamespacePolicy(ns).Quota).
	Limit func(namespace string) int64
	// Named are the namespaces named in the configuration (not globs):
	// Usages lists those with a quota even when they store nothing.
	Named []string
}

// dialect is what differs between SQLite and PostgreSQL in the statements
// the ledger shares.
type dialect struct {
	// dollar numbers the parameters $1, $2, … (PostgreSQL) instead of ?.
	dollar bool
	// forUpdate is appended to the SELECT that locks a namespace's total:
	// " FOR UPDATE" on PostgreSQL; SQLite has one writer.
	forUpdate string
	// lockSubject, when set, serialises the uploads of one subject
	// (its one parameter) until the transaction ends.
	lockSubject string
}

// ledger is the Ledger both databases share, through database/sql.
type ledger struct {
	// writer runs the transactions, reader the reads (the same pool on
	// PostgreSQL).
	writer, reader *sql.DB
	d              dialect
	opts           Options
	close          func() error
	now            func() time.Time
	// stmts are the statements prepared on each SQLite pool; pending
	// those transactions ran before they were.
	mu      sync.Mutex
	stmts   map[*sql.DB]map[string]*sql.Stmt
	pending map[string]bool
}

var _ Ledger = (*ledger)(nil)

// tables are the ledger's tables, in both databases; times are Unix
// nanoseconds. quota_totals holds each namespace's sum of its charges,
// updated in the transaction that changes them, and whether it awaits a
// recompute (dirty_since, 0 when not).
const tables = `
CREATE TABLE IF NOT EXISTS quota_totals (
	namespace   text PRIMARY KEY,
	used        bigint NOT NULL,
	blobs       bigint NOT NULL,
	dirty_since bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS quota_charges (
	namespace  text NOT NULL,
	digest     text NOT NULL,
	size       bigint NOT NULL,
	charged_at bigint NOT NULL,
	PRIMARY KEY (namespace, digest)
);
CREATE TABLE IF NOT EXISTS quota_uploads (
	uuid       text PRIMARY KEY,
	repository text NOT NULL,
	namespace  text NOT NULL,
	subject    text NOT NULL,
	started    bigint NOT NULL,
	last_write bigint NOT NULL,
	bytes      bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS quota_uploads_subject ON quota_uploads (subject, last_write);
CREATE INDEX IF NOT EXISTS quota_uploads_last_write ON quota_uploads (last_write)`

// q rewrites the ? of query for the dialect.
func (l *ledger) q(query string) string {
	if !l.d.dollar {
		return query
	}
	return pgpool.Numbered(query)
}

// exec runs query (with ?) in tx, or when nil on the writer; on SQLite
// through a statement prepared once (parsing dominates its cost).
func (l *ledger) exec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	st, err := l.prepared(ctx, l.writer, tx != nil, query)
	switch {
	case err != nil:
		return nil, err
	case st == nil && tx == nil:
		return l.writer.ExecContext(ctx, l.q(query), args...)
	case st == nil:
		return tx.ExecContext(ctx, l.q(query), args...)
	case tx == nil:
		return st.ExecContext(ctx, args...)
	}
	return tx.StmtContext(ctx, st).ExecContext(ctx, args...)
}

// row runs query (with ?) in tx, or when nil on the reader, as exec does,
// and returns its one row.
func (l *ledger) row(ctx context.Context, tx *sql.Tx, query string, args ...any) *sql.Row {
	db := l.reader
	if tx != nil {
		db = l.writer
	}
	st, err := l.prepared(ctx, db, tx != nil, query)
	switch {
	case err != nil, st == nil && tx == nil:
		// A failed prepare fails again here, with its error in the row.
		return db.QueryRowContext(ctx, l.q(query), args...)
	case st == nil:
		return tx.QueryRowContext(ctx, l.q(query), args...)
	case tx == nil:
		return st.QueryRowContext(ctx, args...)
	}
	return tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
}

// prepared returns query prepared on db, or nil where the driver caches
// statements itself (PostgreSQL's pgx). Within a transaction, which holds
// the writer's one connection, a statement not prepared yet is left for
// tx to prepare once the transaction ends (preparePending), and is nil.
func (l *ledger) prepared(ctx context.Context, db *sql.DB, inTx bool, query string) (*sql.Stmt, error) {
	if l.d.dollar {
		return nil, nil
	}
	l.mu.Lock()
	st := l.stmts[db][query]
	if st == nil && inTx {
		if l.pending == nil {
			l.pending = map[string]bool{}
		}
		l.pending[query] = true
	}
	l.mu.Unlock()
	if st != nil || inTx {
		return st, nil
	}
	st, err := db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stmts == nil {
		l.stmts = map[*sql.DB]map[string]*sql.Stmt{}
	}
	if l.stmts[db] == nil {
		l.stmts[db] = map[string]*sql.Stmt{}
	}
	if prev := l.stmts[db][query]; prev != nil {
		st.Close()
		return prev, nil
	}
	l.stmts[db][query] = st
	return st, nil
}

// preparePending prepares on the writer the statements transactions ran
// unprepared; one that fails to prepare runs unprepared again next time.
func (l *ledger) preparePending(ctx context.Context) {
	l.mu.Lock()
	pending := l.pending
	l.pending = nil
	l.mu.Unlock()
	for query := range pending {
		_, _ = l.prepared(ctx, l.writer, false, query)
	}
}

// tx runs fn in a transaction of the writer.
func (l *ledger) tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := l.writer.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer l.preparePending(ctx)
	defer tx.Rollback() // sql.ErrTxDone after Commit
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// lockTotal creates namespace's total when it has none and locks it until
// tx ends; it returns the namespace's usage.
func (l *ledger) lockTotal(ctx context.Context, tx *sql.Tx, namespace string) (int64, error) {
	if _, err := l.exec(ctx, tx, `INSERT INTO quota_totals (namespace, used, blobs, dirty_since) VALUES (?, 0, 0, 0) ON CONFLICT (namespace) DO NOTHING`, namespace); err != nil {
		return 0, err
	}
	var used int64
	err := l.row(ctx, tx, `SELECT used FROM quota_totals WHERE namespace = ?`+l.d.forUpdate, namespace).Scan(&used)
	return used, err
}

// charged reports whether namespace is charged for digest, in tx or,
// when nil, as last committed.
func (l *ledger) charged(ctx context.Context, tx *sql.Tx, namespace, digest string) (bool, error) {
	var one int
	err := l.row(ctx, tx, `SELECT 1 FROM quota_charges WHERE namespace = ? AND digest = ?`, namespace, digest).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func (l *ledger) Charge(ctx context.Context, p Push) (bool, error) {
	var added bool
	err := l.tx(ctx, func(tx *sql.Tx) error {
		used, err := l.lockTotal(ctx, tx, p.Namespace)
		if err != nil {
			return err
		}
		added, err = l.add(ctx, tx, p.Namespace, p.Item, func() error {
			if p.Limit > 0 && used+p.Size > p.Limit {
				return &OverQuotaError{Namespace: p.Namespace, Used: used, Limit: p.Limit, Needed: p.Size}
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, it := range p.Refs {
			if _, err := l.add(ctx, tx, p.Namespace, it, func() error { return nil }); err != nil {
				return err
			}
		}
		if p.Upload != "" {
			_, err = l.exec(ctx, tx, `DELETE FROM quota_uploads WHERE uuid = ?`, p.Upload)
		}
		return err
	})
	var over *OverQuotaError
	if err != nil && !errors.As(err, &over) {
		return false, fmt.Errorf("quota: charge %s in %s: %w", p.Digest, p.Namespace, err)
	}
	return added, err
}

// add charges namespace, whose total tx holds, for it, unless it is
// charged already: then it refreshes the time of its charge. A new charge
// is made once admit allows it.
func (l *ledger) add(ctx context.Context, tx *sql.Tx, namespace string, it Item, admit func() error) (bool, error) {
	now := l.now().UnixNano()
	if ok, err := l.charged(ctx, tx, namespace, it.Digest); err != nil || ok {
		if err == nil {
			_, err = l.exec(ctx, tx, `UPDATE quota_charges SET charged_at = ? WHERE namespace = ? AND digest = ?`, now, namespace, it.Digest)
		}
		return false, err
	}
	if err := admit(); err != nil {
		return false, err
	}
	if _, err := l.exec(ctx, tx, `INSERT INTO quota_charges (namespace, digest, size, charged_at) VALUES (?, ?, ?, ?)`, namespace, it.Digest, it.Size, now); err != nil {
		return false, err
	}
	if _, err := l.exec(ctx, tx, `UPDATE quota_totals SET used = used + ?, blobs = blobs + 1 WHERE namespace = ?`, it.Size, namespace); err != nil {
		return false, err
	}
	return true, nil
}

func (l *ledger) Check(ctx context.Context, namespace, digest string, size, limit int64) error {
	if limit <= 0 {
		return nil
	}
	if digest != "" {
		ok, err := l.charged(ctx, nil, namespace, digest)
		if err != nil || ok {
			return err
		}
	}
	var used int64
	err := l.row(ctx, nil, `SELECT used FROM quota_totals WHERE namespace = ?`, namespace).Scan(&used)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("quota: usage of %s: %w", namespace, err)
	}
	if used+size > limit {
		return &OverQuotaError{Namespace: namespace, Used: used, Limit: limit, Needed: size}
	}
	return nil
}

func (l *ledger) Uncharge(ctx context.Context, namespace, digest string) error {
	err := l.tx(ctx, func(tx *sql.Tx) error {
		if _, err := l.lockTotal(ctx, tx, namespace); err != nil {
			return err
		}
		var size int64
		err := l.row(ctx, tx, `DELETE FROM quota_charges WHERE namespace = ? AND digest = ? RETURNING size`, namespace, digest).Scan(&size)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		_, err = l.exec(ctx, tx, `UPDATE quota_totals SET used = used - ?, blobs = blobs - 1 WHERE namespace = ?`, size, namespace)
		return err
	})
	if err != nil {
		return fmt.Errorf("quota: uncharge %s in %s: %w", digest, namespace, err)
	}
	return nil
}

func (l *ledger) Recompute(ctx context.Context, namespace string, live map[string]int64, keepSince, start time.Time) error {
	err := l.tx(ctx, func(tx *sql.Tx) error {
		if _, err := l.lockTotal(ctx, tx, namespace); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, l.q(`SELECT digest, charged_at FROM quota_charges WHERE namespace = ?`), namespace)
		if err != nil {
			return err
		}
		have := map[string]int64{}
		for rows.Next() {
			var d string
			var at int64
			if err := rows.Scan(&d, &at); err != nil {
				rows.Close()
				return err
			}
			have[d] = at
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		now := l.now().UnixNano()
		for d, at := range have {
			if _, ok := live[d]; !ok && at < keepSince.UnixNano() {
				if _, err := l.exec(ctx, tx, `DELETE FROM quota_charges WHERE namespace = ? AND digest = ?`, namespace, d); err != nil {
					return err
				}
			}
		}
		for d, size := range live {
			if _, ok := have[d]; !ok {
				if _, err := l.exec(ctx, tx, `INSERT INTO quota_charges (namespace, digest, size, charged_at) VALUES (?, ?, ?, ?)`, namespace, d, size, now); err != nil {
					return err
				}
			}
		}
		_, err = l.exec(ctx, tx, `UPDATE quota_totals SET
			used = (SELECT coalesce(sum(size), 0) FROM quota_charges WHERE namespace = ?),
			blobs = (SELECT count(*) FROM quota_charges WHERE namespace = ?),
			dirty_since = CASE WHEN dirty_since <= ? THEN 0 ELSE dirty_since END
			WHERE namespace = ?`, namespace, namespace, start.UnixNano(), namespace)
		return err
	})
	if err != nil {
		return fmt.Errorf("quota: recompute %s: %w", namespace, err)
	}
	return nil
}

func (l *ledger) MarkDirty(ctx context.Context, namespaces ...string) error {
	now := l.now().UnixNano()
	for _, ns := range namespaces {
		if _, err := l.exec(ctx, nil, `INSERT INTO quota_totals (namespace, used, blobs, dirty_since) VALUES (?, 0, 0, ?)
			ON CONFLICT (namespace) DO UPDATE SET dirty_since = excluded.dirty_since`, ns, now); err != nil {
			return fmt.Errorf("quota: mark %s for a recompute: %w", ns, err)
		}
	}
	return nil
}

func (l *ledger) MarkAllDirty(ctx context.Context) error {
	if _, err := l.exec(ctx, nil, `UPDATE quota_totals SET dirty_since = ?`, l.now().UnixNano()); err != nil {
		return fmt.Errorf("quota: mark every namespace for a recompute: %w", err)
	}
	return nil
}

func (l *ledger) Dirty(ctx context.Context) ([]string, error) {
	rows, err := l.reader.QueryContext(ctx, `SELECT namespace FROM quota_totals WHERE dirty_since > 0 ORDER BY namespace`)
	if err != nil {
		return nil, fmt.Errorf("quota: namespaces to recompute: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var ns string
		if err := rows.Scan(&ns); err != nil {
			return nil, err
		}
		out = append(out, ns)
	}
	return out, rows.Err()
}

func (l *ledger) Usage(ctx context.Context, namespace string) (Usage, error) {
	u := Usage{Namespace: namespace, LimitBytes: l.limit(namespace)}
	err := l.row(ctx, nil, `SELECT used, blobs FROM quota_totals WHERE namespace = ?`, namespace).Scan(&u.UsedBytes, &u.Blobs)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Usage{}, fmt.Errorf("quota: usage of %s: %w", namespace, err)
	}
	if err := l.row(ctx, nil, `SELECT count(*) FROM quota_uploads WHERE namespace = ?`, namespace).Scan(&u.OpenUploads); err != nil {
		return Usage{}, fmt.Errorf("quota: uploads of %s: %w", namespace, err)
	}
	return u, nil
}

func (l *ledger) Usages(ctx context.Context) ([]Usage, error) {
	byName := map[string]*Usage{}
	get := func(ns string) *Usage {
		if byName[ns] == nil {
			byName[ns] = &Usage{Namespace: ns, LimitBytes: l.limit(ns)}
		}
		return byName[ns]
	}
	rows, err := l.reader.QueryContext(ctx, `SELECT namespace, used, blobs FROM quota_totals`)
	if err != nil {
		return nil, fmt.Errorf("quota: usages: %w", err)
	}
	for rows.Next() {
		var ns string
		var used, blobs int64
		if err := rows.Scan(&ns, &used, &blobs); err != nil {
			rows.Close()
			return nil, fmt.Errorf("quota: usages: %w", err)
		}
		u := get(ns)
		u.UsedBytes, u.Blobs = used, blobs
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("quota: usages: %w", err)
	}
	rows, err = l.reader.QueryContext(ctx, `SELECT namespace, count(*) FROM quota_uploads GROUP BY namespace`)
	if err != nil {
		return nil, fmt.Errorf("quota: usages: %w", err)
	}
	for rows.Next() {
		var ns string
		var open int64
		if err := rows.Scan(&ns, &open); err != nil {
			rows.Close()
			return nil, fmt.Errorf("quota: usages: %w", err)
		}
		get(ns).OpenUploads = open
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("quota: usages: %w", err)
	}
	for _, ns := range l.opts.Named {
		if l.limit(ns) > 0 {
			get(ns)
		}
	}
	out := make([]Usage, 0, len(byName))
	for _, u := range byName {
		// A namespace recomputed or marked that stores nothing, has no
		// upload open and no quota is not listed.
		if u.Blobs > 0 || u.OpenUploads > 0 || u.LimitBytes > 0 {
			out = append(out, *u)
		}
	}
	slices.SortFunc(out, func(a, b Usage) int { return strings.Compare(a.Namespace, b.Namespace) })
	return out, nil
}

func (l *ledger) limit(namespace string) int64 {
	if l.opts.Limit == nil {
		return 0
	}
	return l.opts.Limit(namespace)
}

func (l *ledger) OpenUpload(ctx context.Context, u Upload, max int, idleSince time.Time) error {
	err := l.tx(ctx, func(tx *sql.Tx) error {
		if l.d.lockSubject != "" {
			if _, err := tx.ExecContext(ctx, l.d.lockSubject, u.Subject); err != nil {
				return err
			}
		}
		if max >= 0 {
			var open int
			if err := l.row(ctx, tx, `SELECT count(*) FROM quota_uploads WHERE subject = ? AND last_write >= ?`, u.Subject, idleSince.UnixNano()).Scan(&open); err != nil {
				return err
			}
			if open >= max {
				return &TooManyUploadsError{Subject: u.Subject, Open: open, Limit: max}
			}
		}
		_, err := l.exec(ctx, tx, `INSERT INTO quota_uploads (uuid, repository, namespace, subject, started, last_write, bytes) VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (uuid) DO NOTHING`, u.UUID, u.Repository, Namespace(u.Repository), u.Subject, u.Started.UnixNano(), u.Started.UnixNano(), u.Bytes)
		return err
	})
	var many *TooManyUploadsError
	if err != nil && !errors.As(err, &many) {
		return fmt.Errorf("quota: open upload %s: %w", u.UUID, err)
	}
	return err
}

func (l *ledger) TouchUpload(ctx context.Context, uuid string, bytes int64, at time.Time) error {
	if _, err := l.exec(ctx, nil, `UPDATE quota_uploads SET bytes = ?, last_write = ? WHERE uuid = ?`, bytes, at.UnixNano(), uuid); err != nil {
		return fmt.Errorf("quota: record a write to upload %s: %w", uuid, err)
	}
	return nil
}

const uploadColumns = `uuid, repository, subject, started, last_write, bytes`

func scanUpload(row interface{ Scan(...any) error }) (Upload, error) {
	var u Upload
	var started, last int64
	err := row.Scan(&u.UUID, &u.Repository, &u.Subject, &started, &last, &u.Bytes)
	u.Started, u.LastWrite = time.Unix(0, started).UTC(), time.Unix(0, last).UTC()
	return u, err
}

func (l *ledger) Upload(ctx context.Context, uuid string) (Upload, bool, error) {
	u, err := scanUpload(l.row(ctx, nil, `SELECT `+uploadColumns+` FROM quota_uploads WHERE uuid = ?`, uuid))
	if errors.Is(err, sql.ErrNoRows) {
		return Upload{}, false, nil
	}
	if err != nil {
		return Upload{}, false, fmt.Errorf("quota: upload %s: %w", uuid, err)
	}
	return u, true, nil
}

func (l *ledger) CloseUpload(ctx context.Context, uuid string) error {
	if _, err := l.exec(ctx, nil, `DELETE FROM quota_uploads WHERE uuid = ?`, uuid); err != nil {
		return fmt.Errorf("quota: close upload %s: %w", uuid, err)
	}
	return nil
}

func (l *ledger) Abandoned(ctx context.Context, before time.Time) ([]Upload, error) {
	rows, err := l.reader.QueryContext(ctx, l.q(`SELECT `+uploadColumns+` FROM quota_uploads WHERE last_write < ? ORDER BY last_write`), before.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("quota: abandoned uploads: %w", err)
	}
	defer rows.Close()
	var out []Upload
	for rows.Next() {
		u, err := scanUpload(rows)
		if err != nil {
			return nil, fmt.Errorf("quota: abandoned uploads: %w", err)
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

func (l *ledger) Close() error {
	l.mu.Lock()
	for _, byQuery := range l.stmts {
		for _, st := range byQuery {
			st.Close()
		}
	}
	l.stmts = nil
	l.mu.Unlock()
	return l.close()
}
