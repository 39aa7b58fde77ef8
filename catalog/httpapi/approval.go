package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
)

// maxApprovalBody caps the body of POST …/approval.
const maxApprovalBody = 4 << 10

// approve answers POST /api/v1/packages/{namespace}/{name}/versions/{version}/approval:
// it records that the version may be tagged with the permissions whose
// fingerprint the body names, if the caller administers the package. The
// version need not exist yet: it is the one a push was refused for.
func (h *handler) approve(w http.ResponseWriter, r *http.Request) error {
	ns, name, err := PackagePath(r)
	if err != nil {
		return err
	}
	version, err := VersionParam(r)
	if err != nil {
		return err
	}
	if err := onlyParams(r); err != nil {
		return err
	}
	body, err := readBody(w, r, "approval", maxApprovalBody, apiv1.MediaTypeJSON)
	if err != nil {
		return err
	}
	var req struct {
		Permissions string `json:"permissions"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Permissions == "" {
		return fmt.Errorf(`the body must be {"permissions": "sha256:…"}, the fingerprint the refusal of the push named: %w`, catalog.ErrInvalid)
	}
	by, err := h.auth.MayApprove(r.Context(), ns, name)
	if err != nil {
		return err
	}
	a, err := h.cat.Approve(r.Context(), ns, name, version, req.Permissions, by)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, a)
}
