// Package quota keeps what each namespace stores against its quota and the
// blob uploads each subject has open: one ledger, in SQLite for one node or
// in PostgreSQL shared by replicas, that the registry charges as pushes
// commit, refunds as deletes and garbage collections free storage, and that
// the API, the UI, the CLI and the metrics read (docs/configuration.md#quotas).
package quota

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Usage is what one namespace stores against its quota.
type Usage struct {
	// Namespace is the namespace's name.
	Namespace string
	// UsedBytes is the size of the distinct blobs and manifests the
	// namespace's repositories reference, each counted once however many
	// of them hold it.
	UsedBytes int64
	// LimitBytes is the namespace's quota; 0 means none.
	LimitBytes int64
	// Blobs is how many distinct blobs and manifests UsedBytes counts.
	Blobs int64
	// OpenUploads is how many uploads into the namespace are open.
	OpenUploads int64
}

// Reader reads the ledger.
type Reader interface {
	// Usage is namespace's usage; a namespace that stores nothing has a
	// zero Usage with its limit.
	Usage(ctx context.Context, namespace string) (Usage, error)
	// Usages lists, by name, every namespace that stores something or has
	// a quota.
	Usages(ctx context.Context) ([]Usage, error)
}

// Ledger is the whole ledger, as the registry keeps it: charges of what
// namespaces store, and the uploads subjects have open. Digests are
// strings ("sha256:…"); times are the caller's clock.
type Ledger interface {
	Reader
	// Charge records that p.Namespace stores p.Item and reports whether
	// it charged it now. An item the namespace is already charged for
	// changes nothing but the time of its charge; otherwise, when p.Limit
	// is above 0 and the namespace's usage plus the item's size would
	// exceed it, it charges nothing and returns an *OverQuotaError. In
	// the same transaction it closes p.Upload and charges or refreshes
	// p.Refs. Charges of one namespace are serialised, across replicas
	// too, so that racing pushes never go past the limit.
	Charge(ctx context.Context, p Push) (charged bool, err error)
	// Check returns the *OverQuotaError Charge would return, charging
	// nothing; digest may be "" when it is not known yet.
	Check(ctx context.Context, namespace, digest string, size, limit int64) error
	// Uncharge removes a charge Charge made, when what it charged was not
	// stored after all.
	Uncharge(ctx context.Context, namespace, digest string) error
	// Recompute replaces the charges of namespace by live, the digests its
	// repositories reference with their sizes, keeping the charges made
	// since keepSince (pushes in flight), and clears the namespace's
	// dirty mark if it was set before start.
	Recompute(ctx context.Context, namespace string, live map[string]int64, keepSince, start time.Time) error
	// MarkDirty marks namespaces as needing a recompute (Dirty).
	MarkDirty(ctx context.Context, namespaces ...string) error
	// MarkAllDirty marks every namespace the ledger charges as dirty.
	MarkAllDirty(ctx context.Context) error
	// Dirty lists the namespaces marked dirty.
	Dirty(ctx context.Context) ([]string, error)
	// OpenUpload records an upload that u.Subject opens, unless the
	// subject already has max uploads written to since idleSince
	// (max < 0: no limit): then it returns a *TooManyUploadsError.
	// The uploads of one subject are counted one at a time, across
	// replicas too.
	OpenUpload(ctx context.Context, u Upload, max int, idleSince time.Time) error
	// TouchUpload records that upload uuid holds bytes, written at at.
	TouchUpload(ctx context.Context, uuid string, bytes int64, at time.Time) error
	// Upload returns the open upload uuid, and false when there is none.
	Upload(ctx context.Context, uuid string) (Upload, bool, error)
	// CloseUpload forgets upload uuid, committed, cancelled or purged.
	CloseUpload(ctx context.Context, uuid string) error
	// Abandoned lists the open uploads last written to before before.
	Abandoned(ctx context.Context, before time.Time) ([]Upload, error)
	// Close closes the ledger's database connections.
	Close() error
}

// Item is a blob or manifest a namespace stores: its digest and size.
type Item struct {
	Digest string
	Size   int64
}

// Push is what a blob's commit, a cross-repository mount or a manifest
// push stores in a namespace, as Ledger.Charge charges it.
type Push struct {
	Namespace string
	// Item is what is charged, against Limit (0: none).
	Item
	Limit int64
	// Upload, when set, is the upload that stored Item, which the charge
	// closes.
	Upload string
	// Refs are what a manifest references: each is charged, beyond any
	// limit, if the namespace is not charged for it (a recompute that
	// read the storage before the manifest came dropped it), and the time
	// of its charge is refreshed, so that such a recompute keeps it.
	Refs []Item
}

// Upload is an open blob upload.
type Upload struct {
	UUID       string
	Repository string
	// Subject is who opened it: an authenticated identity's name, or
	// without auth the client's address.
	Subject   string
	Started   time.Time
	LastWrite time.Time
	// Bytes is what it held at its last write.
	Bytes int64
}

// Namespace is the namespace of repository: its first path segment.
func Namespace(repository string) string {
	ns, _, _ := strings.Cut(repository, "/")
	return ns
}

// OverQuotaError refuses what would take a namespace beyond its quota.
type OverQuotaError struct {
	Namespace           string
	Used, Limit, Needed int64
}

func (e *OverQuotaError) Error() string {
	return fmt.Sprintf("namespace %s is over its quota: %s used of %s, this upload needs %s more (delete what the namespace no longer needs, or raise namespaces[].quota)",
		e.Namespace, FormatBytes(e.Used), FormatBytes(e.Limit), FormatBytes(e.Needed))
}

// TooManyUploadsError refuses an upload to a subject that has too many open.
type TooManyUploadsError struct {
	Subject     string
	Open, Limit int
}

func (e *TooManyUploadsError) Error() string {
	return fmt.Sprintf("%s has %d uploads open, the most registry.uploads.maxConcurrentPerSubject allows is %d: finish or cancel one, or wait until one has been idle for registry.uploads.idleTimeout",
		e.Subject, e.Open, e.Limit)
}

// FormatBytes writes n in the largest binary unit it reaches, with one
// decimal when it has one: 512, 1.5KiB, 9.9GiB.
func FormatBytes(n int64) string {
	if n < 1024 && n > -1024 {
		return strconv.FormatInt(n, 10) + "B"
	}
	f, unit := float64(n), ""
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"} {
		f, unit = f/1024, u
		if f < 1024 && f > -1024 {
			break
		}
	}
	return strings.TrimSuffix(strconv.FormatFloat(f, 'f', 1, 64), ".0") + unit
}
