package httpapi

import (
	"net/http"
	"strings"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/pkgformat"
)

// search answers GET /api/v1/packages.
func (h *handler) search(w http.ResponseWriter, r *http.Request) error {
	q, err := ParseSearch(r)
	if err != nil {
		return err
	}
	if q.Access, err = h.auth.Pullable(r.Context()); err != nil {
		return err
	}
	res, err := h.cat.Search(r.Context(), q)
	if err != nil {
		return err
	}
	resp := apiv1.SearchResponse{
		Packages: nonNil(res.Packages),
		Facets:   res.Facets,
		Total:    res.Total,
	}
	if resp.Facets.Format == nil {
		resp.Facets.Format = map[string]int{}
	}
	if resp.Facets.Namespace == nil {
		resp.Facets.Namespace = map[string]int{}
	}
	if next := q.Offset + q.Limit; next < res.Total {
		resp.Next = EncodeCursor(next)
	}
	return writeJSON(w, http.StatusOK, resp)
}

// maxImageParam bounds the image parameter: a repository of 255 bytes, a
// tag of 128 and a digest.
const maxImageParam = 512

// ParseSearch reads the query of a search, GET /api/v1/packages; it returns
// an error wrapping catalog.ErrInvalid that names the first malformed
// parameter.
func ParseSearch(r *http.Request) (catalog.Query, error) {
	q := catalog.Query{Sort: catalog.SortRelevance}
	p, err := queryParams(r, "q", "namespace", "format", "channel", "provides", "kubeVersion", "image", "verified", "sort", "limit", "cursor")
	if err != nil {
		return q, err
	}

	q.Text = p.get("q")
	if len(q.Text) > maxQueryText {
		return q, queryError("q", "is %d bytes long, the limit is %d", len(q.Text), maxQueryText)
	}
	if !printable(q.Text) {
		return q, queryError("q", "must be printable UTF-8")
	}

	if q.Namespace = p.get("namespace"); q.Namespace != "" {
		if err := pkgformat.ValidNamespace(q.Namespace); err != nil {
			return q, queryError("namespace", "%s", reason(err))
		}
	}

	switch f := pkgformat.Format(p.get("format")); f {
	case "", pkgformat.KUDO, pkgformat.OLM, pkgformat.Helm, pkgformat.Plain:
		q.Format = f
	default:
		return q, queryError("format", "%s is not one of kudo, olm, helm, plain", quote(string(f)))
	}

	if q.Channel = p.get("channel"); q.Channel != "" {
		if err := checkChannel(q.Channel); err != nil {
			return q, queryError("channel", "%s", err)
		}
	}

	if s := p.get("provides"); s != "" {
		if q.Provides, err = parseProvides(s); err != nil {
			return q, err
		}
	}

	if s := p.get("kubeVersion"); s != "" {
		key, ok := catalog.KubeVersionKey(s)
		if !ok {
			return q, queryError("kubeVersion", "%s is not a Kubernetes version such as 1.29 or v1.29.3", quote(s))
		}
		q.KubeVersion = key
	}

	if s := p.get("image"); s != "" {
		if len(s) > maxImageParam {
			return q, queryError("image", "is %d bytes long, the limit is %d", len(s), maxImageParam)
		}
		if q.Image, err = catalog.ParseImageRef(s); err != nil {
			return q, queryError("image", "%s; give a repository such as quay.io/org/img, with a tag or digest to narrow to one reference", strings.TrimPrefix(err.Error(), catalog.ErrInvalid.Error()+": "))
		}
	}

	switch s := p.get("verified"); s {
	case "":
	case "true", "false":
		v := s == "true"
		q.Verified = &v
	default:
		return q, queryError("verified", "%s is not true or false", quote(s))
	}

	switch s := catalog.Sort(p.get("sort")); s {
	case "":
	case catalog.SortRelevance, catalog.SortName, catalog.SortUpdated:
		q.Sort = s
	default:
		return q, queryError("sort", "%s is not one of relevance, name, updated", quote(string(s)))
	}

	if q.Limit, err = p.limit(); err != nil {
		return q, err
	}
	if q.Offset, err = p.cursor(); err != nil {
		return q, err
	}
	return q, nil
}
