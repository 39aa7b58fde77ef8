// Package graph computes the upgrade graph of one package (DESIGN.md, "The
// catalog", "Upgrade graph" and "OLM integration"): its channels, each with
// its versions, its head and the edges along which an installed version is
// upgraded, and from them the answers of GET .../channels/{channel}/graph and
// GET .../upgrades, and, for OLM, the olm.channel entries of the package's
// file-based catalog (Entries), so that the API and the catalog OLM reads
// never disagree.
//
// The graph depends only on which versions are stored: Build sorts what it is
// given, so the order in which versions were pushed, deleted or listed never
// shows in its output.
//
// The format of the package, which decides how channels are formed, is the
// format of its latest version (the greatest by pkgformat.VersionKey), and so
// is its default channel: the latest version's DefaultChannel (for a KUDO,
// Helm or plain version naming no channel, its implicit channel) when that
// channel exists, else the only channel, else none.
//
// # KUDO, Helm and plain channels
//
// A version belongs to every channel its metadata lists; one that lists none
// belongs to one implicit channel, named by its DefaultChannel or else
// [ImplicitChannel]. Versions are ordered by pkgformat.VersionKey, and any
// later version can be installed directly, as helm upgrade and kudo upgrade
// do. The graph draws this as one edge (kind semver) from each version to the
// next greater one; the head is the greatest version; Upgrades lists every
// greater version as Next, and the head alone as Path: one step.
// Pre-releases count as versions like any other, so the head can be one.
//
// # OLM channels
//
// OLM channels follow operator-registry's loader (pkg/sqlite/load.go,
// addPackageChannels), which walks replaces from a channel's currentCSV, and
// the rules opm validate checks of every file-based catalog channel
// (alpha/model: one head, no stranded bundle, no replaces cycle). A CSV name
// identifies one version, as a bundle name does in OLM: a version without
// one, or whose CSV name a greater version also has, is in no channel.
//
// A version's edges in channel C are those of its entries for C; a version
// whose metadata does not list C has its CSV's edges, those of its other
// entries (pkgformat gives every channel of a version the same ones), and
// one that lists no channel has none. Of several such entries, the first replaces
// and the first skipRange that can be read count, and every skip. Ranges are
// read by Masterminds semver and match pre-releases, as OLM's do; a range it
// cannot read counts as none.
//
// Channel C exists when a version lists it, and its members are:
//
//   - Its head. Berth keeps no currentCSV and derives it from the versions
//     that list C: the greatest version (pkgformat.VersionKey) where their
//     edges in C end, an end being a version no edge leads away from, or the
//     members of a cycle of edges that no edge leaves.
//   - The replaces chain: every version reached by following replaces (by
//     CSV name, over every version, whichever channels it lists) from the
//     head, to a replaces naming no stored version or closing a cycle, as
//     the loader stops there. The loader also stops at a deprecated bundle;
//     berth stores no deprecations.
//   - Every stored version that a version of the chain skips (the loader's
//     entries for skipped CSVs, which name bundles when those exist).
//
// A version that lists C but is not reached is not in C (opm calls it
// stranded), and a version reached from C's head is in C whether or not it
// lists C. A version in no channel's membership is in no channel.
//
// Inside C, a member X that replaces the member Y gives the edge Y→X (kind
// replaces); every member Z that X skips gives Z→X (skips); X's skipRange
// gives V→X for every member V whose version satisfies it (skipRange). A
// name or range that matches no member adds no edge: a missing version never
// breaks the graph or hides the others. An edge derived in several ways is
// listed once, with the first kind of replaces, skips, skipRange. Every
// member reaches the head: a chain member through the replaces before it, a
// skipped one through its skipper.
//
// Entries lists the members, newest first, each with its edges in C as its
// CSV names them (a replaces or skip may name a version that is not a
// member, as opm allows), except where they would break the rules opm
// validate checks; then, in Entries and in the graph alike:
//
//   - Nothing upgrades from the head: a replaces or skip naming it is left
//     out, and so is a skipRange that covers it.
//   - A replaces that closes a cycle of the chain (where the loader stops) is
//     left out, and so are a member's skips and replaces of itself.
//   - opm validate stops following replaces at a version some entry skips;
//     the chain members past that point are each listed as skipped by the
//     member that replaces them, which adds no edge (the replaces edge joins
//     the same pair) and keeps them in the channel as the loader has them.
//
// So the entries of a channel have exactly one head, the graph's head (every
// other member is replaced or skipped by a member), no stranded entry and no
// replaces cycle.
//
// # Upgrades
//
// Next are the versions an edge leads to from the given one, newest first.
// Path is a shortest path from it to the head, the given version excluded
// and the head included; among shortest paths it takes the greatest version
// at each step. Path is empty when the given version is the head.
//
// A Graph does not change once built and is safe for concurrent use.
package graph

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/pkgformat"
)

// Errors of Graph's methods wrap one of these, with the channel or version
// concerned. They mirror the catalog's sentinels of the same names, which this
// package cannot use: the catalog imports it.
var (
	// ErrNotFound: no such channel, or the version is not in the channel.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: no version to upgrade from, or no channel named and the
	// package has no default channel.
	ErrInvalid = errors.New("invalid request")
)

// LookupError is the ErrNotFound error of Channel and Upgrades when the
// channel asked for does not exist or the version to upgrade from is not in
// it. Callers that know the package can describe it in their own words.
type LookupError struct {
	Channel string // the channel asked for
	Version string // the version to upgrade from; "" when the channel does not exist
	// Channels are, sorted, the package's channels when the channel does
	// not exist, else the channels that hold Version (none: the package
	// has no such version, or the version is in no channel).
	Channels []string
}

func (e *LookupError) Error() string {
	switch {
	case e.Version == "":
		return fmt.Sprintf("no channel %q (channels: %s)", e.Channel, strings.Join(e.Channels, ", "))
	case len(e.Channels) == 0:
		return fmt.Sprintf("no version %q in any channel", e.Version)
	}
	return fmt.Sprintf("version %q is not in channel %q (channels of %s: %s)", e.Version, e.Channel, e.Version, strings.Join(e.Channels, ", "))
}

// Unwrap makes a LookupError match ErrNotFound.
func (e *LookupError) Unwrap() error { return ErrNotFound }

// ImplicitChannel names the channel of KUDO, Helm and plain versions that
// name neither a channel nor a default channel.
const ImplicitChannel = "default"

// Version is what the graph needs of one stored package version.
type Version struct {
	// Version is the version's tag, e.g. "0.9.4" or "2.5.1_1.3.2". It
	// identifies the version: when several Versions share it, the one with
	// the smallest Digest is used.
	Version string
	Digest  string
	// Metadata supplies the format, CSV name, channels and default channel.
	// A Version without it is left out of the graph.
	Metadata *pkgformat.Metadata
}

// Graph is the upgrade graph of one package, every channel of it. The zero
// value is the graph of a package with no versions.
type Graph struct {
	defaultChannel string
	channels       []*channel // sorted by name
}

// channel is one channel of a Graph. Nodes are indexed newest first, so a
// smaller index is a greater version.
type channel struct {
	name    string
	semver  bool // any greater version is a direct upgrade (KUDO, Helm, plain)
	nodes   []apiv1.GraphNode
	entries []Entry           // OLM: the nodes' olm.channel entries
	index   map[string]int    // node index by version
	out     [][]int           // out[i]: the nodes edges from i lead to, ascending
	edges   []apiv1.GraphEdge // by from, then to, newest first
	head    int
}

// edgeKinds are the kinds of edges, the preferred first when one edge is
// derived in several ways.
var edgeKinds = []string{apiv1.EdgeReplaces, apiv1.EdgeSkips, apiv1.EdgeSkipRange, apiv1.EdgeSemver}

// Ranks of edgeKinds.
const (
	rankReplaces = iota
	rankSkips
	rankSkipRange
	rankSemver
)

// Build computes every channel of a package from its stored versions, given
// in any order (versions is not modified).
func Build(versions []Version) *Graph {
	vs := newestFirst(versions)
	g := &Graph{}
	if len(vs) == 0 {
		return g
	}
	latest := vs[0].Metadata
	olm := latest.Format == pkgformat.OLM
	if olm {
		g.channels = olmChannels(vs)
	} else {
		g.channels = semverChannels(vs)
	}
	if c := g.find(preferredChannel(latest, olm)); c != nil {
		g.defaultChannel = c.name
	} else if len(g.channels) == 1 {
		g.defaultChannel = g.channels[0].name
	}
	return g
}

// newestFirst returns the versions that have metadata, one per Version
// string, sorted newest first.
func newestFirst(versions []Version) []Version {
	type keyed struct {
		Version
		key string
	}
	ks := make([]keyed, 0, len(versions))
	for _, v := range versions {
		if v.Metadata != nil {
			ks = append(ks, keyed{v, pkgformat.VersionKey(v.Version)})
		}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		return cmp.Or(strings.Compare(b.key, a.key), strings.Compare(a.Digest, b.Digest))
	})
	out := make([]Version, 0, len(ks))
	for i, k := range ks {
		if i == 0 || k.Version.Version != ks[i-1].Version.Version {
			out = append(out, k.Version)
		}
	}
	return out
}

// semverChannels builds the channels of a KUDO, Helm or plain package from
// its versions, newest first.
func semverChannels(vs []Version) []*channel {
	members := map[string][]Version{}
	for _, v := range vs {
		names := map[string]bool{}
		for _, c := range v.Metadata.Channels {
			if c.Name != "" {
				names[c.Name] = true
			}
		}
		if len(names) == 0 {
			names[implicitChannel(v.Metadata)] = true
		}
		for name := range names {
			members[name] = append(members[name], v)
		}
	}
	out := make([]*channel, 0, len(members))
	for _, name := range slices.Sorted(maps.Keys(members)) {
		ms := members[name]
		c := newChannel(name, ms, func(add func(from, to, rank int)) {
			for i := 1; i < len(ms); i++ {
				add(i, i-1, rankSemver)
			}
		})
		c.semver = true
		out = append(out, c)
	}
	return out
}

// implicitChannel is the channel of a KUDO, Helm or plain version that lists none.
func implicitChannel(md *pkgformat.Metadata) string {
	return cmp.Or(md.DefaultChannel, ImplicitChannel)
}

// preferredChannel is the channel the latest version makes the default.
func preferredChannel(latest *pkgformat.Metadata, olm bool) string {
	if latest.DefaultChannel == "" && len(latest.Channels) == 0 && !olm {
		return implicitChannel(latest)
	}
	return latest.DefaultChannel
}

// newChannel builds channel name from its members, newest first, and the
// edges derive gives between them (by index) by calling add; its head is
// the greatest member, which the caller changes when it is not.
func newChannel(name string, members []Version, derive func(add func(from, to, rank int))) *channel {
	c := &channel{name: name, index: make(map[string]int, len(members))}
	for i, m := range members {
		c.nodes = append(c.nodes, apiv1.GraphNode{Version: m.Version, Digest: m.Digest})
		c.index[m.Version] = i
	}
	var pairs [][2]int
	var rank map[[2]int]int
	pairs, rank, c.out = link(len(members), derive)
	c.edges = make([]apiv1.GraphEdge, 0, len(pairs))
	for _, e := range pairs {
		c.edges = append(c.edges, apiv1.GraphEdge{From: c.nodes[e[0]].Version, To: c.nodes[e[1]].Version, Kind: edgeKinds[rank[e]]})
	}
	return c
}

// link collects the edges derive gives between n nodes: each pair (from, to)
// of distinct nodes once, sorted by from then to, with the rank of its
// preferred kind, and each node's successors, ascending.
func link(n int, derive func(add func(from, to, rank int))) (pairs [][2]int, rank map[[2]int]int, out [][]int) {
	rank = map[[2]int]int{}
	derive(func(from, to, r int) {
		e := [2]int{from, to}
		if old, ok := rank[e]; from != to && (!ok || r < old) {
			rank[e] = r
		}
	})
	pairs = slices.SortedFunc(maps.Keys(rank), func(a, b [2]int) int { return cmp.Or(a[0]-b[0], a[1]-b[1]) })
	out = make([][]int, n)
	for _, e := range pairs {
		out[e[0]] = append(out[e[0]], e[1])
	}
	return pairs, rank, out
}

// endsOfUpgrades reports for each node whether upgrades end there: whether
// it is in a strongly connected component that no edge leaves (a node with
// no outgoing edge, or a cycle nothing leaves). Every graph has one.
func endsOfUpgrades(out [][]int) []bool {
	// Tarjan's algorithm.
	n := len(out)
	order, low, comp := make([]int, n), make([]int, n), make([]int, n)
	onStack := make([]bool, n)
	var stack []int
	visited, comps := 0, 0
	var visit func(v int)
	visit = func(v int) {
		visited++
		order[v], low[v] = visited, visited
		stack, onStack[v] = append(stack, v), true
		for _, w := range out[v] {
			if order[w] == 0 {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], order[w])
			}
		}
		if low[v] == order[v] {
			for {
				w := stack[len(stack)-1]
				stack, onStack[w], comp[w] = stack[:len(stack)-1], false, comps
				if w == v {
					break
				}
			}
			comps++
		}
	}
	for v := range n {
		if order[v] == 0 {
			visit(v)
		}
	}
	left := make([]bool, comps) // an edge leaves the component
	for v, ws := range out {
		for _, w := range ws {
			if comp[w] != comp[v] {
				left[comp[v]] = true
			}
		}
	}
	ends := make([]bool, n)
	for v := range n {
		ends[v] = !left[comp[v]]
	}
	return ends
}

// DefaultChannel returns the package's default channel, or "" when it has
// none: the latest version names no existing channel and there are several.
func (g *Graph) DefaultChannel() string {
	return g.defaultChannel
}

// Channels returns every channel of the package, sorted by name, each with
// its head and its versions newest first.
func (g *Graph) Channels() []apiv1.Channel {
	out := make([]apiv1.Channel, 0, len(g.channels))
	for _, c := range g.channels {
		ch := apiv1.Channel{Name: c.name, Head: c.nodes[c.head].Version, Versions: make([]string, len(c.nodes))}
		for i, n := range c.nodes {
			ch.Versions[i] = n.Version
		}
		out = append(out, ch)
	}
	return out
}

// Channel returns the nodes (newest first) and edges of one channel, the
// default channel when name is "". Namespace and Name are left for the
// caller. The error wraps ErrNotFound when there is no such channel and
// ErrInvalid when name is "" and there is no default channel.
func (g *Graph) Channel(name string) (apiv1.Graph, error) {
	c, err := g.lookup(name)
	if err != nil {
		return apiv1.Graph{}, err
	}
	return apiv1.Graph{
		Channel: c.name,
		Head:    c.nodes[c.head].Version,
		Nodes:   slices.Clone(c.nodes),
		Edges:   slices.Clone(c.edges),
	}, nil
}

// Upgrades returns where version from can be upgraded to in a channel, the
// default channel when channel is "": the versions it upgrades to directly
// and the path to the channel's head (see the package documentation). The
// error wraps ErrNotFound when there is no such channel or from is not in
// it, and ErrInvalid when from is "" or channel is "" and there is no
// default channel.
func (g *Graph) Upgrades(channel, from string) (apiv1.Upgrades, error) {
	if from == "" {
		return apiv1.Upgrades{}, fmt.Errorf("no version to upgrade from: %w", ErrInvalid)
	}
	c, err := g.lookup(channel)
	if err != nil {
		return apiv1.Upgrades{}, err
	}
	i, ok := c.index[from]
	if !ok {
		var in []string
		for _, other := range g.channels {
			if _, ok := other.index[from]; ok {
				in = append(in, other.name)
			}
		}
		return apiv1.Upgrades{}, &LookupError{Channel: c.name, Version: from, Channels: in}
	}
	u := apiv1.Upgrades{From: from, Channel: c.name, Head: c.nodes[c.head].Version, Next: []string{}, Path: []string{}}
	if c.semver {
		for _, n := range c.nodes[:i] {
			u.Next = append(u.Next, n.Version)
		}
		if i != c.head {
			u.Path = append(u.Path, u.Head)
		}
		return u, nil
	}
	for _, j := range c.out[i] {
		u.Next = append(u.Next, c.nodes[j].Version)
	}
	for _, j := range c.pathToHead(i) {
		u.Path = append(u.Path, c.nodes[j].Version)
	}
	return u, nil
}

// pathToHead returns a shortest path from node from to the head, from
// excluded, taking the greatest version at each step among shortest paths;
// nil when from is the head (every member reaches it). Breadth-first
// search visiting edges newest first finds exactly that path.
func (c *channel) pathToHead(from int) []int {
	parent := make([]int, len(c.nodes))
	for i := range parent {
		parent[i] = -1
	}
	parent[from] = from
	for queue := []int{from}; len(queue) > 0 && parent[c.head] < 0; queue = queue[1:] {
		for _, w := range c.out[queue[0]] {
			if parent[w] < 0 {
				parent[w] = queue[0]
				queue = append(queue, w)
			}
		}
	}
	if from == c.head || parent[c.head] < 0 {
		return nil
	}
	var path []int
	for v := c.head; v != from; v = parent[v] {
		path = append(path, v)
	}
	slices.Reverse(path)
	return path
}

// lookup returns the channel called name, the default channel when name is "".
func (g *Graph) lookup(name string) (*channel, error) {
	if name == "" {
		if g.defaultChannel == "" {
			if len(g.channels) == 0 {
				return nil, fmt.Errorf("the package has no channels: %w", ErrNotFound)
			}
			return nil, fmt.Errorf("the package has no default channel; name one of %s: %w", g.names(), ErrInvalid)
		}
		name = g.defaultChannel
	}
	c := g.find(name)
	if c == nil {
		names := make([]string, len(g.channels))
		for i, c := range g.channels {
			names[i] = c.name
		}
		return nil, &LookupError{Channel: name, Channels: names}
	}
	return c, nil
}

// find returns the channel called name, or nil.
func (g *Graph) find(name string) *channel {
	i, ok := slices.BinarySearchFunc(g.channels, name, func(c *channel, name string) int { return strings.Compare(c.name, name) })
	if !ok {
		return nil
	}
	return g.channels[i]
}

// names lists the channels for an error message.
func (g *Graph) names() string {
	if len(g.channels) == 0 {
		return "no channels"
	}
	names := make([]string, len(g.channels))
	for i, c := range g.channels {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}
