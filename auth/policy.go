package auth

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/olm"
)

// NamespaceResource is the resource of a namespace-wide action (managing its
// robots): "NAMESPACE/*". A rule matches it only when its glob covers the
// whole namespace ("team-a/*", "*/*").
func NamespaceResource(namespace string) string { return namespace + "/*" }

// Everything is the resource of registry-wide actions (reading /metrics,
// managing any namespace): a rule matches it only with the glob "*/*".
const Everything = "*/*"

// rule is one compiled access rule.
type rule struct {
	source   string // where it was written: "auth.rules[2]", "auth.public[0]"
	subjects []string
	globs    []string
	actions  []Action
	deny     bool
}

func (r *rule) matchesResource(repo string) bool {
	return slices.ContainsFunc(r.globs, func(g string) bool { return globMatch(g, repo) })
}

// globMatch reports whether the glob g (path.Match syntax, checked when the
// configuration was) matches s: the one reading of globs that rules, robot
// scopes and the catalog's namespace shortcut share.
func globMatch(g, s string) bool {
	ok, _ := path.Match(g, s)
	return ok
}

func (r *rule) covers(action Action) bool {
	return slices.ContainsFunc(r.actions, func(a Action) bool { return a.Covers(action) })
}

func (r *rule) matchesSubject(id Identity) bool {
	return slices.ContainsFunc(r.subjects, id.matches)
}

// Policy is the access rules of the configuration. The zero Policy denies
// everything; a nil *Policy is berth without auth, which allows everything.
type Policy struct {
	rules []rule
}

// NewPolicy compiles the rules of cfg; auth.public namespaces become rules
// allowing anonymous pull. cfg must have been validated.
func NewPolicy(cfg *config.Auth) (*Policy, error) {
	p := &Policy{}
	for i, ns := range cfg.Public {
		p.rules = append(p.rules, rule{
			source:   fmt.Sprintf("auth.public[%d] (%s)", i, ns),
			subjects: []string{Anonymous},
			globs:    []string{ns + "/*"},
			actions:  []Action{Pull},
		})
	}
	for i, r := range cfg.Rules {
		c := rule{source: fmt.Sprintf("auth.rules[%d]", i), subjects: r.Subjects, globs: r.Repositories, deny: r.Effect == "deny"}
		for _, s := range r.Actions {
			a, err := ParseAction(s)
			if err != nil {
				return nil, fmt.Errorf("%s.actions: %w", c.source, err)
			}
			c.actions = append(c.actions, a)
		}
		p.rules = append(p.rules, c)
	}
	return p, nil
}

// Decision is the answer to one access question, with its reason.
type Decision struct {
	// Allowed is the answer.
	Allowed bool
	// Rule is where the deciding rule was written ("auth.rules[2]",
	// "robot team-a+ci scopes[0]"), or "" when no rule decided.
	Rule string
	// Reason says why, in words.
	Reason string
}

// Decide is the one access decision of berth: may id do action on repo (a
// repository namespace/name, NamespaceResource(ns) or Everything)? A nil
// policy (no auth section) allows everything but writing a namespace's OLM
// catalog.
//
// A namespace's OLM catalog repository (olm.CatalogRepository) has its own
// rule (decideOLMCatalog). Elsewhere, a token (id.Limited) must grant the
// action on repo first. Then the first deny rule matching the subject, the
// repository and the action denies. Otherwise the first allow rule that
// matches allows; a robot is allowed only by its own scopes and by the rules
// for anonymous. Otherwise the action is denied.
func (p *Policy) Decide(id Identity, repo string, action Action) Decision {
	return p.decide(id, repo, action, true)
}

// decide is Decide; without explain, an allowed decision may come without
// its Rule and Reason, whose formatting costs more than the decision, for
// callers that report only refusals (the gate of the OCI API, Allowed). A
// refusal always has them.
func (p *Policy) decide(id Identity, repo string, action Action, explain bool) Decision {
	if ns, ok := olm.CatalogNamespace(repo); ok {
		return p.decideOLMCatalog(id, repo, ns, action)
	}
	if p == nil {
		return Decision{Allowed: true, Reason: "auth is off: everything is allowed"}
	}
	if id.Limited && !id.grants(repo, action) {
		return Decision{Reason: fmt.Sprintf("the token does not grant %s on %s", action, repo)}
	}
	for i := range p.rules {
		r := &p.rules[i]
		if r.deny && r.covers(action) && r.matchesSubject(id) && r.matchesResource(repo) {
			return Decision{Rule: r.source, Reason: fmt.Sprintf("%s denies %s %s on %s", r.source, id.subject(), action, repo)}
		}
	}
	if id.Robot != nil {
		if d, ok := id.Robot.decide(repo, action, explain); ok {
			return d
		}
	}
	for i := range p.rules {
		r := &p.rules[i]
		if r.deny || !r.covers(action) || !r.matchesResource(repo) {
			continue
		}
		if id.Robot != nil && !slices.Contains(r.subjects, Anonymous) {
			continue
		}
		if !r.matchesSubject(id) {
			continue
		}
		d := Decision{Allowed: true, Rule: r.source}
		if explain {
			d.Reason = fmt.Sprintf("%s allows %s %s on %s", r.source, id.subject(), action, repo)
		}
		return d
	}
	return Decision{Reason: fmt.Sprintf("no rule allows %s %s on %s", id.subject(), action, repo)}
}

// decideOLMCatalog decides action on repo, the OLM catalog repository of
// namespace ns. Its image names every package of ns, so pulling it needs
// pull on every one of them: coverage of ns must be CoversAll for id (a
// deny rule on any package of ns, or allows on some packages only, are
// not), and a token must grant pull on repo itself. berth generates it, so
// every other action is denied to everyone, with auth or without
// (registry.ReservedWrite refuses the writes in the registry itself).
func (p *Policy) decideOLMCatalog(id Identity, repo, ns string, action Action) Decision {
	rule := fmt.Sprintf("%s is namespace %s's OLM catalog: pull needs pull on every package of %s", repo, ns, ns)
	switch {
	case action != Pull:
		return Decision{Reason: fmt.Sprintf("%s; %s is denied to everyone, as berth generates it (docs/olm.md)", rule, action)}
	case p == nil:
		return Decision{Allowed: true, Reason: rule + "; auth is off: everyone may"}
	case id.Limited && !id.grants(repo, Pull):
		return Decision{Reason: fmt.Sprintf("%s; the token does not grant pull on %s", rule, repo)}
	}
	whole := id
	whole.Limited, whole.Grants = false, nil
	if p.coverage(whole, ns) == catalog.CoversAll {
		return Decision{Allowed: true, Reason: fmt.Sprintf("%s; the rules let %s pull every package of %s", rule, id.subject(), ns)}
	}
	return Decision{Reason: fmt.Sprintf("%s; the rules do not let %s pull every package of %s", rule, id.subject(), ns)}
}

// Allowed is Decide's answer alone.
func (p *Policy) Allowed(id Identity, repo string, action Action) bool {
	return p.decide(id, repo, action, false).Allowed
}

func (id Identity) subject() string {
	if id.IsAnonymous() || len(id.Groups) == 0 {
		return id.Name()
	}
	return id.Subject + " (groups " + strings.Join(id.Groups, ", ") + ")"
}
