package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/distribution/distribution/v3/registry/api/errcode"
	"github.com/distribution/reference"
)

// ErrorCodePaginationLastInvalid is the OCI error code of a /v2/_catalog or
// /v2/<repo>/tags/list request whose last parameter is not a repository name
// or a tag. distribution has no code for it.
var ErrorCodePaginationLastInvalid = errcode.Register("berth", errcode.ErrorDescriptor{
	Value:   "PAGINATION_LAST_INVALID",
	Message: "invalid last entry",
	Description: `Returned when the "last" parameter of a listing is not a
	repository name (for the catalog) or a tag (for a tag list).`,
	HTTPStatusCode: http.StatusBadRequest,
})

// pageMaxEntries is the largest page /v2/_catalog and /v2/<repo>/tags/list
// serve; a larger n is refused.
const pageMaxEntries = 1000

var (
	// repositoryNameRegexp is the distribution spec's grammar of a repository name.
	repositoryNameRegexp = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$`)
	// tagRegexp is the distribution spec's grammar of a tag.
	tagRegexp = regexp.MustCompile(`^` + reference.TagRegexp.String() + `$`)
)

// checkPagination checks the n and last parameters of a GET of /v2/_catalog
// or /v2/<repo>/tags/list, which distribution hands to its storage driver
// unchecked: a last that is no name becomes a path the driver refuses, and
// the driver's error, with the storage's path in it, becomes a 500. It
// returns the OCI error (an errcode.Error) to answer with, or nil when the
// parameters are good or req is no such listing.
func checkPagination(req *http.Request) error {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		return nil
	}
	lastValid := tagRegexp.MatchString
	switch {
	case req.URL.Path == "/v2/_catalog":
		lastValid = func(s string) bool {
			return len(s) <= reference.RepositoryNameTotalLengthMax && repositoryNameRegexp.MatchString(s)
		}
	case tagsListPath(req.URL.Path):
	default:
		return nil
	}
	q := req.URL.Query()
	for _, n := range q["n"] {
		if v, err := strconv.ParseUint(n, 10, 32); err != nil || v > pageMaxEntries {
			return errcode.ErrorCodePaginationNumberInvalid.
				WithMessage(fmt.Sprintf(`query parameter "n" must be a number of results from 0 to %d`, pageMaxEntries)).
				WithDetail(map[string]string{"parameter": "n"})
		}
	}
	for _, last := range q["last"] {
		if last != "" && !lastValid(last) {
			what := "a tag"
			if req.URL.Path == "/v2/_catalog" {
				what = "a repository name"
			}
			return ErrorCodePaginationLastInvalid.
				WithMessage(fmt.Sprintf(`query parameter "last" must be %s`, what)).
				WithDetail(map[string]string{"parameter": "last"})
		}
	}
	return nil
}

// tagsListPath reports whether p is /v2/<repo>/tags/list.
func tagsListPath(p string) bool {
	rest, ok := strings.CutPrefix(p, "/v2/")
	if !ok {
		return false
	}
	repo, ok := strings.CutSuffix(rest, "/tags/list")
	return ok && repo != ""
}

// serverErrorWriter keeps the details of server errors (5xx) from clients:
// distribution puts the error of its storage driver, which names paths of
// the server's filesystem, in the detail of an UNKNOWN error. The body of a
// 5xx response is held back and, once the handler is done, replaced by the
// same error codes with their registered messages and the request ID; the
// original goes to the log. Other responses pass through untouched.
type serverErrorWriter struct {
	http.ResponseWriter
	status int
	held   *bytes.Buffer // the body of a 5xx response
}

func (w *serverErrorWriter) WriteHeader(status int) {
	if w.status != 0 {
		return
	}
	w.status = status
	if status >= http.StatusInternalServerError {
		w.held = &bytes.Buffer{}
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *serverErrorWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.held != nil {
		return w.held.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

// ReadFrom writes what r holds as Write does, through the underlying
// writer's ReadFrom when it has one: net/http's sends a file with
// sendfile(2), as the blob reads of fileServer hand it one. Without one
// (HTTP/2), it copies through a copyBufferSize buffer: each write of an
// HTTP/2 handler waits for the connection to send it, so io.Copy's 32 KiB
// writes would hold a blob read to a few hundred MB/s.
func (w *serverErrorWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.held != nil {
		return w.held.ReadFrom(r)
	}
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	// The struct hides r's WriteTo, which would copy 32 KiB at a time.
	return io.CopyBuffer(w.ResponseWriter, struct{ io.Reader }{r}, *buf)
}

// copyBufferSize is the size of the buffers of ReadFrom's copies.
const copyBufferSize = 1 << 20

var copyBuffers = sync.Pool{New: func() any {
	b := make([]byte, copyBufferSize)
	return &b
}}

// Flush sends what has been written, unless it is held back.
func (w *serverErrorWriter) Flush() {
	if w.held == nil {
		_ = http.NewResponseController(w.ResponseWriter).Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *serverErrorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish writes the scrubbed error of a held-back 5xx response and logs the
// original.
func (w *serverErrorWriter) finish(log *slog.Logger, req *http.Request) {
	if w.held == nil {
		return
	}
	requestID := w.Header().Get("X-Request-Id")
	log.ErrorContext(req.Context(), "registry: server error; its details were kept from the client",
		"request_id", requestID, "method", req.Method, "path", req.URL.Path, "status", w.status, "body", w.held.String())
	var sent struct {
		Errors []struct {
			Code string `json:"code"`
		} `json:"errors"`
	}
	_ = json.Unmarshal(w.held.Bytes(), &sent)
	var errs errcode.Errors
	for _, e := range sent.Errors {
		errs = append(errs, scrubbed(errcode.ParseErrorCode(e.Code), requestID))
	}
	if len(errs) == 0 {
		errs = append(errs, scrubbed(errcode.ErrorCodeUnknown, requestID))
	}
	body, _ := json.Marshal(errs)
	h := w.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", "application/json")
	w.ResponseWriter.WriteHeader(w.status)
	_, _ = w.ResponseWriter.Write(append(body, '\n'))
}

// scrubbed is code with its registered message and, as its detail, the
// request ID that finds the original error in the log.
func scrubbed(code errcode.ErrorCode, requestID string) errcode.Error {
	e := code.WithMessage(code.Message())
	if requestID != "" {
		e = e.WithDetail(map[string]string{"requestId": requestID})
	}
	return e
}
