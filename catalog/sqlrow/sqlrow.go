// Package sqlrow is what the catalog's SQL stores (catalog/sqlite and
// catalog/postgres) share, so that both check and encode an entry the same
// way and build the same search document from it: the entry's checks and
// encoded columns, their decoding, the latest version's part of a package's
// search document, the checks of a signature check, and the access filter
// of rows read in namespace and name order.
package sqlrow

import (
	"database/sql"
	"encoding/json"
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
// its channels, and its provided APIs' lower-case groups and kinds.
type Row struct {
	Metadata, Files, OLM sql.NullString
	KubeMin, KubeMax     string
	Channels             []string
	APIGroups, APIKinds  []string
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
	return row, nil
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

// UnindexedPage collects one page of Unindexed: the artifacts access allows,
// after skipping offset of them, up to the page size of limit. With
// access.All the query pages itself (LIMIT and OFFSET) and nothing is
// skipped here.
type UnindexedPage struct {
	Artifacts  []apiv1.Artifact
	allows     func(namespace, name string) bool
	skip, size int
}

// NewUnindexedPage starts a page of limit (catalog.PageSize) after offset.
func NewUnindexedPage(access catalog.Access, limit, offset int) *UnindexedPage {
	p := &UnindexedPage{Artifacts: []apiv1.Artifact{}, allows: Allower(access), size: catalog.PageSize(limit)}
	if !access.All {
		p.skip = offset
	}
	return p
}

// Add offers the next artifact in namespace, name and tag order and reports
// whether the page is full.
func (p *UnindexedPage) Add(a apiv1.Artifact) (full bool) {
	switch {
	case !p.allows(a.Namespace, a.Name):
		return false
	case p.skip > 0:
		p.skip--
		return false
	}
	p.Artifacts = append(p.Artifacts, a)
	return len(p.Artifacts) == p.size
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

// UnindexedColumns are the columns of the entries table AddRow reads.
const UnindexedColumns = `namespace, name, tag, digest, status, reason, indexed`

// AddRow reads one row of UnindexedColumns and offers it to the page (Add):
// it reports whether the page is full.
func (p *UnindexedPage) AddRow(row Scanner) (full bool, err error) {
	var a apiv1.Artifact
	var t int64
	if err := row.Scan(&a.Namespace, &a.Name, &a.Tag, &a.Digest, &a.Status, &a.Reason, &t); err != nil {
		return false, err
	}
	a.Indexed = sqlitedb.DecodeTime(t)
	return p.Add(a), nil
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
