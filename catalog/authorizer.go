package catalog

import "context"

// Authorizer decides what a caller may see and change. The caller's identity
// rides in ctx. Every search result, listing and detail is filtered by
// Pullable, so a caller never learns of packages it may not pull.
type Authorizer interface {
	// Pullable returns the namespaces the caller may pull.
	Pullable(ctx context.Context) (Access, error)
	// MayDelete returns nil when the caller may delete packages in
	// namespace, else an error wrapping ErrDenied.
	MayDelete(ctx context.Context, namespace string) error
}

// AllowAll is the Authorizer of a registry without auth: everyone may pull
// and delete everything.
type AllowAll struct{}

var _ Authorizer = AllowAll{}

// Pullable allows every namespace.
func (AllowAll) Pullable(context.Context) (Access, error) { return Access{All: true}, nil }

// MayDelete allows every deletion.
func (AllowAll) MayDelete(context.Context, string) error { return nil }
