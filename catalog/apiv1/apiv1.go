// Package apiv1 holds the JSON documents of berth's catalog API under /api/v1
// (DESIGN.md, "HTTP API"). The server writes them and the client reads them;
// field names are part of the API and keep their meaning.
package apiv1

import (
	"math/big"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/berth-registry/berth/permissions"
	"github.com/berth-registry/berth/pkgformat"
)

// MediaTypeJSON is the content type of every document of the API.
const MediaTypeJSON = "application/json"

// Search orders: the values of the sort parameter of GET /api/v1/packages.
const (
	// SortRelevance ranks exact name matches first, then name prefixes, then
	// full-text relevance; by name when there is no query text. The default.
	SortRelevance = "relevance"
	// SortName orders by name, then namespace.
	SortName = "name"
	// SortUpdated puts the most recently indexed latest versions first.
	SortUpdated = "updated"
)

// Page sizes of list endpoints (the limit parameter).
const (
	DefaultLimit = 20
	MaxLimit     = 500
)

// SearchResponse is the answer of GET /api/v1/packages.
type SearchResponse struct {
	Packages []PackageSummary `json:"packages"`
	Facets   Facets           `json:"facets"`
	// Total is the number of packages that match, over all pages.
	Total int `json:"total"`
	// Next is the cursor of the next page, empty on the last one.
	Next string `json:"next"`
}

// PackageSummary describes a package by its latest version.
type PackageSummary struct {
	Namespace   string           `json:"namespace"`
	Name        string           `json:"name"`
	Version     string           `json:"version"`
	Format      pkgformat.Format `json:"format"`
	DisplayName string           `json:"displayName,omitempty"`
	Description string           `json:"description,omitempty"`
	AppVersion  string           `json:"appVersion,omitempty"`
	Keywords    []string         `json:"keywords,omitempty"`
	Channels    []string         `json:"channels,omitempty"`
	Digest      string           `json:"digest"`
	Created     *time.Time       `json:"created,omitempty"`
	// Updated is when the latest version was indexed.
	Updated  time.Time `json:"updated"`
	Verified bool      `json:"verified"`
}

// Facets count the matching packages by format and by namespace, and those
// whose latest version is verified.
type Facets struct {
	Format    map[string]int `json:"format"`
	Namespace map[string]int `json:"namespace"`
	Verified  int            `json:"verified"`
}

// Package is the answer of GET /api/v1/packages/{ns}/{name}.
type Package struct {
	Namespace      string                 `json:"namespace"`
	Name           string                 `json:"name"`
	Format         pkgformat.Format       `json:"format"`
	DisplayName    string                 `json:"displayName,omitempty"`
	Description    string                 `json:"description,omitempty"`
	LatestVersion  string                 `json:"latestVersion"`
	DefaultChannel string                 `json:"defaultChannel,omitempty"`
	Maintainers    []pkgformat.Maintainer `json:"maintainers,omitempty"`
	// Versions are the readable versions, newest first.
	Versions []VersionSummary `json:"versions"`
	Channels []Channel        `json:"channels"`
	Verified bool             `json:"verified"`
	// Unindexed are the tags of the repository that are not served as
	// package versions: not packages, or packages that could not be read.
	Unindexed []Artifact `json:"unindexed,omitempty"`
}

// VersionSummary is one version in a Package.
type VersionSummary struct {
	Version    string     `json:"version"`
	Digest     string     `json:"digest"`
	AppVersion string     `json:"appVersion,omitempty"`
	Created    *time.Time `json:"created,omitempty"`
	Indexed    time.Time  `json:"indexed"`
	Channels   []string   `json:"channels,omitempty"`
	Verified   bool       `json:"verified"`
}

// Channel is one channel of a package: its head and its versions, newest first.
type Channel struct {
	Name     string   `json:"name"`
	Head     string   `json:"head"`
	Versions []string `json:"versions"`
}

// Version is the answer of GET /api/v1/packages/{ns}/{name}/versions/{version}.
type Version struct {
	Namespace string           `json:"namespace"`
	Name      string           `json:"name"`
	Version   string           `json:"version"`
	Digest    string           `json:"digest"`
	Format    pkgformat.Format `json:"format"`
	// PullReference is host[:port]/namespace/name@digest, the registry's
	// address as clients reach it.
	PullReference string `json:"pullReference"`
	// Bundle is, for an OLM version, the registry+v1 bundle image berth
	// generated for it (docs/olm.md); absent for other formats.
	Bundle      *Bundle                `json:"bundle,omitempty"`
	Content     Content                `json:"content"`
	Metadata    pkgformat.Metadata     `json:"metadata"`
	Files       []pkgformat.FileInfo   `json:"files"`
	Permissions *pkgformat.Permissions `json:"permissions,omitempty"`
	Indexed     time.Time              `json:"indexed"`
	// Verified is true when a signature is verified by the trust policy.
	Verified bool `json:"verified"`
	// VerifiedReason says why the version is not verified ("no
	// signature", each signature's reason, or that the signatures were not
	// checked yet); empty when it is.
	VerifiedReason string `json:"verifiedReason,omitempty"`
	// Signatures and Attestations are what the last check found, each with
	// its verdict.
	Signatures   []Signature   `json:"signatures"`
	Attestations []Attestation `json:"attestations"`
}

// Bundle is an OLM version's bundle image: an OCI image that opm and OLM
// install as a registry+v1 bundle, stored by digest in the version's
// repository with the version's manifest as its subject.
type Bundle struct {
	Digest string `json:"digest"`
	// Reference is host[:port]/namespace/name@digest, as PullReference.
	Reference string `json:"reference"`
}

// Content is the package tarball: layers[0] of the artifact.
type Content struct {
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
	MediaType string `json:"mediaType"`
}

// Signature kinds: how a signature or attestation was found.
const (
	KindTag      = "tag"      // cosign's tag, sha256-<hex>.sig or .att
	KindReferrer = "referrer" // an OCI referrer of the version
)

// Signature is a signature of a version and whether the trust policy verified it.
type Signature struct {
	// Digest is the digest of the manifest that carries it.
	Digest string `json:"digest"`
	// Layer is the digest of its payload, one of the manifest's layers.
	Layer string `json:"layer,omitempty"`
	// KeyID is the fingerprint of the trusted key that verified it.
	KeyID    string `json:"keyId"`
	Verified bool   `json:"verified"`
	// Reason says why it is not verified.
	Reason string `json:"reason,omitempty"`
	// Kind is "tag" (cosign's sha256-<hex>.sig tag) or "referrer".
	Kind string `json:"kind"`
	// Checked is when the catalog last checked it.
	Checked time.Time `json:"checked"`
}

// Attestation is an attestation of a version (an in-toto statement in a DSSE
// envelope, as cosign attest writes it) and whether the trust policy
// verified its signature.
type Attestation struct {
	// Digest is the digest of the manifest that carries it.
	Digest string `json:"digest"`
	// Layer is the digest of the envelope, one of the manifest's layers.
	Layer string `json:"layer,omitempty"`
	// PredicateType is the statement's predicate type, e.g.
	// https://slsa.dev/provenance/v0.2; "unknown" when it cannot be read.
	PredicateType string `json:"predicateType"`
	KeyID         string `json:"keyId"`
	Verified      bool   `json:"verified"`
	Reason        string `json:"reason,omitempty"`
	// Kind is "tag" (cosign's sha256-<hex>.att tag) or "referrer".
	Kind    string    `json:"kind"`
	Checked time.Time `json:"checked"`
	// Sources are the source URLs a verified SLSA provenance attestation
	// names (without "git+" and "@ref"), which a trust policy's
	// requireSource checks.
	Sources []string `json:"sources,omitempty"`
}

// Graph is the answer of GET /api/v1/packages/{ns}/{name}/channels/{channel}/graph.
type Graph struct {
	Namespace string      `json:"namespace"`
	Name      string      `json:"name"`
	Channel   string      `json:"channel"`
	Head      string      `json:"head"`
	Nodes     []GraphNode `json:"nodes"`
	Edges     []GraphEdge `json:"edges"`
}

// GraphNode is a version in a channel.
type GraphNode struct {
	Version string `json:"version"`
	Digest  string `json:"digest"`
	// Rating is the worst-case rating of the permissions the version asks
	// for: none, low, medium, high or critical (permissions.Rating).
	Rating permissions.Rating `json:"rating"`
}

// Edge kinds: how an upgrade edge was derived.
const (
	EdgeReplaces  = "replaces"
	EdgeSkips     = "skips"
	EdgeSkipRange = "skipRange"
	EdgeSemver    = "semver"
)

// GraphEdge says that From can be upgraded to To directly.
type GraphEdge struct {
	From string `json:"from"`
	To   string `json:"to"`
	Kind string `json:"kind"`
	// WidensPermissions is true when To asks for permissions that From
	// does not have (permissions.Comparer): the upgrade grants more.
	WidensPermissions bool `json:"widensPermissions,omitempty"`
}

// Permissions is the answer of GET
// /api/v1/packages/{ns}/{name}/versions/{version}/permissions: the review of
// the RBAC the version asks for and, with ?from=, what upgrading to it from
// another version changes.
type Permissions struct {
	Namespace string              `json:"namespace"`
	Name      string              `json:"name"`
	Version   string              `json:"version"`
	Review    *permissions.Review `json:"review"`
	// From is the version compared with; empty without ?from=.
	From   string              `json:"from,omitempty"`
	Change *permissions.Change `json:"change,omitempty"`
}

// Upgrades is the answer of GET /api/v1/packages/{ns}/{name}/upgrades.
type Upgrades struct {
	From    string `json:"from"`
	Channel string `json:"channel"`
	Head    string `json:"head"`
	// Next are the versions From upgrades to directly, newest first.
	Next []string `json:"next"`
	// Path is the shortest upgrade path from From to Head, From excluded and
	// Head included; empty when From is the head.
	Path []string `json:"path"`
}

// VersionImages is the answer of GET
// /api/v1/packages/{ns}/{name}/versions/{version}/images: the container
// images the version runs, and where each lives at this site.
type VersionImages struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Version   string `json:"version"`
	// Images are ordered by reference.
	Images []VersionImage `json:"images"`
	// Incomplete is the version's pkgformat.Metadata.ImagesIncomplete.
	Incomplete string `json:"incomplete,omitempty"`
}

// VersionImage is one image of a version.
type VersionImage struct {
	// Reference is the reference the content names, normalised.
	Reference string `json:"reference"`
	// Repository is Reference without its tag or digest (quay.io/org/img).
	Repository string `json:"repository,omitempty"`
	Tag        string `json:"tag,omitempty"`
	Digest     string `json:"digest,omitempty"`
	// Mutable is true when Reference names a tag rather than a digest.
	Mutable bool     `json:"mutable,omitempty"`
	Found   []string `json:"found"`
	// Problem says why Reference is not a valid image reference.
	Problem string `json:"problem,omitempty"`
	// Mirror is where the image lives at this site when an ImageMirror
	// covers its repository: the mirror repository with Reference's tag or
	// digest.
	Mirror string `json:"mirror,omitempty"`
}

// ImageMirrors is the body of PUT and the answer of GET
// /api/v1/image-mirrors: where the images of source repositories live at
// this site, as berth mirror import records it.
type ImageMirrors struct {
	Mirrors []ImageMirror `json:"mirrors"`
}

// ImageMirror maps a source repository, or every repository under a
// prefix, to where its images live at this site.
type ImageMirror struct {
	// Source is a repository or a prefix of repositories (quay.io/org or
	// quay.io/org/img), compared by whole path components.
	Source string `json:"source"`
	// Mirror is host[:port]/path, which replaces Source in a reference.
	Mirror string `json:"mirror"`
}

// Installable is the answer of GET
// /api/v1/packages/{ns}/{name}/versions/{version}/installable, and what
// berth mirror check reports per version: whether everything the version
// needs to install is at this site and its signatures verify.
type Installable struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Version   string `json:"version"`
	// Installable is true when nothing below is missing or refused.
	Installable bool `json:"installable"`
	// Verified and VerifiedReason are the version's own verdict, as in Version.
	Verified       bool   `json:"verified"`
	VerifiedReason string `json:"verifiedReason,omitempty"`
	// Images are the version's images, each checked at its mirror.
	Images []ImageCheck `json:"images"`
	// Problems name, one per line, what stops the version installing.
	Problems []string `json:"problems,omitempty"`
}

// ImageCheck is one image of an Installable.
type ImageCheck struct {
	Reference string `json:"reference"`
	// Mirror is where it was looked for.
	Mirror string `json:"mirror,omitempty"`
	// Present is true when the image, and for an index every platform the
	// mirror carried, is there by digest.
	Present bool `json:"present"`
	// Signed is true when a signature was found; Verified when a trust
	// policy rule covers the image's source repository and verified it.
	Signed   bool `json:"signed,omitempty"`
	Verified bool `json:"verified,omitempty"`
	// Reason says what is missing or refused; empty when nothing is.
	Reason string `json:"reason,omitempty"`
}

// Approval records that a version may be tagged although its permissions
// go beyond those admitted for its package name, in a namespace whose
// policy refuses that (docs/permissions.md). It approves exactly the permissions reviewed: a
// version pushed again with other rules needs another approval. It is the
// body and the answer of POST
// /api/v1/packages/{ns}/{name}/versions/{version}/approval.
type Approval struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Version   string `json:"version"`
	// Permissions is the fingerprint of the rules approved
	// (permissions.Fingerprint), as the refusal names it.
	Permissions string `json:"permissions"`
	// By is who approved, At when.
	By string    `json:"by"`
	At time.Time `json:"at"`
}

// Deleted is the answer of DELETE /api/v1/packages/{ns}/{name}.
type Deleted struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Deleted are the versions deleted, newest first.
	Deleted []string `json:"deleted"`
}

// Accepted is the answer of POST /events.
type Accepted struct {
	// Accepted counts the events passed to the catalog.
	Accepted int `json:"accepted"`
}

// Change actions.
const (
	ActionPut    = "put"
	ActionDelete = "delete"
	// ActionSource is an event of a tracked source (Namespace/Name is its
	// package): Status is SourcePublished (Version, Digest) or
	// SourceFailed (Reason).
	ActionSource = "source"
)

// Changes is the answer of GET /api/v1/changes.
type Changes struct {
	Changes []Change `json:"changes"`
	// Next is the sequence number to ask for next (since=Next).
	Next int64 `json:"next"`
}

// Change is one change to the catalog: a version indexed (put) or removed (delete).
type Change struct {
	Seq       int64     `json:"seq"`
	Action    string    `json:"action"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Version   string    `json:"version"`
	Digest    string    `json:"digest"`
	Status    string    `json:"status"`
	Time      time.Time `json:"time"`
	// Reason says why a source failed (ActionSource).
	Reason string `json:"reason,omitempty"`
}

// Artifact statuses: what the catalog made of a tag.
const (
	StatusIndexed = "indexed" // a readable package version, served by the API
	StatusInvalid = "invalid" // a package that could not be read; Reason says why
	StatusIgnored = "ignored" // not a package (a container image, a signature, ...)
)

// Artifact is a tag the catalog holds but does not serve as a package version.
type Artifact struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Tag       string    `json:"tag"`
	Digest    string    `json:"digest"`
	Status    string    `json:"status"`
	Reason    string    `json:"reason"`
	Indexed   time.Time `json:"indexed"`
}

// Artifacts is the answer of GET /api/v1/artifacts.
type Artifacts struct {
	Artifacts []Artifact `json:"artifacts"`
	Next      string     `json:"next"`
}

// Status is the answer of GET /api/v1/status.
type Status struct {
	Packages  int             `json:"packages"`
	Versions  int             `json:"versions"`
	Unindexed int             `json:"unindexed"`
	Seq       int64           `json:"seq"`
	Reconcile ReconcileStatus `json:"reconcile"`
	Reindex   ReindexStatus   `json:"reindex"`
}

// ReindexStatus reports the background re-index that reads again the
// versions an older berth indexed (docs/catalog-store.md, "Re-index").
type ReindexStatus struct {
	// IndexVersion is what this berth's indexing derives.
	IndexVersion int `json:"indexVersion"`
	// Pending counts the indexed versions recorded with an older one.
	Pending int `json:"pending"`
	// Done counts the versions this process read again since it started.
	Done int64 `json:"done"`
}

// ReconcileStatus reports the last complete reconciliation with the registry.
type ReconcileStatus struct {
	Runs     int64      `json:"runs"`
	Started  *time.Time `json:"started,omitempty"`
	Finished *time.Time `json:"finished,omitempty"`
	Indexed  int        `json:"indexed"`
	Removed  int        `json:"removed"`
	Failed   int        `json:"failed"`
	Error    string     `json:"error,omitempty"`
}

// Errors is the body of every error response, as in the distribution API.
type Errors struct {
	Errors []Error `json:"errors"`
}

// Error is one error: a code from the table in the API document, a message
// for people, and optional detail.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Detail  any    `json:"detail,omitempty"`
}

// InventoryMediaType is the media type of an Inventory document.
const InventoryMediaType = "application/vnd.berth.mirror.inventory.v1+json"

// Inventory is the answer of GET /api/v1/inventory, and the file berth
// mirror inventory writes: what a registry holds, for each repository the
// digests of the manifests and blobs it has. Under auth it covers only the
// repositories the caller may pull.
type Inventory struct {
	MediaType string `json:"mediaType"`
	// Registry is the registry inventoried, host[:port]; empty in the API's
	// answer, which does not know the name clients reach it by.
	Registry string `json:"registry,omitempty"`
	// Taken is when the inventory was taken.
	Taken time.Time `json:"taken"`
	// Repositories maps namespace/name to the digests it holds, ordered.
	Repositories map[string][]digest.Digest `json:"repositories"`
}

// NamespaceUsage is what one namespace stores against its quota: an entry
// of GET /api/v1/usage and the answer of GET
// /api/v1/namespaces/{namespace}/usage.
type NamespaceUsage struct {
	Namespace string `json:"namespace"`
	// UsedBytes is the size of the distinct blobs and manifests the
	// namespace references, each counted once.
	UsedBytes int64 `json:"usedBytes"`
	// LimitBytes is the namespace's quota; 0 means none.
	LimitBytes int64 `json:"limitBytes"`
	// Blobs is how many distinct blobs and manifests UsedBytes counts.
	Blobs int64 `json:"blobs"`
	// OpenUploads is how many uploads into the namespace are open.
	OpenUploads int64 `json:"openUploads"`
}

// Usages is the answer of GET /api/v1/usage: the namespaces the caller may
// pull from that store something or have a quota, by name.
type Usages struct {
	Namespaces []NamespaceUsage `json:"namespaces"`
}

// UsedPercent is UsedBytes as a percentage of LimitBytes to one decimal,
// rounded down so that only a full namespace shows 100.0%: "99.9%". It is
// empty when the namespace has no quota. It counts in big integers, since
// UsedBytes×1000 overflows an int64 past 8 PiB.
func (u NamespaceUsage) UsedPercent() string {
	if u.LimitBytes <= 0 {
		return ""
	}
	tenths := new(big.Int).Mul(big.NewInt(max(u.UsedBytes, 0)), big.NewInt(1000))
	s := tenths.Quo(tenths, big.NewInt(u.LimitBytes)).String()
	if len(s) < 2 {
		s = "0" + s
	}
	return s[:len(s)-1] + "." + s[len(s)-1:] + "%"
}

// Sources is the answer of GET /api/v1/sources: the tracked sources the
// caller may see, ordered by namespace and package.
type Sources struct {
	Sources []Source `json:"sources"`
}

// Source is the status of one tracked source (docs/sources.md#status).
type Source struct {
	Namespace string `json:"namespace"`
	Package   string `json:"package"`
	Kind      string `json:"kind"`
	// URL is the source's, without credentials.
	URL      string `json:"url"`
	Ref      string `json:"ref,omitempty"`
	Dir      string `json:"dir,omitempty"`
	Interval string `json:"interval"`
	// LastCheck is when the source was last checked; NextCheck when it
	// will be, unless a webhook or berth sources check asks sooner.
	LastCheck *time.Time `json:"lastCheck,omitempty"`
	NextCheck *time.Time `json:"nextCheck,omitempty"`
	// Revision is what the last check resolved (commit, ETag, digest);
	// for a tag pattern, Refs holds one per matching tag.
	Revision string      `json:"revision,omitempty"`
	Refs     []SourceRef `json:"refs,omitempty"`
	// LastPublished is the last version built from the source.
	LastPublished *SourceVersion `json:"lastPublished,omitempty"`
	// LastError is the failure of the last check or build, nil when it
	// succeeded.
	LastError *SourceError `json:"lastError,omitempty"`
}

// SourceRef is one tag of a tag-pattern source: what it resolved to and
// the version built from it, or why none was.
type SourceRef struct {
	Ref      string `json:"ref"`
	Revision string `json:"revision"`
	Version  string `json:"version,omitempty"`
	Digest   string `json:"digest,omitempty"`
	Error    string `json:"error,omitempty"`
}

// SourceVersion is a version built from a source.
type SourceVersion struct {
	Version  string    `json:"version"`
	Digest   string    `json:"digest"`
	Ref      string    `json:"ref,omitempty"`
	Revision string    `json:"revision"`
	Time     time.Time `json:"time"`
}

// SourceError is why a source's last check or build failed.
type SourceError struct {
	Time time.Time `json:"time"`
	// Reason is one of the SourceReason values.
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// SourceCheck is the answer of POST
// /api/v1/namespaces/{namespace}/sources/{package}/check: a check of the
// source was asked, and runs on the leader; GET /api/v1/sources shows its
// outcome.
type SourceCheck struct {
	Namespace string `json:"namespace"`
	Package   string `json:"package"`
}

// Why a source failed (SourceError.Reason, and Change.Reason of a failed
// ActionSource event).
const (
	SourceReasonFetch   = "fetch"   // the source could not be reached or read
	SourceReasonLimit   = "limit"   // a bound of sources (bytes, files, time) refused it
	SourceReasonDenied  = "denied"  // a host or address it reached is not allowed
	SourceReasonInvalid = "invalid" // its content is not a package berth can build
	SourceReasonRefused = "refused" // the registry refused the version: trust policy, immutability, quota
)

// The statuses of an ActionSource change.
const (
	SourcePublished = "published"
	SourceFailed    = "failed"
)
