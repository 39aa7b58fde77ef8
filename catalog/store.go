package catalog

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/olm"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/signing"
)

// Sentinel errors of the catalog; errors wrap one of them with the package,
// version or parameter concerned.
var (
	// ErrNotFound: no such package, version, channel or file.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: a query parameter or request is malformed.
	ErrInvalid = errors.New("invalid request")
	// ErrDenied: the caller may not see or change this.
	ErrDenied = errors.New("denied")
	// ErrUnavailable: the registry the catalog reads from did not answer.
	ErrUnavailable = errors.New("unavailable")
	// ErrNotImplemented: this server cannot do it in its mode (the catalog
	// without the registry's storage, in split mode).
	ErrNotImplemented = errors.New("not implemented")
)

// Entry is what the catalog records for one tag of one repository
// <Namespace>/<Name>: the manifest digest the tag pointed at when it was read,
// and either the package version read from it (Status indexed) or why it is
// not served as one (Status invalid or ignored, with Reason).
type Entry struct {
	Namespace string
	Name      string
	Tag       string
	Digest    string
	Status    string // apiv1.StatusIndexed, StatusInvalid or StatusIgnored
	Reason    string
	Indexed   time.Time

	// Set when Status is indexed.
	Metadata *pkgformat.Metadata
	Content  apiv1.Content
	// Files locate each file of the content inside the uncompressed tar
	// stream, so that one file can be served without unpacking the others.
	Files []FileEntry
	// Verified is true when a signature of Digest is verified by the trust
	// policy: the verdict of the last SignatureCheck of the digest.
	Verified bool
	// OLM is the record of the registry+v1 bundle image berth generated for
	// an indexed OLM version (docs/olm.md); nil for other formats, and for an
	// OLM version no bundle image could be made of.
	OLM *olm.BundleRecord
	// IndexVersion is the IndexVersion of the berth that read the version;
	// 1 for the versions stored before it was recorded.
	IndexVersion int
	// Examples are the alm-examples of an OLM version's CSV by
	// "group/Kind", each indented JSON (pkgformat.CSVExamples); stores
	// return them from StoreReader.Examples only.
	Examples map[string][]string

	// bundle is the bundle image to store before the entry is recorded;
	// bundleErr says why an OLM version has none.
	bundle    *olm.Bundle
	bundleErr error
}

// FileEntry is one regular file of a package's content tarball.
type FileEntry struct {
	Path string
	Size int64
	// Offset of the file's data in the uncompressed tar stream.
	Offset int64
}

// Signature kinds: how a signature or attestation was found (signing.Kind).
const (
	// KindTag: cosign's tag scheme, sha256-<hex>.sig or .att.
	KindTag = apiv1.KindTag
	// KindReferrer: a manifest whose subject is the version (OCI referrers).
	KindReferrer = apiv1.KindReferrer
)

// SignatureRecord is one signature or attestation of a version digest, as
// the last check found it (signing.Signature).
type SignatureRecord struct {
	// Digest of the manifest that carries it.
	Digest string
	// Layer is the digest of its payload: a manifest may carry several.
	Layer string
	// Kind is KindTag or KindReferrer.
	Kind string
	// PredicateType is set for attestations (in-toto statements), and only
	// for them.
	PredicateType string
	// KeyID is the fingerprint of the trusted key that verified it.
	KeyID    string
	Verified bool
	// Reason says why it is not verified.
	Reason string
	// Sources are the sources a verified SLSA provenance attestation names.
	Sources []string
}

// Attestation reports whether r is an attestation rather than a signature.
func (r SignatureRecord) Attestation() bool { return r.PredicateType != "" }

// SignatureCheck is the outcome of checking the signatures of one digest of
// a package against the trust policy: what the catalog records for every
// version of the package with that digest.
type SignatureCheck struct {
	Namespace, Name, Digest string
	// Checked is when the registry was read; zero for a digest never checked.
	Checked time.Time
	// Policy is the fingerprint of the trust policy of the check
	// (signing.Policy.Fingerprint), so that versions checked under another
	// policy can be found and checked again.
	Policy string
	// Error, when not empty, says why the signatures could not be read;
	// the digest is then not verified.
	Error string
	// Signatures are the signatures and attestations found, in the order
	// the check reported them.
	Signatures []SignatureRecord
	// RequireSource and PolicyName are the requireSource globs of the rule
	// of the trust policy for the package and the name of that rule
	// (signing.Report's); the catalog sets them from its policy, and
	// stores do not keep them.
	RequireSource []string
	PolicyName    string
}

// Verified reports whether a signature (not an attestation) is verified
// and, when RequireSource is set, a verified SLSA provenance attestation
// names only allowed sources: the verdict of every version with the digest.
func (c *SignatureCheck) Verified() bool {
	return c.Error == "" && c.Report().Verified()
}

// Report is the check as a signing.Report, whose Verified and Reason give
// its verdict.
func (c *SignatureCheck) Report() *signing.Report {
	rep := &signing.Report{Subject: c.Digest, RequireSource: c.RequireSource, Policy: c.PolicyName}
	for _, r := range c.Signatures {
		s := signing.Signature{Digest: r.Digest, Layer: r.Layer, Kind: signing.Kind(r.Kind), PredicateType: r.PredicateType,
			KeyID: r.KeyID, Verified: r.Verified, Reason: r.Reason, Sources: r.Sources}
		if r.Attestation() {
			rep.Attestations = append(rep.Attestations, s)
		} else {
			rep.Signatures = append(rep.Signatures, s)
		}
	}
	return rep
}

// TagDigest is one tag of the catalog and the digest it was indexed from.
type TagDigest struct {
	Namespace, Name, Tag, Digest string
}

// Access is what a caller may pull, as an Authorizer decides it: a
// predicate over packages, since access rules are globs over
// namespace/name. The zero Access allows nothing.
type Access struct {
	// All is true when the caller may pull every package; Namespace and
	// Pull are then not asked.
	All bool
	// Namespace, when not nil, says of a whole namespace what Pull would
	// say of each of its packages: CoversAll, CoversNone, or CoversSome
	// when Pull must be asked package by package. It lets a search or a
	// walk decide once per namespace rather than once per package.
	Namespace func(namespace string) Coverage
	// Pull reports whether the caller may pull the package namespace/name.
	// Nil allows nothing.
	Pull func(namespace, name string) bool
	// Key identifies what the access allows, for caches: two accesses with
	// the same non-empty Key allow the same packages. Responses that depend
	// on an access with no Key (and not All) are not given an entity tag.
	Key string
}

// Coverage is how much of a namespace an Access allows.
type Coverage int8

// Coverages of a namespace, in increasing order.
const (
	// CoversNone: no package of the namespace is allowed.
	CoversNone Coverage = iota
	// CoversSome: some packages of the namespace may be allowed; ask Pull.
	CoversSome
	// CoversAll: every package of the namespace is allowed.
	CoversAll
)

// Covers says how much of namespace the access allows.
func (a Access) Covers(namespace string) Coverage {
	switch {
	case a.All:
		return CoversAll
	case a.Pull == nil:
		return CoversNone
	case a.Namespace == nil:
		return CoversSome
	}
	return a.Namespace(namespace)
}

// Allows reports whether the access allows the package namespace/name.
func (a Access) Allows(namespace, name string) bool {
	switch a.Covers(namespace) {
	case CoversAll:
		return true
	case CoversNone:
		return false
	}
	return a.Pull(namespace, name)
}

// NamespaceAccess is the Access to every package of the namespaces given,
// and to nothing else.
func NamespaceAccess(namespaces ...string) Access {
	allowed := make(map[string]bool, len(namespaces))
	for _, ns := range namespaces {
		allowed[ns] = true
	}
	keys := slices.Sorted(maps.Keys(allowed))
	return Access{
		Namespace: func(ns string) Coverage {
			if allowed[ns] {
				return CoversAll
			}
			return CoversNone
		},
		Pull: func(ns, _ string) bool { return allowed[ns] },
		Key:  "namespaces:" + strings.Join(keys, ","),
	}
}

// Sort orders search results.
type Sort string

// Search orders; apiv1 documents them.
const (
	SortRelevance Sort = apiv1.SortRelevance
	SortName      Sort = apiv1.SortName
	SortUpdated   Sort = apiv1.SortUpdated
)

// Query is a package search. The zero value lists every package the caller may
// see. Each filter left empty matches everything.
type Query struct {
	// Text is matched against names (exact, then prefix) and full text over
	// display name, description, keywords, maintainers and provided CRD kinds
	// and groups.
	Text      string
	Namespace string
	Format    pkgformat.Format
	// Channel: some version of the package is in this channel.
	Channel string
	// Provides: some version provides this API; Group, Kind or both may be set.
	Provides APIFilter
	// KubeVersion: some version of the package supports this Kubernetes
	// version (its min/max bounds allow it). Normalised by KubeVersionKey.
	KubeVersion string
	// Image: some indexed version runs an image of this repository, and of
	// this tag and digest when they are set (ParseImageRef normalises it).
	Image ImageRef
	// Verified filters on the latest version's verification when not nil.
	Verified *bool
	Sort     Sort
	// Limit is the page size; 0 means DefaultLimit.
	Limit int
	// Offset is where the page starts, decoded from the request's cursor.
	Offset int
	Access Access
}

// APIFilter selects packages by a provided API.
type APIFilter struct {
	Group string // exact, case-insensitive
	Kind  string // exact, case-insensitive
}

// Page sizes of list endpoints.
const (
	DefaultLimit = apiv1.DefaultLimit
	MaxLimit     = apiv1.MaxLimit
)

// PageSize applies DefaultLimit (to 0 or less) and MaxLimit to a requested
// page size.
func PageSize(limit int) int {
	switch {
	case limit <= 0:
		return DefaultLimit
	case limit > MaxLimit:
		return MaxLimit
	}
	return limit
}

// SearchResult is one page of a search.
type SearchResult struct {
	Packages []apiv1.PackageSummary
	Facets   apiv1.Facets
	Total    int
}

// Store keeps the catalog. Implementations must be safe for concurrent use;
// every write is atomic and recorded in the change feed in the same transaction.
type Store interface {
	StoreWriter
	StoreReader
	// Close releases the store.
	Close() error
}

// StoreWriter changes the catalog.
type StoreWriter interface {
	// Put records e, replacing what was recorded for its tag. When the tag
	// already holds the same digest and status, Put changes nothing and
	// records no change. When signatures of e's digest are recorded for the
	// package (PutSignatures), the entry takes their verdict rather than
	// e.Verified, so that the versions of one digest always agree. It returns
	// whether anything changed.
	//
	// The signatures recorded for a digest go when no indexed version of the
	// package holds it any more, by Put or Delete.
	Put(ctx context.Context, e *Entry) (changed bool, err error)
	// Delete removes the entry of one tag; deleting an absent tag is not an
	// error. It returns whether anything changed.
	Delete(ctx context.Context, namespace, name, tag string) (changed bool, err error)
	// PutSignatures records c, replacing what the last check of the same
	// namespace, name and digest recorded, and sets Verified to c.Verified()
	// on every version of the package with that digest. A digest that no
	// indexed version of the package holds (deleted or re-pointed while it was
	// checked) records nothing. It returns whether the Verified of some version
	// changed. It records no change in the change feed.
	PutSignatures(ctx context.Context, c *SignatureCheck) (changed bool, err error)
	// PutImageMirrors records mirrors, each replacing the one recorded with
	// the same Source, in one transaction. It returns an error wrapping
	// ErrInvalid when CheckImageMirrors refuses them or when more than
	// MaxImageMirrors would be recorded.
	PutImageMirrors(ctx context.Context, mirrors []apiv1.ImageMirror) error
	// AppendSourceEvent appends ch, an event of a tracked source
	// (apiv1.ActionSource), to the change feed: its Namespace, Name,
	// Version, Digest, Status and Reason, numbered after every change
	// before it and timed now. It changes nothing else.
	AppendSourceEvent(ctx context.Context, ch apiv1.Change) error
	// Reindex records e, read again from the digest its tag records, in
	// place of the tag's entry, and appends a "put" change, when the tag
	// still records e.Digest as an indexed version; otherwise it changes
	// nothing. The version keeps its Verified; one that reads as invalid
	// now is recorded so, as Put records it. It returns whether it
	// recorded e.
	Reindex(ctx context.Context, e *Entry) (changed bool, err error)
}

// StoreReader answers the catalog's queries.
type StoreReader interface {
	// Search returns one page of packages that match q, ranked, with facets
	// over all matches.
	Search(ctx context.Context, q Query) (*SearchResult, error)
	// Entries returns every entry of a repository, of every status, in no
	// particular order. It returns ErrNotFound when there is none.
	Entries(ctx context.Context, namespace, name string) ([]*Entry, error)
	// Summaries returns every entry of a repository as Entries does, but
	// without Files, and with the Metadata of an indexed entry holding only
	// its Summary, which stores keep apart so that it reads fast.
	Summaries(ctx context.Context, namespace, name string) ([]*Entry, error)
	// Examples returns the Examples recorded for one tag and the
	// IndexVersion the tag was read with, or ErrNotFound.
	Examples(ctx context.Context, namespace, name, tag string) (examples map[string][]string, indexVersion int, err error)
	// Stale lists at most limit indexed versions recorded with an
	// IndexVersion below before, ordered by namespace, name and tag,
	// starting after after's.
	Stale(ctx context.Context, before int, after TagDigest, limit int) ([]TagDigest, error)
	// Entry returns the entry of one tag, or ErrNotFound.
	Entry(ctx context.Context, namespace, name, tag string) (*Entry, error)
	// Tags lists every tag the catalog holds and its digest, for the reconciler.
	Tags(ctx context.Context) ([]TagDigest, error)
	// Changes returns up to limit changes with seq > since, oldest first.
	Changes(ctx context.Context, since int64, limit int) ([]apiv1.Change, error)
	// Unindexed returns entries whose status is not indexed, ordered by
	// namespace, name and tag, starting after offset.
	Unindexed(ctx context.Context, access Access, limit, offset int) ([]apiv1.Artifact, error)
	// Walk calls fn for every indexed entry the access allows, ordered by
	// namespace and name, in no particular version order; Files are not
	// loaded. fn's error stops the walk and is returned.
	Walk(ctx context.Context, access Access, namespace string, fn func(*Entry) error) error
	// Stats counts what the catalog holds; Seq is the last change's
	// sequence number, and Reindex.Pending the indexed versions recorded
	// with an IndexVersion below the current one.
	Stats(ctx context.Context) (apiv1.Status, error)
	// Signatures returns the last signature check of a digest of a package,
	// or ErrNotFound when it was never checked or no indexed version holds it.
	Signatures(ctx context.Context, namespace, name, digest string) (*SignatureCheck, error)
	// SignatureChecks lists one SignatureCheck, without Signatures, per
	// digest that indexed versions hold, ordered by namespace, name and
	// digest: a digest never checked has a zero Checked and an empty Policy.
	// Each of namespace, name and digest left empty matches every value.
	SignatureChecks(ctx context.Context, namespace, name, digest string) ([]SignatureCheck, error)
	// SignatureCheckPage lists, as SignatureChecks does over every package,
	// at most limit checks whose (namespace, name, digest) comes after
	// after's; with stale set, only the digests never checked or last checked
	// under a policy other than stale. A pass over every digest pages
	// through it rather than holding them all.
	SignatureCheckPage(ctx context.Context, after SignatureCheck, limit int, stale string) ([]SignatureCheck, error)
	// SignedBy returns the digests of a package whose last check found a
	// signature or attestation in the manifest manifest, ordered.
	SignedBy(ctx context.Context, namespace, name, manifest string) ([]string, error)
	// ImageMirrors returns every image mirror recorded, ordered by Source.
	ImageMirrors(ctx context.Context) ([]apiv1.ImageMirror, error)
}
