package graph

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/berth-registry/berth/pkgformat"
)

// Entry is one member of an OLM channel as the package's file-based catalog
// lists it in its olm.channel document: the version, its bundle's name (the
// CSV name) and its edges in the channel (see the package documentation for
// the few it leaves out). Replaces and Skips name CSVs, members or not.
type Entry struct {
	Version, Digest, CSVName string
	Replaces                 string
	Skips                    []string
	SkipRange                string
}

// Entries returns the members of an OLM channel, the default channel when
// name is "", newest first, with their edges as the channel's olm.channel
// entries give them. The error wraps ErrNotFound when there is no such
// channel, and ErrInvalid when name is "" and there is no default channel or
// the package is not an OLM package.
func (g *Graph) Entries(name string) ([]Entry, error) {
	c, err := g.lookup(name)
	if err != nil {
		return nil, err
	}
	if c.semver {
		return nil, fmt.Errorf("channel %q is not an OLM channel: %w", c.name, ErrInvalid)
	}
	out := slices.Clone(c.entries)
	for i := range out {
		out[i].Skips = slices.Clone(out[i].Skips)
	}
	return out, nil
}

// olmChannels builds the channels of an OLM package from its versions,
// newest first.
func olmChannels(vs []Version) []*channel {
	var bundles []Version // the versions a CSV name identifies, newest first
	byCSV := map[string]int{}
	names := map[string]bool{}
	for _, v := range vs {
		csv := v.Metadata.CSVName
		if _, taken := byCSV[csv]; csv == "" || taken {
			continue
		}
		byCSV[csv] = len(bundles)
		bundles = append(bundles, v)
		for _, c := range v.Metadata.Channels {
			if c.Name != "" {
				names[c.Name] = true
			}
		}
	}
	out := make([]*channel, 0, len(names))
	for _, name := range slices.Sorted(maps.Keys(names)) {
		out = append(out, olmChannel(name, bundles, byCSV))
	}
	return out
}

// olmChannel builds channel name, which some of bundles list: bundles are
// the versions of the package that a CSV name identifies, newest first, and
// byCSV indexes them by CSV name.
func olmChannel(name string, bundles []Version, byCSV map[string]int) *channel {
	edges := make(map[int]Entry) // bundle index -> its edges in the channel
	edgesOf := func(i int) Entry {
		e, ok := edges[i]
		if !ok {
			e = edgesIn(bundles[i], name)
			edges[i] = e
		}
		return e
	}
	head := olmHead(name, bundles, edgesOf)

	// The replaces chain from the head, and the versions its members skip.
	chain, closer := []int{head}, -1
	member := map[int]bool{head: true}
	for {
		last := chain[len(chain)-1]
		next, ok := byCSV[edgesOf(last).Replaces]
		if !ok {
			break
		}
		if member[next] {
			closer = last
			break
		}
		chain, member[next] = append(chain, next), true
	}
	for _, i := range chain {
		for _, skip := range edgesOf(i).Skips {
			if j, ok := byCSV[skip]; ok {
				member[j] = true
			}
		}
	}
	members := slices.Sorted(maps.Keys(member)) // newest first
	at := make(map[int]int, len(members))       // bundle index -> entry index
	entries := make([]Entry, len(members))
	headCSV, headVersion := bundles[head].Metadata.CSVName, semverOf(bundles[head].Version)
	for k, i := range members {
		at[i] = k
		e := edgesOf(i)
		if i == closer || e.Replaces == headCSV || e.Replaces == e.CSVName {
			e.Replaces = ""
		}
		e.Skips = validSkips(e.Skips, headCSV, e.CSVName)
		if r := skipRange(e.SkipRange); i != head && r != nil && headVersion != nil && r.Check(headVersion) {
			e.SkipRange = ""
		}
		entries[k] = e
	}
	keepChainListed(entries, chain, at)

	versions := make([]Version, len(members))
	for k, i := range members {
		versions[k] = bundles[i]
	}
	c := newChannel(name, versions, func(add func(from, to, rank int)) { olmEdges(entries, add) })
	c.entries, c.head = entries, at[head]
	return c
}

// olmHead returns the head of channel name (by bundle index): the greatest
// of the versions that list it where their edges in it end.
func olmHead(name string, bundles []Version, edgesOf func(int) Entry) int {
	var listers []int
	var entries []Entry
	for i, b := range bundles {
		if slices.ContainsFunc(b.Metadata.Channels, func(c pkgformat.Channel) bool { return c.Name == name }) {
			listers = append(listers, i)
			entries = append(entries, edgesOf(i))
		}
	}
	_, _, out := link(len(entries), func(add func(from, to, rank int)) { olmEdges(entries, add) })
	return listers[slices.Index(endsOfUpgrades(out), true)]
}

// edgesIn returns v's edges in channel name: those of its entries for the
// channel or, when it lists no such channel, of all its entries; the first
// replaces and first readable skipRange, and every skip.
func edgesIn(v Version, name string) Entry {
	e := Entry{Version: v.Version, Digest: v.Digest, CSVName: v.Metadata.CSVName}
	entries := v.Metadata.Channels
	if own := slices.DeleteFunc(slices.Clone(entries), func(c pkgformat.Channel) bool { return c.Name != name }); len(own) > 0 {
		entries = own
	}
	for _, c := range entries {
		e.Replaces = cmp.Or(e.Replaces, c.Replaces)
		if e.SkipRange == "" && skipRange(c.SkipRange) != nil {
			e.SkipRange = c.SkipRange
		}
		e.Skips = append(e.Skips, c.Skips...)
	}
	return e
}

// validSkips returns skips without repeats, empty names, the head's CSV
// name or the member's own: the skips an entry keeps.
func validSkips(skips []string, head, own string) []string {
	var out []string
	seen := map[string]bool{"": true, head: true, own: true}
	for _, s := range skips {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// keepChainListed makes every member of the replaces chain (bundle indexes,
// from the head) an entry opm validate finds: it follows replaces from the
// head only until one names a skipped entry, so each member past that point
// that no entry skips is listed as skipped by the member that replaces it.
// at maps bundle indexes to entries.
func keepChainListed(entries []Entry, chain []int, at map[int]int) {
	skipped := map[string]bool{}
	for _, e := range entries {
		for _, s := range e.Skips {
			skipped[s] = true
		}
	}
	past := false
	for j := 0; j+1 < len(chain); j++ {
		e, next := &entries[at[chain[j]]], entries[at[chain[j+1]]].CSVName
		if past && !skipped[next] {
			e.Skips = append(e.Skips, next)
		}
		past = past || skipped[next]
	}
}

// olmEdges calls add(from, to, rank) for every edge the entries derive
// between themselves, by index.
func olmEdges(entries []Entry, add func(from, to, rank int)) {
	byCSV := make(map[string]int, len(entries))
	versions := make([]*semver.Version, len(entries))
	for i, e := range entries {
		byCSV[e.CSVName] = i
		versions[i] = semverOf(e.Version)
	}
	for x, e := range entries {
		if y, ok := byCSV[e.Replaces]; ok {
			add(y, x, rankReplaces)
		}
		for _, skipped := range e.Skips {
			if z, ok := byCSV[skipped]; ok {
				add(z, x, rankSkips)
			}
		}
		if r := skipRange(e.SkipRange); r != nil {
			for v, sv := range versions {
				if sv != nil && r.Check(sv) {
					add(v, x, rankSkipRange)
				}
			}
		}
	}
}

// semverOf reads a version's tag as semver ("_" stands for "+" in tags), or
// returns nil when it is not one.
func semverOf(tag string) *semver.Version {
	v, err := semver.NewVersion(strings.ReplaceAll(tag, "_", "+"))
	if err != nil {
		return nil
	}
	return v
}

// skipRange reads an olm.skipRange, or returns nil when there is none or it
// cannot be read. Pre-releases match, as in OLM.
func skipRange(s string) *semver.Constraints {
	if s == "" {
		return nil
	}
	r, err := semver.NewConstraint(s)
	if err != nil {
		return nil
	}
	r.IncludePrerelease = true
	return r
}
