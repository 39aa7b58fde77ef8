// Package httpapi is the catalog's HTTP layer (DESIGN.md, "HTTP API"): the
// JSON API under /api/v1 described by the OpenAPI document it serves at
// /api/v1/openapi.yaml, the legacy KUDO repository index at /index.yaml and
// /{namespace}/index.yaml, Helm's repository index of the Helm charts at
// /api/helm/index.yaml and /api/helm/{namespace}/index.yaml, and optionally
// the receiver of a registry's notification webhook at POST /events.
//
// Handlers have the shape func(w, r) error; one adapter turns their errors
// into JSON error documents with the status that the catalog's sentinel
// errors map to (see errors.go).
package httpapi

import (
	"context"
	_ "embed"
	"io"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/quota"
)

// Reader is what reading packages asks of the catalog service, here and in
// the web UI. Errors wrap catalog's sentinels.
type Reader interface {
	Search(ctx context.Context, q catalog.Query) (*catalog.SearchResult, error)
	Package(ctx context.Context, access catalog.Access, namespace, name string) (*apiv1.Package, error)
	Version(ctx context.Context, access catalog.Access, namespace, name, version string) (*apiv1.Version, error)
	Graph(ctx context.Context, access catalog.Access, namespace, name, channel string) (*apiv1.Graph, error)
	// Permissions reviews a version's permissions, compared with from's
	// when from is not empty.
	Permissions(ctx context.Context, access catalog.Access, namespace, name, version, from string) (*apiv1.Permissions, error)
	// File opens one file of a version's content; size is its length.
	File(ctx context.Context, access catalog.Access, namespace, name, version, path string) (rc io.ReadCloser, size int64, err error)
	// VersionImages returns the images a version runs and where each lives
	// at this site; registry is the host[:port] versions are pulled from.
	VersionImages(ctx context.Context, access catalog.Access, namespace, name, version, registry string) (*apiv1.VersionImages, error)
	// Installable says whether everything a version needs to install is
	// at this site (catalog.Catalog.Installable).
	Installable(ctx context.Context, access catalog.Access, namespace, name, version, registry string) (*apiv1.Installable, error)
}

// Catalog is what the HTTP layer asks of the catalog service. Errors wrap
// catalog's sentinels (ErrNotFound, ErrInvalid, ErrDenied, ErrUnavailable,
// ErrNotImplemented); any other error is answered 500.
type Catalog interface {
	Reader
	Upgrades(ctx context.Context, access catalog.Access, namespace, name, channel, from string) (*apiv1.Upgrades, error)
	// Approve records an approval of a version's widened permissions
	// (fingerprint) by the caller named by.
	Approve(ctx context.Context, namespace, name, version, fingerprint, by string) (*apiv1.Approval, error)
	DeletePackage(ctx context.Context, namespace, name string) (deleted []string, err error) // versions deleted
	// Changes returns the change feed of what access allows, numbered
	// among the changes access allows (catalog.Catalog.Changes).
	Changes(ctx context.Context, access catalog.Access, since int64, limit int) (*apiv1.Changes, error)
	// FeedHead is the number of the last change of access's feed.
	FeedHead(ctx context.Context, access catalog.Access) (int64, error)
	Unindexed(ctx context.Context, access catalog.Access, limit, offset int) ([]apiv1.Artifact, error)
	Status(ctx context.Context) (*apiv1.Status, error)
	// Walk streams every indexed entry the access allows, ordered by namespace then name (versions in no order).
	Walk(ctx context.Context, access catalog.Access, namespace string, fn func(*catalog.Entry) error) error
	// Ingest takes events from a registry's notification webhook (split mode).
	Ingest(ctx context.Context, events []catalog.Event) error
	// ImageMirrors returns the image mirrors recorded; SetImageMirrors
	// records more, each replacing the one with the same source, and
	// returns them all.
	ImageMirrors(ctx context.Context) ([]apiv1.ImageMirror, error)
	SetImageMirrors(ctx context.Context, mirrors []apiv1.ImageMirror) ([]apiv1.ImageMirror, error)
}

// Options configure the handler New returns.
type Options struct {
	// Catalog answers every request. Required.
	Catalog Catalog
	// Authorizer decides what the caller may see and delete. Nil means
	// catalog.AllowAll{}.
	Authorizer catalog.Authorizer
	// Logger logs failed requests. Nil means slog.Default().
	Logger *slog.Logger
	// RegistryURL is the base URL (scheme://host[:port]) of the registry that
	// serves /v2/, used for the download links of the indexes. Empty means the
	// external base URL of each request (forwarded.BaseURL): the scheme and
	// host it came to, as a trusted proxy's forwarding headers tell them.
	RegistryURL string
	// Events mounts POST /events, the receiver of distribution's
	// notification webhook (split mode).
	Events bool
	// Inventory answers GET /api/v1/inventory from the registry's storage.
	// Nil (split mode, where the catalog has no storage of its own) answers
	// it 501 NOT_IMPLEMENTED.
	Inventory Inventory
	// OLM answers /api/v1/olm/{namespace}/all and .../metas from the OLM
	// catalog publisher. Nil answers them 501 NOT_IMPLEMENTED.
	OLM OLM
	// Admin gates what only administrators may do (PUT
	// /api/v1/image-mirrors), as auth.AdminGate does. Nil answers those
	// requests 501 NOT_IMPLEMENTED.
	Admin func(http.Handler) http.Handler
	// Quota answers GET /api/v1/usage and
	// /api/v1/namespaces/{namespace}/usage from the quota ledger. Nil (berth
	// serve catalog, which has no registry storage) answers them 501
	// NOT_IMPLEMENTED.
	Quota quota.Reader
	// Sources answers /api/v1/sources and asks for checks of tracked
	// package sources (sources.Tracker). Nil (a server that tracks none)
	// lists none and answers the other sources endpoints 404.
	Sources Sources
	// SourcesWebhook serves POST /api/v1/sources/webhook, the push and tag
	// webhooks of the sources' repositories (sources/webhook.New), which
	// authenticate by their signature rather than a berth login. Nil
	// answers it 404.
	SourcesWebhook http.Handler
}

//go:embed openapi.yaml
var openAPIDocument []byte

// OpenAPI returns the OpenAPI 3.0 document of the API, as served at
// /api/v1/openapi.yaml.
func OpenAPI() []byte {
	return append([]byte(nil), openAPIDocument...)
}

// handler serves the catalog's HTTP API.
type handler struct {
	cat         Catalog
	auth        catalog.Authorizer
	log         *slog.Logger
	registryURL string
	inv         Inventory
	olm         OLM
	quota       quota.Reader
	// sourcesTracker is Options.Sources.
	sourcesTracker Sources
	mux            *chi.Mux
}

// New returns the handler of the catalog API. It routes on the whole request
// path, so mount it as is (not with chi's Mount, which strips a prefix) for
// /api/v1/*, /api/helm/*, /index.yaml, /{namespace}/index.yaml and, when
// Options.Events is set, /events.
func New(opts Options) http.Handler {
	h := &handler{
		cat:         opts.Catalog,
		auth:        opts.Authorizer,
		log:         opts.Logger,
		registryURL: opts.RegistryURL,
		inv:         opts.Inventory,
		olm:         opts.OLM,
		quota:       opts.Quota,

		sourcesTracker: opts.Sources,
	}
	if h.auth == nil {
		h.auth = catalog.AllowAll{}
	}
	if h.log == nil {
		h.log = slog.Default()
	}

	r := chi.NewRouter()
	r.NotFound(h.handle(h.notFound))
	r.MethodNotAllowed(h.handle(h.methodNotAllowed))

	const pkg = "/api/v1/packages/{namespace}/{name}"
	r.Get("/api/v1/packages", h.handle(h.search))
	r.Get(pkg, h.handle(h.getPackage))
	r.Delete(pkg, h.handle(h.deletePackage))
	r.Get(pkg+"/versions/{version}", h.handle(h.getVersion))
	r.Get(pkg+"/versions/{version}/files/*", h.handle(h.getFile))
	r.Get(pkg+"/versions/{version}/permissions", h.handle(h.getPermissions))
	r.Get(pkg+"/versions/{version}/images", h.handle(h.getImages))
	r.Get(pkg+"/versions/{version}/installable", h.handle(h.getInstallable))
	r.Post(pkg+"/versions/{version}/approval", h.handle(h.approve))
	r.Get(pkg+"/channels/{channel}/graph", h.handle(h.getGraph))
	r.Get(pkg+"/upgrades", h.handle(h.getUpgrades))
	r.Get("/api/v1/changes", h.handle(h.changes))
	r.Get("/api/v1/artifacts", h.handle(h.artifacts))
	r.Get("/api/v1/status", h.handle(h.status))
	r.Get("/api/v1/inventory", h.handle(h.inventory))
	r.Get("/api/v1/usage", h.handle(h.usages))
	r.Get("/api/v1/namespaces/{namespace}/usage", h.handle(h.namespaceUsage))
	r.Get("/api/v1/olm/{namespace}/all", h.handle(h.olmAll))
	r.Get("/api/v1/olm/{namespace}/metas", h.handle(h.olmMetas))
	r.Get("/api/v1/sources", h.handle(h.sources))
	r.Get("/api/v1/sources/key", h.handle(h.sourcesKey))
	r.Post("/api/v1/namespaces/{namespace}/sources/{name}/check", h.handle(h.checkSource))
	if opts.SourcesWebhook != nil {
		r.Method(http.MethodPost, "/api/v1/sources/webhook", opts.SourcesWebhook)
	} else {
		r.Post("/api/v1/sources/webhook", h.handle(func(http.ResponseWriter, *http.Request) error { return errNoSources }))
	}
	r.Get("/api/v1/image-mirrors", h.handle(h.getImageMirrors))
	if opts.Admin != nil {
		r.Method(http.MethodPut, "/api/v1/image-mirrors", opts.Admin(h.handle(h.putImageMirrors)))
	} else {
		r.Put("/api/v1/image-mirrors", h.handle(notImplemented("recording image mirrors")))
	}
	r.Get("/api/v1/openapi.yaml", h.handle(h.openAPI))
	r.Get("/index.yaml", h.handle(h.index))
	r.Get("/{namespace}/index.yaml", h.handle(h.index))
	r.Get("/api/helm/index.yaml", h.handle(h.helmIndex))
	r.Get("/api/helm/{namespace}/index.yaml", h.handle(h.helmIndex))
	r.Get("/api/helm/{namespace}/{name}/{file}", h.handle(h.helmChart))
	if opts.Events {
		r.Post("/events", h.handle(h.events))
	}
	h.mux = r
	return h
}

// ServeHTTP routes r on its whole path with a routing context of its own, so
// that the handler works the same under an outer chi router, and then hands
// the matched route pattern to the outer router's context, where the
// server's access log and metrics read it.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	outer := chi.RouteContext(r.Context())
	rctx := chi.NewRouteContext()
	h.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), chi.RouteCtxKey, rctx)))
	if outer != nil && len(rctx.RoutePatterns) > 0 {
		outer.RoutePatterns = rctx.RoutePatterns
	}
}

// openAPI serves the API's OpenAPI document.
func (h *handler) openAPI(w http.ResponseWriter, r *http.Request) error {
	if err := onlyParams(r); err != nil {
		return err
	}
	w.Header().Set("Content-Type", mediaTypeYAML)
	_, err := w.Write(openAPIDocument)
	return err
}
