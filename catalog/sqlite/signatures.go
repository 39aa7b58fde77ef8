package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/sqlrow"
	"github.com/berth-registry/berth/internal/sqlitedb"
)

// PutSignatures records the signature check c of a digest of a package,
// replacing the last one, and sets the verdict c.Verified() on the entries of
// the package with that digest, in one transaction; the search index follows
// when the verdict of the package's latest version changed. It records
// nothing when no indexed version of the package holds the digest, and no
// change in the change feed. It returns whether the Verified of some entry
// changed, and an error wrapping catalog.ErrInvalid when c lacks its
// namespace, name or digest or a record has an unknown kind.
func (s *Store) PutSignatures(ctx context.Context, c *catalog.SignatureCheck) (bool, error) {
	if err := sqlrow.CheckSignatures(c); err != nil {
		return false, fmt.Errorf("catalog: signatures of %s/%s@%s: %w", c.Namespace, c.Name, c.Digest, err)
	}
	verified := c.Verified()
	checked := sqlitedb.EncodeTime(c.Checked)
	changed := false
	err := s.write(ctx, func(tx *writeTx) (*indexUpdate, error) {
		var held bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM entries
		WHERE namespace = ? AND name = ? AND digest = ? AND status = 'indexed')`, c.Namespace, c.Name, c.Digest).Scan(&held); err != nil {
			return nil, err
		}
		if !held {
			return nil, nil
		}
		// The signature rows go with the check they belong to (ON DELETE CASCADE).
		if _, err := tx.ExecContext(ctx, `DELETE FROM signature_checks WHERE namespace = ? AND name = ? AND digest = ?`,
			c.Namespace, c.Name, c.Digest); err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO signature_checks (namespace, name, digest, checked, policy, verified, error)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, c.Namespace, c.Name, c.Digest, checked, c.Policy, verified, c.Error); err != nil {
			return nil, err
		}
		for i, r := range c.Signatures {
			sources, err := sqlrow.EncodeSources(r.Sources)
			if err != nil {
				return nil, err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO signatures (namespace, name, subject, position, digest, layer, kind,
			predicate_type, key_id, verified, reason, sources) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				c.Namespace, c.Name, c.Digest, i, r.Digest, r.Layer, r.Kind, r.PredicateType, r.KeyID, r.Verified, r.Reason, sources); err != nil {
				return nil, err
			}
		}
		res, err := tx.ExecContext(ctx, `UPDATE entries SET verified = ? WHERE namespace = ? AND name = ? AND digest = ? AND verified <> ?`,
			verified, c.Namespace, c.Name, c.Digest, verified)
		if err != nil {
			return nil, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return nil, err
		}
		changed = true
		return refreshPackage(ctx, tx, c.Namespace, c.Name)
	})
	if err != nil {
		return false, fmt.Errorf("catalog: signatures of %s/%s@%s: %w", c.Namespace, c.Name, c.Digest, err)
	}
	return changed, nil
}

// pruneSignatures removes the check of digest, and its signatures, when no
// indexed entry of the package holds the digest any more.
func pruneSignatures(ctx context.Context, tx *writeTx, namespace, name, digest string) error {
	_, err := tx.ExecContext(ctx, `DELETE FROM signature_checks WHERE namespace = ? AND name = ? AND digest = ?
	AND NOT EXISTS (SELECT 1 FROM entries WHERE namespace = ? AND name = ? AND digest = ? AND status = 'indexed')`,
		namespace, name, digest, namespace, name, digest)
	return err
}

// Signatures returns the last check of a digest of a package with what it
// found, in the order it was recorded, or an error wrapping
// catalog.ErrNotFound when the digest was never checked or no indexed version
// holds it.
func (s *Store) Signatures(ctx context.Context, namespace, name, digest string) (*catalog.SignatureCheck, error) {
	c, err := s.signatures(ctx, namespace, name, digest)
	if err != nil {
		return nil, fmt.Errorf("catalog: signatures of %s/%s@%s: %w", namespace, name, digest, err)
	}
	return c, nil
}

func (s *Store) signatures(ctx context.Context, namespace, name, digest string) (*catalog.SignatureCheck, error) {
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() // read-only: nothing to commit
	c := &catalog.SignatureCheck{Namespace: namespace, Name: name, Digest: digest}
	var checked int64
	err = tx.QueryRowContext(ctx, `SELECT checked, policy, error FROM signature_checks WHERE namespace = ? AND name = ? AND digest = ?`,
		namespace, name, digest).Scan(&checked, &c.Policy, &c.Error)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, catalog.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	c.Checked = sqlitedb.DecodeTime(checked)
	err = query(ctx, tx, `SELECT digest, layer, kind, predicate_type, key_id, verified, reason, sources FROM signatures
	WHERE namespace = ? AND name = ? AND subject = ? ORDER BY position`, []any{namespace, name, digest}, func(rows *sql.Rows) error {
		var r catalog.SignatureRecord
		var sources string
		if err := rows.Scan(&r.Digest, &r.Layer, &r.Kind, &r.PredicateType, &r.KeyID, &r.Verified, &r.Reason, &sources); err != nil {
			return err
		}
		var err error
		if r.Sources, err = sqlrow.DecodeSources(sources); err != nil {
			return err
		}
		c.Signatures = append(c.Signatures, r)
		return nil
	})
	if err != nil {
		return nil, err
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
			where = append(where, f.column+` = ?`)
			args = append(args, f.value)
		}
	}
	return s.listChecks(ctx, where, args, `ORDER BY e.namespace, e.name, e.digest`, nil)
}

// SignatureCheckPage implements catalog.StoreReader.
func (s *Store) SignatureCheckPage(ctx context.Context, after catalog.SignatureCheck, limit int, stale string) ([]catalog.SignatureCheck, error) {
	where := []string{`status = 'indexed'`, `(namespace, name, digest) > (?, ?, ?)`}
	args := []any{after.Namespace, after.Name, after.Digest}
	return s.listChecks(ctx, where, args,
		`WHERE ? = '' OR c.checked IS NULL OR c.checked = 0 OR c.policy != ? ORDER BY e.namespace, e.name, e.digest LIMIT ?`,
		[]any{stale, stale, limit})
}

// listChecks lists the checks, without their signatures, of the distinct
// digests of the entries where selects (a digest never checked: zero
// Checked, empty Policy); tail filters, orders and limits them.
func (s *Store) listChecks(ctx context.Context, where []string, args []any, tail string, tailArgs []any) ([]catalog.SignatureCheck, error) {
	var out []catalog.SignatureCheck
	err := query(ctx, s.reads, `SELECT `+sqlrow.CheckColumns+`
	FROM (SELECT DISTINCT namespace, name, digest FROM entries WHERE `+strings.Join(where, ` AND `)+`) e
	LEFT JOIN signature_checks c ON c.namespace = e.namespace AND c.name = e.name AND c.digest = e.digest
	`+tail, append(args, tailArgs...), func(rows *sql.Rows) error {
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
	err := query(ctx, s.reader, `SELECT DISTINCT subject FROM signatures WHERE namespace = ? AND name = ? AND digest = ? ORDER BY subject`,
		[]any{namespace, name, manifest}, func(rows *sql.Rows) error {
			var d string
			if err := rows.Scan(&d); err != nil {
				return err
			}
			out = append(out, d)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("catalog: signed by %s/%s@%s: %w", namespace, name, manifest, err)
	}
	return out, nil
}
