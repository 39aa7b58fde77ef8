package permissions

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/berth-registry/berth/pkgformat"
)

// MaxGrants bounds the grants Diff expands one version's rules to (scope ×
// API group × resource × name × verb, or scope × URL × verb).
const MaxGrants = 100_000

// ErrTooBroad says a version's rules expand to more than MaxGrants grants.
var ErrTooBroad = errors.New("permissions too broad to compare")

// Grant is one thing a rule allows: a verb on a resource (with a name, ""
// for all) of an API group, or on a non-resource URL, in a scope.
type Grant struct {
	Scope    string `json:"scope"`
	APIGroup string `json:"apiGroup,omitempty"`
	Resource string `json:"resource,omitempty"`
	Name     string `json:"name,omitempty"`
	URL      string `json:"url,omitempty"`
	Verb     string `json:"verb"`
}

func (g Grant) String() string {
	target := g.Resource
	if g.URL != "" {
		target = g.URL
	} else {
		if g.APIGroup != "" {
			target += "." + g.APIGroup
		}
		if g.Name != "" {
			target += "/" + g.Name
		}
	}
	return fmt.Sprintf("%s %s (%s)", g.Verb, target, g.Scope)
}

// Change is what an upgrade from one version to another changes in the
// permissions asked for.
type Change struct {
	From Rating `json:"from"`
	To   Rating `json:"to"`
	// Added are the grants of the new version that no grant of the old
	// covers; Removed the reverse. Both sorted.
	Added   []Grant `json:"added"`
	Removed []Grant `json:"removed"`
	// Widens is true when the new version may do something the old could
	// not: some grant is added.
	Widens bool `json:"widens"`
	// RatingWidens is true when the new version's rating is worse.
	RatingWidens bool `json:"ratingWidens"`
}

// Diff compares the permissions of an old and a new version. It returns
// an error wrapping ErrTooBroad when either expands to more than MaxGrants.
func Diff(from, to *pkgformat.Permissions) (*Change, error) {
	old, err := grants(from)
	if err != nil {
		return nil, fmt.Errorf("old version: %w", err)
	}
	cur, err := grants(to)
	if err != nil {
		return nil, fmt.Errorf("new version: %w", err)
	}
	c := &Change{From: Of(from).Rating, To: Of(to).Rating, Added: uncovered(cur, old), Removed: uncovered(old, cur)}
	c.Widens, c.RatingWidens = len(c.Added) > 0, c.To > c.From
	return c, nil
}

// uncovered returns the grants of gs that no grant of by covers, sorted
// and without duplicates. A grant is covered by one that is the same, or
// has "*" for its verb, API group, resource or URL, no name (every name),
// or the cluster scope for the namespace's: each grant of gs is looked up
// under each of these 64 forms, so the work grows with the grants, not
// with their product.
func uncovered(gs, by []Grant) []Grant {
	have := index(by)
	out := []Grant{}
	for _, g := range gs {
		if !covered(g, have) {
			out = append(out, g)
		}
	}
	slices.SortFunc(out, func(a, b Grant) int { return strings.Compare(a.String(), b.String()) })
	return slices.Compact(out)
}

// index is the set of gs, for covered.
func index(gs []Grant) map[Grant]bool {
	have := make(map[Grant]bool, len(gs))
	for _, g := range gs {
		have[g] = true
	}
	return have
}

// covered reports whether some grant in have covers g.
func covered(g Grant, have map[Grant]bool) bool {
	for form := range 64 {
		c := g
		if form&1 != 0 {
			c.Scope = Cluster
		}
		if form&2 != 0 {
			c.Verb = "*"
		}
		if form&4 != 0 {
			c.APIGroup = "*"
		}
		if form&8 != 0 {
			c.Resource = "*"
		}
		if form&16 != 0 {
			c.URL = "*"
		}
		if form&32 != 0 {
			c.Name = ""
		}
		// A resource grant has no URL and a URL grant no resource: their
		// wildcards apply only to what they have.
		if (g.URL == "" && form&16 != 0) || (g.URL != "" && form&(4|8|32) != 0) {
			continue
		}
		if have[c] {
			return true
		}
	}
	return false
}

// grants expands p's rules, refusing beyond MaxGrants before it allocates.
func grants(p *pkgformat.Permissions) ([]Grant, error) {
	if p == nil {
		return nil, nil
	}
	n := 0
	count := func(rules []pkgformat.PolicyRule) {
		for _, r := range rules {
			names := max(1, len(r.ResourceNames))
			targets := max(1, len(r.APIGroups)) * len(r.Resources) * names
			if len(r.NonResourceURLs) > 0 {
				targets += len(r.NonResourceURLs)
			}
			if targets > MaxGrants || len(r.Verbs) > MaxGrants {
				n = MaxGrants + 1
				return
			}
			n += targets * len(r.Verbs)
			if n > MaxGrants {
				return
			}
		}
	}
	count(p.Namespaced)
	count(p.Cluster)
	if n > MaxGrants {
		return nil, fmt.Errorf("%w: more than %d grants", ErrTooBroad, MaxGrants)
	}
	out := make([]Grant, 0, n)
	add := func(scope string, rules []pkgformat.PolicyRule) {
		for _, r := range rules {
			apiGroups := r.APIGroups
			if len(apiGroups) == 0 {
				apiGroups = []string{""}
			}
			names := r.ResourceNames
			if len(names) == 0 {
				names = []string{""}
			}
			for _, v := range r.Verbs {
				for _, u := range r.NonResourceURLs {
					out = append(out, Grant{Scope: scope, URL: u, Verb: v})
				}
				for _, g := range apiGroups {
					for _, res := range r.Resources {
						for _, name := range names {
							out = append(out, Grant{Scope: scope, APIGroup: g, Resource: res, Name: name, Verb: v})
						}
					}
				}
			}
		}
	}
	add(Namespace, p.Namespaced)
	add(Cluster, p.Cluster)
	return out, nil
}
