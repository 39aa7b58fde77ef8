package registry

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/distribution/distribution/v3/registry/api/errcode"

	"github.com/berth-registry/berth/olm"
	"github.com/berth-registry/berth/pkgformat"
)

// ReservedWrite returns the OCI DENIED error (HTTP 403) that refuses a
// request with method on route when it writes into a repository only berth
// writes: a namespace's OLM catalog (olm.CatalogRepository), which berth
// generates from the namespace's packages. Writes are any upload (a
// cross-repository mount into it included), and any manifest or blob
// request but GET and HEAD. It refuses as well every write but DELETE into
// <namespace>/olm (pkgformat.ReservedName), the repository of a package that
// would hold the namespace's catalog in its path: a package of that name
// stored before the name was reserved can still be deleted, which removes
// its own repository alone (guardedNamespace.Remove). It returns nil for
// every other request; reads of a reserved repository are the policy's to
// decide.
//
// ServeHTTP refuses these writes where requests enter the Registry,
// whatever auth is configured, and berth writes the catalog in process
// through Namespace(), which no request reaches. Refusing at the entry
// rather than in the namespace needs no mark on berth's own writes that a
// request could carry, and covers uploads, mounts and deletes alike.
func ReservedWrite(route Route, method string) error {
	if !writes(route.Kind, method) {
		return nil
	}
	if ns, name, _ := strings.Cut(route.Repository, "/"); method != http.MethodDelete && pkgformat.ValidNamespace(ns) == nil {
		if pkgformat.NotReserved(name) != nil {
			return errcode.ErrorCodeDenied.WithMessage(fmt.Sprintf("%s: %v", route.Repository, pkgformat.ErrReservedName))
		}
	}
	ns, ok := olm.CatalogNamespace(route.Repository)
	if !ok {
		return nil
	}
	return errcode.ErrorCodeDenied.WithMessage(fmt.Sprintf(
		"%s is namespace %s's OLM catalog, which berth generates from the namespace's packages (docs/olm.md); no client may push to it or delete from it",
		route.Repository, ns))
}

// writes reports whether a request with method on a route of kind may
// change a repository: uploads always, manifests and blobs unless read.
func writes(kind RouteKind, method string) bool {
	switch kind {
	case RouteUploadStart, RouteUpload:
		return true
	case RouteManifest, RouteBlob:
		return method != http.MethodGet && method != http.MethodHead
	}
	return false
}
