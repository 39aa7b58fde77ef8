package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strconv"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/pkgformat"
)

// Sources is what the sources endpoints ask of the tracker of package
// sources (sources.Tracker).
type Sources interface {
	// Status returns the status of every tracked source, ordered by
	// namespace and package; the caller filters it by access.
	Status(ctx context.Context) ([]apiv1.Source, error)
	// Check asks for a check of the source of namespace/pkg now. An
	// unknown source gives an error wrapping fs.ErrNotExist.
	Check(ctx context.Context, namespace, pkg string) error
	// PublicKey is the PEM public key of the key berth signs what it
	// builds with.
	PublicKey() []byte
}

// mediaTypePEM is the media type of the provenance public key.
const mediaTypePEM = "application/x-pem-file"

// errNoSources answers the sources endpoints of a server that tracks no
// sources.
var errNoSources = fmt.Errorf("this server tracks no package sources (namespaces[].sources in the configuration, docs/sources.md): %w", catalog.ErrNotFound)

// sources answers GET /api/v1/sources?namespace=: the status of the
// tracked sources whose package the caller may pull, in namespace alone
// when it is set; an empty list from a server that tracks none.
func (h *handler) sources(w http.ResponseWriter, r *http.Request) error {
	p, err := queryParams(r, "namespace")
	if err != nil {
		return err
	}
	ns := p.get("namespace")
	if ns != "" {
		if err := pkgformat.ValidNamespace(ns); err != nil {
			return queryError("namespace", "%s", reason(err))
		}
	}
	access, err := h.auth.Pullable(r.Context())
	if err != nil {
		return err
	}
	list, err := VisibleSources(r.Context(), h.sourcesTracker, access, ns)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, apiv1.Sources{Sources: list})
}

// VisibleSources is the status of the sources of t whose package access
// allows, in namespace ns alone when it is not empty; never nil. A nil t
// tracks none.
func VisibleSources(ctx context.Context, t Sources, access catalog.Access, ns string) ([]apiv1.Source, error) {
	out := []apiv1.Source{}
	if t == nil {
		return out, nil
	}
	all, err := t.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the status of the sources: %w", err)
	}
	for _, s := range all {
		if (ns == "" || s.Namespace == ns) && access.Allows(s.Namespace, s.Package) {
			out = append(out, s)
		}
	}
	return out, nil
}

// checkSource answers POST
// /api/v1/namespaces/{namespace}/sources/{name}/check: it asks for a check
// of the source now, if the caller may push to its package. A source the
// caller may not see is not found, as an unknown one is.
func (h *handler) checkSource(w http.ResponseWriter, r *http.Request) error {
	ns, name, err := PackagePath(r)
	if err != nil {
		return err
	}
	if err := onlyParams(r); err != nil {
		return err
	}
	if h.sourcesTracker == nil {
		return errNoSources
	}
	if err := h.auth.MayPush(r.Context(), ns, name); err != nil {
		return err
	}
	if err := h.sourcesTracker.Check(r.Context(), ns, name); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no source publishes %s/%s (namespaces[].sources in the configuration): %w", ns, name, catalog.ErrNotFound)
	} else if err != nil {
		return fmt.Errorf("ask for a check of the source of %s/%s: %w", ns, name, err)
	}
	return writeJSON(w, http.StatusAccepted, apiv1.SourceCheck{Namespace: ns, Package: name})
}

// sourcesKey answers GET /api/v1/sources/key: the public key of berth's
// provenance key, which verifies the signatures and attestations of the
// versions it builds (cosign verify-attestation --key). Anyone may read it.
func (h *handler) sourcesKey(w http.ResponseWriter, r *http.Request) error {
	if err := onlyParams(r); err != nil {
		return err
	}
	if h.sourcesTracker == nil {
		return errNoSources
	}
	key := h.sourcesTracker.PublicKey()
	if len(key) == 0 {
		return fmt.Errorf("berth's provenance key is not loaded yet: %w", catalog.ErrNotFound)
	}
	w.Header().Set("Content-Type", mediaTypePEM)
	w.Header().Set("Content-Length", strconv.Itoa(len(key)))
	_, err := w.Write(key)
	return err
}
