package httpapi

import (
	"net/http"

	"github.com/berth-registry/berth/catalog/apiv1"
)

// changes answers GET /api/v1/changes?since=&limit=: the change feed after
// since, oldest first, without the changes of packages the caller may not
// pull. Next is where the following request starts, also when every change
// of the page was filtered out.
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
	c, err := h.cat.Changes(r.Context(), since, limit)
	if err != nil {
		return err
	}
	if !access.All {
		kept := c.Changes[:0:0]
		for _, ch := range c.Changes {
			if access.Allows(ch.Namespace, ch.Name) {
				kept = append(kept, ch)
			}
		}
		c.Changes = kept
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
		resp.Next = encodeCursor(offset + limit)
	}
	return writeJSON(w, http.StatusOK, resp)
}

// status answers GET /api/v1/status. The counts cover the whole catalog;
// the caller's access is still asked for, so that a caller the Authorizer
// refuses is refused here too.
func (h *handler) status(w http.ResponseWriter, r *http.Request) error {
	if _, err := h.pullable(r); err != nil {
		return err
	}
	s, err := h.cat.Status(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s)
}
