// Package quota keeps what each namespace stores against its quota and the
// blob uploads each subject has open: one ledger, in SQLite for one node or
// in PostgreSQL shared by replicas, that the registry charges as pushes
// commit, refunds as deletes and garbage collections free storage, and that
// the API, the UI, the CLI and the metrics read (docs/configuration.md#quotas).
package quota

import "context"

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
