package registry

import (
	"net/http"
	"strings"

	v2 "github.com/distribution/distribution/v3/registry/api/v2"
	"github.com/gorilla/mux"
)

// RouteKind is which endpoint of the OCI API a request under /v2/ addresses.
type RouteKind int

// The endpoints a Registry serves.
const (
	// RouteUnknown is a path no endpoint serves.
	RouteUnknown RouteKind = iota
	// RouteBase is /v2/.
	RouteBase
	// RouteCatalog is /v2/_catalog.
	RouteCatalog
	// RouteTags is /v2/<name>/tags/list.
	RouteTags
	// RouteManifest is /v2/<name>/manifests/<reference>.
	RouteManifest
	// RouteBlob is /v2/<name>/blobs/<digest>.
	RouteBlob
	// RouteUploadStart is /v2/<name>/blobs/uploads/.
	RouteUploadStart
	// RouteUpload is /v2/<name>/blobs/uploads/<uuid>.
	RouteUpload
	// RouteReferrers is /v2/<name>/referrers/<digest>.
	RouteReferrers
)

// Route is what a request under /v2/ addresses, as the Registry routes it.
type Route struct {
	Kind RouteKind
	// Repository is the <name> of the path, for the endpoints that have one.
	Repository string
	// Reference is the manifest's tag or digest, the blob's or the
	// referrers' subject digest, or the upload's UUID.
	Reference string
}

// routeKinds maps distribution's route names to their kinds.
var routeKinds = map[string]RouteKind{
	v2.RouteNameBase:            RouteBase,
	v2.RouteNameCatalog:         RouteCatalog,
	v2.RouteNameTags:            RouteTags,
	v2.RouteNameManifest:        RouteManifest,
	v2.RouteNameBlob:            RouteBlob,
	v2.RouteNameBlobUpload:      RouteUploadStart,
	v2.RouteNameBlobUploadChunk: RouteUpload,
}

// ParseRoute returns the route of req as ServeHTTP routes it: the referrers
// API first, then distribution's own router, so that the repository it
// names is the one the Registry serves. Repository names may contain slashes.
func ParseRoute(req *http.Request) Route {
	if repo, ref, ok := referrersPath(req.URL.Path); ok {
		return Route{Kind: RouteReferrers, Repository: repo, Reference: ref}
	}
	if r, ok := quickRoute(req.URL.Path); ok {
		return r
	}
	var m mux.RouteMatch
	if !v2.Router().Match(req, &m) || m.Route == nil {
		return Route{}
	}
	kind := routeKinds[m.Route.GetName()]
	switch kind {
	case RouteManifest:
		return Route{Kind: kind, Repository: m.Vars["name"], Reference: m.Vars["reference"]}
	case RouteBlob:
		return Route{Kind: kind, Repository: m.Vars["name"], Reference: m.Vars["digest"]}
	case RouteUpload:
		return Route{Kind: kind, Repository: m.Vars["name"], Reference: m.Vars["uuid"]}
	}
	return Route{Kind: kind, Repository: m.Vars["name"]}
}

// quickRoute parses the routes of every pull and push, a manifest by tag or
// sha256 digest, a blob by sha256 digest and a blob upload, without
// distribution's router and its regular expressions; it leaves every other
// path to the router, with which it agrees
// (TestQuickRouteAgreesWithTheRouter).
func quickRoute(p string) (Route, bool) {
	rest, ok := strings.CutPrefix(p, "/v2/")
	if !ok {
		return Route{}, false
	}
	if name, ok := strings.CutSuffix(rest, "/blobs/uploads/"); ok && validName(name) {
		return Route{Kind: RouteUploadStart, Repository: name}, true
	}
	if name, id, ok := splitRef(rest, "/blobs/uploads/"); ok && validUploadID(id) {
		return Route{Kind: RouteUpload, Repository: name, Reference: id}, true
	}
	if name, ref, ok := splitRef(rest, "/blobs/"); ok {
		if _, ok := sha256Digest(ref); ok {
			return Route{Kind: RouteBlob, Repository: name, Reference: ref}, true
		}
		return Route{}, false
	}
	if name, ref, ok := splitRef(rest, "/manifests/"); ok {
		if _, ok := sha256Digest(ref); ok || validTag(ref) {
			return Route{Kind: RouteManifest, Repository: name, Reference: ref}, true
		}
	}
	return Route{}, false
}

// validUploadID reports whether id is an upload's UUID as distribution's
// router reads it: [a-zA-Z0-9-_.=]+.
func validUploadID(id string) bool {
	for i := 0; i < len(id); i++ {
		b := id[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '_' || b == '.' || b == '=') {
			return false
		}
	}
	return id != ""
}
