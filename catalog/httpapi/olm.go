package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/olm"
)

// OLM is what the /api/v1/olm endpoints ask of the OLM catalog publisher
// (olm.Publisher has it).
type OLM interface {
	// WriteFBC writes the namespace's file-based catalog as JSON Lines,
	// package by package: the packages allow keeps, the documents keep
	// keeps. Its error wraps olm.ErrNoCatalog when the namespace has none.
	WriteFBC(ctx context.Context, w io.Writer, namespace string, allow func(name string) bool, keep func(schema, pkg string) bool) error
}

// mediaTypeJSONLines is the media type of catalogd's /all and /metas.
const mediaTypeJSONLines = "application/jsonl"

// olmAll answers GET /api/v1/olm/{namespace}/all: the namespace's FBC, as
// catalogd serves a catalog's, restricted to the packages the caller may pull.
func (h *handler) olmAll(w http.ResponseWriter, r *http.Request) error {
	access, err := h.pullable(r)
	if err != nil {
		return err
	}
	return h.writeFBC(w, r, access, nil)
}

// olmMetas answers GET /api/v1/olm/{namespace}/metas?schema=&package=: the
// documents of the namespace's FBC with that schema and of that package,
// each filter left out matching everything, as catalogd's metas endpoint.
func (h *handler) olmMetas(w http.ResponseWriter, r *http.Request) error {
	p, err := queryParams(r, "schema", "package")
	if err != nil {
		return err
	}
	access, err := h.auth.Pullable(r.Context())
	if err != nil {
		return err
	}
	schema, pkg := p.get("schema"), p.get("package")
	return h.writeFBC(w, r, access, func(s, name string) bool {
		return (schema == "" || s == schema) && (pkg == "" || name == pkg)
	})
}

// writeFBC streams the FBC of the request's namespace. A namespace with no
// catalog, and one whose packages the caller may pull none of, are not found.
func (h *handler) writeFBC(w http.ResponseWriter, r *http.Request, access catalog.Access, keep func(schema, pkg string) bool) error {
	ns, err := NamespaceParam(r)
	if err != nil {
		return err
	}
	notFound := fmt.Errorf("namespace %q has no OLM catalog: %w", ns, catalog.ErrNotFound)
	if h.olm == nil {
		return fmt.Errorf("this server does not generate OLM catalogs (berth serve catalog has no registry to store them in): %w", errNotImplemented)
	}
	if access.Covers(ns) == catalog.CoversNone {
		return notFound
	}
	w.Header().Set("Content-Type", mediaTypeJSONLines)
	err = h.olm.WriteFBC(r.Context(), w, ns, func(name string) bool { return access.Allows(ns, name) }, keep)
	if errors.Is(err, olm.ErrNoCatalog) {
		return notFound
	}
	return err
}
