package pkgformat

import (
	"cmp"
	"slices"
	"strings"
)

// normalize trims, sorts and deduplicates every list of md so that the same
// content always gives the same metadata, whatever order the files list it in.
func normalize(md *Metadata) {
	md.Keywords = sortedStrings(md.Keywords)
	md.RelatedImages = sortedStrings(md.RelatedImages)
	for i, m := range md.Maintainers {
		md.Maintainers[i] = Maintainer{Name: strings.TrimSpace(m.Name), Email: strings.TrimSpace(m.Email), URL: strings.TrimSpace(m.URL)}
	}
	for i, l := range md.Links {
		md.Links[i] = Link{Name: strings.TrimSpace(l.Name), URL: strings.TrimSpace(l.URL)}
	}
	md.Maintainers = sortedUnique(md.Maintainers, func(a, b Maintainer) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Email, b.Email), strings.Compare(a.URL, b.URL))
	}, func(m Maintainer) bool { return m.Name == "" && m.Email == "" && m.URL == "" })
	md.Links = sortedUnique(md.Links, func(a, b Link) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.URL, b.URL))
	}, func(l Link) bool { return l.URL == "" })
	for i := range md.Channels {
		md.Channels[i].Skips = sortedStrings(md.Channels[i].Skips)
	}
	md.Channels = sortedUnique(md.Channels, func(a, b Channel) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Replaces, b.Replaces),
			strings.Compare(a.SkipRange, b.SkipRange), slices.Compare(a.Skips, b.Skips))
	}, func(c Channel) bool { return c.Name == "" })
	md.ProvidedAPIs = sortedUnique(md.ProvidedAPIs, compareAPI, func(a API) bool { return a.Kind == "" })
	md.RequiredAPIs = sortedUnique(md.RequiredAPIs, compareAPI, func(a API) bool { return a.Kind == "" })
	md.RequiredPackages = sortedUnique(md.RequiredPackages, func(a, b PackageRequirement) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.VersionRange, b.VersionRange))
	}, func(r PackageRequirement) bool { return r.Name == "" })
	if p := md.Permissions; p != nil {
		p.Cluster, p.Namespaced = sortedRules(p.Cluster), sortedRules(p.Namespaced)
		if len(p.Cluster) == 0 && len(p.Namespaced) == 0 {
			md.Permissions = nil
		}
	}
}

func compareAPI(a, b API) int {
	return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Version, b.Version),
		strings.Compare(a.Kind, b.Kind), strings.Compare(a.Plural, b.Plural))
}

// sortedRules sorts the lists inside each rule, then the rules, and drops
// duplicates.
func sortedRules(rules []PolicyRule) []PolicyRule {
	for i, r := range rules {
		rules[i] = PolicyRule{
			APIGroups:       sortedSet(r.APIGroups),
			Resources:       sortedSet(r.Resources),
			ResourceNames:   sortedSet(r.ResourceNames),
			Verbs:           sortedSet(r.Verbs),
			NonResourceURLs: sortedSet(r.NonResourceURLs),
		}
	}
	return sortedUnique(rules, func(a, b PolicyRule) int {
		return cmp.Or(slices.Compare(a.APIGroups, b.APIGroups), slices.Compare(a.Resources, b.Resources),
			slices.Compare(a.ResourceNames, b.ResourceNames), slices.Compare(a.Verbs, b.Verbs),
			slices.Compare(a.NonResourceURLs, b.NonResourceURLs))
	}, func(r PolicyRule) bool { return len(r.Verbs) == 0 })
}

// sortedStrings trims the strings of s, drops empty ones, sorts and
// deduplicates them; nil when nothing is left.
func sortedStrings(s []string) []string {
	trimmed := make([]string, len(s))
	for i, x := range s {
		trimmed[i] = strings.TrimSpace(x)
	}
	return sortedUnique(trimmed, strings.Compare, func(x string) bool { return x == "" })
}

// sortedSet sorts and deduplicates s, keeping empty strings (in RBAC rules ""
// is the core API group); nil when s is empty.
func sortedSet(s []string) []string {
	return sortedUnique(s, strings.Compare, func(string) bool { return false })
}

// sortedUnique returns the elements of s that drop rejects, sorted by compare
// with duplicates removed; nil when nothing is left.
func sortedUnique[T any](s []T, compare func(a, b T) int, drop func(T) bool) []T {
	out := slices.DeleteFunc(slices.Clone(s), drop)
	if len(out) == 0 {
		return nil
	}
	slices.SortFunc(out, compare)
	return slices.CompactFunc(out, func(a, b T) bool { return compare(a, b) == 0 })
}
