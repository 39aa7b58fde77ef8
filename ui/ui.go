// Package ui is berth's web UI: server-rendered HTML pages for the cluster
// admin who looks a package over before installing it — search with facets,
// a package's versions, channels and upgrade graph (SVG drawn on the
// server), a version's permissions first, then its CRDs, files and
// signatures, each file highlighted and downloadable with the session, a
// namespace's packages with its storage against its quota, the status of the
// package sources the server follows, and a login form
// for sessions (auth.Sessions).
//
// Pages are html/template, and work without JavaScript; one small script
// only enhances them (search as you type, highlighting in the graph). The
// templates, the stylesheet and the script are embedded. No page has an
// inline script or style, and every page is sent with a strict
// Content-Security-Policy. Everything a package says is escaped; only the
// output of the Markdown and source highlighters, which sanitise it, is
// written as HTML.
//
// Every page and download shows only what the viewer may pull, decided by
// the catalog's Authorizer as the JSON API decides it: a package the viewer
// may not pull is the same 404 page as one that does not exist.
package ui

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/httpapi"
	"github.com/berth-registry/berth/quota"
	"github.com/berth-registry/berth/signing"
)

// Catalog is what the pages read, from the catalog service in process: what
// the API reads, and a package with one channel's graph in one read.
// ErrNotFound is the 404 page.
type Catalog interface {
	httpapi.Reader
	Overview(ctx context.Context, access catalog.Access, namespace, name, channel string) (*apiv1.Package, *apiv1.Graph, error)
	// ImageMirrors are where the images of source repositories live at
	// this site, for the install commands.
	ImageMirrors(ctx context.Context) ([]apiv1.ImageMirror, error)
	// Examples are the alm-examples indexing recorded for a version, and
	// whether it recorded them (catalog.Catalog.Examples).
	Examples(ctx context.Context, access catalog.Access, namespace, name, version string) (map[string][]string, bool, error)
}

var _ Catalog = (*catalog.Catalog)(nil)

// Options configure the handler New returns.
type Options struct {
	// Catalog answers every page. Required.
	Catalog Catalog
	// Authorizer decides what the viewer may see. Nil means catalog.AllowAll{}.
	Authorizer catalog.Authorizer
	// Sessions are the logins of the UI; nil when auth is off, and the
	// login page says so.
	Sessions *auth.Sessions
	// Trust is the trust policy, named on the signatures it verified.
	Trust *signing.Policy
	// RegistryURL is the registry's base URL as clients reach it, as
	// httpapi.Options.RegistryURL: the host of the pull and install
	// commands shown. Empty means the host the request came to.
	RegistryURL string
	// Logger logs failed requests. Nil means slog.Default().
	Logger *slog.Logger
	// Quota is the quota ledger, whose usage a namespace's page shows. Nil
	// (berth serve catalog, which has no registry storage) shows none.
	Quota quota.Reader
	// Sources is the tracker of package sources (sources.Tracker), whose
	// status /ui/sources shows. Nil (a server that follows none) shows
	// none, and the header does not link to the page.
	Sources httpapi.Sources
}

// handler serves the UI.
type handler struct {
	cat         Catalog
	auth        catalog.Authorizer
	sessions    *auth.Sessions
	trust       *signing.Policy
	registryURL string
	log         *slog.Logger
	quota       quota.Reader
	sources     httpapi.Sources
	mux         http.Handler
}

// New returns the UI's handler. It routes on the whole request path: mount
// it as is for / and /ui/*.
func New(opts Options) http.Handler {
	h := &handler{
		cat:         opts.Catalog,
		auth:        opts.Authorizer,
		sessions:    opts.Sessions,
		trust:       opts.Trust,
		registryURL: opts.RegistryURL,
		log:         opts.Logger,
		quota:       opts.Quota,
		sources:     opts.Sources,
	}
	if h.auth == nil {
		h.auth = catalog.AllowAll{}
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	r := chi.NewRouter()
	r.NotFound(h.page(func(http.ResponseWriter, *http.Request) error { return errNoPage }))
	r.MethodNotAllowed(h.page(func(http.ResponseWriter, *http.Request) error { return errMethod }))
	const pkg = "/ui/packages/{namespace}/{name}"
	r.Get("/", h.page(h.search))
	r.Get("/ui/namespaces/{namespace}", h.page(h.namespace))
	r.Get(pkg, h.page(h.packagePage))
	r.Get(pkg+"/versions/{version}", h.page(h.versionPage))
	r.Get(pkg+"/versions/{version}/files/*", h.page(h.filePage))
	r.Get(pkg+"/versions/{version}/download/*", h.page(h.download))
	r.Get("/ui/sources", h.page(h.sourcesList))
	r.Get("/ui/login", h.page(h.loginForm))
	r.Post("/ui/login", h.page(h.login))
	r.Post("/ui/logout", h.page(h.logout))
	r.Get("/ui/static/{file}", h.page(h.static))
	var mux http.Handler = r
	if h.sessions != nil {
		mux = h.sessions.Middleware(mux)
	}
	h.mux = mux
	return h
}

// ServeHTTP routes r with a routing context of its own, so that the handler
// works the same under an outer chi router, and hands the matched route
// pattern to the outer router's context for the access log and metrics.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header())
	outer := chi.RouteContext(r.Context())
	rctx := chi.NewRouteContext()
	h.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), chi.RouteCtxKey, rctx)))
	if outer != nil && len(rctx.RoutePatterns) > 0 {
		outer.RoutePatterns = rctx.RoutePatterns
	}
}

// ContentSecurityPolicy is the policy of every response of the UI: no
// inline script or style, nothing from elsewhere, no framing. connect-src
// lets the script fetch the search page it enhances.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

func setSecurityHeaders(hdr http.Header) {
	hdr.Set("Content-Security-Policy", ContentSecurityPolicy)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "same-origin")
	hdr.Set("X-Frame-Options", "DENY")
}

// Errors of the UI itself, beside catalog's sentinels.
var (
	errNoPage = fmt.Errorf("no such page: %w", catalog.ErrNotFound)
	errMethod = errors.New("method not allowed")
)

// pageFunc is the shape of every page: it writes the response, or returns
// the error that page turns into an error page.
type pageFunc func(w http.ResponseWriter, r *http.Request) error

// page adapts f to http.HandlerFunc, writing its error as an error page
// with the status that the error's sentinel maps to.
func (h *handler) page(f pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r = r.WithContext(context.WithValue(r.Context(), startKey{}, time.Now()))
		err := f(w, r)
		if err == nil || r.Context().Err() != nil {
			return
		}
		status, message := http.StatusInternalServerError, "Something went wrong on the server; it logged the details."
		switch {
		case errors.Is(err, catalog.ErrNotFound):
			status, message = http.StatusNotFound, "There is no such page, or you may not see it."
		case errors.Is(err, catalog.ErrInvalid):
			status, message = http.StatusBadRequest, err.Error()
		case errors.Is(err, errMethod):
			status, message = http.StatusMethodNotAllowed, "This page does not take that method."
		case errors.Is(err, catalog.ErrUnavailable):
			status, message = http.StatusServiceUnavailable, "The registry the catalog reads from is unavailable; try again later."
		default:
			h.log.ErrorContext(r.Context(), "ui: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		h.render(w, r, status, "error", errorPage{Status: status, Title: http.StatusText(status), Message: message})
	}
}

// startKey keys the time a page's handler started in its request's
// context, for its Server-Timing header.
type startKey struct{}

// errorPage is the data of the error page.
type errorPage struct {
	Status  int
	Title   string
	Message string
}
