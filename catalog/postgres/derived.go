package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/sqlrow"
)

// recordDerived writes the summary, examples and index version of the
// entry just inserted for e's tag (sqlrow.Derived).
func recordDerived(ctx context.Context, tx pgx.Tx, e *catalog.Entry) error {
	d, err := sqlrow.EncodeDerived(e)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE entries SET summary = $1, examples = $2, index_version = $3
	WHERE namespace = $4 AND name = $5 AND tag = $6`, d.Summary, d.Examples, d.IndexVersion, e.Namespace, e.Name, e.Tag)
	return err
}

// Reindex implements catalog.StoreWriter: it replaces the tag's entry with
// e in one transaction on the package, as Put does, when the tag still
// records e.Digest as an indexed version. It returns an error wrapping
// catalog.ErrInvalid when Put would refuse e.
func (s *Store) Reindex(ctx context.Context, e *catalog.Entry) (bool, error) {
	row, err := sqlrow.Encode(e)
	if err != nil {
		return false, fmt.Errorf("catalog: reindex %s/%s:%s: %w", e.Namespace, e.Name, e.Tag, err)
	}
	changed, err := s.write(ctx, e.Namespace, e.Name, func(tx pgx.Tx) (bool, *change, error) {
		var id int64
		var verified bool
		err := tx.QueryRow(ctx, `SELECT id, verified FROM entries
		WHERE namespace = $1 AND name = $2 AND tag = $3 AND digest = $4 AND status = 'indexed'`,
			e.Namespace, e.Name, e.Tag, e.Digest).Scan(&id, &verified)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil, nil
		}
		if err != nil {
			return false, nil, err
		}
		// ON DELETE CASCADE removes its channel, API and image rows; the
		// digest stays, and with it its signature checks.
		if _, err := tx.Exec(ctx, `DELETE FROM entries WHERE id = $1`, id); err != nil {
			return false, nil, err
		}
		prune := ""
		if e.Status != apiv1.StatusIndexed {
			prune = e.Digest
		}
		if err := storeEntry(ctx, tx, e, row, verified, prune); err != nil {
			return false, nil, err
		}
		return true, &change{apiv1.ActionPut, e.Tag, e.Digest, e.Status}, nil
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
	err := s.pool.QueryRow(ctx, `SELECT examples, index_version FROM entries WHERE namespace = $1 AND name = $2 AND tag = $3`,
		namespace, name, tag).Scan(&col, &version)
	if errors.Is(err, pgx.ErrNoRows) {
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
	err := s.query(ctx, `SELECT namespace, name, tag, digest FROM entries
	WHERE status = 'indexed' AND index_version < $1 AND (namespace, name, tag) > ($2, $3, $4)
	ORDER BY namespace, name, tag LIMIT $5`, []any{before, after.Namespace, after.Name, after.Tag, limit}, func(rows pgx.Rows) error {
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
