package ui

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/httpapi"
	"github.com/berth-registry/berth/internal/forwarded"
	"github.com/berth-registry/berth/permissions"
	"github.com/berth-registry/berth/pkgformat"
)

// versionPage is the data of a version's page.
type versionPage struct {
	Version *apiv1.Version
	// CRDs are the APIs the version provides, each with its examples.
	CRDs       []crd
	Signatures []verdict
	Review     *permissions.Review
	// Scopes group the review's rules by scope, namespace first.
	Scopes []scopeRules
	// Previous is the version before this one in its channel, and Change
	// what upgrading from it changes in the permissions; both empty for
	// the first version. ChangeError says why there is no Change.
	Previous    string
	Change      *permissions.Change
	ChangeError string
	// Channel is the channel the version is followed in: the package's
	// default one when the version is in it, else the first it is in.
	Channel string
	Install []snippet
	// Images are the images the version runs, each with what the
	// installable check found at this site; Installable is that check,
	// made only at a site that records image mirrors (one that berth
	// mirror import fills): elsewhere images are pulled from where their
	// references name them, and the check would only say so.
	Images      []imageRow
	Incomplete  string
	Installable *apiv1.Installable
}

func (p versionPage) title() string {
	return p.Version.Namespace + "/" + p.Version.Name + " " + p.Version.Version
}

// crd is a provided API and the examples of it the package gives (OLM's
// alm-examples).
type crd struct {
	pkgformat.API
	Examples []string
}

// verdict is a signature or an attestation as the page states it.
type verdict struct {
	What   string // "signature", or the attestation's predicate type
	Kind   string // tag or referrer
	Digest string
	// Verdict says by which key under which policy it is verified, or why not.
	Verdict  string
	Verified bool
}

type scopeRules struct {
	Scope string
	Rules []permissions.Rule
}

// versionPage serves GET /ui/packages/{namespace}/{name}/versions/{version}.
func (h *handler) versionPage(w http.ResponseWriter, r *http.Request) error {
	ns, name, version, access, err := h.versionPath(r)
	if err != nil {
		return err
	}
	v, err := h.cat.Version(r.Context(), access, ns, name, version)
	if err != nil {
		return err
	}
	host := httpapi.PullHost(forwarded.BaseURL(r, h.registryURL))
	v.PullReference = host + "/" + v.PullReference
	if v.Bundle != nil {
		v.Bundle.Reference = host + "/" + v.Bundle.Reference
	}
	p := versionPage{Version: v}
	if err := h.permissions(r.Context(), access, &p); err != nil {
		return err
	}
	imgs, mirrors, err := h.siteImages(r.Context(), access, v, host)
	if err != nil {
		return err
	}
	if len(mirrors) > 0 {
		if p.Installable, err = h.cat.Installable(r.Context(), access, ns, name, version, host); err != nil {
			return err
		}
	}
	p.Images, p.Incomplete = imageRows(imgs, p.Installable), imgs.Incomplete
	p.Install = h.install(r, v, p.Channel, imgs, mirrors)
	for _, scope := range []string{permissions.Namespace, permissions.Cluster} {
		var rules []permissions.Rule
		for _, rule := range p.Review.Rules {
			if rule.Scope == scope {
				rules = append(rules, rule)
			}
		}
		if len(rules) > 0 {
			p.Scopes = append(p.Scopes, scopeRules{Scope: scope, Rules: rules})
		}
	}
	examples := h.almExamples(r.Context(), access, v)
	for _, api := range v.Metadata.ProvidedAPIs {
		p.CRDs = append(p.CRDs, crd{API: api, Examples: examples[api.Group+"/"+api.Kind]})
	}
	p.Signatures = h.verdicts(v)
	h.render(w, r, http.StatusOK, "version", p)
	return nil
}

// permissions sets the channel the version is followed in (the package's
// default one, or the first it is in), the review of the version's
// permissions and the change from the previous version in that channel,
// when there is one.
func (h *handler) permissions(ctx context.Context, access catalog.Access, p *versionPage) error {
	v := p.Version
	pkg, err := h.cat.Package(ctx, access, v.Namespace, v.Name)
	if err != nil {
		return err
	}
	tag := pkgformat.Tag(v.Version)
	for _, c := range pkg.Channels {
		i := slices.Index(c.Versions, tag)
		if i < 0 || p.Channel != "" && c.Name != pkg.DefaultChannel {
			continue
		}
		p.Channel, p.Previous = c.Name, ""
		if i+1 < len(c.Versions) {
			p.Previous = c.Versions[i+1]
		}
	}
	perm, err := h.cat.Permissions(ctx, access, v.Namespace, v.Name, v.Version, p.Previous)
	if errors.Is(err, catalog.ErrInvalid) && p.Previous != "" {
		p.ChangeError = err.Error()
		perm, err = h.cat.Permissions(ctx, access, v.Namespace, v.Name, v.Version, "")
	}
	if err != nil {
		return err
	}
	p.Review, p.Change = perm.Review, perm.Change
	return nil
}

// versionPath reads the {namespace}, {name} and {version} segments, and
// what the viewer may pull.
func (h *handler) versionPath(r *http.Request) (ns, name, version string, access catalog.Access, err error) {
	if ns, name, err = httpapi.PackagePath(r); err != nil {
		return
	}
	if version, err = httpapi.VersionParam(r); err != nil {
		return
	}
	access, err = h.auth.Pullable(r.Context())
	return
}

// verdicts states the signatures and attestations of v.
func (h *handler) verdicts(v *apiv1.Version) []verdict {
	policy := "no trust policy"
	if rule, ok := h.trust.For(v.Namespace + "/" + v.Name); ok {
		policy = "the trust policy for " + strings.Join(rule.Repositories, ", ")
	}
	state := func(verified bool, key, reason string) string {
		if verified {
			return "verified by key " + key + " under " + policy
		}
		if reason == "" {
			reason = "not verified"
		}
		return "not verified: " + reason
	}
	var out []verdict
	for _, s := range v.Signatures {
		out = append(out, verdict{What: "signature", Kind: s.Kind, Digest: s.Digest, Verified: s.Verified, Verdict: state(s.Verified, s.KeyID, s.Reason)})
	}
	for _, a := range v.Attestations {
		d := verdict{What: "attestation " + a.PredicateType, Kind: a.Kind, Digest: a.Digest, Verified: a.Verified, Verdict: state(a.Verified, a.KeyID, a.Reason)}
		if a.Verified && len(a.Sources) > 0 {
			d.Verdict += "; built from " + strings.Join(a.Sources, ", ")
		}
		out = append(out, d)
	}
	return out
}

// almExamples returns the alm-examples of an OLM version's CSV, by
// group/Kind, each indented JSON: as indexing recorded them, or, for a
// version indexed before they were recorded that the re-index has not read
// again yet, read from its CSV as the indexer reads them
// (pkgformat.CSVExamples, under the default limits' YAML budget). Anything
// unreadable gives no examples; the page is shown without them.
func (h *handler) almExamples(ctx context.Context, access catalog.Access, v *apiv1.Version) map[string][]string {
	if v.Format != pkgformat.OLM {
		return nil
	}
	examples, recorded, err := h.cat.Examples(ctx, access, v.Namespace, v.Name, v.Version)
	if err != nil || recorded {
		return examples
	}
	i := slices.IndexFunc(v.Files, func(f pkgformat.FileInfo) bool { return catalog.IsCSV(f.Path, f.Size) })
	if i < 0 {
		return nil
	}
	rc, size, err := h.cat.File(ctx, access, v.Namespace, v.Name, v.Version, v.Files[i].Path)
	if err != nil {
		return nil
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, size))
	if err != nil {
		return nil
	}
	examples, err = pkgformat.CSVExamples(ctx, v.Files[i].Path, data, pkgformat.Limits{})
	if err != nil {
		return nil
	}
	return examples
}
