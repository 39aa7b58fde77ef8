package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
)

// PutImageMirrors records mirrors, each replacing the one with the same
// Source, in one transaction that holds the table against other writers,
// so that replicas setting mirrors at once never pass the limit together.
// It returns an error wrapping catalog.ErrInvalid when
// catalog.CheckImageMirrors refuses them or more than
// catalog.MaxImageMirrors would be recorded.
func (s *Store) PutImageMirrors(ctx context.Context, mirrors []apiv1.ImageMirror) error {
	if err := catalog.CheckImageMirrors(mirrors); err != nil {
		return fmt.Errorf("catalog: image mirrors: %w", err)
	}
	sources, targets := make([]string, len(mirrors)), make([]string, len(mirrors))
	for i, m := range mirrors {
		sources[i], targets[i] = m.Source, m.Mirror
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE image_mirrors IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO image_mirrors (source, mirror) SELECT s, m FROM unnest($1::text[], $2::text[]) AS x (s, m)
		ON CONFLICT (source) DO UPDATE SET mirror = excluded.mirror`, sources, targets); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM image_mirrors`).Scan(&n); err != nil {
			return err
		}
		if n > catalog.MaxImageMirrors {
			return fmt.Errorf("%d image mirrors would be recorded, the limit is %d: %w", n, catalog.MaxImageMirrors, catalog.ErrInvalid)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("catalog: image mirrors: %w", err)
	}
	return nil
}

// ImageMirrors returns every image mirror recorded, ordered by Source.
func (s *Store) ImageMirrors(ctx context.Context) ([]apiv1.ImageMirror, error) {
	out := []apiv1.ImageMirror{}
	err := s.query(ctx, `SELECT source, mirror FROM image_mirrors ORDER BY source`, nil, func(rows pgx.Rows) error {
		var m apiv1.ImageMirror
		err := rows.Scan(&m.Source, &m.Mirror)
		out = append(out, m)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: image mirrors: %w", err)
	}
	return out, nil
}
