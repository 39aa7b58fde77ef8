package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/maintenance"
)

// CollectGarbage runs retention and garbage collection on the server now
// (POST /api/v1/admin/gc) and returns what the run did, once it has ended.
// dryRun nil leaves the choice to the server's gc.dryRun; true deletes
// nothing. It needs admin on everything: a caller who may not gets an
// error wrapping ErrDenied (ErrUnauthorized without credentials), and a
// run already in progress on the server one wrapping ErrConflict.
func (c *Catalog) CollectGarbage(ctx context.Context, dryRun *bool) (*maintenance.Report, error) {
	const op = "gc"
	var q url.Values
	if dryRun != nil {
		q = url.Values{"dryRun": {strconv.FormatBool(*dryRun)}}
	}
	var rep maintenance.Report
	if err := c.do(ctx, op, http.MethodPost, "/admin/gc", q, nil, http.StatusOK, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// Delete deletes the package version ref names (by version or digest) from
// its registry, as oras manifest delete does: the version's manifest and
// every tag of it go; its blobs stay until garbage collection finds nothing
// references them. It returns the deleted manifest's descriptor. Errors
// wrap ErrInvalidReference (neither version nor digest), ErrNotFound (no
// such version), ErrUnauthorized, ErrDenied (no delete permission) or
// ErrRegistry, with the registry's message.
func (c *Client) Delete(ctx context.Context, ref Reference) (ocispec.Descriptor, error) {
	desc, err := c.resolve(ctx, "delete", ref)
	switch {
	case errors.Is(err, ErrDenied):
		return ocispec.Descriptor{}, deniedDelete(ref, err)
	case errors.Is(err, ErrNotFound) && ref.Digest != "":
		return ocispec.Descriptor{}, fmt.Errorf("%w: %s has no manifest %s", err, ref.Repository(), ref.Digest)
	case errors.Is(err, ErrNotFound):
		return ocispec.Descriptor{}, fmt.Errorf("%w: %s has no version %s", err, ref.Repository(), ref.Tag)
	case err != nil:
		return ocispec.Descriptor{}, err
	}
	if err := c.repository(ref).Delete(ctx, desc); err != nil {
		err = wrapError("delete", ref, "", err)
		if errors.Is(err, ErrDenied) {
			err = deniedDelete(ref, err)
		}
		return ocispec.Descriptor{}, err
	}
	return desc, nil
}

// deniedDelete says what a refused delete of ref needs.
func deniedDelete(ref Reference, err error) error {
	return fmt.Errorf("%w (deleting needs pull and delete on %s: berth login %s as someone who has them)", err, ref.Repository(), ref.Registry)
}
