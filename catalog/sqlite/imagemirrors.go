package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
)

// PutImageMirrors records mirrors, each replacing the one with the same
// Source, in one transaction. It returns an error wrapping
// catalog.ErrInvalid when catalog.CheckImageMirrors refuses them or more
// than catalog.MaxImageMirrors would be recorded.
func (s *Store) PutImageMirrors(ctx context.Context, mirrors []apiv1.ImageMirror) error {
	if err := catalog.CheckImageMirrors(mirrors); err != nil {
		return fmt.Errorf("catalog: image mirrors: %w", err)
	}
	err := s.write(ctx, func(tx *writeTx) (*indexUpdate, error) {
		for _, m := range mirrors {
			if _, err := tx.ExecContext(ctx, `INSERT INTO image_mirrors (source, mirror) VALUES (?, ?)
			ON CONFLICT (source) DO UPDATE SET mirror = excluded.mirror`, m.Source, m.Mirror); err != nil {
				return nil, err
			}
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM image_mirrors`).Scan(&n); err != nil {
			return nil, err
		}
		if n > catalog.MaxImageMirrors {
			return nil, fmt.Errorf("%d image mirrors would be recorded, the limit is %d: %w", n, catalog.MaxImageMirrors, catalog.ErrInvalid)
		}
		return nil, nil
	})
	if err != nil {
		return fmt.Errorf("catalog: image mirrors: %w", err)
	}
	return nil
}

// ImageMirrors returns every image mirror recorded, ordered by Source.
func (s *Store) ImageMirrors(ctx context.Context) ([]apiv1.ImageMirror, error) {
	out := []apiv1.ImageMirror{}
	err := query(ctx, s.reader, `SELECT source, mirror FROM image_mirrors ORDER BY source`, nil, func(rows *sql.Rows) error {
		var m apiv1.ImageMirror
		if err := rows.Scan(&m.Source, &m.Mirror); err != nil {
			return err
		}
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: image mirrors: %w", err)
	}
	return out, nil
}
