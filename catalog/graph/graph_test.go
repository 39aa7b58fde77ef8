package graph_test

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/berth-registry/berth/catalog/graph"
	"github.com/berth-registry/berth/pkgformat"
)

// olm is an OLM version of package "op" whose CSV is "op.v<version>".
func olm(version string, channels ...pkgformat.Channel) graph.Version {
	return graph.Version{Version: version, Digest: digest(version), Metadata: &pkgformat.Metadata{
		Name: "op", Version: version, Format: pkgformat.OLM, CSVName: csv(version), Channels: channels,
	}}
}

// withDefault sets the default channel of v.
func withDefault(v graph.Version, channel string) graph.Version {
	v.Metadata.DefaultChannel = channel
	return v
}

// csv is the CSV name of version of package "op".
func csv(version string) string { return "op.v" + version }

// in is the entry of channel name with the edges given as "replaces:<version>",
// "skips:<version>" (CSVs of package "op") or "range:<skipRange>".
func in(name string, edges ...string) pkgformat.Channel {
	c := pkgformat.Channel{Name: name}
	for _, e := range edges {
		kind, arg, _ := strings.Cut(e, ":")
		switch kind {
		case "replaces":
			c.Replaces = csv(arg)
		case "skips":
			c.Skips = append(c.Skips, csv(arg))
		case "range":
			c.SkipRange = arg
		default:
			panic("bad edge " + e)
		}
	}
	return c
}

// semverV is a version of another format, in no channel unless channels are given.
func semverV(format pkgformat.Format, version string, channels ...string) graph.Version {
	md := &pkgformat.Metadata{Name: "op", Version: version, Format: format}
	for _, c := range channels {
		md.Channels = append(md.Channels, pkgformat.Channel{Name: c})
	}
	return graph.Version{Version: version, Digest: digest(version), Metadata: md}
}

func digest(version string) string { return "sha256:" + version }

// wantChannel is a channel as the test expects it: its head, its versions
// newest first and its edges as "from>to kind", in the order Channel lists them.
type wantChannel struct {
	head     string
	versions []string
	edges    []string
}

// wantUpgrades is what Upgrades(channel, from) returns; path and next are
// nil when they must be empty.
type wantUpgrades struct {
	channel, from string
	next, path    []string
}

func TestBuild(t *testing.T) {
	tests := []struct {
		name     string
		versions []graph.Version
		def      string
		channels map[string]wantChannel
		upgrades []wantUpgrades
	}{
		{
			name: "replaces chain",
			versions: []graph.Version{
				olm("1.1.0", in("stable", "replaces:1.0.0")),
				olm("1.0.0", in("stable")),
				olm("1.2.0", in("stable", "replaces:1.1.0")),
			},
			def: "stable", // the only channel
			channels: map[string]wantChannel{
				"stable": {"1.2.0", []string{"1.2.0", "1.1.0", "1.0.0"}, []string{"1.1.0>1.2.0 replaces", "1.0.0>1.1.0 replaces"}},
			},
			upgrades: []wantUpgrades{
				{"", "1.0.0", []string{"1.1.0"}, []string{"1.1.0", "1.2.0"}},
				{"stable", "1.1.0", []string{"1.2.0"}, []string{"1.2.0"}},
				{"stable", "1.2.0", nil, nil},
			},
		},
		{
			name: "skips",
			versions: []graph.Version{
				olm("1.0.0", in("stable")),
				olm("1.1.0", in("stable", "replaces:1.0.0")),
				olm("1.2.0", in("stable", "replaces:1.0.0", "skips:1.1.0")),
			},
			def: "stable",
			channels: map[string]wantChannel{
				"stable": {"1.2.0", []string{"1.2.0", "1.1.0", "1.0.0"},
					[]string{"1.1.0>1.2.0 skips", "1.0.0>1.2.0 replaces", "1.0.0>1.1.0 replaces"}},
			},
			upgrades: []wantUpgrades{
				{"stable", "1.0.0", []string{"1.2.0", "1.1.0"}, []string{"1.2.0"}},
				{"stable", "1.1.0", []string{"1.2.0"}, []string{"1.2.0"}},
			},
		},
		{
			// The range matches pre-releases, as OLM's do; an edge derived
			// twice keeps the first kind of replaces, skips, skipRange.
			name: "skipRange",
			versions: []graph.Version{
				olm("1.0.0", in("stable")),
				olm("1.0.1", in("stable", "replaces:1.0.0")),
				olm("1.0.2-rc.1", in("stable")),
				olm("1.1.0", in("stable", "replaces:1.0.1", "skips:1.0.2-rc.1", "range:>=1.0.0 <1.1.0")),
				olm("2.0.0", in("stable", "replaces:1.1.0", "range:>=1.0.0 <1.0.1")),
			},
			def: "stable",
			channels: map[string]wantChannel{
				"stable": {"2.0.0", []string{"2.0.0", "1.1.0", "1.0.2-rc.1", "1.0.1", "1.0.0"}, []string{
					"1.1.0>2.0.0 replaces",
					"1.0.2-rc.1>1.1.0 skips",
					"1.0.1>1.1.0 replaces",
					"1.0.0>2.0.0 skipRange",
					"1.0.0>1.1.0 skipRange",
					"1.0.0>1.0.1 replaces",
				}},
			},
			upgrades: []wantUpgrades{
				{"stable", "1.0.0", []string{"2.0.0", "1.1.0", "1.0.1"}, []string{"2.0.0"}},
				{"stable", "1.0.1", []string{"1.1.0"}, []string{"1.1.0", "2.0.0"}},
			},
		},
		{
			// 1.0.0 is not stored: the edges naming it are dropped, the rest stands.
			name: "missing replaces target",
			versions: []graph.Version{
				olm("1.1.0", in("stable", "replaces:1.0.0")),
				olm("1.2.0", in("stable", "replaces:1.1.0", "skips:1.0.0", "skips:1.0.5", "range:<1.0.0")),
			},
			def: "stable",
			channels: map[string]wantChannel{
				"stable": {"1.2.0", []string{"1.2.0", "1.1.0"}, []string{"1.1.0>1.2.0 replaces"}},
			},
			upgrades: []wantUpgrades{{"stable", "1.1.0", []string{"1.2.0"}, []string{"1.2.0"}}},
		},
		{
			// stable lists 1.0.0 and 1.2.0, but 1.2.0 replaces 1.1.0, which
			// lists fast only: the replaces chain makes 1.1.0 a member of
			// stable, with the edges its CSV gives (replaces 1.0.0).
			name: "replaces chain crossing channel annotations",
			versions: []graph.Version{
				olm("1.0.0", in("fast"), in("stable")),
				olm("1.1.0", in("fast", "replaces:1.0.0")),
				withDefault(olm("1.2.0", in("fast", "replaces:1.1.0"), in("stable", "replaces:1.1.0", "skips:1.0.0")), "stable"),
			},
			def: "stable", // the latest version's default channel
			channels: map[string]wantChannel{
				"fast":   {"1.2.0", []string{"1.2.0", "1.1.0", "1.0.0"}, []string{"1.1.0>1.2.0 replaces", "1.0.0>1.1.0 replaces"}},
				"stable": {"1.2.0", []string{"1.2.0", "1.1.0", "1.0.0"}, []string{"1.1.0>1.2.0 replaces", "1.0.0>1.2.0 skips", "1.0.0>1.1.0 replaces"}},
			},
			upgrades: []wantUpgrades{
				{"", "1.0.0", []string{"1.2.0", "1.1.0"}, []string{"1.2.0"}},
				{"", "1.1.0", []string{"1.2.0"}, []string{"1.2.0"}},
				{"fast", "1.0.0", []string{"1.1.0"}, []string{"1.1.0", "1.2.0"}},
			},
		},
		{
			// Upgrades end in the cycle 1.0.0 <-> 2.0.0, which 3.0.0 leads
			// into: the head is the greatest version of the cycle, and
			// 1.0.0's replaces of it, which closes the cycle, is left out.
			name: "cycle",
			versions: []graph.Version{
				olm("1.0.0", in("stable", "replaces:2.0.0", "skips:3.0.0")),
				olm("2.0.0", in("stable", "replaces:1.0.0", "skips:2.0.0")),
				olm("3.0.0", in("stable")),
			},
			def: "stable",
			channels: map[string]wantChannel{
				"stable": {"2.0.0", []string{"3.0.0", "2.0.0", "1.0.0"},
					[]string{"3.0.0>1.0.0 skips", "1.0.0>2.0.0 replaces"}},
			},
			upgrades: []wantUpgrades{
				{"stable", "3.0.0", []string{"1.0.0"}, []string{"1.0.0", "2.0.0"}},
				{"stable", "1.0.0", []string{"2.0.0"}, []string{"2.0.0"}},
				{"stable", "2.0.0", nil, nil},
			},
		},
		{
			// A range that is not one adds no edge; an OLM version that names
			// no channel is in none.
			name: "bad range, version in no channel",
			versions: []graph.Version{
				olm("1.0.0", in("stable")),
				olm("1.1.0", in("stable", "replaces:1.0.0", "range:not a range")),
				withDefault(olm("1.2.0"), "stable"),
			},
			def: "stable",
			channels: map[string]wantChannel{
				"stable": {"1.1.0", []string{"1.1.0", "1.0.0"}, []string{"1.0.0>1.1.0 replaces"}},
			},
			upgrades: []wantUpgrades{{"stable", "1.0.0", []string{"1.1.0"}, []string{"1.1.0"}}},
		},
		{
			// The latest version's default channel does not exist and there
			// are several: no default.
			name: "no default channel",
			versions: []graph.Version{
				withDefault(olm("1.0.0", in("a"), in("b")), "c"),
			},
			def: "",
			channels: map[string]wantChannel{
				"a": {"1.0.0", []string{"1.0.0"}, []string{}},
				"b": {"1.0.0", []string{"1.0.0"}, []string{}},
			},
		},
		{
			// KUDO: semver order, pre-releases before their release, the
			// "<appVersion>_<operatorVersion>" form ordered by appVersion;
			// any greater version is one step away.
			name: "kudo",
			versions: []graph.Version{
				semverV(pkgformat.KUDO, "2.5.0_1.3.1"),
				semverV(pkgformat.KUDO, "2.5.1_1.3.2"),
				semverV(pkgformat.KUDO, "2.5.1-rc.1_1.3.2"),
				semverV(pkgformat.KUDO, "2.4.0_1.2.0"),
				semverV(pkgformat.KUDO, "2.10.0-beta.2_2.0.0"),
				semverV(pkgformat.KUDO, "2.10.0-beta.10_2.0.0"),
			},
			def: graph.ImplicitChannel,
			channels: map[string]wantChannel{
				graph.ImplicitChannel: {"2.10.0-beta.10_2.0.0",
					[]string{"2.10.0-beta.10_2.0.0", "2.10.0-beta.2_2.0.0", "2.5.1_1.3.2", "2.5.1-rc.1_1.3.2", "2.5.0_1.3.1", "2.4.0_1.2.0"},
					[]string{
						"2.10.0-beta.2_2.0.0>2.10.0-beta.10_2.0.0 semver",
						"2.5.1_1.3.2>2.10.0-beta.2_2.0.0 semver",
						"2.5.1-rc.1_1.3.2>2.5.1_1.3.2 semver",
						"2.5.0_1.3.1>2.5.1-rc.1_1.3.2 semver",
						"2.4.0_1.2.0>2.5.0_1.3.1 semver",
					}},
			},
			upgrades: []wantUpgrades{
				{"", "2.5.1-rc.1_1.3.2", []string{"2.10.0-beta.10_2.0.0", "2.10.0-beta.2_2.0.0", "2.5.1_1.3.2"}, []string{"2.10.0-beta.10_2.0.0"}},
				{graph.ImplicitChannel, "2.10.0-beta.10_2.0.0", nil, nil},
			},
		},
		{
			// Helm and plain: versions that are not semver come first; a
			// version's default channel names its implicit channel.
			name: "helm",
			versions: []graph.Version{
				semverV(pkgformat.Helm, "1.0.0"),
				withDefault(semverV(pkgformat.Helm, "1.1.0_build.5"), "stable"),
				withDefault(semverV(pkgformat.Helm, "1.2.0"), "stable"),
				withDefault(semverV(pkgformat.Helm, "nightly"), "stable"),
			},
			def: "stable",
			channels: map[string]wantChannel{
				graph.ImplicitChannel: {"1.0.0", []string{"1.0.0"}, []string{}},
				"stable": {"1.2.0", []string{"1.2.0", "1.1.0_build.5", "nightly"},
					[]string{"1.1.0_build.5>1.2.0 semver", "nightly>1.1.0_build.5 semver"}},
			},
			upgrades: []wantUpgrades{
				{"", "nightly", []string{"1.2.0", "1.1.0_build.5"}, []string{"1.2.0"}},
			},
		},
		{
			// The latest version's format decides how edges are derived:
			// here semver order, the OLM version's edges ignored.
			name: "mixed formats",
			versions: []graph.Version{
				olm("1.0.0", in("stable")),
				olm("1.1.0", in("stable", "skips:1.0.0")),
				semverV(pkgformat.Plain, "2.0.0", "stable"),
			},
			def: "stable",
			channels: map[string]wantChannel{
				"stable": {"2.0.0", []string{"2.0.0", "1.1.0", "1.0.0"}, []string{"1.1.0>2.0.0 semver", "1.0.0>1.1.0 semver"}},
			},
		},
		{
			// A version given twice counts once, with the smaller digest;
			// versions without metadata are left out.
			name: "duplicates and versions without metadata",
			versions: []graph.Version{
				{Version: "1.1.0", Digest: "sha256:z", Metadata: &pkgformat.Metadata{Format: pkgformat.KUDO, DefaultChannel: "b"}},
				{Version: "1.1.0", Digest: digest("1.1.0"), Metadata: &pkgformat.Metadata{Format: pkgformat.KUDO, DefaultChannel: "a"}},
				{Version: "2.0.0", Digest: digest("2.0.0")},
			},
			def: "a",
			channels: map[string]wantChannel{
				"a": {"1.1.0", []string{"1.1.0"}, []string{}},
			},
		},
		{
			name:     "no versions",
			channels: map[string]wantChannel{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := graph.Build(tt.versions)
			if got := g.DefaultChannel(); got != tt.def {
				t.Errorf("default channel %q, want %q", got, tt.def)
			}
			var names []string
			for _, c := range g.Channels() {
				names = append(names, c.Name)
				want, ok := tt.channels[c.Name]
				if !ok {
					t.Errorf("unexpected channel %s: %+v", c.Name, c)
					continue
				}
				if c.Head != want.head || !slices.Equal(c.Versions, want.versions) {
					t.Errorf("channel %s: head %s, versions %v; want head %s, versions %v", c.Name, c.Head, c.Versions, want.head, want.versions)
				}
				cg, err := g.Channel(c.Name)
				if err != nil {
					t.Fatal(err)
				}
				var nodes []string
				for _, n := range cg.Nodes {
					nodes = append(nodes, n.Version)
					if n.Digest != digest(n.Version) {
						t.Errorf("node %s has digest %s", n.Version, n.Digest)
					}
				}
				edges := []string{}
				for _, e := range cg.Edges {
					edges = append(edges, fmt.Sprintf("%s>%s %s", e.From, e.To, e.Kind))
				}
				if cg.Channel != c.Name || cg.Head != want.head || !slices.Equal(nodes, want.versions) || !slices.Equal(edges, want.edges) {
					t.Errorf("graph of %s: head %s, nodes %v, edges %q; want head %s, nodes %v, edges %q",
						c.Name, cg.Head, nodes, edges, want.head, want.versions, want.edges)
				}
			}
			if len(names) != len(tt.channels) || !slices.IsSorted(names) {
				t.Errorf("channels %v, want %d sorted by name", names, len(tt.channels))
			}
			for _, want := range tt.upgrades {
				u, err := g.Upgrades(want.channel, want.from)
				if err != nil {
					t.Errorf("Upgrades(%q, %q): %v", want.channel, want.from, err)
					continue
				}
				channel := cmp.Or(want.channel, tt.def)
				if u.From != want.from || u.Channel != channel || u.Head != tt.channels[channel].head ||
					!slices.Equal(u.Next, orEmpty(want.next)) || !slices.Equal(u.Path, orEmpty(want.path)) {
					t.Errorf("Upgrades(%q, %q) = %+v, want channel %s, head %s, next %q, path %q",
						want.channel, want.from, u, channel, tt.channels[channel].head, want.next, want.path)
				}
			}
		})
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func TestErrors(t *testing.T) {
	g := graph.Build([]graph.Version{
		olm("1.0.0", in("stable"), in("fast")),
		olm("1.1.0", in("fast", "replaces:1.0.0")),
		olm("0.9.0", in("stable")), // stranded: nothing reaches it
	})
	noDefault := graph.Build([]graph.Version{withDefault(olm("1.0.0", in("a"), in("b")), "c")})
	empty := graph.Build(nil)
	tests := []struct {
		name          string
		g             *graph.Graph
		channel, from string
		want          error // of Upgrades
		wantChannel   error // of Channel(channel)
	}{
		{"unknown channel", g, "beta", "1.0.0", graph.ErrNotFound, graph.ErrNotFound},
		{"unknown version", g, "fast", "9.9.9", graph.ErrNotFound, nil},
		{"version in another channel", g, "stable", "1.1.0", graph.ErrNotFound, nil},
		{"version in no channel", g, "stable", "0.9.0", graph.ErrNotFound, nil},
		{"no version", g, "fast", "", graph.ErrInvalid, nil},
		{"no default channel", noDefault, "", "1.0.0", graph.ErrInvalid, graph.ErrInvalid},
		{"no channels", empty, "", "1.0.0", graph.ErrNotFound, graph.ErrNotFound},
		{"no channels, channel named", empty, "stable", "1.0.0", graph.ErrNotFound, graph.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.g.Upgrades(tt.channel, tt.from); !errors.Is(err, tt.want) {
				t.Errorf("Upgrades(%q, %q) error %v, want %v", tt.channel, tt.from, err, tt.want)
			}
			if _, err := tt.g.Channel(tt.channel); !errors.Is(err, tt.wantChannel) {
				t.Errorf("Channel(%q) error %v, want %v", tt.channel, err, tt.wantChannel)
			}
		})
	}
	if _, err := noDefault.Upgrades("", "1.0.0"); err == nil || !strings.Contains(err.Error(), "a, b") {
		t.Errorf("the error %v does not name the channels", err)
	}
	if _, err := g.Upgrades("stable", "0.9.0"); err == nil || err.Error() != `no version "0.9.0" in any channel` {
		t.Errorf("the error %v does not say that 0.9.0 is in no channel", err)
	}
}

// TestJSON checks that empty lists are JSON arrays, never null.
func TestJSON(t *testing.T) {
	g := graph.Build([]graph.Version{olm("1.0.0", in("stable"))})
	u, err := g.Upgrades("", "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	cg, err := g.Channel("stable")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		doc  any
		want string
	}{
		{u, `{"from":"1.0.0","channel":"stable","head":"1.0.0","next":[],"path":[]}`},
		{cg, `{"namespace":"","name":"","channel":"stable","head":"1.0.0","nodes":[{"version":"1.0.0","digest":"sha256:1.0.0","rating":"none"}],"edges":[]}`},
		{graph.Build(nil).Channels(), `[]`},
	} {
		data, err := json.Marshal(tt.doc)
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != tt.want {
			t.Errorf("got %s, want %s", data, tt.want)
		}
	}
}

// TestBuildKeepsInput checks that Build neither reorders its input nor
// changes the metadata, and that its results do not share memory with the graph.
func TestBuildKeepsInput(t *testing.T) {
	vs := []graph.Version{olm("1.1.0", in("stable", "replaces:1.0.0")), olm("1.0.0", in("stable"))}
	g := graph.Build(vs)
	if vs[0].Version != "1.1.0" || vs[0].Metadata.Channels[0].Replaces != csv("1.0.0") || len(vs[1].Metadata.Channels) != 1 {
		t.Errorf("Build changed its input: %+v", vs)
	}
	cg, _ := g.Channel("stable")
	cg.Nodes[0].Version, cg.Edges[0].To = "x", "x"
	g.Channels()[0].Versions[0] = "x"
	if again, _ := g.Channel("stable"); again.Nodes[0].Version != "1.1.0" || again.Edges[0].To != "1.1.0" || g.Channels()[0].Versions[0] != "1.1.0" {
		t.Errorf("changing a result changed the graph: %+v", again)
	}
}
