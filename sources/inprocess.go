package sources

import (
	"bytes"
	"io"
	"net/http"
	"strconv"

	"github.com/berth-registry/berth/registry"
)

// uploadSubject is who the tracker's uploads count against in the
// registry's bounds on concurrent uploads.
const uploadSubject = "berth-sources"

// inProcess is a RoundTripper that serves each request with the registry's
// handler in this process: no network, no credentials, and every rule of
// the registry applies.
type inProcess struct {
	h http.Handler
}

// RoundTrip implements http.RoundTripper.
func (p inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(registry.WithUploadSubject(req.Context(), uploadSubject))
	r.Host = req.URL.Host
	r.RequestURI = req.URL.RequestURI()
	r.RemoteAddr = "127.0.0.1:0"
	if r.Body == nil {
		r.Body = http.NoBody
	}
	w := &response{header: http.Header{}}
	p.h.ServeHTTP(w, r)
	if r.Body != nil {
		r.Body.Close()
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	// A HEAD answer has no body but says the length of the GET's.
	length := int64(w.body.Len())
	if n, err := strconv.ParseInt(w.header.Get("Content-Length"), 10, 64); err == nil && req.Method == http.MethodHead {
		length = n
	}
	return &http.Response{
		Status:        http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.header,
		Body:          io.NopCloser(bytes.NewReader(w.body.Bytes())),
		ContentLength: length,
		Request:       req,
	}, nil
}

// response records what a handler answers.
type response struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *response) Header() http.Header { return w.header }

func (w *response) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *response) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(b)
}
