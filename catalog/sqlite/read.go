package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/sqlrow"
	"github.com/berth-registry/berth/internal/sqlitedb"
)

// Entry returns the entry of one tag, Files included, or an error wrapping
// catalog.ErrNotFound.
func (s *Store) Entry(ctx context.Context, namespace, name, tag string) (*catalog.Entry, error) {
	row := s.reads.QueryRowContext(ctx, `SELECT `+sqlrow.EntryColumns+sqlrow.FilesColumn+` FROM entries
	WHERE namespace = ? AND name = ? AND tag = ?`, namespace, name, tag)
	e, err := sqlrow.ScanEntry(row, true)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("catalog: %s/%s:%s: %w", namespace, name, tag, catalog.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("catalog: %s/%s:%s: %w", namespace, name, tag, err)
	}
	return e, nil
}

// Entries returns every entry of a repository, Files included, ordered by tag,
// or an error wrapping catalog.ErrNotFound when there is none.
func (s *Store) Entries(ctx context.Context, namespace, name string) ([]*catalog.Entry, error) {
	return s.entries(ctx, sqlrow.EntryColumns+sqlrow.FilesColumn, true, namespace, name)
}

// Summaries implements catalog.StoreReader: every entry of a repository,
// ordered by tag, each indexed one with its summary as its Metadata, or an
// error wrapping catalog.ErrNotFound when there is none.
func (s *Store) Summaries(ctx context.Context, namespace, name string) ([]*catalog.Entry, error) {
	return s.entries(ctx, sqlrow.SummaryColumns, false, namespace, name)
}

// entries reads columns (sqlrow.ScanEntry's) of every entry of a
// repository, ordered by tag, or returns an error wrapping
// catalog.ErrNotFound when there is none.
func (s *Store) entries(ctx context.Context, columns string, withFiles bool, namespace, name string) ([]*catalog.Entry, error) {
	var out []*catalog.Entry
	err := query(ctx, s.reader, `SELECT `+columns+` FROM entries WHERE namespace = ? AND name = ? ORDER BY tag`,
		[]any{namespace, name}, func(rows *sql.Rows) error {
			e, err := sqlrow.ScanEntry(rows, withFiles)
			out = append(out, e)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("catalog: %s/%s: %w", namespace, name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("catalog: %s/%s: %w", namespace, name, catalog.ErrNotFound)
	}
	return out, nil
}

// Tags lists every tag, of every status, with its digest, ordered by
// namespace, name and tag.
func (s *Store) Tags(ctx context.Context) ([]catalog.TagDigest, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT namespace, name, tag, digest FROM entries ORDER BY namespace, name, tag`)
	if err != nil {
		return nil, fmt.Errorf("catalog: tags: %w", err)
	}
	defer rows.Close()
	var out []catalog.TagDigest
	for rows.Next() {
		var t catalog.TagDigest
		if err := rows.Scan(&t.Namespace, &t.Name, &t.Tag, &t.Digest); err != nil {
			return nil, fmt.Errorf("catalog: tags: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("catalog: tags: %w", err)
	}
	return out, nil
}

// Changes returns up to limit changes with seq > since, oldest first. A limit
// <= 0 means catalog.DefaultLimit, and it is capped at catalog.MaxLimit.
func (s *Store) Changes(ctx context.Context, since int64, limit int) ([]apiv1.Change, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT seq, action, namespace, name, tag, digest, status, time, reason
	FROM changes WHERE seq > ? ORDER BY seq LIMIT ?`, since, catalog.PageSize(limit))
	if err != nil {
		return nil, fmt.Errorf("catalog: changes since %d: %w", since, err)
	}
	defer rows.Close()
	out := []apiv1.Change{}
	for rows.Next() {
		var c apiv1.Change
		var t int64
		if err := rows.Scan(&c.Seq, &c.Action, &c.Namespace, &c.Name, &c.Version, &c.Digest, &c.Status, &t, &c.Reason); err != nil {
			return nil, fmt.Errorf("catalog: changes since %d: %w", since, err)
		}
		c.Time = sqlitedb.DecodeTime(t)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("catalog: changes since %d: %w", since, err)
	}
	return out, nil
}

// Unindexed implements catalog.StoreReader (sqlrow.Unindexed).
func (s *Store) Unindexed(ctx context.Context, access catalog.Access, limit, offset int) ([]apiv1.Artifact, error) {
	return sqlrow.Unindexed(access, limit, offset, `LIMIT ? OFFSET ?`, func(sqlText string, args []any, row func(sqlrow.Scanner) (bool, error)) error {
		return query(ctx, s.reader, sqlText, args, func(rows *sql.Rows) error { return sqlrow.Stop(row(rows)) })
	})
}

// Walk calls fn for every indexed entry access allows (only namespace's when
// it is not empty), ordered by namespace, name and tag, without Files. It
// reads sqlrow.WalkBatch entries at a time and holds no read transaction
// while fn runs, so a slow consumer never keeps the WAL from being
// checkpointed; entries written during the walk may or may not be seen, and
// each is seen at most once. fn's error stops the walk and is returned as it
// is.
func (s *Store) Walk(ctx context.Context, access catalog.Access, namespace string, fn func(*catalog.Entry) error) error {
	var filter []any
	where := `status = 'indexed'`
	if namespace != "" {
		where += ` AND namespace = ?`
		filter = append(filter, namespace)
	}
	sqlText := `SELECT ` + sqlrow.EntryColumns + ` FROM entries WHERE ` + where +
		` AND (namespace, name, tag) > (?, ?, ?) ORDER BY namespace, name, tag LIMIT ?`
	batch := make([]*catalog.Entry, 0, sqlrow.WalkBatch)
	return sqlrow.Walk(access, func(last [3]string) ([]*catalog.Entry, error) {
		args := append(append([]any{}, filter...), last[0], last[1], last[2], sqlrow.WalkBatch)
		batch = batch[:0]
		err := query(ctx, s.reader, sqlText, args, func(rows *sql.Rows) error {
			e, err := sqlrow.ScanEntry(rows, false)
			if err != nil {
				return err
			}
			batch = append(batch, e)
			return nil
		})
		return batch, err
	}, fn)
}

// Stats counts packages with an indexed version, indexed versions and other
// entries, the indexed versions recorded with an older catalog.IndexVersion,
// and reports the last change's sequence number, from one snapshot.
// Reconcile, and the rest of Reindex, are left zero: the catalog fills them.
func (s *Store) Stats(ctx context.Context) (apiv1.Status, error) {
	var st apiv1.Status
	err := s.reader.QueryRowContext(ctx, `SELECT
	(SELECT count(*) FROM packages),
	(SELECT count(*) FROM entries WHERE status = 'indexed'),
	(SELECT count(*) FROM entries WHERE status <> 'indexed'),
	coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'changes'), 0),
	(SELECT count(*) FROM entries WHERE status = 'indexed' AND index_version < ?)`, catalog.IndexVersion).Scan(
		&st.Packages, &st.Versions, &st.Unindexed, &st.Seq, &st.Reindex.Pending)
	if err != nil {
		return apiv1.Status{}, fmt.Errorf("catalog: stats: %w", err)
	}
	return st, nil
}

// queryer is *sql.DB or *sql.Tx.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// query runs a query and calls fn for each row.
func query(ctx context.Context, db queryer, query string, args []any, fn func(*sql.Rows) error) error {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
