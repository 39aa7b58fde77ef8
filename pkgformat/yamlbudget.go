package pkgformat

import (
	"context"
	"fmt"
	"io"

	"github.com/berth-registry/berth/pkgformat/render"
)

// yamlBudget is what parsing the YAML of one package may still cost, under
// the YAML fields of Limits, until ctx ends. One budget serves every YAML
// file of a package, so that many small files add up.
type yamlBudget struct {
	ctx    context.Context
	limits Limits
	nodes  int64 // nodes of the documents parsed so far, aliases expanded
	size   int64 // bytes handed to the parser so far
}

// newYAMLBudget returns a budget of limits (defaults filled) that ends with
// ctx; a nil ctx never ends.
func newYAMLBudget(ctx context.Context, limits Limits) *yamlBudget {
	if ctx == nil {
		ctx = context.Background()
	}
	return &yamlBudget{ctx: ctx, limits: limits.withDefaults()}
}

// stopped returns the context's error, naming file, once it has ended.
func (b *yamlBudget) stopped(file string) error {
	if err := b.ctx.Err(); err != nil {
		return fmt.Errorf("%s: reading stopped: %w", displayPath(file), err)
	}
	return nil
}

// document spends the nodes of a parsed document of file, the documents
// of file counted so far including it.
func (b *yamlBudget) document(file string, docs int, nodes int64) error {
	if docs > b.limits.MaxYAMLDocuments {
		return overLimit(file, "more than %d YAML documents in one file (MaxYAMLDocuments)", b.limits.MaxYAMLDocuments)
	}
	b.nodes += nodes
	if b.nodes > b.limits.MaxYAMLNodes {
		return overLimit(file, "the package's YAML has more than %d nodes (MaxYAMLNodes)", b.limits.MaxYAMLNodes)
	}
	return b.stopped(file)
}

// yamlReader hands the YAML of one file to yaml.v3's decoder, which pulls it
// a few hundred bytes at a time as it builds a document: so the reader
// checks the budget as the tree grows, and stops a document whose node
// count may pass a limit before the tree is built. Its err is the limit hit.
type yamlReader struct {
	file string
	data []byte
	b    *yamlBudget
	// docNodes bounds the nodes of the bytes read since the last document
	// ended (yaml.v3 reads at most a buffer ahead of the document it builds).
	docNodes int64
	err      error
}

// nextDocument starts counting the nodes of a new document.
func (r *yamlReader) nextDocument() { r.docNodes = 0 }

// Read implements io.Reader.
func (r *yamlReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.data)
	chunk := r.data[:n]
	r.data = r.data[n:]
	r.b.size += int64(n)
	r.docNodes += nodeBound(chunk)
	l := r.b.limits
	switch {
	case r.b.size > l.MaxYAMLSize:
		r.err = overLimit(r.file, "the package's YAML is larger than %d bytes (MaxYAMLSize)", l.MaxYAMLSize)
	case r.docNodes > l.MaxYAMLDocumentNodes:
		r.err = overLimit(r.file, "a YAML document has more than %d nodes (MaxYAMLDocumentNodes)", l.MaxYAMLDocumentNodes)
	case r.b.nodes+r.docNodes > l.MaxYAMLNodes:
		r.err = overLimit(r.file, "the package's YAML has more than %d nodes (MaxYAMLNodes)", l.MaxYAMLNodes)
	default:
		r.err = r.b.stopped(r.file)
	}
	if r.err != nil {
		return 0, r.err
	}
	return n, nil
}

// nodeBound is an upper bound of the nodes yaml.v3 builds from YAML text:
// two for every line and three for every indicator that may start or
// separate a node. A line holds one node more than its indicators (its
// first scalar), plus the mapping a key opens; an indicator adds at most a
// collection, an empty scalar and the scalar after it. Prose, comments and
// block scalars count two a line, so real documents stay within three times
// their true count.
func nodeBound(text []byte) int64 {
	var n int64
	for _, c := range text {
		switch c {
		case '\n':
			n += 2
		case '-', '?', ':', ',', '[', '{':
			n += 3
		}
	}
	return n
}

// bytesPerNode is about what one yaml.v3 node takes in memory.
const bytesPerNode = 200

// ParseCost is an upper bound of the memory, in bytes, that New takes to
// parse the YAML of files under limits (defaults for zero fields), beyond
// the files themselves: one document's tree is held at a time, and no
// document exceeds MaxYAMLDocumentNodes.
func ParseCost(files []File, limits Limits) int64 {
	limits = limits.withDefaults()
	var most int64
	for _, f := range yamlFiles(files) {
		most = max(most, min(nodeBound(f.Data), limits.MaxYAMLDocumentNodes))
	}
	return most * bytesPerNode
}

// RenderCost is an upper bound of the memory, in bytes, that New takes
// beyond ParseCost to render the templates of files (a Helm chart or a
// KUDO operator; 0 for other packages) under limits (defaults for zero
// fields): the strings rendering may build (MaxRenderSteps ×
// render.BytesPerStep), the outputs kept (MaxFileSize in all), and the
// tree of one rendered document.
func RenderCost(files []File, limits Limits) int64 {
	pf := newPkgFiles(files, Options{})
	if dir := commonFolder(files); dir != "" && !pf.has(helmChartFile) && !pf.has(kudoOperatorFile) {
		pf = newPkgFiles(stripFolder(files, dir), Options{})
	}
	if !pf.has(helmChartFile) && !pf.has(kudoOperatorFile) {
		return 0
	}
	limits = limits.withDefaults()
	tree := min(limits.MaxYAMLDocumentNodes, 3*limits.MaxFileSize) * bytesPerNode
	return limits.MaxRenderSteps*render.BytesPerStep + limits.MaxFileSize + tree
}
