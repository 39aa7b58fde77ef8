package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/internal/allowed"
)

// Errors of the HTTP layer itself, beside catalog's sentinels.
var (
	errMethodNotAllowed     = errors.New("method not allowed")
	errTooLarge             = errors.New("request body too large")
	errUnsupportedMediaType = errors.New("unsupported media type")
)

// errorCodes is the one table from errors to what clients see: the code in
// the error document, the HTTP status, and whether the error's own message
// may be shown. Messages of the other errors can name internal hosts and
// paths; clients get a generic message and the log gets the error.
var errorCodes = []struct {
	err     error
	code    string
	status  int
	message string // shown instead of the error's message when set
}{
	{catalog.ErrNotFound, "NOT_FOUND", http.StatusNotFound, ""},
	{catalog.ErrInvalid, "INVALID", http.StatusBadRequest, ""},
	{catalog.ErrDenied, "DENIED", http.StatusForbidden, ""},
	{catalog.ErrUnavailable, "UNAVAILABLE", http.StatusServiceUnavailable, "the registry the catalog reads from is unavailable; try again later"},
	{errMethodNotAllowed, "METHOD_NOT_ALLOWED", http.StatusMethodNotAllowed, ""},
	{errTooLarge, "TOO_LARGE", http.StatusRequestEntityTooLarge, ""},
	{errUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE", http.StatusUnsupportedMediaType, ""},
	{catalog.ErrNotImplemented, "NOT_IMPLEMENTED", http.StatusNotImplemented, ""},
}

// Code and status of every other error.
const (
	codeInternal    = "INTERNAL"
	messageInternal = "internal error; the server logged the details"
)

// paramError is a malformed request parameter. It wraps catalog.ErrInvalid,
// and its detail names the parameter.
type paramError struct {
	in     string // "query" or "path"
	name   string
	reason string
}

func (e *paramError) Error() string {
	return fmt.Sprintf("%s parameter %q: %s", e.in, e.name, e.reason)
}

func (e *paramError) Unwrap() error { return catalog.ErrInvalid }

func queryError(name, format string, args ...any) error {
	return &paramError{in: "query", name: name, reason: fmt.Sprintf(format, args...)}
}

func pathError(name, format string, args ...any) error {
	return &paramError{in: "path", name: name, reason: fmt.Sprintf(format, args...)}
}

// handlerFunc is the shape of every handler: it writes a response, or returns
// the error that handle turns into one.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle adapts f to http.HandlerFunc. An error returned before the response
// has started is written as an error document; one returned after it started
// cannot be reported in the body, so it is logged and the connection is
// aborted, which leaves the client with a visibly truncated response rather
// than a complete-looking one.
func (h *handler) handle(f handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tw := &trackingWriter{ResponseWriter: w}
		err := f(tw, r)
		if err == nil {
			return
		}
		if r.Context().Err() != nil {
			return // the client went away or the server is shutting down
		}
		if tw.started {
			h.log.ErrorContext(r.Context(), "catalog api: response failed after it started",
				"request_id", requestID(w), "method", r.Method, "path", r.URL.Path, "err", err)
			panic(http.ErrAbortHandler)
		}
		h.writeError(tw, r, err)
	}
}

// writeError writes err as an apiv1.Errors document with the code and status
// of errorCodes, logging errors the client is not told about.
func (h *handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code, status, message := codeInternal, http.StatusInternalServerError, messageInternal
	for _, c := range errorCodes {
		if errors.Is(err, c.err) {
			code, status, message = c.code, c.status, c.message
			break
		}
	}
	hidden := message != ""
	if !hidden {
		message = err.Error()
	}
	e := apiv1.Error{Code: code, Message: message}
	var pe *paramError
	switch {
	case errors.As(err, &pe):
		e.Detail = map[string]string{"parameter": pe.name, "in": pe.in}
	case hidden:
		h.log.ErrorContext(r.Context(), "catalog api: request failed",
			"request_id", requestID(w), "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
		if id := requestID(w); id != "" {
			e.Detail = map[string]string{"requestId": id}
		}
	}
	hdr := w.Header()
	for _, k := range []string{"ETag", "Cache-Control", "Content-Length"} {
		hdr.Del(k)
	}
	_ = writeJSON(w, status, apiv1.Errors{Errors: []apiv1.Error{e}})
}

// notFound answers paths the API does not have.
func (h *handler) notFound(_ http.ResponseWriter, r *http.Request) error {
	return fmt.Errorf("no endpoint %s: %w", r.URL.Path, catalog.ErrNotFound)
}

// methodNotAllowed answers a method a path does not take, listing in Allow
// the methods it does take (HEAD wherever GET: berth's server answers it).
func (h *handler) methodNotAllowed(w http.ResponseWriter, r *http.Request) error {
	methods := allowed.Methods(h.mux, r)
	w.Header().Set("Allow", strings.Join(methods, ", "))
	return fmt.Errorf("%s %s: %w; allowed: %s", r.Method, r.URL.Path, errMethodNotAllowed, strings.Join(methods, ", "))
}

// requestID is the request ID the server's middleware echoes in the response.
func requestID(w http.ResponseWriter) string {
	return w.Header().Get("X-Request-Id")
}

// jsonBuffers holds the buffers writeJSON encodes responses in. A search's
// answer (about 9 KiB) grows a new buffer five times: at c=4 those copies
// were 30 % of the bytes a search request allocated, and so of the
// collections that pause it (docs/benchmarks.md).
var jsonBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledJSON is the largest buffer writeJSON keeps for another response:
// a rare large answer is not held on to.
const maxPooledJSON = 256 << 10

// writeJSON writes v as a JSON document with status.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	buf := jsonBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledJSON {
			buf.Reset()
			jsonBuffers.Put(buf)
		}
	}()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	w.Header().Set("Content-Type", apiv1.MediaTypeJSON)
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, err := w.Write(buf.Bytes())
	return err
}

// trackingWriter records whether the response has started, so that handle
// knows whether an error can still be written as a document.
type trackingWriter struct {
	http.ResponseWriter
	started bool
}

func (w *trackingWriter) WriteHeader(status int) {
	w.started = true
	w.ResponseWriter.WriteHeader(status)
}

func (w *trackingWriter) Write(p []byte) (int, error) {
	w.started = true
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *trackingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
