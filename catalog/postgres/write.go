package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/searchindex"
	"github.com/berth-registry/berth/catalog/sqlrow"
	"github.com/berth-registry/berth/internal/sqlitedb"
)

// change is what a write records in the change feed; nil records nothing.
type change struct {
	action, tag, digest, status string
}

// write runs fn in a transaction on the package namespace/name, holding the
// package's transaction advisory lock, so that the writes of one package,
// through any replica, run one at a time and each computes the package's
// document from every entry committed before it. When fn reports a change,
// write stamps it as its last step (stamp) and commits; once committed, the
// package's new document goes to this replica's index and OnChange. It
// returns whether fn changed anything.
func (s *Store) write(ctx context.Context, namespace, name string, fn func(tx pgx.Tx) (changed bool, ch *change, err error)) (bool, error) {
	var rev int64
	var doc *searchindex.Doc
	var changed bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, lockClass, packageLock(namespace, name)); err != nil {
			return err
		}
		var ch *change
		var err error
		if changed, ch, err = fn(tx); err != nil || !changed {
			return err
		}
		if doc, err = packageDoc(ctx, tx, namespace, name); err != nil {
			return err
		}
		rev, err = stamp(ctx, tx, namespace, name, doc, ch)
		return err
	})
	if err != nil || !changed {
		return false, err
	}
	if s.apply(namespace, name, rev, doc) && s.onChange != nil {
		s.onChange(namespace, name)
	}
	return true, nil
}

// stamp takes the next revision, and the next change sequence number when
// ch is set, from the counters row, and writes the package's row and the
// change with them, and a notification to the other replicas.
//
// Why a follower never skips a change: the UPDATE locks the counters row
// until this transaction ends, so a second writer's UPDATE waits, and reads
// the row as this one committed it (or as it was, if this one rolled back).
// Numbers are thus handed out in commit order and without holes, and a
// reader that sees number n has already been able to see every number below
// it: reading changes with seq > last, or packages with rev > last, misses
// nothing. The lock is held from here to the commit only, so writers of
// different packages run in parallel until this last step.
func stamp(ctx context.Context, tx pgx.Tx, namespace, name string, doc *searchindex.Doc, ch *change) (int64, error) {
	var rev, seq int64
	feed := 0
	if ch != nil {
		feed = 1
	}
	if err := tx.QueryRow(ctx, `UPDATE counters SET rev = rev + 1, seq = seq + $1 RETURNING rev, seq`, feed).Scan(&rev, &seq); err != nil {
		return 0, err
	}
	var docJSON *string
	if doc != nil {
		b, err := json.Marshal(encodeDoc(doc))
		if err != nil {
			return 0, err
		}
		str := string(b)
		docJSON = &str
	}
	if _, err := tx.Exec(ctx, `INSERT INTO packages (namespace, name, rev, doc) VALUES ($1, $2, $3, $4)
	ON CONFLICT (namespace, name) DO UPDATE SET rev = excluded.rev, doc = excluded.doc`, namespace, name, rev, docJSON); err != nil {
		return 0, err
	}
	if ch != nil {
		if _, err := tx.Exec(ctx, `INSERT INTO changes (seq, action, namespace, name, tag, digest, status, time)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, seq, ch.action, namespace, name, ch.tag, ch.digest, ch.status,
			sqlitedb.EncodeTime(time.Now())); err != nil {
			return 0, err
		}
	}
	_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, notifyChannel, fmt.Sprint(rev))
	return rev, err
}

// AppendSourceEvent appends ch, an event of a tracked source, to the
// change feed. It takes the next sequence number from the counters row, as
// stamp does, so that the feed stays numbered in commit order without
// holes; it writes no package row and so no revision.
func (s *Store) AppendSourceEvent(ctx context.Context, ch apiv1.Change) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var seq int64
		if err := tx.QueryRow(ctx, `UPDATE counters SET seq = seq + 1 RETURNING seq`).Scan(&seq); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO changes (seq, action, namespace, name, tag, digest, status, reason, time)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, seq, apiv1.ActionSource, ch.Namespace, ch.Name, ch.Version, ch.Digest,
			ch.Status, ch.Reason, sqlitedb.EncodeTime(time.Now()))
		return err
	})
	if err != nil {
		return fmt.Errorf("catalog: record the source event of %s/%s: %w", ch.Namespace, ch.Name, err)
	}
	return nil
}

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
	changed, err := s.write(ctx, e.Namespace, e.Name, func(tx pgx.Tx) (bool, *change, error) {
		var id int64
		var digest, status string
		err := tx.QueryRow(ctx, `SELECT id, digest, status FROM entries WHERE namespace = $1 AND name = $2 AND tag = $3`,
			e.Namespace, e.Name, e.Tag).Scan(&id, &digest, &status)
		replaced := ""
		switch {
		case err == nil && digest == e.Digest && status == e.Status:
			return false, nil, nil
		case err == nil:
			// ON DELETE CASCADE removes its channel and API rows.
			if _, err := tx.Exec(ctx, `DELETE FROM entries WHERE id = $1`, id); err != nil {
				return false, nil, err
			}
			replaced = digest
		case !errors.Is(err, pgx.ErrNoRows):
			return false, nil, err
		}
		// The versions of one digest share the verdict of its last check.
		verified := e.Verified
		err = tx.QueryRow(ctx, `SELECT verified FROM signature_checks WHERE namespace = $1 AND name = $2 AND digest = $3`,
			e.Namespace, e.Name, e.Digest).Scan(&verified)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return false, nil, err
		}
		if err := storeEntry(ctx, tx, e, row, verified, replaced); err != nil {
			return false, nil, err
		}
		return true, &change{apiv1.ActionPut, e.Tag, e.Digest, e.Status}, nil
	})
	if err != nil {
		return false, fmt.Errorf("catalog: put %s/%s:%s: %w", e.Namespace, e.Name, e.Tag, err)
	}
	return changed, nil
}

// Delete removes the entry of one tag and appends a "delete" change, in one
// transaction. Deleting an absent tag changes nothing and is not an error.
func (s *Store) Delete(ctx context.Context, namespace, name, tag string) (bool, error) {
	changed, err := s.write(ctx, namespace, name, func(tx pgx.Tx) (bool, *change, error) {
		var digest, status string
		err := tx.QueryRow(ctx, `DELETE FROM entries WHERE namespace = $1 AND name = $2 AND tag = $3 RETURNING digest, status`,
			namespace, name, tag).Scan(&digest, &status)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil, nil
		}
		if err != nil {
			return false, nil, err
		}
		if err := pruneSignatures(ctx, tx, namespace, name, digest); err != nil {
			return false, nil, err
		}
		return true, &change{apiv1.ActionDelete, tag, digest, status}, nil
	})
	if err != nil {
		return false, fmt.Errorf("catalog: delete %s/%s:%s: %w", namespace, name, tag, err)
	}
	return changed, nil
}

// storeEntry writes e's row with the verdict verified and the columns
// derived from it (recordDerived), and, when prune names a digest, removes
// the signature records no version of that digest holds any more
// (pruneSignatures). Put and Reindex store an entry through it.
func storeEntry(ctx context.Context, tx pgx.Tx, e *catalog.Entry, row *sqlrow.Row, verified bool, prune string) error {
	if err := insertEntry(ctx, tx, e, row, verified); err != nil {
		return err
	}
	if err := recordDerived(ctx, tx, e); err != nil {
		return err
	}
	if prune == "" {
		return nil
	}
	return pruneSignatures(ctx, tx, e.Namespace, e.Name, prune)
}

func insertEntry(ctx context.Context, tx pgx.Tx, e *catalog.Entry, row *sqlrow.Row, verified bool) error {
	var id int64
	err := tx.QueryRow(ctx, `INSERT INTO entries (namespace, name, tag, version_key, digest, status, reason,
	indexed, verified, kube_min, kube_max, content_digest, content_size, content_media_type, metadata, files, olm)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17) RETURNING id`,
		e.Namespace, e.Name, e.Tag, catalog.VersionKey(e.Tag), e.Digest, e.Status, e.Reason,
		sqlitedb.EncodeTime(e.Indexed), verified, row.KubeMin, row.KubeMax,
		e.Content.Digest, e.Content.Size, e.Content.MediaType, row.Metadata, row.Files, row.OLM).Scan(&id)
	if err != nil {
		return err
	}
	if len(row.Channels) > 0 {
		if _, err := tx.Exec(ctx, `INSERT INTO entry_channels (entry_id, channel) SELECT $1, unnest($2::text[])
		ON CONFLICT DO NOTHING`, id, row.Channels); err != nil {
			return err
		}
	}
	if len(row.APIKinds) > 0 {
		if _, err := tx.Exec(ctx, `INSERT INTO entry_apis (entry_id, api_group, kind) SELECT $1, g, k
		FROM unnest($2::text[], $3::text[]) AS t (g, k)`, id, row.APIGroups, row.APIKinds); err != nil {
			return err
		}
	}
	if len(row.Images) > 0 {
		repos, tags, digests := make([]string, len(row.Images)), make([]string, len(row.Images)), make([]string, len(row.Images))
		for i, im := range row.Images {
			repos[i], tags[i], digests[i] = im.Repository, im.Tag, im.Digest
		}
		if _, err := tx.Exec(ctx, `INSERT INTO entry_images (entry_id, repository, tag, digest) SELECT $1, r, t, d
		FROM unnest($2::text[], $3::text[], $4::text[]) AS x (r, t, d)`, id, repos, tags, digests); err != nil {
			return err
		}
	}
	return nil
}

// packageDoc is the search document of a package, from its indexed versions
// as the transaction sees them (the summary and full text of the latest, the
// filter sets of all), or nil when none is left.
func packageDoc(ctx context.Context, tx pgx.Tx, namespace, name string) (*searchindex.Doc, error) {
	var tag, digest string
	var indexed int64
	var verified bool
	var metadata []byte
	err := tx.QueryRow(ctx, `SELECT tag, digest, indexed, verified, metadata FROM entries
	WHERE namespace = $1 AND name = $2 AND status = 'indexed' ORDER BY version_key DESC LIMIT 1`,
		namespace, name).Scan(&tag, &digest, &indexed, &verified, &metadata)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	d, err := sqlrow.Latest(namespace, name, tag, digest, sqlitedb.DecodeTime(indexed), verified, metadata)
	if err != nil {
		return nil, err
	}
	var groups, kinds, mins, maxs, repos, tags, digests []string
	// Each set's distinct rows are read once; a pair's two arrays come
	// from the same ordered aggregate pass.
	err = tx.QueryRow(ctx, `SELECT ch.channels, ap.groups, ap.kinds, kb.mins, kb.maxs, im.repos, im.tags, im.digests FROM
	(SELECT coalesce(array_agg(DISTINCT c.channel ORDER BY c.channel), '{}') AS channels FROM entries e
		JOIN entry_channels c ON c.entry_id = e.id
		WHERE e.namespace = $1 AND e.name = $2 AND e.status = 'indexed') AS ch,
	(SELECT coalesce(array_agg(g ORDER BY g, k), '{}') AS groups, coalesce(array_agg(k ORDER BY g, k), '{}') AS kinds
		FROM (SELECT DISTINCT a.api_group AS g, a.kind AS k FROM entries e
		JOIN entry_apis a ON a.entry_id = e.id
		WHERE e.namespace = $1 AND e.name = $2 AND e.status = 'indexed') AS apis) AS ap,
	(SELECT coalesce(array_agg(lo ORDER BY lo, hi), '{}') AS mins, coalesce(array_agg(hi ORDER BY lo, hi), '{}') AS maxs
		FROM (SELECT DISTINCT kube_min AS lo, kube_max AS hi FROM entries
		WHERE namespace = $1 AND name = $2 AND status = 'indexed') AS kube) AS kb,
	(SELECT coalesce(array_agg(r ORDER BY r, t, d), '{}') AS repos, coalesce(array_agg(t ORDER BY r, t, d), '{}') AS tags,
		coalesce(array_agg(d ORDER BY r, t, d), '{}') AS digests
		FROM (SELECT DISTINCT i.repository AS r, i.tag AS t, i.digest AS d FROM entries e
		JOIN entry_images i ON i.entry_id = e.id
		WHERE e.namespace = $1 AND e.name = $2 AND e.status = 'indexed') AS images) AS im`,
		namespace, name).Scan(&d.Channels, &groups, &kinds, &mins, &maxs, &repos, &tags, &digests)
	if err != nil {
		return nil, err
	}
	for i := range groups {
		d.Provides = append(d.Provides, catalog.APIFilter{Group: groups[i], Kind: kinds[i]})
	}
	for i := range mins {
		d.Kube = append(d.Kube, searchindex.KubeRange{Min: mins[i], Max: maxs[i]})
	}
	for i := range repos {
		d.Images = append(d.Images, catalog.ImageRef{Repository: repos[i], Tag: tags[i], Digest: digests[i]})
	}
	return d, nil
}

// pruneSignatures removes the check of digest, and its signatures, when no
// indexed entry of the package holds the digest any more.
func pruneSignatures(ctx context.Context, tx pgx.Tx, namespace, name, digest string) error {
	_, err := tx.Exec(ctx, `DELETE FROM signature_checks WHERE namespace = $1 AND name = $2 AND digest = $3
	AND NOT EXISTS (SELECT 1 FROM entries WHERE namespace = $1 AND name = $2 AND digest = $3 AND status = 'indexed')`,
		namespace, name, digest)
	return err
}

// PutSignatures records the signature check c of a digest of a package,
// replacing the last one, and sets the verdict c.Verified() on the entries of
// the package with that digest, in one transaction; the package's document
// follows when the verdict of some version changed. It records nothing when no
// indexed version of the package holds the digest, and no change in the change
// feed. It returns whether the Verified of some entry changed, and an error
// wrapping catalog.ErrInvalid when c lacks its namespace, name or digest or a
// record has an unknown kind.
func (s *Store) PutSignatures(ctx context.Context, c *catalog.SignatureCheck) (bool, error) {
	if err := sqlrow.CheckSignatures(c); err != nil {
		return false, fmt.Errorf("catalog: signatures of %s/%s@%s: %w", c.Namespace, c.Name, c.Digest, err)
	}
	verified := c.Verified()
	changed, err := s.write(ctx, c.Namespace, c.Name, func(tx pgx.Tx) (bool, *change, error) {
		var held bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM entries
		WHERE namespace = $1 AND name = $2 AND digest = $3 AND status = 'indexed')`, c.Namespace, c.Name, c.Digest).Scan(&held); err != nil {
			return false, nil, err
		}
		if !held {
			return false, nil, nil
		}
		// The signature rows go with the check they belong to (ON DELETE CASCADE).
		if _, err := tx.Exec(ctx, `DELETE FROM signature_checks WHERE namespace = $1 AND name = $2 AND digest = $3`,
			c.Namespace, c.Name, c.Digest); err != nil {
			return false, nil, err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO signature_checks (namespace, name, digest, checked, policy, verified, error)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, c.Namespace, c.Name, c.Digest, sqlitedb.EncodeTime(c.Checked), c.Policy, verified, c.Error); err != nil {
			return false, nil, err
		}
		for i, r := range c.Signatures {
			sources, err := sqlrow.EncodeSources(r.Sources)
			if err != nil {
				return false, nil, err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO signatures (namespace, name, subject, position, digest, layer, kind,
			predicate_type, key_id, verified, reason, sources) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
				c.Namespace, c.Name, c.Digest, i, r.Digest, r.Layer, r.Kind, r.PredicateType, r.KeyID, r.Verified, r.Reason, sources); err != nil {
				return false, nil, err
			}
		}
		tag, err := tx.Exec(ctx, `UPDATE entries SET verified = $1 WHERE namespace = $2 AND name = $3 AND digest = $4 AND verified <> $1`,
			verified, c.Namespace, c.Name, c.Digest)
		if err != nil {
			return false, nil, err
		}
		if tag.RowsAffected() == 0 {
			// The check is recorded; no version's verdict, nor so the document, changed.
			return false, nil, nil
		}
		return true, nil, nil
	})
	if err != nil {
		return false, fmt.Errorf("catalog: signatures of %s/%s@%s: %w", c.Namespace, c.Name, c.Digest, err)
	}
	return changed, nil
}
