package auth

import (
	"context"
	"slices"
	"strings"
	"time"
)

// Anonymous is the subject of a caller who did not log in.
const Anonymous = "anonymous"

// Identity is who a request comes from, as authentication established it.
type Identity struct {
	// Subject is "anonymous", "user:NAME", "robot:NAMESPACE+NAME" or
	// "oidc:NAME".
	Subject string
	// Groups the subject is in (from the config for users, from the
	// issuer's mapping for OIDC subjects).
	Groups []string
	// Robot is the robot account of a robot subject, as the robot store
	// held it when the request came in (checked active).
	Robot *Robot
	// Limited is true when the request carries a token berth issued: only
	// what Grants list may then be done with it, whatever the policy allows.
	Limited bool
	// Grants are the token's grants, when Limited.
	Grants []Grant
	// Issuer is the OIDC issuer that vouched for an oidc subject: the
	// credentials berth mints for it stop working when the issuer is no
	// longer trusted.
	Issuer string
	// Expires is when the credential the identity was proven with stops
	// being valid (an OIDC token's exp, a robot's expiry); zero when it
	// does not expire. Nothing berth mints for the identity outlives it.
	Expires time.Time
	// password is the fingerprint of an htpasswd user's password hash
	// (signingKey.fingerprint): the tokens minted for the user carry it,
	// and stop working when the password changes.
	password string
}

// Grant is one entry of a token's access claim, as the token spec has it.
type Grant struct {
	// Type is "repository" or "registry".
	Type string `json:"type"`
	// Name is the repository name, or "catalog" for the registry type.
	Name string `json:"name"`
	// Actions granted: pull, push, delete, sign; "*" for registry:catalog.
	Actions []string `json:"actions"`
}

// AnonymousIdentity is the identity of a caller who did not log in.
func AnonymousIdentity() Identity { return Identity{Subject: Anonymous} }

// IsAnonymous reports whether the caller did not log in.
func (id Identity) IsAnonymous() bool { return id.Subject == "" || id.Subject == Anonymous }

// Name is the subject of id as audit events and robot records name it:
// Subject, or "anonymous".
func (id Identity) Name() string {
	if id.IsAnonymous() {
		return Anonymous
	}
	return id.Subject
}

// matches reports whether a rule's subject s names id.
func (id Identity) matches(s string) bool {
	switch {
	case s == Anonymous:
		return true
	case s == "authenticated":
		return !id.IsAnonymous()
	case s == id.Subject:
		return true
	}
	g, ok := strings.CutPrefix(s, "group:")
	return ok && slices.Contains(id.Groups, g)
}

// grants reports whether the token of a Limited identity grants action on
// repo: a granted action covers it as it does in rules (push covers sign).
// A registry:catalog:* grant lets the holder list (pull) what the policy
// lets it pull.
func (id Identity) grants(repo string, action Action) bool {
	if action == Pull && id.grantsCatalog() {
		return true
	}
	covers := func(s string) bool { return Action(s).Covers(action) }
	for _, g := range id.Grants {
		if g.Type == "repository" && g.Name == repo && slices.ContainsFunc(g.Actions, covers) {
			return true
		}
	}
	return false
}

// grantsCatalog reports whether the token of a Limited identity grants
// registry:catalog:*, the listing of /v2/_catalog.
func (id Identity) grantsCatalog() bool {
	return slices.ContainsFunc(id.Grants, func(g Grant) bool {
		return g.Type == "registry" && g.Name == "catalog" && slices.Contains(g.Actions, "*")
	})
}

// withoutCatalogGrant is id without a registry:catalog:* grant, which lets
// a token list what the policy lets it pull but not pull it: requests on a
// repository under /v2/ are decided on this.
func (id Identity) withoutCatalogGrant() Identity {
	registryGrant := func(g Grant) bool { return g.Type == "registry" }
	if !id.Limited || !slices.ContainsFunc(id.Grants, registryGrant) {
		return id
	}
	id.Grants = slices.DeleteFunc(slices.Clone(id.Grants), registryGrant)
	return id
}

type identityKey struct{}

// WithIdentity returns ctx carrying id.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the identity ctx carries, or the anonymous identity.
func IdentityFrom(ctx context.Context) Identity {
	if id, ok := ctx.Value(identityKey{}).(Identity); ok {
		return id
	}
	return AnonymousIdentity()
}
