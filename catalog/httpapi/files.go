package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"
)

// contentTypes maps file extensions to the content type a file is served
// with. Anything else is application/octet-stream, so that no file of a
// package is ever rendered as HTML by a browser.
var contentTypes = map[string]string{
	".yaml": mediaTypeYAML,
	".yml":  mediaTypeYAML,
	".json": "application/json",
	".md":   "text/markdown; charset=utf-8",
	".txt":  "text/plain; charset=utf-8",
	".png":  "image/png",
	".svg":  "image/svg+xml",
}

// mediaTypeYAML is the content type of YAML documents (RFC 9512).
const mediaTypeYAML = "application/yaml"

// fileContentType returns the content type of the file at p.
func fileContentType(p string) string {
	if ct, ok := contentTypes[strings.ToLower(path.Ext(p))]; ok {
		return ct
	}
	return "application/octet-stream"
}

// getFile answers GET /api/v1/packages/{namespace}/{name}/versions/{version}/files/{path}:
// one file of the package content, streamed. The path may contain '/', sent
// as is or escaped as %2F.
func (h *handler) getFile(w http.ResponseWriter, r *http.Request) error {
	ns, name, err := PackagePath(r)
	if err != nil {
		return err
	}
	version, err := VersionParam(r)
	if err != nil {
		return err
	}
	p, err := FilePathParam(r)
	if err != nil {
		return err
	}
	access, err := h.pullable(r)
	if err != nil {
		return err
	}
	rc, size, err := h.cat.File(r.Context(), access, ns, name, version, p)
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := WriteFile(w, rc, size, p); err != nil {
		return fmt.Errorf("%s/%s %s: %w", ns, name, version, err)
	}
	return nil
}

// WriteFile writes a package's file at path p, size bytes read from rc, as
// its content: a content type by p's extension (application/octet-stream
// unless contentTypes names it), nosniff, and a Content-Security-Policy that
// sandboxes it, so that an SVG or HTML file never runs in berth's origin. It
// streams rc. It writes the status first: an error is a copy that failed or
// ended short (io.ErrUnexpectedEOF), after the response started.
func WriteFile(w http.ResponseWriter, rc io.Reader, size int64, p string) error {
	hdr := w.Header()
	hdr.Set("Content-Type", fileContentType(p))
	hdr.Set("Content-Length", strconv.FormatInt(size, 10))
	hdr.Set("X-Content-Type-Options", "nosniff")
	// Files are whatever the package author put there: an SVG may carry
	// script. Served from berth's origin, it must not run.
	hdr.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; sandbox")
	w.WriteHeader(http.StatusOK)
	n, err := io.Copy(w, io.LimitReader(rc, size))
	if err == nil && n < size {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return fmt.Errorf("copy %s after %d of %d bytes: %w", p, n, size, err)
	}
	return nil
}
