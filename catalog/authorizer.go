package catalog

import "context"

// Authorizer decides what a caller may see and change. The caller's identity
// rides in ctx. Every search result, listing and detail is filtered by
// Pullable, so a caller never learns of packages it may not pull.
type Authorizer interface {
	// Pullable returns what the caller may pull.
	Pullable(ctx context.Context) (Access, error)
	// MayDelete returns nil when the caller may delete the package
	// namespace/name. Otherwise it returns an error wrapping ErrNotFound
	// when the caller may not pull the package either, so that it learns
	// nothing of it, and one wrapping ErrDenied when it may.
	MayDelete(ctx context.Context, namespace, name string) error
	// MayPush returns nil when the caller may push to the package
	// namespace/name (and so ask for a check of the source that publishes
	// it). Its errors are MayDelete's.
	MayPush(ctx context.Context, namespace, name string) error
	// MayApprove returns the caller's name when it may approve versions of
	// namespace/name (docs/permissions.md): when it administers the
	// package. Its errors are MayDelete's.
	MayApprove(ctx context.Context, namespace, name string) (by string, err error)
}

// AllowAll is the Authorizer of a registry without auth: everyone may pull
// and delete everything.
type AllowAll struct{}

var _ Authorizer = AllowAll{}

// Pullable allows every package.
func (AllowAll) Pullable(context.Context) (Access, error) { return Access{All: true}, nil }

// MayDelete allows every deletion.
func (AllowAll) MayDelete(context.Context, string, string) error { return nil }

// MayPush allows every push.
func (AllowAll) MayPush(context.Context, string, string) error { return nil }

// MayApprove allows every approval, by an anonymous caller.
func (AllowAll) MayApprove(context.Context, string, string) (string, error) { return "anonymous", nil }
