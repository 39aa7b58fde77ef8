package graph_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/berth-registry/berth/catalog/graph"
	"github.com/berth-registry/berth/pkgformat"
)

// wantMembers is an OLM channel as the test expects it: its head and its
// entries newest first, as entryString writes them.
type wantMembers struct {
	head    string
	entries []string
}

// entryString writes an entry as "<version>[ replaces <v>][ skips <v>,…][ range <r>]",
// CSVs of package "op" by their versions.
func entryString(e graph.Entry) string {
	s := e.Version
	if e.Replaces != "" {
		s += " replaces " + strings.TrimPrefix(e.Replaces, "op.v")
	}
	if len(e.Skips) > 0 {
		var skips []string
		for _, skip := range e.Skips {
			skips = append(skips, strings.TrimPrefix(skip, "op.v"))
		}
		s += " skips " + strings.Join(skips, ",")
	}
	if e.SkipRange != "" {
		s += " range " + e.SkipRange
	}
	return s
}

func TestChannelMembership(t *testing.T) {
	noCSV := olm("1.2.0", in("stable"))
	noCSV.Metadata.CSVName = ""
	rc := olm("1.1.0-rc.1", in("stable"))
	rc.Metadata.CSVName = csv("1.1.0")
	tests := []struct {
		name     string
		versions []graph.Version
		channels map[string]wantMembers
		stranded []string // versions listing a channel they are not in, as channel/version
		edges    map[string][]string
	}{
		{
			// stable lists 1.2.0 and 1.3.0 only; 1.2.0 replaces 1.1.0, which
			// lists only alpha, so stable holds 1.1.0 and, along alpha's
			// replaces, 1.0.0 and 0.9.0, which lists no channel and has no
			// edges.
			name: "replaces chain crossing channel annotations",
			versions: []graph.Version{
				olm("0.9.0"),
				olm("1.0.0", in("alpha", "replaces:0.9.0")),
				olm("1.1.0", in("alpha", "replaces:1.0.0")),
				olm("1.2.0", in("stable", "replaces:1.1.0")),
				olm("1.3.0", in("stable", "replaces:1.2.0")),
			},
			channels: map[string]wantMembers{
				"alpha":  {"1.1.0", []string{"1.1.0 replaces 1.0.0", "1.0.0 replaces 0.9.0", "0.9.0"}},
				"stable": {"1.3.0", []string{"1.3.0 replaces 1.2.0", "1.2.0 replaces 1.1.0", "1.1.0 replaces 1.0.0", "1.0.0 replaces 0.9.0", "0.9.0"}},
			},
			edges: map[string][]string{
				"stable": {"1.2.0>1.3.0 replaces", "1.1.0>1.2.0 replaces", "1.0.0>1.1.0 replaces", "0.9.0>1.0.0 replaces"},
			},
		},
		{
			// The versions the chain skips are members, whatever channels
			// they list (1.0.5: beta); what a skipped member replaces is not
			// (1.0.0, stranded). A skip naming no stored version stays in the
			// entry and adds no edge.
			name: "skipped members",
			versions: []graph.Version{
				olm("1.0.0", in("stable")),
				olm("1.0.5", in("beta", "skips:1.0.0")),
				olm("1.1.0", in("stable", "replaces:1.0.0")),
				olm("1.2.0", in("stable")),
				olm("2.0.0", in("stable", "replaces:1.2.0", "skips:1.1.0", "skips:1.0.5", "skips:0.9.0")),
			},
			channels: map[string]wantMembers{
				"beta":   {"1.0.5", []string{"1.0.5 skips 1.0.0", "1.0.0"}},
				"stable": {"2.0.0", []string{"2.0.0 replaces 1.2.0 skips 1.1.0,1.0.5,0.9.0", "1.2.0", "1.1.0 replaces 1.0.0", "1.0.5 skips 1.0.0"}},
			},
			stranded: []string{"stable/1.0.0"},
			edges: map[string][]string{
				"stable": {"1.2.0>2.0.0 replaces", "1.1.0>2.0.0 skips", "1.0.5>2.0.0 skips"},
			},
		},
		{
			// opm validate follows replaces from the head until one names a
			// skipped entry (1.1.0): past it, each member is listed as skipped
			// by the one that replaces it, so that it is not stranded.
			name: "chain past a skipped member",
			versions: []graph.Version{
				olm("0.9.0", in("stable")),
				olm("1.0.0", in("stable", "replaces:0.9.0")),
				olm("1.1.0", in("stable", "replaces:1.0.0")),
				olm("1.2.0", in("stable", "replaces:1.1.0")),
				olm("1.3.0", in("stable", "replaces:1.2.0", "skips:1.1.0")),
			},
			channels: map[string]wantMembers{
				"stable": {"1.3.0", []string{"1.3.0 replaces 1.2.0 skips 1.1.0", "1.2.0 replaces 1.1.0",
					"1.1.0 replaces 1.0.0 skips 1.0.0", "1.0.0 replaces 0.9.0 skips 0.9.0", "0.9.0"}},
			},
			edges: map[string][]string{
				"stable": {"1.2.0>1.3.0 replaces", "1.1.0>1.3.0 skips", "1.1.0>1.2.0 replaces", "1.0.0>1.1.0 replaces", "0.9.0>1.0.0 replaces"},
			},
		},
		{
			// 2.0.0 replaces 1.5.0, which is not stored: the chain ends there
			// and the 1.x chain, whose end is not the greatest, is stranded.
			name: "broken chain",
			versions: []graph.Version{
				olm("1.0.0", in("stable")),
				olm("1.1.0", in("stable", "replaces:1.0.0")),
				olm("2.0.0", in("stable", "replaces:1.5.0")),
				olm("2.1.0", in("stable", "replaces:2.0.0")),
			},
			channels: map[string]wantMembers{
				"stable": {"2.1.0", []string{"2.1.0 replaces 2.0.0", "2.0.0 replaces 1.5.0"}},
			},
			stranded: []string{"stable/1.0.0", "stable/1.1.0"},
		},
		{
			// The chain 3.0.0, 2.0.0, 1.0.0 ends where 1.0.0 replaces 2.0.0
			// again, as the loader stops: that replaces is left out.
			name: "replaces cycle",
			versions: []graph.Version{
				olm("1.0.0", in("stable", "replaces:2.0.0")),
				olm("2.0.0", in("stable", "replaces:1.0.0")),
				olm("3.0.0", in("stable", "replaces:2.0.0")),
			},
			channels: map[string]wantMembers{
				"stable": {"3.0.0", []string{"3.0.0 replaces 2.0.0", "2.0.0 replaces 1.0.0", "1.0.0"}},
			},
			edges: map[string][]string{"stable": {"2.0.0>3.0.0 replaces", "1.0.0>2.0.0 replaces"}},
		},
		{
			// Members that replace, skip or cover the head with their range,
			// from annotations of another channel: nothing upgrades from the
			// head, so those are left out, here and in alpha, whose head
			// 1.5.0 skips 2.0.0, which skips 1.5.0.
			name: "head replaced and skipped by members",
			versions: []graph.Version{
				olm("1.0.0", in("alpha", "replaces:2.0.0")),
				olm("1.5.0", in("alpha", "skips:2.0.0", "range:>=2.0.0")),
				olm("2.0.0", in("stable", "replaces:1.0.0", "skips:1.5.0")),
			},
			channels: map[string]wantMembers{
				"alpha":  {"1.5.0", []string{"2.0.0 replaces 1.0.0", "1.5.0 skips 2.0.0 range >=2.0.0"}},
				"stable": {"2.0.0", []string{"2.0.0 replaces 1.0.0 skips 1.5.0", "1.5.0", "1.0.0"}},
			},
			stranded: []string{"alpha/1.0.0"},
			edges: map[string][]string{
				"alpha":  {"2.0.0>1.5.0 skips"},
				"stable": {"1.5.0>2.0.0 skips", "1.0.0>2.0.0 replaces"},
			},
		},
		{
			// Upgrades end in the cycle 1.0.0 <-> 2.0.0 of skips: the head is
			// its greatest version, and 1.0.0's skip of it is left out.
			name: "skips cycle",
			versions: []graph.Version{
				olm("1.0.0", in("stable", "skips:2.0.0", "skips:1.0.0")),
				olm("2.0.0", in("stable", "skips:1.0.0")),
			},
			channels: map[string]wantMembers{
				"stable": {"2.0.0", []string{"2.0.0 skips 1.0.0", "1.0.0"}},
			},
		},
		{
			// A CSV name identifies one version, the greatest: 1.1.0-rc.1,
			// whose CSV 1.1.0 has, and 1.2.0, which has none, are in no
			// channel. Of two entries for a channel, the first replaces and
			// readable range count, and every skip.
			name: "odd metadata",
			versions: []graph.Version{
				olm("1.0.0", in("stable")),
				rc,
				olm("1.1.0", in("stable", "replaces:1.0.0")),
				noCSV,
				olm("1.3.0", in("stable", "replaces:1.1.0", "range:not a range"), in("stable", "replaces:1.0.0", "skips:1.0.0", "range:>=1.0.0 <1.1.0")),
			},
			channels: map[string]wantMembers{
				"stable": {"1.3.0", []string{"1.3.0 replaces 1.1.0 skips 1.0.0 range >=1.0.0 <1.1.0", "1.1.0 replaces 1.0.0", "1.0.0"}},
			},
			stranded: []string{"stable/1.1.0-rc.1", "stable/1.2.0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := graph.Build(tt.versions)
			stranded := checkInvariants(t, tt.versions, g)
			slices.Sort(stranded)
			if !slices.Equal(stranded, tt.stranded) {
				t.Errorf("stranded %v, want %v", stranded, tt.stranded)
			}
			if len(g.Channels()) != len(tt.channels) {
				t.Errorf("channels %+v, want %d", g.Channels(), len(tt.channels))
			}
			for name, want := range tt.channels {
				entries, err := g.Entries(name)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, e := range entries {
					got = append(got, entryString(e))
					if e.Digest != digest(e.Version) || e.CSVName != csv(e.Version) {
						t.Errorf("entry %+v: wrong digest or CSV name", e)
					}
				}
				cg, _ := g.Channel(name)
				if cg.Head != want.head || !slices.Equal(got, want.entries) {
					t.Errorf("channel %s: head %s, entries %q; want head %s, entries %q", name, cg.Head, got, want.head, want.entries)
				}
				if wantEdges, ok := tt.edges[name]; ok {
					edges := []string{}
					for _, e := range cg.Edges {
						edges = append(edges, fmt.Sprintf("%s>%s %s", e.From, e.To, e.Kind))
					}
					if !slices.Equal(edges, wantEdges) {
						t.Errorf("channel %s: edges %q, want %q", name, edges, wantEdges)
					}
				}
			}
			sameInEveryOrder(t, tt.versions)
		})
	}
}

// sameInEveryOrder checks that Build gives the same answers from every
// permutation of versions.
func sameInEveryOrder(t *testing.T, versions []graph.Version) {
	t.Helper()
	want := snapshotOf(graph.Build(versions), versions)
	order := slices.Clone(versions)
	var permute func(k int)
	permute = func(k int) {
		if k == len(order) {
			if got := snapshotOf(graph.Build(order), versions); !reflect.DeepEqual(got, want) {
				t.Fatalf("built from %v: %s", order, difference(got, want))
			}
			return
		}
		for i := k; i < len(order); i++ {
			order[k], order[i] = order[i], order[k]
			permute(k + 1)
			order[k], order[i] = order[i], order[k]
		}
	}
	permute(0)
}

// TestEntriesShuffled builds random OLM packages whose versions replace and
// skip one another at random, across channels, and checks every graph's
// invariants and entries, and that the order of its input does not show.
func TestEntriesShuffled(t *testing.T) {
	const seed, packages = 20250107, 300
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	channels := []string{"alpha", "beta", "stable"}
	for p := range packages {
		n := 1 + rng.IntN(8)
		version := func() string { return fmt.Sprintf("1.%d.0", rng.IntN(n+2)) } // some not stored
		var vs []graph.Version
		for i := range n {
			var entries []pkgformat.Channel
			for _, c := range channels {
				if rng.IntN(3) == 0 {
					entries = append(entries, pkgformat.Channel{Name: c})
				}
			}
			var edges []string
			if rng.IntN(4) > 0 {
				edges = append(edges, "replaces:"+version())
			}
			for range rng.IntN(3) {
				edges = append(edges, "skips:"+version())
			}
			if rng.IntN(4) == 0 {
				edges = append(edges, "range:>="+version()+" <"+version())
			}
			for k := range entries {
				entries[k] = in(entries[k].Name, edges...)
			}
			vs = append(vs, olm(fmt.Sprintf("1.%d.0", i), entries...))
		}
		t.Run(fmt.Sprint(p), func(t *testing.T) {
			g := graph.Build(vs)
			checkInvariants(t, vs, g)
			want := snapshotOf(g, vs)
			for range 5 {
				order := slices.Clone(vs)
				rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
				if got := snapshotOf(graph.Build(order), vs); !reflect.DeepEqual(got, want) {
					t.Fatalf("seed %d: %s", seed, difference(got, want))
				}
			}
		})
	}
}

func TestEntriesErrors(t *testing.T) {
	g := graph.Build([]graph.Version{olm("1.0.0", in("stable", "skips:0.9.0"))})
	tests := []struct {
		name    string
		g       *graph.Graph
		channel string
		want    error
		says    string
	}{
		{"unknown channel", g, "beta", graph.ErrNotFound, `no channel "beta" (channels: stable)`},
		{"semver package", graph.Build([]graph.Version{semverV(pkgformat.Helm, "1.0.0")}), "", graph.ErrInvalid, `channel "default" is not an OLM channel`},
		{"no channels", graph.Build(nil), "", graph.ErrNotFound, "no channels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.g.Entries(tt.channel); !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("Entries(%q): %v, want %v saying %q", tt.channel, err, tt.want, tt.says)
			}
		})
	}
	entries, _ := g.Entries("")
	entries[0].Skips[0], entries[0].Version = "x", "x"
	if again, _ := g.Entries(""); again[0].Skips[0] != csv("0.9.0") || again[0].Version != "1.0.0" {
		t.Errorf("changing a result changed the graph: %+v", again)
	}
}
