// Package sqlrow is what the catalog's SQL stores (catalog/sqlite and
// catalog/postgres) share, so that both check and encode an entry the same
// way and build the same search document from it: the entry's checks and
// encoded columns, reading them back, the latest version's part of a
// package's search document, the checks of a signature check, the access
// filter of rows read in namespace and name order, and the queries whose
// logic does not depend on the database (Unindexed, Walk, Search).
package sqlrow

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/searchindex"
	"github.com/berth-registry/berth/internal/sqlitedb"
	"github.com/berth-registry/berth/olm"
	"github.com/berth-registry/berth/pkgformat"
)

// Row is an Entry's encoded columns: the JSON of its metadata, files and
// OLM bundle record (NULL when absent), and, for an indexed entry, what the
// search filters read: its Kubernetes bounds as catalog.KubeVersionKey keys,
// its channels, its provided APIs' lower-case groups and kinds, and its
// images that parse, split.
type Row struct {
	Metadata, Files, OLM sql.NullString
	KubeMin, KubeMax     string
	Channels             []string
	APIGroups, APIKinds  []string
	Images               []catalog.ImageRef
}

// Encode checks e and encodes the columns that are not stored as they are.
// It returns an error wrapping catalog.ErrInvalid when e lacks its
// namespace, name or tag, has an unknown status, or is indexed without
// metadata.
func Encode(e *catalog.Entry) (*Row, error) {
	if e.Namespace == "" || e.Name == "" || e.Tag == "" {
		return nil, fmt.Errorf("%w: namespace, name and tag are required", catalog.ErrInvalid)
	}
	switch e.Status {
	case apiv1.StatusIndexed:
		if e.Metadata == nil {
			return nil, fmt.Errorf("%w: an indexed entry needs its metadata", catalog.ErrInvalid)
		}
	case apiv1.StatusInvalid, apiv1.StatusIgnored:
	default:
		return nil, fmt.Errorf("%w: unknown status %q", catalog.ErrInvalid, e.Status)
	}
	row := &Row{}
	if e.Metadata != nil {
		b, err := json.Marshal(e.Metadata)
		if err != nil {
			return nil, err
		}
		row.Metadata = sql.NullString{String: string(b), Valid: true}
	}
	if e.OLM != nil {
		// Without HTML escaping, so that the FBC property values read back
		// byte for byte as olm.BuildBundle wrote them, as opm writes them:
		// json.Marshal would turn each & < > into \u0026 and the like.
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(e.OLM); err != nil {
			return nil, err
		}
		row.OLM = sql.NullString{String: strings.TrimSuffix(b.String(), "\n"), Valid: true}
	}
	if len(e.Files) > 0 {
		b, err := json.Marshal(e.Files)
		if err != nil {
			return nil, err
		}
		row.Files = sql.NullString{String: string(b), Valid: true}
	}
	if e.Status != apiv1.StatusIndexed {
		return row, nil
	}
	md := e.Metadata
	row.KubeMin, _ = catalog.KubeVersionKey(md.MinKubeVersion)
	row.KubeMax, _ = catalog.KubeVersionKey(md.MaxKubeVersion)
	for _, c := range md.Channels {
		row.Channels = append(row.Channels, c.Name)
	}
	for _, a := range md.ProvidedAPIs {
		row.APIGroups = append(row.APIGroups, strings.ToLower(a.Group))
		row.APIKinds = append(row.APIKinds, strings.ToLower(a.Kind))
	}
	seen := make(map[catalog.ImageRef]bool, len(md.Images))
	for _, im := range md.Images {
		if r, err := catalog.ParseImageRef(im.Reference); err == nil && im.Problem == "" && !seen[r] {
			seen[r] = true
			row.Images = append(row.Images, r)
		}
	}
	return row, nil
}

// EntryColumns are the columns of the entries table ScanEntry reads;
// FilesColumn follows them when Files are wanted.
const (
	EntryColumns = `namespace, name, tag, digest, status, reason, indexed, verified,
	content_digest, content_size, content_media_type, metadata, olm`
	FilesColumn = `, files`
)

// ScanEntry reads EntryColumns, and FilesColumn when withFiles.
func ScanEntry(row Scanner, withFiles bool) (*catalog.Entry, error) {
	var e catalog.Entry
	var indexed int64
	var metadata, bundle, files []byte
	dest := []any{&e.Namespace, &e.Name, &e.Tag, &e.Digest, &e.Status, &e.Reason, &indexed, &e.Verified,
		&e.Content.Digest, &e.Content.Size, &e.Content.MediaType, &metadata, &bundle}
	if withFiles {
		dest = append(dest, &files)
	}
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	e.Indexed = sqlitedb.DecodeTime(indexed)
	if err := Decode(&e, metadata, bundle, files); err != nil {
		return nil, err
	}
	return &e, nil
}

// Decode sets e's metadata, OLM bundle record and files from their JSON
// columns; a nil column leaves its field as it is.
func Decode(e *catalog.Entry, metadata, bundle, files []byte) error {
	if metadata != nil {
		e.Metadata = new(pkgformat.Metadata)
		if err := json.Unmarshal(metadata, e.Metadata); err != nil {
			return fmt.Errorf("metadata of %s/%s:%s: %w", e.Namespace, e.Name, e.Tag, err)
		}
	}
	if bundle != nil {
		e.OLM = new(olm.BundleRecord)
		if err := json.Unmarshal(bundle, e.OLM); err != nil {
			return fmt.Errorf("OLM bundle of %s/%s:%s: %w", e.Namespace, e.Name, e.Tag, err)
		}
	}
	if files != nil {
		if err := json.Unmarshal(files, &e.Files); err != nil {
			return fmt.Errorf("files of %s/%s:%s: %w", e.Namespace, e.Name, e.Tag, err)
		}
	}
	return nil
}

// Latest is the part of the search document of package namespace/name that
// its latest indexed version makes, from that version's tag, digest, time of
// indexing, verdict and metadata column: the summary and the full text of
// maintainers and provided APIs. The filter sets over all versions are left
// to the store. Times are in UTC, as the stores read them back.
func Latest(namespace, name, tag, digest string, indexed time.Time, verified bool, metadata []byte) (*searchindex.Doc, error) {
	var md pkgformat.Metadata
	if err := json.Unmarshal(metadata, &md); err != nil {
		return nil, fmt.Errorf("metadata of %s/%s:%s: %w", namespace, name, tag, err)
	}
	d := &searchindex.Doc{Summary: apiv1.PackageSummary{
		Namespace: namespace, Name: name, Version: tag, Digest: digest, Format: md.Format,
		DisplayName: md.DisplayName, Description: md.Description, AppVersion: md.AppVersion,
		Keywords: md.Keywords, Updated: indexed.UTC(), Verified: verified,
	}}
	for _, c := range md.Channels {
		d.Summary.Channels = append(d.Summary.Channels, c.Name)
	}
	if md.Created != nil {
		t := md.Created.UTC()
		d.Summary.Created = &t
	}
	maintainers := make([]string, len(md.Maintainers))
	for i, m := range md.Maintainers {
		maintainers[i] = m.Name
	}
	apis := make([]string, 0, 2*len(md.ProvidedAPIs))
	for _, a := range md.ProvidedAPIs {
		apis = append(apis, a.Kind, a.Group)
	}
	d.Maintainers, d.APIs = strings.Join(maintainers, " "), strings.Join(apis, " ")
	return d, nil
}

// CheckSignatures refuses a signature check a store cannot file: one
// without its namespace, name or digest, or with a record of an unknown
// kind (an error wrapping catalog.ErrInvalid).
func CheckSignatures(c *catalog.SignatureCheck) error {
	if c.Namespace == "" || c.Name == "" || c.Digest == "" {
		return fmt.Errorf("%w: namespace, name and digest are required", catalog.ErrInvalid)
	}
	for _, r := range c.Signatures {
		if r.Kind != catalog.KindTag && r.Kind != catalog.KindReferrer {
			return fmt.Errorf("%w: signature %s: unknown kind %q", catalog.ErrInvalid, r.Digest, r.Kind)
		}
	}
	return nil
}

// EncodeSources is the sources column of a signature record: a JSON array,
// or "" for none.
func EncodeSources(sources []string) (string, error) {
	if len(sources) == 0 {
		return "", nil
	}
	b, err := json.Marshal(sources)
	return string(b), err
}

// DecodeSources reads what EncodeSources wrote.
func DecodeSources(col string) ([]string, error) {
	if col == "" {
		return nil, nil
	}
	var sources []string
	if err := json.Unmarshal([]byte(col), &sources); err != nil {
		return nil, fmt.Errorf("signature sources: %w", err)
	}
	return sources, nil
}

// Allower returns access.Allows for rows read in namespace and name order:
// it asks the access once per namespace, and Pull once per package of a
// namespace the access covers only in part.
func Allower(access catalog.Access) func(namespace, name string) bool {
	if access.All {
		return func(string, string) bool { return true }
	}
	var ns, name string
	cov, allowed, asked := catalog.CoversNone, false, false
	return func(n, m string) bool {
		if !asked || n != ns {
			ns, cov, name, asked = n, access.Covers(n), "", true
		}
		switch cov {
		case catalog.CoversAll:
			return true
		case catalog.CoversNone:
			return false
		}
		if m != name || name == "" {
			name, allowed = m, access.Pull(n, m)
		}
		return allowed
	}
}

// WalkBatch is how many entries Walk reads per query: it holds no
// transaction while its callback runs, so a slow consumer (an index.yaml
// streamed to a slow client) holds nothing in the database.
const WalkBatch = 256

// Walk calls fn for every entry access allows, reading them WalkBatch at a
// time with batch, which returns the entries after the key (namespace,
// name, tag) given, in that order; the first call gets the empty key. fn's
// error stops the walk and is returned as it is.
func Walk(access catalog.Access, batch func(after [3]string) ([]*catalog.Entry, error), fn func(*catalog.Entry) error) error {
	if !access.All && access.Pull == nil {
		return nil
	}
	allows := Allower(access)
	var last [3]string
	for {
		entries, err := batch(last)
		if err != nil {
			return fmt.Errorf("catalog: walk: %w", err)
		}
		for _, e := range entries {
			if !allows(e.Namespace, e.Name) {
				continue
			}
			if err := fn(e); err != nil {
				return err
			}
		}
		if len(entries) < WalkBatch {
			return nil
		}
		e := entries[len(entries)-1]
		last = [3]string{e.Namespace, e.Name, e.Tag}
	}
}

// Scanner is a row of *sql.Rows or pgx.Rows.
type Scanner interface{ Scan(dest ...any) error }

// Query runs sqlText with args on a store's database and calls row for
// each row until it returns stop or an error; a store's row loop stops on
// Stop's error.
type Query func(sqlText string, args []any, row func(Scanner) (stop bool, err error)) error

// ErrStop ends a store's row loop early; it is no failure.
var ErrStop = errors.New("stop")

// Stop is the error a store's row loop returns for row's verdict: ErrStop
// when it says stop.
func Stop(stop bool, err error) error {
	if err == nil && stop {
		return ErrStop
	}
	return err
}

// Unindexed is a store's Unindexed: the entries whose status is not indexed
// and whose package access allows, ordered by namespace, name and tag,
// starting after offset of them, at most catalog.PageSize(limit). With
// access.All the query pages itself, with limitClause, the store's
// "LIMIT ? OFFSET ?" in its placeholders; otherwise the access is asked in
// Go, once per package, so the rows of the packages it hides are read and
// skipped. A negative offset is an error wrapping catalog.ErrInvalid.
func Unindexed(access catalog.Access, limit, offset int, limitClause string, query Query) ([]apiv1.Artifact, error) {
	if offset < 0 {
		return nil, fmt.Errorf("catalog: unindexed: %w: negative offset %d", catalog.ErrInvalid, offset)
	}
	out := []apiv1.Artifact{}
	if !access.All && access.Pull == nil {
		return out, nil
	}
	size := catalog.PageSize(limit)
	sqlText := `SELECT namespace, name, tag, digest, status, reason, indexed
	FROM entries WHERE status <> 'indexed' ORDER BY namespace, name, tag`
	var args []any
	skip := offset
	if access.All {
		sqlText += ` ` + limitClause
		args, skip = []any{size, offset}, 0
	}
	allows := Allower(access)
	err := query(sqlText, args, func(row Scanner) (bool, error) {
		var a apiv1.Artifact
		var t int64
		if err := row.Scan(&a.Namespace, &a.Name, &a.Tag, &a.Digest, &a.Status, &a.Reason, &t); err != nil {
			return false, err
		}
		switch {
		case !allows(a.Namespace, a.Name):
			return false, nil
		case skip > 0:
			skip--
			return false, nil
		}
		a.Indexed = sqlitedb.DecodeTime(t)
		out = append(out, a)
		return len(out) == size, nil
	})
	if err != nil && !errors.Is(err, ErrStop) {
		return nil, fmt.Errorf("catalog: unindexed: %w", err)
	}
	return out, nil
}

// CheckColumns selects, from a join of the distinct digests e of entries
// and their signature_checks c, what ScanCheck reads: a digest never
// checked has a zero time and empty policy and error.
const CheckColumns = `e.namespace, e.name, e.digest, coalesce(c.checked, 0), coalesce(c.policy, ''), coalesce(c.error, '')`

// ScanCheck reads one row of CheckColumns.
func ScanCheck(row Scanner) (catalog.SignatureCheck, error) {
	var c catalog.SignatureCheck
	var checked int64
	if err := row.Scan(&c.Namespace, &c.Name, &c.Digest, &checked, &c.Policy, &c.Error); err != nil {
		return c, err
	}
	c.Checked = sqlitedb.DecodeTime(checked)
	return c, nil
}

// Search answers q from a store's in-memory index (searchindex.Index.Search
// documents the ranking), unless ctx has ended; errors name the search.
func Search(ctx context.Context, ix *searchindex.Index, q catalog.Query) (*catalog.SearchResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("catalog: search: %w", err)
	}
	res, err := ix.Search(q)
	if err != nil {
		return nil, fmt.Errorf("catalog: search: %w", err)
	}
	return res, nil
}
