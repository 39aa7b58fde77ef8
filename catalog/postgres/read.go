package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/sqlrow"
	"github.com/berth-registry/berth/internal/sqlitedb"
)

// Search returns one page of the packages that match q from this replica's
// index (searchindex.Index.Search documents the ranking), which follows the
// database within a notification's delay.
func (s *Store) Search(ctx context.Context, q catalog.Query) (*catalog.SearchResult, error) {
	return sqlrow.Search(ctx, s.index, q)
}

// Entry returns the entry of one tag, Files included, or an error wrapping
// catalog.ErrNotFound.
func (s *Store) Entry(ctx context.Context, namespace, name, tag string) (*catalog.Entry, error) {
	e, err := sqlrow.ScanEntry(s.pool.QueryRow(ctx, `SELECT `+sqlrow.EntryColumns+sqlrow.FilesColumn+` FROM entries
	WHERE namespace = $1 AND name = $2 AND tag = $3`, namespace, name, tag), true)
	if errors.Is(err, pgx.ErrNoRows) {
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
	err := s.query(ctx, `SELECT `+columns+` FROM entries WHERE namespace = $1 AND name = $2 ORDER BY tag`,
		[]any{namespace, name}, func(rows pgx.Rows) error {
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
	var out []catalog.TagDigest
	err := s.query(ctx, `SELECT namespace, name, tag, digest FROM entries ORDER BY namespace, name, tag`, nil, func(rows pgx.Rows) error {
		var t catalog.TagDigest
		if err := rows.Scan(&t.Namespace, &t.Name, &t.Tag, &t.Digest); err != nil {
			return err
		}
		out = append(out, t)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: tags: %w", err)
	}
	return out, nil
}

// Changes returns up to limit changes with seq > since, oldest first. A limit
// <= 0 means catalog.DefaultLimit, and it is capped at catalog.MaxLimit.
// Sequence numbers become visible in order (stamp), so a reader that goes on
// from the last number it read misses none.
func (s *Store) Changes(ctx context.Context, since int64, limit int) ([]apiv1.Change, error) {
	out := []apiv1.Change{}
	err := s.query(ctx, `SELECT seq, action, namespace, name, tag, digest, status, time, reason
	FROM changes WHERE seq > $1 ORDER BY seq LIMIT $2`, []any{since, catalog.PageSize(limit)}, func(rows pgx.Rows) error {
		var c apiv1.Change
		var t int64
		if err := rows.Scan(&c.Seq, &c.Action, &c.Namespace, &c.Name, &c.Version, &c.Digest, &c.Status, &t, &c.Reason); err != nil {
			return err
		}
		c.Time = sqlitedb.DecodeTime(t)
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: changes since %d: %w", since, err)
	}
	return out, nil
}

// Unindexed implements catalog.StoreReader (sqlrow.Unindexed).
func (s *Store) Unindexed(ctx context.Context, access catalog.Access, limit, offset int) ([]apiv1.Artifact, error) {
	return sqlrow.Unindexed(access, limit, offset, `LIMIT $1 OFFSET $2`, func(sqlText string, args []any, row func(sqlrow.Scanner) (bool, error)) error {
		return s.query(ctx, sqlText, args, func(rows pgx.Rows) error { return sqlrow.Stop(row(rows)) })
	})
}

// Walk calls fn for every indexed entry access allows (only namespace's when
// it is not empty), ordered by namespace, name and tag, without Files,
// reading sqlrow.WalkBatch entries at a time and holding no transaction
// while fn runs: entries written during the walk may or may not be seen, and
// each is seen at most once. fn's error stops the walk and is returned as it
// is.
func (s *Store) Walk(ctx context.Context, access catalog.Access, namespace string, fn func(*catalog.Entry) error) error {
	where := `status = 'indexed' AND (namespace, name, tag) > ($1, $2, $3)`
	var filter []any
	if namespace != "" {
		where += ` AND namespace = $5`
		filter = append(filter, namespace)
	}
	sqlText := `SELECT ` + sqlrow.EntryColumns + ` FROM entries WHERE ` + where + ` ORDER BY namespace, name, tag LIMIT $4`
	batch := make([]*catalog.Entry, 0, sqlrow.WalkBatch)
	return sqlrow.Walk(access, func(last [3]string) ([]*catalog.Entry, error) {
		args := append([]any{last[0], last[1], last[2], sqlrow.WalkBatch}, filter...)
		batch = batch[:0]
		err := s.query(ctx, sqlText, args, func(rows pgx.Rows) error {
			e, err := sqlrow.ScanEntry(rows, false)
			batch = append(batch, e)
			return err
		})
		return batch, err
	}, fn)
}

// Stats counts packages with an indexed version, indexed versions, other
// entries and the indexed versions recorded with an older
// catalog.IndexVersion, and reports the last change's sequence number,
// from one snapshot.
func (s *Store) Stats(ctx context.Context) (apiv1.Status, error) {
	var st apiv1.Status
	err := s.pool.QueryRow(ctx, `SELECT
	(SELECT count(*) FROM packages WHERE doc IS NOT NULL),
	(SELECT count(*) FROM entries WHERE status = 'indexed'),
	(SELECT count(*) FROM entries WHERE status <> 'indexed'),
	(SELECT seq FROM counters),
	(SELECT count(*) FROM entries WHERE status = 'indexed' AND index_version < $1)`, catalog.IndexVersion).Scan(
		&st.Packages, &st.Versions, &st.Unindexed, &st.Seq, &st.Reindex.Pending)
	if err != nil {
		return apiv1.Status{}, fmt.Errorf("catalog: stats: %w", err)
	}
	return st, nil
}

// Signatures returns the last check of a digest of a package with what it
// found, in the order it was recorded, or an error wrapping
// catalog.ErrNotFound when the digest was never checked or no indexed version
// holds it.
func (s *Store) Signatures(ctx context.Context, namespace, name, digest string) (*catalog.SignatureCheck, error) {
	c := &catalog.SignatureCheck{Namespace: namespace, Name: name, Digest: digest}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var checked int64
		err := tx.QueryRow(ctx, `SELECT checked, policy, error FROM signature_checks WHERE namespace = $1 AND name = $2 AND digest = $3`,
			namespace, name, digest).Scan(&checked, &c.Policy, &c.Error)
		if errors.Is(err, pgx.ErrNoRows) {
			return catalog.ErrNotFound
		}
		if err != nil {
			return err
		}
		c.Checked = sqlitedb.DecodeTime(checked)
		rows, err := tx.Query(ctx, `SELECT digest, layer, kind, predicate_type, key_id, verified, reason, sources FROM signatures
		WHERE namespace = $1 AND name = $2 AND subject = $3 ORDER BY position`, namespace, name, digest)
		if err != nil {
			return err
		}
		c.Signatures, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (catalog.SignatureRecord, error) {
			var r catalog.SignatureRecord
			var sources string
			if err := row.Scan(&r.Digest, &r.Layer, &r.Kind, &r.PredicateType, &r.KeyID, &r.Verified, &r.Reason, &sources); err != nil {
				return r, err
			}
			var err error
			r.Sources, err = sqlrow.DecodeSources(sources)
			return r, err
		})
		if len(c.Signatures) == 0 {
			c.Signatures = nil
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: signatures of %s/%s@%s: %w", namespace, name, digest, err)
	}
	return c, nil
}

// SignatureChecks lists one check, without its signatures, per digest that
// indexed entries hold, ordered by namespace, name and digest; a digest never
// checked has a zero Checked and an empty Policy. Empty filters match
// everything.
func (s *Store) SignatureChecks(ctx context.Context, namespace, name, digest string) ([]catalog.SignatureCheck, error) {
	where := []string{`status = 'indexed'`}
	var args []any
	for _, f := range []struct{ column, value string }{{"namespace", namespace}, {"name", name}, {"digest", digest}} {
		if f.value != "" {
			args = append(args, f.value)
			where = append(where, fmt.Sprintf(`%s = $%d`, f.column, len(args)))
		}
	}
	return s.listChecks(ctx, where, args, `ORDER BY e.namespace, e.name, e.digest`)
}

// SignatureCheckPage implements catalog.StoreReader.
func (s *Store) SignatureCheckPage(ctx context.Context, after catalog.SignatureCheck, limit int, stale string) ([]catalog.SignatureCheck, error) {
	where := []string{`status = 'indexed'`, `(namespace, name, digest) > ($1, $2, $3)`}
	args := []any{after.Namespace, after.Name, after.Digest, stale, limit}
	return s.listChecks(ctx, where, args,
		`WHERE $4 = '' OR c.checked IS NULL OR c.checked = 0 OR c.policy != $4 ORDER BY e.namespace, e.name, e.digest LIMIT $5`)
}

// listChecks lists the checks, without their signatures, of the distinct
// digests of the entries where selects (a digest never checked: zero
// Checked, empty Policy); tail filters, orders and limits them.
func (s *Store) listChecks(ctx context.Context, where []string, args []any, tail string) ([]catalog.SignatureCheck, error) {
	var out []catalog.SignatureCheck
	err := s.query(ctx, `SELECT `+sqlrow.CheckColumns+`
	FROM (SELECT DISTINCT namespace, name, digest FROM entries WHERE `+strings.Join(where, ` AND `)+`) e
	LEFT JOIN signature_checks c ON c.namespace = e.namespace AND c.name = e.name AND c.digest = e.digest
	`+tail, args, func(rows pgx.Rows) error {
		c, err := sqlrow.ScanCheck(rows)
		out = append(out, c)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: signature checks: %w", err)
	}
	return out, nil
}

// SignedBy returns the digests of a package whose last check found a
// signature or attestation in the manifest manifest, ordered.
func (s *Store) SignedBy(ctx context.Context, namespace, name, manifest string) ([]string, error) {
	var out []string
	err := s.query(ctx, `SELECT DISTINCT subject FROM signatures WHERE namespace = $1 AND name = $2 AND digest = $3 ORDER BY subject`,
		[]any{namespace, name, manifest}, func(rows pgx.Rows) error {
			var d string
			err := rows.Scan(&d)
			out = append(out, d)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("catalog: signed by %s/%s@%s: %w", namespace, name, manifest, err)
	}
	return out, nil
}

// query runs a query and calls fn for each row; fn's error stops it.
func (s *Store) query(ctx context.Context, sql string, args []any, fn func(pgx.Rows) error) error {
	rows, err := s.pool.Query(ctx, sql, args...)
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
