package client

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/berth-registry/berth/catalog/apiv1"
)

// maxPublicKey caps the answer of GET /api/v1/sources/key.
const maxPublicKey = 64 << 10

// Sources returns the status of the tracked package sources the caller may
// pull, of namespace alone when it is not empty (GET /api/v1/sources). A
// server without the endpoint (an older berth: 404, 405) gives an error
// that also wraps errors.ErrUnsupported; a malformed namespace one wrapping
// ErrInvalid, before any request.
func (c *Catalog) Sources(ctx context.Context, namespace string) (*apiv1.Sources, error) {
	op := "sources"
	var query url.Values
	if namespace != "" {
		op = "sources of " + namespace
		if err := checkComponent("namespace", namespace); err != nil {
			return nil, fmt.Errorf("%s: %w: %v", op, ErrInvalid, err)
		}
		query = url.Values{"namespace": {namespace}}
	}
	var res apiv1.Sources
	if err := c.get(ctx, op, "/sources", query, &res); err != nil {
		return nil, unsupported(err, http.StatusNotFound, http.StatusMethodNotAllowed)
	}
	if res.Sources == nil {
		res.Sources = []apiv1.Source{}
	}
	return &res, nil
}

// CheckSource asks the server to check the source that publishes
// namespace/name now (POST /api/v1/namespaces/{namespace}/sources/{name}/check).
// An unknown source, one the caller may not see, or a server that tracks no
// sources gives an error wrapping ErrNotFound; a caller who may not push to
// the package one wrapping ErrDenied.
func (c *Catalog) CheckSource(ctx context.Context, namespace, name string) (*apiv1.SourceCheck, error) {
	op := "check the source of " + namespace + "/" + name
	if err := checkNames(op, namespace, name); err != nil {
		return nil, err
	}
	var res apiv1.SourceCheck
	path := "/namespaces/" + url.PathEscape(namespace) + "/sources/" + url.PathEscape(name) + "/check"
	if err := c.do(ctx, op, http.MethodPost, path, nil, nil, http.StatusAccepted, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// SourcesKey returns the PEM public key of the key the server signs the
// versions it builds from sources, and their provenance, with (GET
// /api/v1/sources/key). A server that tracks no sources gives an error
// wrapping ErrNotFound; an answer that is not a PEM block one wrapping
// ErrRegistry.
func (c *Catalog) SourcesKey(ctx context.Context) ([]byte, error) {
	const op = "provenance key"
	endpoint := c.base + "/sources/key"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	req.Header.Set("Accept", "application/x-pem-file")
	if err := c.authorize(req); err != nil {
		return nil, c.transportError(op, err)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, c.transportError(op, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, c.responseError(op, endpoint, resp)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxPublicKey+1))
	if err != nil {
		return nil, fmt.Errorf("%s: read the answer of %s: %w", op, endpoint, err)
	}
	if block, _ := pem.Decode(data); len(data) > maxPublicKey || block == nil {
		return nil, &opError{msg: fmt.Sprintf("%s: %s: %s answered with %s, not a PEM public key", op, ErrRegistry, endpoint, bodyKind(resp)), kind: ErrRegistry}
	}
	return data, nil
}
