package ui

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/pkgsource"
)

//go:embed templates
var templateFiles embed.FS

// pages are the parsed templates of every page, each with the layout; they
// are parsed once, at start.
var pages = parsePages("search", "package", "version", "file", "login", "error", "sources")

func parsePages(names ...string) map[string]*template.Template {
	out := make(map[string]*template.Template, len(names))
	for _, name := range names {
		out[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(templateFiles,
			"templates/layout.html", "templates/partials.html", "templates/"+name+".html"))
	}
	return out
}

// funcs are the template functions: URLs of pages, and formats.
var funcs = template.FuncMap{
	"packageURL":    packageURL,
	"versionURL":    versionURL,
	"fileURL":       fileURL,
	"downloadURL":   downloadURL,
	"namespaceURL":  func(ns string) string { return "/ui/namespaces/" + url.PathEscape(ns) },
	"static":        staticURL,
	"date":          formatDate,
	"size":          formatSize,
	"join":          strings.Join,
	"add":           func(a, b int) int { return a + b },
	"shortRevision": pkgsource.ShortRevision,
}

// layout is what every page shows around its own content.
type layout struct {
	Title string
	// Viewer names who is signed in (viewerName); empty for an anonymous
	// viewer.
	Viewer string
	// AuthOn is set when the registry has logins.
	AuthOn bool
	// Query is the search text, kept in the header's search box.
	Query string
	// Sources is set when the server follows package sources: the header
	// links to their page.
	Sources bool
	// Page is the page's own data.
	Page any
}

// titled is a page's data that names its page.
type titled interface{ title() string }

func (p errorPage) title() string { return p.Title }

// render writes the page name with data under the layout, with status. The
// page is rendered to a buffer first, so that a template error is a 500 and
// never half a page.
func (h *handler) render(w http.ResponseWriter, r *http.Request, status int, name string, data titled) {
	l := layout{Title: data.title(), AuthOn: h.sessions != nil, Query: r.URL.Query().Get("q"), Sources: h.sources != nil, Page: data}
	if id := auth.IdentityFrom(r.Context()); !id.IsAnonymous() {
		l.Viewer = viewerName(id)
	}
	var buf bytes.Buffer
	if err := pages[name].ExecuteTemplate(&buf, "layout", l); err != nil {
		h.log.ErrorContext(r.Context(), "ui: render", "page", name, "err", err)
		http.Error(w, "internal error: the page could not be rendered", http.StatusInternalServerError)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Content-Length", strconv.Itoa(buf.Len()))
	hdr.Set("Cache-Control", "no-store")
	if start, ok := r.Context().Value(startKey{}).(time.Time); ok {
		// What the page cost the server, from its handler's start to its
		// rendering: browsers' developer tools and the benchmark read it.
		hdr.Set("Server-Timing", fmt.Sprintf("page;dur=%.3f", float64(time.Since(start).Microseconds())/1000))
	}
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// viewerName is how a page names a signed-in viewer: a user or an OIDC
// subject by their name ("alice", never the subject "user:alice"), a robot
// as "robot NAMESPACE/NAME".
func viewerName(id auth.Identity) string {
	if id.Robot != nil {
		return "robot " + id.Robot.Namespace + "/" + id.Robot.Name
	}
	kind, name, ok := strings.Cut(id.Subject, ":")
	if !ok {
		return id.Subject
	}
	if kind == "robot" {
		return "robot " + strings.Replace(name, "+", "/", 1)
	}
	return name
}

func packageURL(ns, name string) string {
	return "/ui/packages/" + url.PathEscape(ns) + "/" + url.PathEscape(name)
}

func versionURL(ns, name, version string) string {
	return packageURL(ns, name) + "/versions/" + url.PathEscape(version)
}

func fileURL(ns, name, version, path string) string {
	return versionURL(ns, name, version) + "/files/" + escapePath(path)
}

// downloadURL is the URL the UI serves the file itself at, with the
// viewer's session: the API's file URL does not read the session cookie.
func downloadURL(ns, name, version, path string) string {
	return versionURL(ns, name, version) + "/download/" + escapePath(path)
}

// escapePath escapes each segment of a slash-separated path.
func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

func formatDate(t any) string {
	switch t := t.(type) {
	case time.Time:
		if !t.IsZero() {
			return t.UTC().Format("2006-01-02")
		}
	case *time.Time:
		if t != nil && !t.IsZero() {
			return t.UTC().Format("2006-01-02")
		}
	}
	return ""
}

// formatSize renders a byte count as the CLI does (config.ByteSize.Human).
func formatSize(n int64) string { return config.ByteSize(n).Human() }
