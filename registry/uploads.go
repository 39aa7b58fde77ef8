package registry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/distribution/distribution/v3/registry/api/errcode"

	"github.com/berth-registry/berth/internal/forwarded"
	"github.com/berth-registry/berth/quota"
)

// An upload request whose size is known (Content-Length, with the offset
// its Content-Range or the ledger tells) is refused before distribution
// stores a byte of it when it would take the upload beyond
// registry.uploads.maxSize or its namespace beyond its quota. One whose
// size is not known (a streaming body) is cut when it passes either. The
// upload a refused request wrote to is cancelled: nothing of it stays.

// uploadRefusal is where the guard leaves, for the request being served,
// the refusal that distribution's handlers would turn into an UNKNOWN
// error (they keep only the codes of a commit's and a manifest's errors),
// and the upload the request opened.
type uploadRefusal struct {
	mu     sync.Mutex
	err    error
	upload string
}

type uploadRefusalKey struct{}

// refuseUpload leaves err for the response to ctx's request, if it is one
// the registry serves; it returns err.
func refuseUpload(ctx context.Context, err error) error {
	if r, ok := ctx.Value(uploadRefusalKey{}).(*uploadRefusal); ok {
		r.mu.Lock()
		if r.err == nil {
			r.err = err
		}
		r.mu.Unlock()
	}
	return err
}

// openedUpload records the upload ctx's request opened.
func openedUpload(ctx context.Context, uuid string) {
	if r, ok := ctx.Value(uploadRefusalKey{}).(*uploadRefusal); ok {
		r.mu.Lock()
		r.upload = uuid
		r.mu.Unlock()
	}
}

func (r *uploadRefusal) get() (error, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err, r.upload
}

// withClientSubject returns req naming its subject, for its quota and its
// uploads: the authenticated identity auth named (WithUploadSubject), else
// the client's address. Writes without one are berth's own.
func withClientSubject(req *http.Request) *http.Request {
	if s, _ := uploadSubject(req.Context()); s != "" {
		return req
	}
	return req.WithContext(WithUploadSubject(req.Context(), forwarded.Of(req).Client))
}

// serveUpload serves a request that opens or writes to an upload (POST,
// PATCH and PUT under /blobs/uploads/) under the quotas.
func (r *Registry) serveUpload(w http.ResponseWriter, req *http.Request, route Route, next http.HandlerFunc) {
	q := r.guard.quota
	ctx := req.Context()
	refusal := &uploadRefusal{}
	ctx = context.WithValue(ctx, uploadRefusalKey{}, refusal)
	req = req.WithContext(ctx)
	uuid := ""
	if route.Kind == RouteUpload {
		uuid = route.Reference
	}
	// A refused upload is cancelled; one the ledger could not be asked
	// about (UNAVAILABLE) stays, for the client to try again.
	cancel := func(uuid string, err error) {
		var coded errcode.Error
		if uuid == "" || errors.As(err, &coded) && coded.Code == errcode.ErrorCodeUnavailable {
			return
		}
		if err := q.cancelUpload(ctx, route.Repository, uuid); err != nil {
			r.log.ErrorContext(ctx, "registry: cancel a refused upload", "repo", route.Repository, "upload", uuid, "err", err)
		}
	}
	offset, err := r.uploadOffset(ctx, req, uuid)
	if err == nil && req.ContentLength > 0 {
		err = q.admitSize(ctx, route.Repository, req.URL.Query().Get("digest"), offset+req.ContentLength)
	}
	if err != nil {
		cancel(uuid, err)
		w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
		_ = errcode.ServeJSON(w, err)
		return
	}
	if req.ContentLength < 0 && req.Body != nil {
		req.Body = r.cutter(ctx, req.Body, route.Repository, offset)
	}
	next(&refusingWriter{ResponseWriter: w, refusal: refusal}, req)
	if err, opened := refusal.get(); err != nil {
		if uuid == "" {
			uuid = opened
		}
		cancel(uuid, err)
	}
}

// uploadOffset is where the request's bytes start in upload uuid: its
// Content-Range's start, else what the upload held at its last write
// (0 for a new upload).
func (r *Registry) uploadOffset(ctx context.Context, req *http.Request, uuid string) (int64, error) {
	if uuid == "" {
		return 0, nil
	}
	if start, _, ok := strings.Cut(req.Header.Get("Content-Range"), "-"); ok {
		if n, err := strconv.ParseInt(start, 10, 64); err == nil && n >= 0 {
			return n, nil
		}
	}
	u, _, err := r.guard.quota.Ledger.Upload(ctx, uuid)
	if err != nil {
		return 0, errcode.ErrorCodeUnavailable.WithMessage("the quota ledger cannot be read: " + err.Error())
	}
	return u.Bytes, nil
}

// cutter returns body cut where the upload into repo, already holding
// offset bytes, passes registry.uploads.maxSize or its namespace's
// remaining quota, whichever comes first.
func (r *Registry) cutter(ctx context.Context, body io.ReadCloser, repo string, offset int64) io.ReadCloser {
	q := r.guard.quota
	c := &cutReader{ReadCloser: body, ctx: ctx, read: offset, max: -1}
	if q.MaxUploadSize > 0 {
		c.max = q.MaxUploadSize
		c.refuse = func(n int64) error { return q.refusal(quota.Namespace(repo), errTooLarge(n, q.MaxUploadSize)) }
	}
	ns := quota.Namespace(repo)
	if limit := q.limit(ctx, ns); limit > 0 {
		u, err := q.Ledger.Usage(ctx, ns)
		if err == nil && (c.max < 0 || limit-u.UsedBytes < c.max) {
			c.max = max(limit-u.UsedBytes, 0)
			c.refuse = func(n int64) error {
				return q.refusal(ns, &quota.OverQuotaError{Namespace: ns, Used: u.UsedBytes, Limit: limit, Needed: n})
			}
		}
	}
	if c.max < 0 {
		return body
	}
	return c
}

// errCut is what a cut body's reader returns.
var errCut = errors.New("upload cut: beyond its limit")

// cutReader reads a body until the upload it writes holds more than max
// bytes, then fails, leaving the refusal for the response.
type cutReader struct {
	io.ReadCloser
	ctx    context.Context
	read   int64
	max    int64
	refuse func(size int64) error
}

func (c *cutReader) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.read += int64(n)
	if c.read > c.max {
		refuseUpload(c.ctx, c.refuse(c.read))
		return 0, errCut
	}
	return n, err
}

// refusingWriter answers with the refusal the guard left, if any, instead
// of distribution's response.
type refusingWriter struct {
	http.ResponseWriter
	refusal *uploadRefusal
	// wrote is set once a status went out, replaced when it was the
	// refusal's.
	wrote, replaced bool
}

func (w *refusingWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.wrote = true
	if err, _ := w.refusal.get(); err != nil {
		w.replaced = true
		h := w.Header()
		for _, k := range []string{"Location", "Docker-Upload-UUID", "Range", "Content-Length", "Docker-Content-Digest"} {
			h.Del(k)
		}
		_ = errcode.ServeJSON(w.ResponseWriter, err)
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *refusingWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.replaced {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap is for http.ResponseController.
func (w *refusingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
