package httpapi

import (
	"fmt"
	"net/http"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
)

// changes answers GET /api/v1/changes?since=&limit=: the change feed of
// the packages the caller may pull, after since, oldest first, numbered by
// catalog.Catalog.Changes so that nothing in it moves with the changes the
// caller may not see.
func (h *handler) changes(w http.ResponseWriter, r *http.Request) error {
	p, err := queryParams(r, "since", "limit")
	if err != nil {
		return err
	}
	since, err := p.since()
	if err != nil {
		return err
	}
	limit, err := p.limit()
	if err != nil {
		return err
	}
	access, err := h.auth.Pullable(r.Context())
	if err != nil {
		return err
	}
	c, err := h.cat.Changes(r.Context(), access, since, limit)
	if err != nil {
		return err
	}
	c.Changes = nonNil(c.Changes)
	return writeJSON(w, http.StatusOK, c)
}

// artifacts answers GET /api/v1/artifacts?limit=&cursor=: the tags the
// catalog holds but does not serve as package versions, with the reason.
func (h *handler) artifacts(w http.ResponseWriter, r *http.Request) error {
	p, err := queryParams(r, "limit", "cursor")
	if err != nil {
		return err
	}
	limit, err := p.limit()
	if err != nil {
		return err
	}
	offset, err := p.cursor()
	if err != nil {
		return err
	}
	access, err := h.auth.Pullable(r.Context())
	if err != nil {
		return err
	}
	// One more than the page tells whether there is a next page.
	list, err := h.cat.Unindexed(r.Context(), access, limit+1, offset)
	if err != nil {
		return err
	}
	resp := apiv1.Artifacts{Artifacts: nonNil(list)}
	if len(list) > limit {
		resp.Artifacts = list[:limit]
		resp.Next = EncodeCursor(offset + limit)
	}
	return writeJSON(w, http.StatusOK, resp)
}

// status answers GET /api/v1/status. Its counts cover the whole catalog,
// hidden packages too, so only a caller who may pull everything gets them.
func (h *handler) status(w http.ResponseWriter, r *http.Request) error {
	access, err := h.pullable(r)
	if err != nil {
		return err
	}
	if !access.All {
		return fmt.Errorf("the status counts the whole catalog; it needs pull on every repository: %w", catalog.ErrDenied)
	}
	s, err := h.cat.Status(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s)
}
