package httpapi

import (
	"net/http"
	"strings"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/pkgformat"
)

// getPackage answers GET /api/v1/packages/{namespace}/{name}.
func (h *handler) getPackage(w http.ResponseWriter, r *http.Request) error {
	ns, name, err := PackagePath(r)
	if err != nil {
		return err
	}
	access, err := h.pullable(r)
	if err != nil {
		return err
	}
	p, err := h.cat.Package(r.Context(), access, ns, name)
	if err != nil {
		return err
	}
	p.Versions = nonNil(p.Versions)
	p.Channels = nonNil(p.Channels)
	for i := range p.Channels {
		p.Channels[i].Versions = nonNil(p.Channels[i].Versions)
	}
	return writeJSON(w, http.StatusOK, p)
}

// deletePackage answers DELETE /api/v1/packages/{namespace}/{name}: it deletes
// every version, if the caller may delete the package. A package the caller
// may not pull is answered as one that does not exist.
func (h *handler) deletePackage(w http.ResponseWriter, r *http.Request) error {
	ns, name, err := PackagePath(r)
	if err != nil {
		return err
	}
	if err := onlyParams(r); err != nil {
		return err
	}
	if err := h.auth.MayDelete(r.Context(), ns, name); err != nil {
		return err
	}
	versions, err := h.cat.DeletePackage(r.Context(), ns, name)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, apiv1.Deleted{Namespace: ns, Name: name, Deleted: nonNil(versions)})
}

// getVersion answers GET /api/v1/packages/{namespace}/{name}/versions/{version}.
func (h *handler) getVersion(w http.ResponseWriter, r *http.Request) error {
	ns, name, err := PackagePath(r)
	if err != nil {
		return err
	}
	version, err := VersionParam(r)
	if err != nil {
		return err
	}
	access, err := h.pullable(r)
	if err != nil {
		return err
	}
	v, err := h.cat.Version(r.Context(), access, ns, name, version)
	if err != nil {
		return err
	}
	v.PullReference = PullHost(h.downloadBase(r)) + "/" + v.PullReference
	if v.Bundle != nil {
		v.Bundle.Reference = PullHost(h.downloadBase(r)) + "/" + v.Bundle.Reference
	}
	v.Files = nonNil(v.Files)
	v.Signatures = nonNil(v.Signatures)
	v.Attestations = nonNil(v.Attestations)
	normalizeMetadata(&v.Metadata)
	if v.Permissions != nil {
		normalizePermissions(v.Permissions)
	}
	return writeJSON(w, http.StatusOK, v)
}

// getPermissions answers
// GET /api/v1/packages/{namespace}/{name}/versions/{version}/permissions?from=:
// the review of the version's permissions and, with from, what upgrading
// from that version changes.
func (h *handler) getPermissions(w http.ResponseWriter, r *http.Request) error {
	ns, name, err := PackagePath(r)
	if err != nil {
		return err
	}
	version, err := VersionParam(r)
	if err != nil {
		return err
	}
	p, err := queryParams(r, "from")
	if err != nil {
		return err
	}
	from := p.get("from")
	if from != "" {
		if err := pkgformat.ValidVersion(from); err != nil {
			return queryError("from", "%s", reason(err))
		}
	}
	access, err := h.auth.Pullable(r.Context())
	if err != nil {
		return err
	}
	perms, err := h.cat.Permissions(r.Context(), access, ns, name, version, from)
	if err != nil {
		return err
	}
	for i := range perms.Review.Rules {
		perms.Review.Rules[i].Rule.Verbs = nonNil(perms.Review.Rules[i].Rule.Verbs)
	}
	return writeJSON(w, http.StatusOK, perms)
}

// getGraph answers GET /api/v1/packages/{namespace}/{name}/channels/{channel}/graph.
func (h *handler) getGraph(w http.ResponseWriter, r *http.Request) error {
	ns, name, err := PackagePath(r)
	if err != nil {
		return err
	}
	channel, err := channelParam(r)
	if err != nil {
		return err
	}
	access, err := h.pullable(r)
	if err != nil {
		return err
	}
	g, err := h.cat.Graph(r.Context(), access, ns, name, channel)
	if err != nil {
		return err
	}
	g.Nodes = nonNil(g.Nodes)
	g.Edges = nonNil(g.Edges)
	return writeJSON(w, http.StatusOK, g)
}

// getUpgrades answers GET /api/v1/packages/{namespace}/{name}/upgrades?from=&channel=.
// from is required; channel defaults to the package's default channel.
func (h *handler) getUpgrades(w http.ResponseWriter, r *http.Request) error {
	ns, name, err := PackagePath(r)
	if err != nil {
		return err
	}
	p, err := queryParams(r, "from", "channel")
	if err != nil {
		return err
	}
	from := p.get("from")
	if from == "" {
		return queryError("from", "is required: the version to upgrade from")
	}
	if err := pkgformat.ValidVersion(from); err != nil {
		return queryError("from", "%s", reason(err))
	}
	channel := p.get("channel")
	if channel != "" {
		if err := checkChannel(channel); err != nil {
			return queryError("channel", "%s", err)
		}
	}
	access, err := h.auth.Pullable(r.Context())
	if err != nil {
		return err
	}
	u, err := h.cat.Upgrades(r.Context(), access, ns, name, channel, from)
	if err != nil {
		return err
	}
	u.Next = nonNil(u.Next)
	u.Path = nonNil(u.Path)
	return writeJSON(w, http.StatusOK, u)
}

// nonNil returns s, or an empty slice when s is nil, so that lists are
// written [] and never null.
func nonNil[S ~[]E, E any](s S) S {
	if s == nil {
		return S{}
	}
	return s
}

// normalizeMetadata makes the lists of m that JSON writes without omitempty
// non-nil.
func normalizeMetadata(m *pkgformat.Metadata) {
	m.Files = nonNil(m.Files)
	if m.Permissions != nil {
		normalizePermissions(m.Permissions)
	}
}

func normalizePermissions(p *pkgformat.Permissions) {
	for _, rules := range [][]pkgformat.PolicyRule{p.Cluster, p.Namespaced} {
		for i := range rules {
			rules[i].Verbs = nonNil(rules[i].Verbs)
		}
	}
}

// PullHost is the host[:port] of a base URL, as image references name a registry.
func PullHost(base string) string {
	_, host, _ := strings.Cut(base, "://")
	return host
}
