package auth

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// scope is one scope of a token request, in the token spec's grammar
// type:name:actions.
type scope struct {
	typ     string
	name    string
	actions []Action
}

// requestError is a token request the client got wrong: 400.
type requestError struct{ msg string }

func (e *requestError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &requestError{msg: fmt.Sprintf(format, args...)}
}

// parseScopes parses scope values, each one scope or several separated by
// spaces.
func parseScopes(values []string) ([]scope, error) {
	var scopes []scope
	for _, v := range values {
		for _, s := range strings.Fields(v) {
			sc, err := parseScope(s)
			if err != nil {
				return nil, err
			}
			scopes = append(scopes, sc)
		}
	}
	return scopes, nil
}

// parseScope parses type:name:actions. The type ends at the first colon
// and the actions start after the last, so the name may hold a host:port.
// The types are repository (with comma-separated actions, "*" for every
// action) and registry, whose one scope is registry:catalog:*.
func parseScope(s string) (scope, error) {
	typ, rest, ok := strings.Cut(s, ":")
	i := strings.LastIndex(rest, ":")
	if !ok || i < 0 {
		return scope{}, badRequest("scope %q: want type:name:actions", s)
	}
	name, actions := rest[:i], rest[i+1:]
	switch typ {
	case "registry":
		if name != "catalog" || actions != "*" {
			return scope{}, badRequest("scope %q: the one registry scope is registry:catalog:*", s)
		}
		return scope{typ: typ, name: name}, nil
	case "repository":
	default:
		return scope{}, badRequest("scope %q: unknown resource type %q: want repository or registry", s, typ)
	}
	if name == "" || strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return scope{}, badRequest("scope %q: want a repository name", s)
	}
	sc := scope{typ: typ, name: name}
	for a := range strings.SplitSeq(actions, ",") {
		if a == "*" {
			sc.actions = append(sc.actions, Actions...)
			continue
		}
		act, err := ParseAction(a)
		if err != nil {
			return scope{}, badRequest("scope %q: %v", s, err)
		}
		sc.actions = append(sc.actions, act)
	}
	return sc, nil
}

// grant is what a token for id gets of what scopes ask: for each asked
// action on a repository, the action when the policy allows it, and sign
// for a push it does not allow when it allows sign (a signer pushes
// signatures only). registry:catalog:* is always granted: listings show
// only what the holder may pull. Each repository appears once, without
// the actions another of its granted actions covers (push covers sign).
func (a *Authn) grant(id Identity, scopes []scope) []Grant {
	var grants []Grant
	asked := map[string][]Action{}
	var order []string
	catalog := false
	for _, sc := range scopes {
		if sc.typ == "registry" {
			catalog = true
			continue
		}
		if _, seen := asked[sc.name]; !seen {
			order = append(order, sc.name)
		}
		asked[sc.name] = append(asked[sc.name], sc.actions...)
	}
	for _, repo := range order {
		var granted []string
		allowed := func(act Action) bool {
			d := a.policy.Decide(id, repo, act)
			a.metrics.Decision(act, d.Allowed)
			return d.Allowed
		}
		for _, act := range Actions {
			if !slices.Contains(asked[repo], act) {
				continue
			}
			switch {
			case allowed(act):
				granted = append(granted, string(act))
			case act == Push && !slices.Contains(asked[repo], Sign) && allowed(Sign):
				granted = append(granted, string(Sign))
			}
		}
		if len(granted) > 0 {
			grants = append(grants, Grant{Type: "repository", Name: repo, Actions: withoutCovered(granted)})
		}
	}
	if catalog {
		grants = append(grants, Grant{Type: "registry", Name: "catalog", Actions: []string{"*"}})
	}
	return grants
}

// withoutCovered drops the actions another of actions covers.
func withoutCovered(actions []string) []string {
	var kept []string
	for _, a := range actions {
		covered := slices.ContainsFunc(actions, func(b string) bool { return b != a && Action(b).Covers(Action(a)) })
		if !covered {
			kept = append(kept, a)
		}
	}
	return kept
}
