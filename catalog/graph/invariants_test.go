package graph_test

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/graph"
	"github.com/berth-registry/berth/pkgformat"
)

// checkInvariants checks g, built from versions, against what must hold of
// every graph: each version is a node of every channel it belongs to and of
// no other (for OLM, the channel's head and what operator-registry's loader
// reaches from it, loaderMembers); nodes are newest first; edges join
// distinct members, once each; the head has no outgoing edge; Next lists the
// edges leaving a version; Path is empty for the head and a shortest path to
// the head for every other version, which reaches it; and, for OLM, the
// entries keep opm validate's rules and give the graph's edges
// (checkEntries). It returns the versions that list a channel but are not in
// it, as channel/version.
func checkInvariants(t *testing.T, versions []graph.Version, g *graph.Graph) (stranded []string) {
	t.Helper()
	format := pkgformat.Format("")
	listed := map[string][]string{} // channel -> versions that list it
	latest := ""
	for _, v := range versions {
		if latest == "" || pkgformat.VersionKey(v.Version) > pkgformat.VersionKey(latest) {
			latest, format = v.Version, v.Metadata.Format
		}
	}
	for _, v := range versions {
		names := map[string]bool{}
		for _, c := range v.Metadata.Channels {
			names[c.Name] = true
		}
		if len(names) == 0 && format != pkgformat.OLM {
			names[graph.ImplicitChannel] = true
		}
		for name := range names {
			listed[name] = append(listed[name], v.Version)
		}
	}
	channels := g.Channels()
	var names []string
	for _, c := range channels {
		names = append(names, c.Name)
	}
	if want := slices.Sorted(maps.Keys(listed)); !slices.Equal(names, want) {
		t.Fatalf("channels %v, want %v", names, want)
	}
	if def := g.DefaultChannel(); def != "" && !slices.Contains(names, def) || def == "" && len(names) == 1 {
		t.Errorf("default channel %q, channels %v", def, names)
	}
	for _, c := range channels {
		cg, err := g.Channel(c.Name)
		if err != nil {
			t.Fatal(err)
		}
		members := listed[c.Name]
		if format == pkgformat.OLM {
			if !slices.Contains(listed[c.Name], c.Head) {
				t.Errorf("channel %s: the head %s does not list it", c.Name, c.Head)
			}
			members = loaderMembers(versions, c.Name, c.Head)
			for _, v := range listed[c.Name] {
				if !slices.Contains(members, v) {
					stranded = append(stranded, c.Name+"/"+v)
				}
			}
			checkEntries(t, g, c.Name)
		}
		want := slices.SortedFunc(slices.Values(members), func(a, b string) int {
			return strings.Compare(pkgformat.VersionKey(b), pkgformat.VersionKey(a))
		})
		var nodes []string
		for _, n := range cg.Nodes {
			nodes = append(nodes, n.Version)
		}
		if !slices.Equal(nodes, want) || !slices.Equal(c.Versions, want) {
			t.Errorf("channel %s: nodes %v, versions %v, want %v", c.Name, nodes, c.Versions, want)
		}
		if cg.Head != c.Head || !slices.Contains(nodes, c.Head) {
			t.Errorf("channel %s: head %q (graph: %q) is not a member", c.Name, c.Head, cg.Head)
		}
		out := map[string][]string{}
		seen := map[[2]string]bool{}
		for _, e := range cg.Edges {
			pair := [2]string{e.From, e.To}
			if !slices.Contains(nodes, e.From) || !slices.Contains(nodes, e.To) || e.From == e.To || seen[pair] {
				t.Errorf("channel %s: bad or repeated edge %+v", c.Name, e)
			}
			seen[pair] = true
			out[e.From] = append(out[e.From], e.To)
			if e.From == c.Head {
				t.Errorf("channel %s: the head %s has an outgoing edge to %s", c.Name, c.Head, e.To)
			}
		}
		for _, v := range nodes {
			u, err := g.Upgrades(c.Name, v)
			if err != nil {
				t.Fatal(err)
			}
			next := slices.SortedFunc(slices.Values(out[v]), func(a, b string) int {
				return strings.Compare(pkgformat.VersionKey(b), pkgformat.VersionKey(a))
			})
			if format != pkgformat.OLM {
				next = nodes[:slices.Index(nodes, v)] // every greater version
			}
			if !slices.Equal(u.Next, next) || u.Head != c.Head || u.Channel != c.Name || u.From != v {
				t.Errorf("Upgrades(%s, %s) = %+v, want next %v, head %s", c.Name, v, u, next, c.Head)
			}
			dist := distances(out, v)
			switch d, reachable := dist[c.Head]; {
			case v == c.Head:
				if len(u.Path) != 0 {
					t.Errorf("Upgrades(%s, %s): path %v from the head", c.Name, v, u.Path)
				}
			case format != pkgformat.OLM:
				if !slices.Equal(u.Path, []string{c.Head}) {
					t.Errorf("Upgrades(%s, %s): path %v, want the head alone", c.Name, v, u.Path)
				}
			case !reachable:
				t.Errorf("Upgrades(%s, %s): the head %s cannot be reached", c.Name, v, c.Head)
			case len(u.Path) != d || u.Path[len(u.Path)-1] != c.Head:
				t.Errorf("Upgrades(%s, %s): path %v, want %d steps to %s", c.Name, v, u.Path, d, c.Head)
			default:
				for i, from := range append([]string{v}, u.Path[:len(u.Path)-1]...) {
					if !seen[[2]string{from, u.Path[i]}] {
						t.Errorf("Upgrades(%s, %s): path %v takes %s>%s, which is not an edge", c.Name, v, u.Path, from, u.Path[i])
					}
				}
			}
		}
	}
	return stranded
}

// loaderMembers returns the members of an OLM channel whose head is given,
// as operator-registry's loader (addPackageChannels) finds them from a
// currentCSV: the versions reached through replaces, whichever channels they
// list, and the versions these skip. A version's edges are those of its
// entries for the channel, else of all its entries.
func loaderMembers(versions []graph.Version, channel, head string) []string {
	byCSV := map[string]graph.Version{}
	for _, v := range versions {
		if old, ok := byCSV[v.Metadata.CSVName]; v.Metadata.CSVName != "" && (!ok || pkgformat.VersionKey(v.Version) > pkgformat.VersionKey(old.Version)) {
			byCSV[v.Metadata.CSVName] = v
		}
	}
	edges := func(v graph.Version) (replaces string, skips []string) {
		for _, c := range v.Metadata.Channels {
			if c.Name == channel {
				return c.Replaces, c.Skips
			}
		}
		for _, c := range v.Metadata.Channels {
			return c.Replaces, c.Skips
		}
		return "", nil
	}
	var cur graph.Version
	for _, v := range versions {
		if v.Version == head {
			cur = v
		}
	}
	members := map[string]bool{}
	var skipped []string
	for !members[cur.Version] {
		members[cur.Version] = true
		replaces, skips := edges(cur)
		skipped = append(skipped, skips...)
		next, ok := byCSV[replaces]
		if !ok {
			break
		}
		cur = next
	}
	for _, s := range skipped {
		if v, ok := byCSV[s]; ok {
			members[v.Version] = true
		}
	}
	return slices.Collect(maps.Keys(members))
}

// distances returns the number of edges from start to every version it reaches.
func distances(out map[string][]string, start string) map[string]int {
	dist := map[string]int{start: 0}
	for queue := []string{start}; len(queue) > 0; queue = queue[1:] {
		for _, w := range out[queue[0]] {
			if _, ok := dist[w]; !ok {
				dist[w] = dist[queue[0]] + 1
				queue = append(queue, w)
			}
		}
	}
	return dist
}

// checkEntries checks the entries of an OLM channel against the rules opm
// validate enforces (operator-registry's alpha/model, Channel.Head and
// validateReplacesChain): exactly one entry that no entry replaces or skips,
// the graph's head; every entry on the replaces chain from the head (which
// stops at a skipped entry) or skipped by an entry; no replaces cycle; no
// empty skip; a readable skipRange. It also checks that the entries are the
// graph's nodes and give, read as OLM reads them, exactly the graph's edges.
func checkEntries(t *testing.T, g *graph.Graph, channel string) {
	t.Helper()
	entries, err := g.Entries(channel)
	if err != nil {
		t.Fatal(err)
	}
	cg, err := g.Channel(channel)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(cg.Nodes) {
		t.Fatalf("channel %s: %d entries for %d nodes", channel, len(entries), len(cg.Nodes))
	}
	byName := map[string]graph.Entry{}
	incoming, skipped := map[string]bool{}, map[string]bool{}
	for i, e := range entries {
		if e.Version != cg.Nodes[i].Version || e.Digest != cg.Nodes[i].Digest || e.CSVName == "" {
			t.Errorf("channel %s: entry %+v for node %+v", channel, e, cg.Nodes[i])
		}
		if _, dup := byName[e.CSVName]; dup {
			t.Errorf("channel %s: two entries named %s", channel, e.CSVName)
		}
		byName[e.CSVName] = e
		if e.Replaces != "" {
			incoming[e.Replaces] = true
		}
		for _, s := range e.Skips {
			if s == "" {
				t.Errorf("channel %s: %s has an empty skip", channel, e.Version)
			}
			incoming[s], skipped[s] = true, true
		}
		if _, err := semver.NewConstraint(e.SkipRange); e.SkipRange != "" && err != nil {
			t.Errorf("channel %s: %s has skipRange %q: %v", channel, e.Version, e.SkipRange, err)
		}
	}
	var heads []string
	for _, e := range entries {
		if !incoming[e.CSVName] {
			heads = append(heads, e.Version)
		}
	}
	if !slices.Equal(heads, []string{cg.Head}) {
		t.Fatalf("channel %s: heads %v, want the graph's head %s", channel, heads, cg.Head)
	}
	head := entries[slices.IndexFunc(entries, func(e graph.Entry) bool { return e.Version == cg.Head })]
	chain := map[string]bool{head.CSVName: true}
	for cur, ok := head, true; ok && !skipped[cur.Replaces]; cur, ok = byName[cur.Replaces] {
		if chain[cur.Replaces] {
			t.Fatalf("channel %s: replaces cycle at %s", channel, cur.Replaces)
		}
		chain[cur.Replaces] = true
	}
	for _, e := range entries {
		if !chain[e.CSVName] && !skipped[e.CSVName] {
			t.Errorf("channel %s: %s is stranded", channel, e.Version)
		}
	}
	// The edges OLM derives from the entries, with the first kind of
	// replaces, skips, skipRange.
	kinds := []string{apiv1.EdgeReplaces, apiv1.EdgeSkips, apiv1.EdgeSkipRange}
	derived := map[[2]string]int{}
	add := func(from, to string, kind int) {
		pair := [2]string{from, to}
		if old, ok := derived[pair]; from != to && (!ok || kind < old) {
			derived[pair] = kind
		}
	}
	for _, x := range entries {
		if y, ok := byName[x.Replaces]; ok {
			add(y.Version, x.Version, 0)
		}
		for _, s := range x.Skips {
			if z, ok := byName[s]; ok {
				add(z.Version, x.Version, 1)
			}
		}
		if r, err := semver.NewConstraint(x.SkipRange); x.SkipRange != "" && err == nil {
			r.IncludePrerelease = true
			for _, v := range entries {
				if sv, err := semver.NewVersion(strings.ReplaceAll(v.Version, "_", "+")); err == nil && r.Check(sv) {
					add(v.Version, x.Version, 2)
				}
			}
		}
	}
	got := map[[2]string]int{}
	for _, e := range cg.Edges {
		got[[2]string{e.From, e.To}] = slices.Index(kinds, e.Kind)
	}
	if !reflect.DeepEqual(got, derived) {
		t.Errorf("channel %s: edges %v, the entries give %v", channel, got, derived)
	}
}
