package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
)

// maxImageMirrorsBody caps the body of PUT /api/v1/image-mirrors:
// catalog.MaxImageMirrors entries of two names of at most 255 bytes each,
// and their JSON.
const maxImageMirrorsBody = catalog.MaxImageMirrors * 600

// getImages answers GET /api/v1/packages/{namespace}/{name}/versions/{version}/images.
func (h *handler) getImages(w http.ResponseWriter, r *http.Request) error {
	ns, name, version, access, err := h.versionRequest(r)
	if err != nil {
		return err
	}
	imgs, err := h.cat.VersionImages(r.Context(), access, ns, name, version, PullHost(h.downloadBase(r)))
	if err != nil {
		return err
	}
	imgs.Images = nonNil(imgs.Images)
	return writeJSON(w, http.StatusOK, imgs)
}

// getInstallable answers GET /api/v1/packages/{namespace}/{name}/versions/{version}/installable.
func (h *handler) getInstallable(w http.ResponseWriter, r *http.Request) error {
	ns, name, version, access, err := h.versionRequest(r)
	if err != nil {
		return err
	}
	inst, err := h.cat.Installable(r.Context(), access, ns, name, version, PullHost(h.downloadBase(r)))
	if err != nil {
		return err
	}
	inst.Images = nonNil(inst.Images)
	return writeJSON(w, http.StatusOK, inst)
}

// versionRequest reads the path of a request about one version, which takes
// no query parameters, and what the caller may pull.
func (h *handler) versionRequest(r *http.Request) (ns, name, version string, access catalog.Access, err error) {
	if ns, name, err = PackagePath(r); err != nil {
		return
	}
	if version, err = VersionParam(r); err != nil {
		return
	}
	if err = onlyParams(r); err != nil {
		return
	}
	access, err = h.auth.Pullable(r.Context())
	return
}

// getImageMirrors answers GET /api/v1/image-mirrors, to any caller who may
// pull something.
func (h *handler) getImageMirrors(w http.ResponseWriter, r *http.Request) error {
	if err := onlyParams(r); err != nil {
		return err
	}
	access, err := h.auth.Pullable(r.Context())
	if err != nil {
		return err
	}
	if !access.All && access.Pull == nil {
		return fmt.Errorf("the image mirrors are for callers who may pull from this berth: %w", catalog.ErrDenied)
	}
	ms, err := h.cat.ImageMirrors(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, apiv1.ImageMirrors{Mirrors: nonNil(ms)})
}

// putImageMirrors answers PUT /api/v1/image-mirrors, behind the admin gate:
// it records the mirrors of the body, each replacing the one with the same
// source, and answers every mirror recorded.
func (h *handler) putImageMirrors(w http.ResponseWriter, r *http.Request) error {
	if err := onlyParams(r); err != nil {
		return err
	}
	body, err := readBody(w, r, "image mirrors", maxImageMirrorsBody, apiv1.MediaTypeJSON)
	if err != nil {
		return err
	}
	var req apiv1.ImageMirrors
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || dec.More() {
		if err == nil {
			err = fmt.Errorf("more than one document")
		}
		return fmt.Errorf(`the body must be {"mirrors": [{"source": "quay.io/org", "mirror": "host:5000/mirror/org"}, …]}: %v: %w`, err, catalog.ErrInvalid)
	}
	ms, err := h.cat.SetImageMirrors(r.Context(), req.Mirrors)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, apiv1.ImageMirrors{Mirrors: nonNil(ms)})
}

// notImplemented answers every request 501 NOT_IMPLEMENTED, saying what
// this server cannot do.
func notImplemented(what string) handlerFunc {
	return func(http.ResponseWriter, *http.Request) error {
		return fmt.Errorf("%s is not set up on this server (no admin gate): %w", what, catalog.ErrNotImplemented)
	}
}
