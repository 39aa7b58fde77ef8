package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/berth-registry/berth/catalog/apiv1"
)

// Usages returns what each namespace the caller may pull from stores
// against its quota, by name (GET /api/v1/usage). A server that keeps no
// usage (berth serve catalog answers 501) or has no such endpoint (an older
// berth, or a registry that is not berth: 404 or 405) gives an error that
// also wraps errors.ErrUnsupported.
func (c *Catalog) Usages(ctx context.Context) (*apiv1.Usages, error) {
	var res apiv1.Usages
	if err := c.get(ctx, "usage", "/usage", nil, &res); err != nil {
		return nil, unsupported(err, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented)
	}
	if res.Namespaces == nil {
		res.Namespaces = []apiv1.NamespaceUsage{}
	}
	return &res, nil
}

// Usage returns what namespace stores against its quota (GET
// /api/v1/namespaces/{namespace}/usage). A namespace that stores nothing
// and has no quota, or that the caller may pull nothing from, is an error
// wrapping ErrNotFound; a server that keeps no usage (501, 405) one that
// also wraps errors.ErrUnsupported; a malformed namespace one wrapping
// ErrInvalid, before any request.
func (c *Catalog) Usage(ctx context.Context, namespace string) (*apiv1.NamespaceUsage, error) {
	op := "usage of " + namespace
	if err := checkComponent("namespace", namespace); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", op, ErrInvalid, err)
	}
	var res apiv1.NamespaceUsage
	if err := c.get(ctx, op, "/namespaces/"+url.PathEscape(namespace)+"/usage", nil, &res); err != nil {
		return nil, unsupported(err, http.StatusMethodNotAllowed, http.StatusNotImplemented)
	}
	return &res, nil
}
