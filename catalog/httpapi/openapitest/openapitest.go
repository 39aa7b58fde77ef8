// Package openapitest checks HTTP exchanges with the catalog API against the
// API's OpenAPI document (httpapi.OpenAPI), for unit tests of the handlers
// and end-to-end tests against a running server alike.
package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/berth-registry/berth/catalog/httpapi"
)

// filesSegment is where the one path parameter that may contain '/' starts.
const filesSegment = "/files/"

var load = sync.OnceValues(func() (*document, error) {
	openapi3filter.RegisterBodyDecoder("application/jsonl", decodeJSONLines)
	// The provenance public key (GET /api/v1/sources/key) is text.
	openapi3filter.RegisterBodyDecoder("application/x-pem-file", openapi3filter.RegisteredBodyDecoder("text/plain"))
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(httpapi.OpenAPI())
	if err != nil {
		return nil, fmt.Errorf("load the OpenAPI document: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("the OpenAPI document is invalid: %w", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route the OpenAPI document: %w", err)
	}
	return &document{doc: doc, router: router}, nil
})

type document struct {
	doc    *openapi3.T
	router routers.Router
}

// Document returns the loaded and validated OpenAPI document.
func Document() (*openapi3.T, error) {
	d, err := load()
	if err != nil {
		return nil, err
	}
	return d.doc, nil
}

// Validate checks one exchange against the OpenAPI document and reports every
// mismatch with t.Errorf: req is the request sent, status, header and body
// the response received.
//
// The response must be one the document lists for the operation (status,
// required headers, content type and body schema). A request the server
// accepted (status below 400) must conform to the document too; a refused
// one is expected not to. A request that names no operation of the document
// must have been answered 404 or 405 (with Allow) with an error document.
//
// If req has a body, its GetBody must be set (http.NewRequest sets it for
// in-memory bodies) for the body to be checked; otherwise the request body
// is not checked.
func Validate(t testing.TB, req *http.Request, status int, header http.Header, body []byte) {
	t.Helper()
	d, err := load()
	if err != nil {
		t.Fatal(err)
	}
	what := req.Method + " " + req.URL.RequestURI()

	route, pathParams, err := d.router.FindRoute(routable(req))
	if errors.Is(err, routers.ErrPathNotFound) || errors.Is(err, routers.ErrMethodNotAllowed) {
		switch {
		case status != http.StatusNotFound && status != http.StatusMethodNotAllowed:
			t.Errorf("%s: not an operation of the OpenAPI document, yet answered %d", what, status)
		case status == http.StatusMethodNotAllowed && header.Get("Allow") == "":
			t.Errorf("%s: 405 without Allow", what)
		}
		d.validateErrors(t, what, header, body)
		return
	}
	if err != nil {
		t.Errorf("%s: route: %v", what, err)
		return
	}

	opts := &openapi3filter.Options{
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
		IncludeResponseStatus: true,
		MultiError:            true,
	}
	in := &openapi3filter.RequestValidationInput{
		Request:    requestCopy(t, req),
		PathParams: pathParams,
		Route:      route,
		Options:    opts,
	}
	if in.Request.Body == nil || in.Request.Body == http.NoBody {
		opts.ExcludeRequestBody = true
	}
	if status < 400 {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			t.Errorf("%s: the request does not conform to the OpenAPI document, yet was answered %d: %v", what, status, err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 status,
		Header:                 header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                opts,
	}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("%s: response %d does not conform to the OpenAPI document: %v\nbody: %.2000s", what, status, err, body)
	}
	if status == http.StatusNotModified && len(body) > 0 {
		t.Errorf("%s: 304 with a body", what)
	}
}

// validateErrors checks that a response is an Errors document.
func (d *document) validateErrors(t testing.TB, what string, header http.Header, body []byte) {
	t.Helper()
	if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: error content type %q, want application/json", what, ct)
		return
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Errorf("%s: error body is not JSON: %v", what, err)
		return
	}
	schema := d.doc.Components.Schemas["Errors"].Value
	if err := schema.VisitJSON(v, openapi3.MultiErrors()); err != nil {
		t.Errorf("%s: error body does not match Errors: %v\nbody: %s", what, err, body)
	}
}

// routable returns req, or for a file request a copy whose file path has its
// '/' escaped: the document's {path} parameter, as every OpenAPI path
// parameter, is one segment, while the server also takes the path unescaped.
func routable(req *http.Request) *http.Request {
	p := req.URL.EscapedPath()
	i := strings.Index(p, filesSegment)
	if i < 0 || !strings.HasPrefix(p, "/api/v1/packages/") {
		return req
	}
	head, file := p[:i+len(filesSegment)], p[i+len(filesSegment):]
	escaped := head + strings.ReplaceAll(file, "/", "%2F")
	unescaped, err := url.PathUnescape(escaped)
	if err != nil {
		return req
	}
	r := req.Clone(context.Background())
	r.URL.Path, r.URL.RawPath = unescaped, escaped
	return r
}

// requestCopy returns a copy of req with a fresh body from GetBody, or with
// no body when it cannot be read again.
func requestCopy(t testing.TB, req *http.Request) *http.Request {
	t.Helper()
	r := req.Clone(context.Background())
	r.Body = http.NoBody
	if req.GetBody != nil {
		b, err := req.GetBody()
		if err != nil {
			t.Fatalf("request body: %v", err)
		}
		r.Body = b
	}
	return r
}

// decodeJSONLines decodes a JSON Lines body (the /api/v1/olm endpoints) as
// the string the document describes it as, after checking that every line
// is one JSON object.
func decodeJSONLines(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	for i, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		var obj map[string]any
		if len(b) > 0 && json.Unmarshal(line, &obj) != nil {
			return nil, fmt.Errorf("line %d is not a JSON object: %.80s", i+1, line)
		}
	}
	return string(b), nil
}
