package ui

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
)

// Bounds of the drawing of an upgrade graph: the newest versions and the
// edges among them are drawn, and the page says how many were left out.
const (
	maxGraphNodes = 200
	maxGraphEdges = 1000
)

// Geometry of the drawing, in SVG user units: one row per version, newest
// at the top; an edge between neighbouring rows is a straight line, a longer
// one an arc to the left that bulges further the more rows it spans.
const (
	rowHeight  = 28
	topMargin  = 18
	nodeRadius = 6
	maxBulge   = 120
	labelGap   = 14
	charWidth  = 7.5
)

// graphDrawing is an upgrade graph laid out for the graph template. Its
// coordinates are numbers and its paths made of numbers; the versions are
// text that the template escapes.
type graphDrawing struct {
	Channel string
	Head    string
	Width   int
	Height  int
	Nodes   []drawnNode
	Edges   []drawnEdge
	// OmittedNodes and OmittedEdges count what the bounds left out.
	OmittedNodes, OmittedEdges int
}

type drawnNode struct {
	Version string
	X, Y    int
	LabelX  int
	Head    bool
	// Rating is the version's permission rating, when known.
	Rating string
	// Widens is set when an upgrade to the version widens permissions.
	Widens bool
}

type drawnEdge struct {
	From, To string
	Kind     string
	Widens   bool
	Path     string
}

// layoutGraph lays g out. The result depends on g's content only: nodes are
// ordered by version, edges by their ends and kind.
func layoutGraph(g *apiv1.Graph) *graphDrawing {
	nodes := slices.Clone(g.Nodes)
	slices.SortFunc(nodes, func(a, b apiv1.GraphNode) int {
		return cmp.Or(cmp.Compare(catalog.VersionKey(b.Version), catalog.VersionKey(a.Version)), cmp.Compare(a.Version, b.Version))
	})
	d := &graphDrawing{Channel: g.Channel, Head: g.Head}
	if len(nodes) > maxGraphNodes {
		d.OmittedNodes = len(nodes) - maxGraphNodes
		nodes = nodes[:maxGraphNodes]
	}
	row := make(map[string]int, len(nodes))
	for i, n := range nodes {
		row[n.Version] = i
	}
	edges := make([]apiv1.GraphEdge, 0, len(g.Edges))
	for _, e := range g.Edges {
		_, okFrom := row[e.From]
		_, okTo := row[e.To]
		if okFrom && okTo && e.From != e.To {
			edges = append(edges, e)
		} else {
			d.OmittedEdges++
		}
	}
	slices.SortFunc(edges, func(a, b apiv1.GraphEdge) int {
		return cmp.Or(cmp.Compare(row[a.To], row[b.To]), cmp.Compare(row[a.From], row[b.From]), cmp.Compare(a.Kind, b.Kind))
	})
	if len(edges) > maxGraphEdges {
		d.OmittedEdges += len(edges) - maxGraphEdges
		edges = edges[:maxGraphEdges]
	}

	bulge := 0
	for _, e := range edges {
		bulge = max(bulge, bulgeOf(row[e.From]-row[e.To]))
	}
	x := 16 + bulge
	widest := 0
	widens := make(map[string]bool)
	for _, e := range edges {
		if e.WidensPermissions {
			widens[e.To] = true
		}
	}
	for i, n := range nodes {
		dn := drawnNode{Version: n.Version, X: x, Y: topMargin + i*rowHeight, LabelX: x + labelGap, Head: n.Version == g.Head, Rating: n.Rating.String(), Widens: widens[n.Version]}
		d.Nodes = append(d.Nodes, dn)
		widest = max(widest, len([]rune(n.Version))+len(dn.Rating)+16)
	}
	for _, e := range edges {
		d.Edges = append(d.Edges, drawnEdge{From: e.From, To: e.To, Kind: e.Kind, Widens: e.WidensPermissions, Path: edgePath(x, row[e.From], row[e.To])})
	}
	d.Width = x + labelGap + int(math.Ceil(float64(widest)*charWidth)) + 150
	d.Height = topMargin*2 + max(len(nodes)-1, 0)*rowHeight
	return d
}

// bulgeOf is how far left an edge spanning rows bulges; 0 for neighbours.
func bulgeOf(span int) int {
	if span < 0 {
		span = -span
	}
	if span <= 1 {
		return 0
	}
	return min(maxBulge, 10+int(18*math.Log2(float64(span))))
}

// edgePath draws an edge from the row of the old version to the row of the
// new one, ending beside the new version's node where its arrow head goes.
func edgePath(x, from, to int) string {
	y1, y2 := topMargin+from*rowHeight, topMargin+to*rowHeight
	dir := 1
	if y2 > y1 {
		dir = -1
	}
	y1 -= dir * nodeRadius
	y2 += dir * (nodeRadius + 2)
	b := bulgeOf(from - to)
	if b == 0 {
		return fmt.Sprintf("M%d %dL%d %d", x, y1, x, y2)
	}
	return fmt.Sprintf("M%d %dC%d %d %d %d %d %d", x, y1, x-b, y1, x-b, y2, x, y2)
}
