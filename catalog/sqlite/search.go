package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/searchindex"
	"github.com/berth-registry/berth/catalog/sqlrow"
	"github.com/berth-registry/berth/internal/sqlitedb"
	"github.com/berth-registry/berth/pkgformat"
)

// Search returns one page of the packages that match q, each summarised by its
// latest indexed version, with facets and Total over every match, from the
// in-memory index (searchindex.Index.Search documents the ranking). A
// negative Limit or Offset, or an unknown Sort, is an error wrapping
// catalog.ErrInvalid.
func (s *Store) Search(ctx context.Context, q catalog.Query) (*catalog.SearchResult, error) {
	return sqlrow.Search(ctx, s.index, q)
}

// indexUpdate is what a write does to the search index once committed: set
// the package's document, or remove the package when doc is nil.
type indexUpdate struct {
	namespace, name string
	doc             *searchindex.Doc
}

// apply applies u to ix.
func (u *indexUpdate) apply(ix *searchindex.Index) {
	if u.doc != nil {
		ix.Set(u.doc)
	} else {
		ix.Remove(u.namespace, u.name)
	}
}

// loadIndex builds the search index of every package from one snapshot of db.
func loadIndex(ctx context.Context, db *sql.DB) (*searchindex.Index, error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() // read-only: nothing to commit
	docs, err := readDocs(ctx, tx, "", "")
	if err != nil {
		return nil, err
	}
	ix := searchindex.New()
	ix.Set(docs...)
	return ix, nil
}

// readDocs reads the search documents of the packages table: of the package
// namespace/name, or of every package when both are empty. A document is a
// package's row: its latest version's summary and full text, and the filter
// sets of all its indexed versions (setPackageSets).
func readDocs(ctx context.Context, q queryer, namespace, name string) ([]*searchindex.Doc, error) {
	where, args := `1`, []any(nil)
	if namespace != "" || name != "" {
		where, args = `namespace = ? AND name = ?`, []any{namespace, name}
	}
	var docs []*searchindex.Doc
	err := query(ctx, q, `SELECT namespace, name, version, digest, format, display_name, description, app_version,
	keywords, channels, created, updated, verified, maintainers, apis, all_channels, all_apis, kube_ranges, all_images
	FROM packages WHERE `+where, args, func(rows *sql.Rows) error {
		d := &searchindex.Doc{}
		p := &d.Summary
		var format string
		var keywords, channels, allChannels, allAPIs, kubeRanges, allImages []byte
		var created sql.NullInt64
		var updated int64
		if err := rows.Scan(&p.Namespace, &p.Name, &p.Version, &p.Digest, &format, &p.DisplayName, &p.Description,
			&p.AppVersion, &keywords, &channels, &created, &updated, &p.Verified, &d.Maintainers, &d.APIs,
			&allChannels, &allAPIs, &kubeRanges, &allImages); err != nil {
			return err
		}
		p.Format = pkgformat.Format(format)
		if created.Valid {
			t := sqlitedb.DecodeTime(created.Int64)
			p.Created = &t
		}
		p.Updated = sqlitedb.DecodeTime(updated)
		var apis, kube [][2]string
		var images [][3]string
		for _, col := range []struct {
			name string
			data []byte
			into any
		}{
			{"keywords", keywords, &p.Keywords}, {"channels", channels, &p.Channels},
			{"all_channels", allChannels, &d.Channels}, {"all_apis", allAPIs, &apis}, {"kube_ranges", kubeRanges, &kube},
			{"all_images", allImages, &images},
		} {
			if err := json.Unmarshal(col.data, col.into); err != nil {
				return fmt.Errorf("%s of %s/%s: %w", col.name, p.Namespace, p.Name, err)
			}
		}
		for _, a := range apis {
			d.Provides = append(d.Provides, catalog.APIFilter{Group: a[0], Kind: a[1]})
		}
		for _, k := range kube {
			d.Kube = append(d.Kube, searchindex.KubeRange{Min: k[0], Max: k[1]})
		}
		for _, im := range images {
			d.Images = append(d.Images, catalog.ImageRef{Repository: im[0], Tag: im[1], Digest: im[2]})
		}
		docs = append(docs, d)
		return nil
	})
	return docs, err
}
