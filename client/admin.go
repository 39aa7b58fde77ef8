package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

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
