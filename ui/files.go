package ui

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"mime"
	"net/http"
	"path"
	"unicode/utf8"

	"github.com/alecthomas/chroma/v2"
	"github.com/alecthomas/chroma/v2/formatters/html"
	"github.com/alecthomas/chroma/v2/lexers"
	"github.com/alecthomas/chroma/v2/styles"

	"github.com/berth-registry/berth/catalog/httpapi"
)

// maxHighlighted bounds the part of a file that is shown, highlighted; the
// rest is left to the download link (downloadURL). Highlighted HTML is about
// twelve times the size of its source, so 256 KiB makes a page of about 3 MB.
const maxHighlighted = 256 << 10

// fileRef names a file of a version.
type fileRef struct {
	Namespace, Name, Version, Path string
}

// filePage is the data of a file's page.
type filePage struct {
	fileRef
	Size int64
	// Binary is set for a file that is not UTF-8 text.
	Binary bool
	// Truncated is set when only the first maxHighlighted bytes are shown.
	Truncated bool
	Shown     int64
	// Code is the highlighted source: chroma's HTML, classes only, of the
	// file's text, which it escapes.
	Code template.HTML
}

func (p filePage) title() string { return p.Path + " · " + p.Name + " " + p.Version }

// highlighter writes chroma's HTML with CSS classes (the stylesheet has
// their colours) and line numbers, never inline styles.
var highlighter = html.New(html.WithClasses(true), html.WithLineNumbers(true), html.LineNumbersInTable(false), html.TabWidth(4))

// filePage serves GET /ui/packages/{namespace}/{name}/versions/{version}/files/{path...}:
// the file as highlighted source, whatever its type; an SVG, HTML or
// Markdown file is shown as its source, never rendered.
func (h *handler) filePage(w http.ResponseWriter, r *http.Request) error {
	f, rc, size, err := h.openFile(r)
	if err != nil {
		return err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxHighlighted))
	if err != nil {
		return fmt.Errorf("%s/%s %s: read %s: %w", f.Namespace, f.Name, f.Version, f.Path, err)
	}
	page := filePage{fileRef: f, Size: size}
	if int64(len(data)) < size {
		page.Truncated = true
		data = cutAtLine(data)
	}
	page.Shown = int64(len(data))
	if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
		page.Binary = true
	} else if page.Code, err = highlight(f.Path, string(data)); err != nil {
		return err
	}
	h.render(w, r, http.StatusOK, "file", page)
	return nil
}

// download serves GET /ui/packages/{namespace}/{name}/versions/{version}/download/{path...}:
// the file itself, streamed, for the viewer the session cookie names, under
// the same access decision as every page (a package the viewer may not pull
// is the 404 page). It is an attachment, typed and sandboxed as the API's
// file URL serves it (httpapi.WriteFile), so that no file, HTML or SVG
// included, is ever shown in berth's origin. A copy that fails after the
// response started aborts it, so that the client sees a broken download
// rather than a short file.
func (h *handler) download(w http.ResponseWriter, r *http.Request) error {
	f, rc, size, err := h.openFile(r)
	if err != nil {
		return err
	}
	defer rc.Close()
	hdr := w.Header()
	hdr.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(f.Path)}))
	hdr.Set("Cache-Control", "no-store")
	if err := httpapi.WriteFile(w, rc, size, f.Path); err != nil {
		h.log.ErrorContext(r.Context(), "ui: download failed after it started", "path", r.URL.Path, "err", err)
		panic(http.ErrAbortHandler)
	}
	return nil
}

// openFile opens the file that the {namespace}, {name}, {version} and path
// segments of a files/ or download/ URL name, as the viewer may pull it:
// catalog.ErrNotFound for one that is missing or that the viewer may not
// pull, catalog.ErrInvalid for a malformed path.
func (h *handler) openFile(r *http.Request) (f fileRef, rc io.ReadCloser, size int64, err error) {
	ns, name, version, access, err := h.versionPath(r)
	if err != nil {
		return f, nil, 0, err
	}
	p, err := httpapi.FilePathParam(r)
	if err != nil {
		return f, nil, 0, err
	}
	rc, size, err = h.cat.File(r.Context(), access, ns, name, version, p)
	if err != nil {
		return f, nil, 0, err
	}
	return fileRef{Namespace: ns, Name: name, Version: version, Path: p}, rc, size, nil
}

// cutAtLine cuts data after its last newline, so that a cut neither ends
// in the middle of a line nor of a UTF-8 sequence.
func cutAtLine(data []byte) []byte {
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		return data[:i+1]
	}
	for len(data) > 0 && !utf8.Valid(data) {
		data = data[:len(data)-1]
	}
	return data
}

// highlight returns the HTML of src highlighted by the lexer its file name
// picks (plain text when none does).
func highlight(name, src string) (template.HTML, error) {
	lexer := lexers.Match(name)
	if lexer == nil {
		lexer = lexers.Fallback
	}
	it, err := chroma.Coalesce(lexer).Tokenise(nil, src)
	if err != nil {
		return "", fmt.Errorf("highlight %s: %w", name, err)
	}
	var buf bytes.Buffer
	if err := highlighter.Format(&buf, styles.Fallback, it); err != nil {
		return "", fmt.Errorf("highlight %s: %w", name, err)
	}
	return template.HTML(buf.String()), nil //nolint:gosec // chroma escapes the source it formats
}
