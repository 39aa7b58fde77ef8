package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/berth-registry/berth/catalog"
)

// CatalogAuthorizer is the catalog's Authorizer under a policy: the caller is
// the identity in the request's context (IdentityFrom), and every answer is
// Policy.Decide's. A nil Policy (auth off) allows everything.
type CatalogAuthorizer struct {
	// Policy decides; nil allows everything.
	Policy *Policy
	// Audit records refused deletions.
	Audit *Auditor
	// Metrics count the deletion decisions. Pull decisions of listings,
	// one per package, are not counted.
	Metrics *Metrics
}

var _ catalog.Authorizer = CatalogAuthorizer{}

// Pullable returns the packages the caller may pull: those on which Decide
// allows it pull. The access answers whole namespaces at once where the
// rules allow it (coverage), and package by package elsewhere.
func (a CatalogAuthorizer) Pullable(ctx context.Context) (catalog.Access, error) {
	p := a.Policy
	if p == nil {
		return catalog.Access{All: true}, nil
	}
	id := IdentityFrom(ctx)
	if p.coverage(id, "") == catalog.CoversAll {
		return catalog.Access{All: true}, nil
	}
	return catalog.Access{
		Namespace: func(ns string) catalog.Coverage { return p.coverage(id, ns) },
		Pull:      func(ns, name string) bool { return p.Allowed(id, ns+"/"+name, Pull) },
		Key:       accessKey(p, id),
	}, nil
}

// MayDelete decides delete on the repository namespace/name. A caller who
// may not pull it either is told it does not exist, in the words the catalog
// uses for a package that does not; one who may pull it is refused with the
// decision's reason.
func (a CatalogAuthorizer) MayDelete(ctx context.Context, namespace, name string) error {
	_, err := a.may(ctx, namespace, name, Delete)
	return err
}

// MayPush decides push on the repository namespace/name, as MayDelete
// decides delete.
func (a CatalogAuthorizer) MayPush(ctx context.Context, namespace, name string) error {
	_, err := a.may(ctx, namespace, name, Push)
	return err
}

// MayApprove decides admin on the repository namespace/name, as MayDelete
// decides delete, and returns the caller's name.
func (a CatalogAuthorizer) MayApprove(ctx context.Context, namespace, name string) (string, error) {
	return a.may(ctx, namespace, name, Admin)
}

// may decides action on the repository namespace/name for the caller, whose
// name it returns; refusals are audited.
func (a CatalogAuthorizer) may(ctx context.Context, namespace, name string, action Action) (string, error) {
	repo := namespace + "/" + name
	id := IdentityFrom(ctx)
	d := a.Policy.Decide(id, repo, action)
	a.Metrics.Decision(action, d.Allowed)
	if d.Allowed {
		return id.Name(), nil
	}
	a.Audit.Record(requestFrom(ctx), Event{Subject: id.Name(), Action: string(action), Resource: repo, Result: ResultDenied, Reason: d.Reason})
	if !a.Policy.Allowed(id, repo, Pull) {
		return "", fmt.Errorf("package %s: %w", repo, catalog.ErrNotFound)
	}
	return "", fmt.Errorf("%s: %w", d.Reason, catalog.ErrDenied)
}

// coverage says how much of namespace ns (of every namespace when ns is
// "") Decide lets id pull, from the rules alone: CoversAll only when Decide
// allows every repository of it, CoversNone only when it allows none, and
// CoversSome whenever that cannot be told without the repository's name.
// It follows Decide's steps: the token's grants, then deny rules, then the
// robot's scopes and the allow rules.
func (p *Policy) coverage(id Identity, ns string) catalog.Coverage {
	if p == nil {
		return catalog.CoversAll
	}
	grants := catalog.CoversAll
	if id.Limited && !id.grants("", Pull) { // no registry:catalog:* grant: only the repositories named
		grants = catalog.CoversNone
		for _, g := range id.Grants {
			if g.Type == "repository" && (ns == "" || strings.HasPrefix(g.Name, ns+"/")) && slices.Contains(g.Actions, string(Pull)) {
				grants = catalog.CoversSome
			}
		}
		if grants == catalog.CoversNone {
			return catalog.CoversNone
		}
	}
	denied := false
	for i := range p.rules {
		r := &p.rules[i]
		if !r.deny || !r.covers(Pull) || !r.matchesSubject(id) {
			continue
		}
		switch globsCoverage(r.globs, ns) {
		case catalog.CoversAll:
			return catalog.CoversNone
		case catalog.CoversSome:
			denied = true
		}
	}
	allowed := catalog.CoversNone
	if id.Robot != nil {
		for _, s := range id.Robot.Scopes {
			if slices.ContainsFunc(s.Actions, func(a Action) bool { return a.Covers(Pull) }) {
				allowed = max(allowed, globsCoverage(s.Repositories, ns))
			}
		}
	}
	for i := range p.rules {
		r := &p.rules[i]
		if r.deny || !r.covers(Pull) || !r.matchesSubject(id) || (id.Robot != nil && !slices.Contains(r.subjects, Anonymous)) {
			continue
		}
		allowed = max(allowed, globsCoverage(r.globs, ns))
	}
	switch {
	case allowed == catalog.CoversNone:
		return catalog.CoversNone
	case denied || grants == catalog.CoversSome:
		return catalog.CoversSome
	}
	return allowed
}

// globsCoverage is the largest coverage of the globs: how much of
// namespace ns (of every namespace when ns is "") they match.
func globsCoverage(globs []string, ns string) catalog.Coverage {
	c := catalog.CoversNone
	for _, g := range globs {
		c = max(c, globCoverage(g, ns))
	}
	return c
}

// globCoverage says how much of namespace ns (of every namespace when ns is
// "") the glob g matches, knowing that repository names are NAMESPACE/NAME
// with neither part empty nor holding '/' or a glob's special characters.
// As '*' and '?' never match '/', a glob without classes or escapes matches
// such a name only part by part, split at its one '/'. Globs with classes or
// escapes are CoversSome.
func globCoverage(g, ns string) catalog.Coverage {
	if strings.ContainsAny(g, `[\`) {
		return catalog.CoversSome
	}
	nsGlob, nameGlob, ok := strings.Cut(g, "/")
	if !ok || strings.Contains(nameGlob, "/") {
		return catalog.CoversNone
	}
	if ns == "" {
		if nsGlob == "*" && nameGlob == "*" {
			return catalog.CoversAll
		}
		return catalog.CoversSome
	}
	if !globMatch(nsGlob, ns) {
		return catalog.CoversNone
	}
	if nameGlob == "*" {
		return catalog.CoversAll
	}
	return catalog.CoversSome
}

// accessKey identifies what id may pull under p, for the entity tags of
// responses rendered for it: a digest of the policy's rules and of the
// identity.
func accessKey(p *Policy, id Identity) string {
	b, _ := json.Marshal(struct { // these types always encode
		Rules   string
		Subject string
		Groups  []string
		Robot   []RobotScope
		Limited bool
		Grants  []Grant
	}{fmt.Sprintf("%+v", p.rules), id.Subject, id.Groups, robotScopes(id.Robot), id.Limited, id.Grants})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

func robotScopes(r *Robot) []RobotScope {
	if r == nil {
		return nil
	}
	return r.Scopes
}

type requestKey struct{}

// withRequest returns ctx carrying r, for audit events recorded below it.
func withRequest(ctx context.Context, r *http.Request) context.Context {
	return context.WithValue(ctx, requestKey{}, r)
}

// requestFrom returns the request ctx carries, or nil.
func requestFrom(ctx context.Context) *http.Request {
	r, _ := ctx.Value(requestKey{}).(*http.Request)
	return r
}
