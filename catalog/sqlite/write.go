package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/sqlrow"
	"github.com/berth-registry/berth/internal/sqlitedb"
)

// Put records e, replacing what its tag held, and appends a "put" change, in
// one transaction. When the tag already holds e's digest and status it changes
// nothing. It returns an error wrapping catalog.ErrInvalid when e lacks its
// namespace, name or tag, has an unknown status, or is indexed without
// metadata.
func (s *Store) Put(ctx context.Context, e *catalog.Entry) (bool, error) {
	row, err := sqlrow.Encode(e)
	if err != nil {
		return false, fmt.Errorf("catalog: put %s/%s:%s: %w", e.Namespace, e.Name, e.Tag, err)
	}
	changed := false
	err = s.write(ctx, func(tx *writeTx) (*indexUpdate, error) {
		var id int64
		var digest, status string
		err := tx.QueryRowContext(ctx, `SELECT id, digest, status FROM entries WHERE namespace = ? AND name = ? AND tag = ?`,
			e.Namespace, e.Name, e.Tag).Scan(&id, &digest, &status)
		replaced, verified := "", false
		switch {
		case err == nil && digest == e.Digest && status == e.Status:
			return nil, nil
		case err == nil:
			// ON DELETE CASCADE removes its channel and API rows.
			if _, err := tx.ExecContext(ctx, `DELETE FROM entries WHERE id = ?`, id); err != nil {
				return nil, err
			}
			replaced = digest
		case !errors.Is(err, sql.ErrNoRows):
			return nil, err
		}
		// The versions of one digest share the verdict of its last check.
		err = tx.QueryRowContext(ctx, `SELECT verified FROM signature_checks WHERE namespace = ? AND name = ? AND digest = ?`,
			e.Namespace, e.Name, e.Digest).Scan(&verified)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			verified = e.Verified
		case err != nil:
			return nil, err
		}
		changed = true
		return storeEntry(ctx, tx, e, row, verified, replaced)
	})
	if err != nil {
		return false, fmt.Errorf("catalog: put %s/%s:%s: %w", e.Namespace, e.Name, e.Tag, err)
	}
	return changed, nil
}

// storeEntry writes e's row with the verdict verified and the columns
// derived from it (recordDerived); when prune names a digest, it removes
// the signature records no version of that digest holds any more
// (pruneSignatures); then it refreshes the package and appends e's "put"
// change. Put and Reindex store an entry through it.
func storeEntry(ctx context.Context, tx *writeTx, e *catalog.Entry, row *sqlrow.Row, verified bool, prune string) (*indexUpdate, error) {
	if err := insertEntry(ctx, tx, e, row, verified); err != nil {
		return nil, err
	}
	if err := recordDerived(ctx, tx, e); err != nil {
		return nil, err
	}
	if prune != "" {
		if err := pruneSignatures(ctx, tx, e.Namespace, e.Name, prune); err != nil {
			return nil, err
		}
	}
	upd, err := refreshPackage(ctx, tx, e.Namespace, e.Name)
	if err != nil {
		return nil, err
	}
	return upd, appendChange(ctx, tx, apiv1.ActionPut, e.Namespace, e.Name, e.Tag, e.Digest, e.Status)
}

// Delete removes the entry of one tag and appends a "delete" change, in one
// transaction. Deleting an absent tag changes nothing and is not an error.
func (s *Store) Delete(ctx context.Context, namespace, name, tag string) (bool, error) {
	changed := false
	err := s.write(ctx, func(tx *writeTx) (*indexUpdate, error) {
		var digest, status string
		err := tx.QueryRowContext(ctx, `DELETE FROM entries WHERE namespace = ? AND name = ? AND tag = ? RETURNING digest, status`,
			namespace, name, tag).Scan(&digest, &status)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if err := pruneSignatures(ctx, tx, namespace, name, digest); err != nil {
			return nil, err
		}
		upd, err := refreshPackage(ctx, tx, namespace, name)
		if err != nil {
			return nil, err
		}
		changed = true
		return upd, appendChange(ctx, tx, apiv1.ActionDelete, namespace, name, tag, digest, status)
	})
	if err != nil {
		return false, fmt.Errorf("catalog: delete %s/%s:%s: %w", namespace, name, tag, err)
	}
	return changed, nil
}

func insertEntry(ctx context.Context, tx *writeTx, e *catalog.Entry, row *sqlrow.Row, verified bool) error {
	var id int64
	err := tx.QueryRowContext(ctx, `INSERT INTO entries (namespace, name, tag, version_key, digest, status, reason,
	indexed, verified, kube_min, kube_max, content_digest, content_size, content_media_type, metadata, files, olm)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		e.Namespace, e.Name, e.Tag, catalog.VersionKey(e.Tag), e.Digest, e.Status, e.Reason,
		sqlitedb.EncodeTime(e.Indexed), verified, row.KubeMin, row.KubeMax,
		e.Content.Digest, e.Content.Size, e.Content.MediaType, row.Metadata, row.Files, row.OLM).Scan(&id)
	if err != nil {
		return err
	}
	for _, c := range row.Channels {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO entry_channels (entry_id, namespace, name, channel) VALUES (?, ?, ?, ?)`,
			id, e.Namespace, e.Name, c); err != nil {
			return err
		}
	}
	for i := range row.APIKinds {
		if _, err := tx.ExecContext(ctx, `INSERT INTO entry_apis (entry_id, namespace, name, api_group, kind) VALUES (?, ?, ?, ?, ?)`,
			id, e.Namespace, e.Name, row.APIGroups[i], row.APIKinds[i]); err != nil {
			return err
		}
	}
	for _, im := range row.Images {
		if _, err := tx.ExecContext(ctx, `INSERT INTO entry_images (entry_id, repository, tag, digest) VALUES (?, ?, ?, ?)`,
			id, im.Repository, im.Tag, im.Digest); err != nil {
			return err
		}
	}
	return nil
}

// refreshPackage rewrites the row of a package from its indexed versions (the
// summary and full text of the latest, the filter sets of all), or removes it
// when none is left, and returns the search document the package now has,
// read back from that row in the same transaction. Every write calls it, so
// that neither the row nor the document ever disagrees with the entries.
func refreshPackage(ctx context.Context, tx *writeTx, namespace, name string) (*indexUpdate, error) {
	upd := &indexUpdate{namespace: namespace, name: name}
	var tag, digest string
	var indexed int64
	var verified bool
	var metadata []byte
	err := tx.QueryRowContext(ctx, `SELECT tag, digest, indexed, verified, metadata FROM entries
	WHERE namespace = ? AND name = ? AND status = 'indexed' ORDER BY version_key DESC LIMIT 1`,
		namespace, name).Scan(&tag, &digest, &indexed, &verified, &metadata)
	if errors.Is(err, sql.ErrNoRows) {
		_, err := tx.ExecContext(ctx, `DELETE FROM packages WHERE namespace = ? AND name = ?`, namespace, name)
		return upd, err
	}
	if err != nil {
		return nil, err
	}
	latest, err := sqlrow.Latest(namespace, name, tag, digest, sqlitedb.DecodeTime(indexed), verified, metadata)
	if err != nil {
		return nil, err
	}
	p := &latest.Summary
	keywords, err := json.Marshal(p.Keywords)
	if err != nil {
		return nil, err
	}
	channels, err := json.Marshal(p.Channels)
	if err != nil {
		return nil, err
	}
	var created sql.NullInt64
	if p.Created != nil {
		created = sql.NullInt64{Int64: sqlitedb.EncodeTime(*p.Created), Valid: true}
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO packages (namespace, name, version, digest, format, display_name,
	description, app_version, keywords, channels, created, updated, verified, maintainers, apis)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (namespace, name) DO UPDATE SET version = excluded.version, digest = excluded.digest,
	format = excluded.format, display_name = excluded.display_name, description = excluded.description,
	app_version = excluded.app_version, keywords = excluded.keywords, channels = excluded.channels,
	created = excluded.created, updated = excluded.updated, verified = excluded.verified,
	maintainers = excluded.maintainers, apis = excluded.apis`,
		namespace, name, tag, digest, string(p.Format), p.DisplayName, p.Description, p.AppVersion,
		string(keywords), string(channels), created, indexed, verified, latest.Maintainers, latest.APIs)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, setPackageSets, namespace, name); err != nil {
		return nil, err
	}
	docs, err := readDocs(ctx, tx, namespace, name)
	if err != nil {
		return nil, err
	}
	if len(docs) != 1 {
		return nil, fmt.Errorf("%s/%s: %d search documents after the refresh, want 1", namespace, name, len(docs))
	}
	upd.doc = docs[0]
	return upd, nil
}

// setPackageSets sets the columns of the packages row of a package that
// cover all its indexed versions, for the search filters: its channels, its
// provided APIs (lower-case group and kind), its Kubernetes ranges and its
// images, each a JSON array. Schema step 2 filled the first three the same
// way.
const setPackageSets = `UPDATE packages SET
	all_channels = (SELECT json_group_array(channel) FROM (SELECT DISTINCT c.channel FROM entries e
		JOIN entry_channels c ON c.entry_id = e.id
		WHERE e.namespace = packages.namespace AND e.name = packages.name AND e.status = 'indexed' ORDER BY 1)),
	all_apis = (SELECT json_group_array(json_array(api_group, kind)) FROM (SELECT DISTINCT a.api_group, a.kind FROM entries e
		JOIN entry_apis a ON a.entry_id = e.id
		WHERE e.namespace = packages.namespace AND e.name = packages.name AND e.status = 'indexed' ORDER BY 1, 2)),
	kube_ranges = (SELECT json_group_array(json_array(kube_min, kube_max)) FROM (SELECT DISTINCT kube_min, kube_max FROM entries e
		WHERE e.namespace = packages.namespace AND e.name = packages.name AND e.status = 'indexed' ORDER BY 1, 2)),
	all_images = (SELECT json_group_array(json_array(repository, tag, digest)) FROM (SELECT DISTINCT i.repository, i.tag, i.digest
		FROM entries e JOIN entry_images i ON i.entry_id = e.id
		WHERE e.namespace = packages.namespace AND e.name = packages.name AND e.status = 'indexed' ORDER BY 1, 2, 3))
	WHERE namespace = ? AND name = ?`

// AppendSourceEvent appends ch, an event of a tracked source, to the
// change feed, in a transaction of its own.
func (s *Store) AppendSourceEvent(ctx context.Context, ch apiv1.Change) error {
	err := s.write(ctx, func(tx *writeTx) (*indexUpdate, error) {
		_, err := tx.ExecContext(ctx, `INSERT INTO changes (action, namespace, name, tag, digest, status, reason, time)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, apiv1.ActionSource, ch.Namespace, ch.Name, ch.Version, ch.Digest, ch.Status, ch.Reason,
			sqlitedb.EncodeTime(time.Now()))
		return nil, err
	})
	if err != nil {
		return fmt.Errorf("catalog: record the source event of %s/%s: %w", ch.Namespace, ch.Name, err)
	}
	return nil
}

func appendChange(ctx context.Context, tx *writeTx, action, namespace, name, tag, digest, status string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO changes (action, namespace, name, tag, digest, status, time) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		action, namespace, name, tag, digest, status, sqlitedb.EncodeTime(time.Now()))
	return err
}
