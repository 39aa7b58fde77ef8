package graph_test

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"
	"golang.org/x/sync/errgroup"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/graph"
	"github.com/berth-registry/berth/pkgformat"
)

// fixtures holds the real third-party packages (see its README).
const fixtures = "../../../shared/fixtures"

// fixtureVersions is how many versions the fixtures hold: 38 KUDO, 489 OLM.
const fixtureVersions = 38 + 489

// fixturePackage is one package of the fixtures: its versions as the catalog
// stores them and, for the OLM package-manifest layout, the head its package
// file names for each channel (currentCSV).
type fixturePackage struct {
	name     string
	format   pkgformat.Format
	versions []graph.Version
	heads    map[string]string // channel -> CSV name
}

// loadFixtures reads every KUDO and OLM package of the fixtures once, sorted
// by format and name. It fails unless it finds all fixtureVersions.
var loadFixtures = sync.OnceValues(func() ([]fixturePackage, error) {
	var out []fixturePackage
	kudo, err := dirs(filepath.Join(fixtures, "kudo"))
	if err != nil {
		return nil, err
	}
	for _, name := range kudo {
		out = append(out, fixturePackage{name: name, format: pkgformat.KUDO})
	}
	olm, err := dirs(filepath.Join(fixtures, "olm-community"))
	if err != nil {
		return nil, err
	}
	for _, name := range olm {
		out = append(out, fixturePackage{name: name, format: pkgformat.OLM, heads: map[string]string{}})
	}
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := range out {
		g.Go(out[i].load)
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	versions := 0
	for _, fp := range out {
		versions += len(fp.versions)
	}
	if versions != fixtureVersions {
		return nil, fmt.Errorf("%s: %d versions, want %d", fixtures, versions, fixtureVersions)
	}
	return out, nil
})

// load reads the versions of fp and, from an OLM package file, the heads.
func (fp *fixturePackage) load() error {
	if fp.format == pkgformat.KUDO {
		dir := filepath.Join(fixtures, "kudo", fp.name)
		folders, err := dirs(dir)
		if err != nil {
			return err
		}
		for _, folder := range folders {
			p, err := pkgformat.Load(filepath.Join(dir, folder), pkgformat.Options{})
			if err != nil {
				return err
			}
			fp.versions = append(fp.versions, stored(p))
		}
		return nil
	}
	dir := filepath.Join(fixtures, "olm-community", fp.name)
	pkgs, err := pkgformat.LoadRepository(dir, pkgformat.Options{})
	if err != nil {
		return err
	}
	for _, p := range pkgs {
		fp.versions = append(fp.versions, stored(p))
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.package.yaml"))
	for _, file := range files {
		var pm struct {
			Channels []struct {
				Name       string `yaml:"name"`
				CurrentCSV string `yaml:"currentCSV"`
			} `yaml:"channels"`
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		if err := yaml.Unmarshal(data, &pm); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		for _, c := range pm.Channels {
			fp.heads[c.Name] = c.CurrentCSV
		}
	}
	return nil
}

// dirs lists the folders in dir.
func dirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// stored is p as the catalog hands it to the graph: tag, a digest, metadata.
func stored(p *pkgformat.Package) graph.Version {
	tag := pkgformat.Tag(p.Metadata.Version)
	return graph.Version{
		Version:  tag,
		Digest:   fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(p.Metadata.Name+"@"+tag))),
		Metadata: &p.Metadata,
	}
}

func fixturePackages(t *testing.T) []fixturePackage {
	t.Helper()
	pkgs, err := loadFixtures()
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// fixture returns the fixture package called name.
func fixture(t *testing.T, name string) fixturePackage {
	t.Helper()
	for _, fp := range fixturePackages(t) {
		if fp.name == name {
			return fp
		}
	}
	t.Fatalf("no fixture package %s", name)
	return fixturePackage{}
}

// TestFixtures builds the graph of every fixture package and checks its
// invariants, and, for OLM packages with a package file, that each channel's
// head is the currentCSV that file names.
func TestFixtures(t *testing.T) {
	// The versions that list a channel but are not reached from its head,
	// read by hand. couchbase-enterprise 1.1.0 replaces nothing, so 1.0.0
	// is cut off. The bundles of the other three name no replaces or skips
	// (cloud-native-postgresql only skipRanges), their ci.yaml having
	// community-operators infer the graph from the versions
	// ("updateGraph: semver-mode"), which no bundle records: their channels
	// hold their heads alone, as operator-registry loads them.
	wantStranded := []string{
		"cloud-native-postgresql stable/1.1.0", "cloud-native-postgresql stable/1.2.1", "cloud-native-postgresql stable/1.3.0",
		"cloud-native-postgresql stable/1.4.0", "cloud-native-postgresql stable/1.5.0", "cloud-native-postgresql stable/1.5.1",
		"couchbase-enterprise stable/1.0.0",
		"istio-workspace-operator alpha/0.0.10", "istio-workspace-operator alpha/0.0.6", "istio-workspace-operator alpha/0.0.7",
		"istio-workspace-operator alpha/0.0.8", "istio-workspace-operator alpha/0.0.9", "istio-workspace-operator alpha/0.1.0",
		"istio-workspace-operator alpha/0.2.0",
		"poison-pill-operator alpha/0.0.1", "poison-pill-operator alpha/0.0.2", "poison-pill-operator alpha/0.0.3",
		"poison-pill-operator alpha/0.0.4", "poison-pill-operator alpha/0.0.5", "poison-pill-operator alpha/0.0.6",
	}
	versions, edges, stranded := 0, map[string]int{}, []string{}
	for _, fp := range fixturePackages(t) {
		t.Run(string(fp.format)+"/"+fp.name, func(t *testing.T) {
			g := graph.Build(fp.versions)
			for _, v := range checkInvariants(t, fp.versions, g) {
				stranded = append(stranded, fp.name+" "+v)
			}
			for _, c := range g.Channels() {
				cg, _ := g.Channel(c.Name)
				for _, e := range cg.Edges {
					edges[e.Kind]++
				}
				csv, ok := fp.heads[c.Name]
				if !ok {
					continue
				}
				for _, v := range fp.versions {
					if v.Metadata.CSVName == csv && v.Version != c.Head {
						t.Errorf("channel %s: head %s, but the package file names %s (%s)", c.Name, c.Head, csv, v.Version)
					}
				}
			}
			latest := slices.MaxFunc(fp.versions, func(a, b graph.Version) int {
				return strings.Compare(pkgformat.VersionKey(a.Version), pkgformat.VersionKey(b.Version))
			})
			if fp.format == pkgformat.OLM && g.DefaultChannel() != latest.Metadata.DefaultChannel {
				t.Errorf("default channel %q, want %q, the latest version's", g.DefaultChannel(), latest.Metadata.DefaultChannel)
			}
			versions += len(fp.versions)
		})
	}
	t.Logf("%d versions, edges by kind %v", versions, edges)
	if versions != fixtureVersions {
		t.Errorf("%d versions, want %d", versions, fixtureVersions)
	}
	slices.Sort(stranded)
	if !slices.Equal(stranded, wantStranded) {
		t.Errorf("versions not in a channel they list: %q, want %q", stranded, wantStranded)
	}
}

// TestFixturesPinned checks graphs of fixture packages against what their
// files say, read by hand.
func TestFixturesPinned(t *testing.T) {
	tests := []struct {
		pkg      string
		def      string
		channels map[string]wantChannel // edges nil: not checked
		upgrades []wantUpgrades
	}{
		{
			// etcd.package.yaml: three channels; 0.9.2 and 0.9.2-clusterwide
			// both replace 0.9.0, which is in two channels.
			pkg: "etcd",
			def: "singlenamespace-alpha",
			channels: map[string]wantChannel{
				"alpha":                 {"0.6.1", []string{"0.6.1"}, []string{}},
				"clusterwide-alpha":     {"0.9.4-clusterwide", []string{"0.9.4-clusterwide", "0.9.2-clusterwide", "0.9.0"}, []string{"0.9.2-clusterwide>0.9.4-clusterwide replaces", "0.9.0>0.9.2-clusterwide replaces"}},
				"singlenamespace-alpha": {"0.9.4", []string{"0.9.4", "0.9.2", "0.9.0"}, []string{"0.9.2>0.9.4 replaces", "0.9.0>0.9.2 replaces"}},
			},
			upgrades: []wantUpgrades{
				{"", "0.9.0", []string{"0.9.2"}, []string{"0.9.2", "0.9.4"}},
				{"clusterwide-alpha", "0.9.0", []string{"0.9.2-clusterwide"}, []string{"0.9.2-clusterwide", "0.9.4-clusterwide"}},
				{"alpha", "0.6.1", nil, nil},
			},
		},
		{
			// Bundles with a skipRange ">=0.6.0 <X" and no replaces or skips:
			// the loader finds the head alone (see TestFixtures).
			pkg: "cloud-native-postgresql",
			def: "stable",
			channels: map[string]wantChannel{
				"stable": {"1.6.0", []string{"1.6.0"}, []string{}},
			},
			upgrades: []wantUpgrades{{"", "1.6.0", nil, nil}},
		},
		{
			// Replaces chains that cross channel annotations: stable's 0.5.0
			// replaces 0.4.0, which lists preview only, and so on to 0.0.1.
			pkg: "redis-operator",
			def: "stable",
			channels: map[string]wantChannel{
				"preview": {"0.4.0", []string{"0.4.0", "0.3.0", "0.2.0", "0.0.1"}, []string{
					"0.3.0>0.4.0 replaces", "0.2.0>0.3.0 replaces", "0.0.1>0.2.0 replaces"}},
				"stable": {"0.6.0", []string{"0.6.0", "0.5.0", "0.4.0", "0.3.0", "0.2.0", "0.0.1"}, []string{
					"0.5.0>0.6.0 replaces", "0.4.0>0.5.0 replaces", "0.3.0>0.4.0 replaces", "0.2.0>0.3.0 replaces", "0.0.1>0.2.0 replaces"}},
			},
			upgrades: []wantUpgrades{{"stable", "0.0.1", []string{"0.2.0"}, []string{"0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0"}}},
		},
		{
			// 1.5.1, alone in maintenance-1.5, replaces 1.5.0 of stable;
			// 1.6.0 replaces 1.5.0 too, and stable does not hold 1.5.1.
			pkg: "ibm-block-csi-operator-community",
			def: "stable",
			channels: map[string]wantChannel{
				"maintenance-1.5": {"1.5.1", []string{"1.5.1", "1.5.0", "1.4.0", "1.3.0"}, []string{
					"1.5.0>1.5.1 replaces", "1.4.0>1.5.0 replaces", "1.3.0>1.4.0 replaces"}},
				"stable": {"1.6.0", []string{"1.6.0", "1.5.0", "1.4.0", "1.3.0"}, []string{
					"1.5.0>1.6.0 replaces", "1.4.0>1.5.0 replaces", "1.3.0>1.4.0 replaces"}},
			},
			upgrades: []wantUpgrades{{"maintenance-1.5", "1.3.0", []string{"1.4.0"}, []string{"1.4.0", "1.5.0", "1.5.1"}}},
		},
		{
			// stable lists 1.0.0 alone, which replaces 0.0.4 of alpha.
			pkg: "tackle-operator",
			def: "stable",
			channels: map[string]wantChannel{
				"alpha":  {"1.0.0", []string{"1.0.0", "0.0.4", "0.0.3", "0.0.2", "0.0.1"}, nil},
				"stable": {"1.0.0", []string{"1.0.0", "0.0.4", "0.0.3", "0.0.2", "0.0.1"}, nil},
			},
			upgrades: []wantUpgrades{{"stable", "0.0.1", []string{"0.0.2"}, []string{"0.0.2", "0.0.3", "0.0.4", "1.0.0"}}},
		},
		{
			// 1.0.1 skips "awss3operator.1.0.0", a CSV that does not exist
			// (1.0.0's is awss3operator.v1.0.0, in channel original).
			pkg: "awss3-operator-registry",
			def: "alpha",
			channels: map[string]wantChannel{
				"alpha":    {"1.0.1", []string{"1.0.1"}, []string{}},
				"original": {"1.0.0", []string{"1.0.0"}, []string{}},
			},
			upgrades: []wantUpgrades{{"", "1.0.1", nil, nil}},
		},
		{
			// Channels named by versions; 1.0.2 only in alpha; 6.x with a
			// skipRange that matches no member of their channels.
			pkg: "aqua",
			def: "6.2.0",
			channels: map[string]wantChannel{
				"5.3.0": {"5.3.0", []string{"5.3.0", "1.0.1", "1.0.0", "0.0.2", "0.0.1"}, []string{
					"1.0.1>5.3.0 replaces", "1.0.0>1.0.1 replaces", "0.0.2>1.0.0 replaces", "0.0.1>0.0.2 replaces"}},
				"6.0.0": {"6.0.0", []string{"6.0.0"}, []string{}},
				"6.2.0": {"6.2.0", []string{"6.2.0"}, []string{}},
				"alpha": {"1.0.2", []string{"1.0.2", "1.0.1", "1.0.0", "0.0.2", "0.0.1"}, []string{
					"1.0.1>1.0.2 replaces", "1.0.0>1.0.1 replaces", "0.0.2>1.0.0 replaces", "0.0.1>0.0.2 replaces"}},
			},
			upgrades: []wantUpgrades{
				{"5.3.0", "0.0.1", []string{"0.0.2"}, []string{"0.0.2", "1.0.0", "1.0.1", "5.3.0"}},
				{"alpha", "0.0.1", []string{"0.0.2"}, []string{"0.0.2", "1.0.0", "1.0.1", "1.0.2"}},
			},
		},
		{
			// KUDO: "<appVersion>_<operatorVersion>", ordered by pkgformat.VersionKey.
			pkg: "kafka",
			def: graph.ImplicitChannel,
			channels: map[string]wantChannel{
				graph.ImplicitChannel: {"2.5.1_1.3.2", []string{"2.5.1_1.3.2", "2.5.0_1.3.2", "2.5.0_1.3.1", "2.5.0_1.3.0", "2.4.1_1.2.1", "2.4.0_1.2.1", "2.4.0_1.2.0"}, nil},
			},
			upgrades: []wantUpgrades{
				{"", "2.5.0_1.3.1", []string{"2.5.1_1.3.2", "2.5.0_1.3.2"}, []string{"2.5.1_1.3.2"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.pkg, func(t *testing.T) {
			g := graph.Build(fixture(t, tt.pkg).versions)
			if g.DefaultChannel() != tt.def {
				t.Errorf("default channel %q, want %q", g.DefaultChannel(), tt.def)
			}
			if got := len(g.Channels()); got != len(tt.channels) {
				t.Errorf("%d channels, want %d", got, len(tt.channels))
			}
			for name, want := range tt.channels {
				cg, err := g.Channel(name)
				if err != nil {
					t.Fatal(err)
				}
				var nodes []string
				for _, n := range cg.Nodes {
					nodes = append(nodes, n.Version)
				}
				edges := []string{}
				for _, e := range cg.Edges {
					edges = append(edges, fmt.Sprintf("%s>%s %s", e.From, e.To, e.Kind))
				}
				if cg.Head != want.head || !slices.Equal(nodes, want.versions) || want.edges != nil && !slices.Equal(edges, want.edges) {
					t.Errorf("channel %s: head %s, nodes %v, edges %q; want head %s, nodes %v, edges %q",
						name, cg.Head, nodes, edges, want.head, want.versions, want.edges)
				}
			}
			for _, want := range tt.upgrades {
				u, err := g.Upgrades(want.channel, want.from)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(u.Next, orEmpty(want.next)) || !slices.Equal(u.Path, orEmpty(want.path)) {
					t.Errorf("Upgrades(%q, %q) = %+v, want next %q, path %q", want.channel, want.from, u, want.next, want.path)
				}
			}
		})
	}
	// The head of cloud-native-postgresql keeps its skipRange, which covers
	// no member but would cover the older versions OLM installed from other
	// catalogs.
	entries, err := graph.Build(fixture(t, "cloud-native-postgresql").versions).Entries("stable")
	if err != nil || len(entries) != 1 || entries[0].SkipRange != ">=0.6.0 <1.6.0" || entries[0].CSVName != "cloud-native-postgresql.v1.6.0" {
		t.Errorf("entries of cloud-native-postgresql: %+v, %v", entries, err)
	}
	// 1.0.0 of awss3-operator-registry is not in alpha.
	if _, err := graph.Build(fixture(t, "awss3-operator-registry").versions).Upgrades("alpha", "1.0.0"); !errors.Is(err, graph.ErrNotFound) {
		t.Errorf("Upgrades(alpha, 1.0.0): %v, want not found", err)
	}
}

// snapshot is everything a Graph answers.
type snapshot struct {
	Default  string
	Channels []apiv1.Channel
	Graphs   []apiv1.Graph
	Entries  [][]graph.Entry
	Upgrades []apiv1.Upgrades
	Errors   []string
}

// snapshotOf asks g everything about versions: each channel's graph and,
// for OLM, entries, and Upgrades from each version in each channel and in
// the default channel.
func snapshotOf(g *graph.Graph, versions []graph.Version) snapshot {
	s := snapshot{Default: g.DefaultChannel(), Channels: g.Channels()}
	for _, channel := range append([]apiv1.Channel{{}}, s.Channels...) {
		if cg, err := g.Channel(channel.Name); err == nil {
			s.Graphs = append(s.Graphs, cg)
		} else {
			s.Errors = append(s.Errors, err.Error())
		}
		if entries, err := g.Entries(channel.Name); err == nil {
			s.Entries = append(s.Entries, entries)
		} else {
			s.Errors = append(s.Errors, err.Error())
		}
		for _, v := range versions {
			if u, err := g.Upgrades(channel.Name, v.Version); err == nil {
				s.Upgrades = append(s.Upgrades, u)
			} else {
				s.Errors = append(s.Errors, err.Error())
			}
		}
	}
	return s
}

// TestBuildIgnoresOrder is the property that the graph depends only on what
// is stored: for every fixture package, and for random subsets of its
// versions (as left after random deletions), Build gives the same answers
// whatever the order of its input. The graphs of the subsets, where
// deletions break chains and leave edges naming missing versions, must also
// keep the invariants of checkInvariants.
func TestBuildIgnoresOrder(t *testing.T) {
	const (
		seed         = 20240611
		permutations = 50 // of all versions of each package
		subsets      = 10 // of each package
		subsetOrders = 5  // of each subset
	)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	for _, fp := range fixturePackages(t) {
		// Sorted, so that the versions asked about are in the same order for
		// every build of a set.
		all := slices.SortedFunc(slices.Values(fp.versions), func(a, b graph.Version) int { return strings.Compare(a.Version, b.Version) })
		same := func(t *testing.T, set []graph.Version, want snapshot) {
			t.Helper()
			order := slices.Clone(set)
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			if got := snapshotOf(graph.Build(order), set); !reflect.DeepEqual(got, want) {
				var names []string
				for _, v := range order {
					names = append(names, v.Version)
				}
				t.Fatalf("seed %d: built from %v: %s", seed, names, difference(got, want))
			}
		}
		t.Run(string(fp.format)+"/"+fp.name, func(t *testing.T) {
			want := snapshotOf(graph.Build(all), all)
			for range permutations {
				same(t, all, want)
			}
			for range subsets {
				var kept []graph.Version
				for _, v := range all {
					if rng.IntN(3) > 0 {
						kept = append(kept, v)
					}
				}
				g := graph.Build(kept)
				checkInvariants(t, kept, g)
				want := snapshotOf(g, kept)
				for range subsetOrders {
					same(t, kept, want)
				}
			}
		})
	}
}

// difference describes where two snapshots first differ.
func difference(got, want snapshot) string {
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(want)
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(0, i-80)
	return fmt.Sprintf("got …%s…, want …%s…", a[from:min(len(a), i+80)], b[from:min(len(b), i+80)])
}
