package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/sqlrow"
)

// recordDerived writes the summary, examples and index version of the
// entry just inserted for e's tag (sqlrow.Derived).
func recordDerived(ctx context.Context, tx *writeTx, e *catalog.Entry) error {
	d, err := sqlrow.EncodeDerived(e)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE entries SET summary = ?, examples = ?, index_version = ?
	WHERE namespace = ? AND name = ? AND tag = ?`, d.Summary, d.Examples, d.IndexVersion, e.Namespace, e.Name, e.Tag)
	return err
}

// Reindex implements catalog.StoreWriter: it replaces the tag's entry with
// e in one transaction when the tag still records e.Digest as an indexed
// version. It returns an error wrapping catalog.ErrInvalid when Put would
// refuse e.
func (s *Store) Reindex(ctx context.Context, e *catalog.Entry) (bool, error) {
	row, err := sqlrow.Encode(e)
	if err != nil {
		return false, fmt.Errorf("catalog: reindex %s/%s:%s: %w", e.Namespace, e.Name, e.Tag, err)
	}
	changed := false
	err = s.write(ctx, func(tx *writeTx) (*indexUpdate, error) {
		var id int64
		var verified bool
		err := tx.QueryRowContext(ctx, `SELECT id, verified FROM entries
		WHERE namespace = ? AND name = ? AND tag = ? AND digest = ? AND status = 'indexed'`,
			e.Namespace, e.Name, e.Tag, e.Digest).Scan(&id, &verified)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		// ON DELETE CASCADE removes its channel, API and image rows; the
		// digest stays, and with it its signature checks.
		if _, err := tx.ExecContext(ctx, `DELETE FROM entries WHERE id = ?`, id); err != nil {
			return nil, err
		}
		prune := ""
		if e.Status != apiv1.StatusIndexed {
			prune = e.Digest
		}
		changed = true
		return storeEntry(ctx, tx, e, row, verified, prune)
	})
	if err != nil {
		return false, fmt.Errorf("catalog: reindex %s/%s:%s: %w", e.Namespace, e.Name, e.Tag, err)
	}
	return changed, nil
}

// Examples implements catalog.StoreReader.
func (s *Store) Examples(ctx context.Context, namespace, name, tag string) (map[string][]string, int, error) {
	var col []byte
	var version int
	err := s.reader.QueryRowContext(ctx, `SELECT examples, index_version FROM entries WHERE namespace = ? AND name = ? AND tag = ?`,
		namespace, name, tag).Scan(&col, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, fmt.Errorf("catalog: %s/%s:%s: %w", namespace, name, tag, catalog.ErrNotFound)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("catalog: %s/%s:%s: %w", namespace, name, tag, err)
	}
	ex, err := sqlrow.DecodeExamples(namespace, name, tag, col)
	if err != nil {
		return nil, 0, fmt.Errorf("catalog: %w", err)
	}
	return ex, version, nil
}

// Stale implements catalog.StoreReader.
func (s *Store) Stale(ctx context.Context, before int, after catalog.TagDigest, limit int) ([]catalog.TagDigest, error) {
	var out []catalog.TagDigest
	err := query(ctx, s.reader, `SELECT namespace, name, tag, digest FROM entries
	WHERE status = 'indexed' AND index_version < ? AND (namespace, name, tag) > (?, ?, ?)
	ORDER BY namespace, name, tag LIMIT ?`, []any{before, after.Namespace, after.Name, after.Tag, limit}, func(rows *sql.Rows) error {
		var t catalog.TagDigest
		err := rows.Scan(&t.Namespace, &t.Name, &t.Tag, &t.Digest)
		out = append(out, t)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: versions indexed before index version %d: %w", before, err)
	}
	return out, nil
}
