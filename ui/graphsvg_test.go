package ui

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/graph"
	"github.com/berth-registry/berth/permissions"
	"github.com/berth-registry/berth/pkgformat"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/graph")

// fixtureGraph is the upgrade graph of one channel of a fixture package.
func fixtureGraph(t *testing.T, dir, channel string) *apiv1.Graph {
	t.Helper()
	path := filepath.Join("../../shared/fixtures", dir)
	var ps []*pkgformat.Package
	if pkgformat.IsRepository(path) {
		var err error
		if ps, err = pkgformat.LoadRepository(path, pkgformat.Options{}); err != nil {
			t.Fatal(err)
		}
	} else {
		entries, err := os.ReadDir(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			p, err := pkgformat.Load(filepath.Join(path, e.Name()), pkgformat.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
		}
	}
	var vs []graph.Version
	for _, p := range ps {
		vs = append(vs, graph.Version{Version: pkgformat.Tag(p.Metadata.Version), Digest: "sha256:" + p.Metadata.Version, Metadata: &p.Metadata})
	}
	g, err := graph.Build(vs).Channel(channel)
	if err != nil {
		t.Fatal(err)
	}
	// Ratings and widening edges, as the catalog judges them.
	perms := make(map[string]*pkgformat.Permissions)
	for _, p := range ps {
		perms[pkgformat.Tag(p.Metadata.Version)] = p.Metadata.Permissions
	}
	for i := range g.Nodes {
		g.Nodes[i].Rating = permissions.Of(perms[g.Nodes[i].Version]).Rating
	}
	cmp := permissions.NewComparer(permissions.MaxGrants)
	for i := range g.Edges {
		g.Edges[i].WidensPermissions = cmp.Widens(perms[g.Edges[i].From], perms[g.Edges[i].To])
	}
	return &g
}

// drawGraph renders the graph partial of g.
func drawGraph(t *testing.T, g *apiv1.Graph) string {
	t.Helper()
	var buf bytes.Buffer
	if err := pages["package"].ExecuteTemplate(&buf, "graph", layoutGraph(g)); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestGraphGolden(t *testing.T) {
	for _, tc := range []struct{ name, dir, channel string }{
		{"etcd-singlenamespace-alpha", "olm-community/etcd", "singlenamespace-alpha"},
		{"etcd-clusterwide-alpha", "olm-community/etcd", "clusterwide-alpha"},
		{"kafka", "kudo/kafka", ""},
		{"cassandra", "kudo/cassandra", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := drawGraph(t, fixtureGraph(t, tc.dir, tc.channel))
			if again := drawGraph(t, fixtureGraph(t, tc.dir, tc.channel)); again != got {
				t.Fatal("two drawings of one graph differ")
			}
			file := filepath.Join("testdata", "graph", tc.name+".svg.html")
			if *update {
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run go test -update to write it)", err)
			}
			if got != string(want) {
				t.Errorf("the drawing differs from %s (go test -update rewrites it):\n%s", file, got)
			}
		})
	}
}

func TestGraphIsBounded(t *testing.T) {
	g := &apiv1.Graph{Channel: "stable"}
	for i := range 300 {
		v := fmt.Sprintf("1.%d.0", i)
		g.Nodes = append(g.Nodes, apiv1.GraphNode{Version: v})
		for j := max(0, i-10); j < i; j++ {
			g.Edges = append(g.Edges, apiv1.GraphEdge{From: fmt.Sprintf("1.%d.0", j), To: v, Kind: apiv1.EdgeSkipRange})
		}
	}
	g.Head = "1.299.0"
	d := layoutGraph(g)
	if len(d.Nodes) != maxGraphNodes || d.OmittedNodes != 100 {
		t.Errorf("%d nodes drawn, %d left out; want %d, 100", len(d.Nodes), d.OmittedNodes, maxGraphNodes)
	}
	if d.Nodes[0].Version != "1.299.0" || !d.Nodes[0].Head {
		t.Errorf("the first row is %+v, want the head", d.Nodes[0])
	}
	if len(d.Edges) != maxGraphEdges || d.OmittedEdges != len(g.Edges)-maxGraphEdges {
		t.Errorf("%d edges drawn, %d left out, of %d", len(d.Edges), d.OmittedEdges, len(g.Edges))
	}
	if html := drawGraph(t, g); !strings.Contains(html, "left out: 100 older versions") {
		t.Error("the drawing does not say what it left out")
	}
}

func TestGraphEscapesVersions(t *testing.T) {
	g := &apiv1.Graph{Channel: "<script>", Head: "2.0.0</svg>",
		Nodes: []apiv1.GraphNode{{Version: "1.0.0<script>alert(1)</script>"}, {Version: "2.0.0</svg>"}},
		Edges: []apiv1.GraphEdge{{From: "1.0.0<script>alert(1)</script>", To: "2.0.0</svg>", Kind: `"><script>`}},
	}
	html := drawGraph(t, g)
	for _, bad := range []string{"<script>", "2.0.0</svg>", `class="edge "><`} {
		if strings.Contains(html, bad) {
			t.Errorf("%q unescaped in %s", bad, html)
		}
	}
	if strings.Count(html, "</svg>") != 1 {
		t.Errorf("the drawing closes its svg %d times", strings.Count(html, "</svg>"))
	}
}
