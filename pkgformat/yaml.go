package pkgformat

import (
	"errors"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"
)

const (
	// maxYAMLDepth is the deepest nesting accepted in a YAML document, aliases
	// expanded. CRD schemas, the deepest real documents, stay far below it.
	maxYAMLDepth = 128
	// maxAliasNodes is how many nodes the aliases of one YAML file may add
	// when expanded, which stops "billion laughs" documents.
	maxAliasNodes = 1 << 20
	// maxMappingKeys is the most keys one YAML mapping may have: yaml.v3
	// compares every key of a mapping it decodes with every other.
	maxMappingKeys = 4096
	// fewKeys is the size up to which keys are compared pairwise, not hashed.
	fewKeys = 8
)

// eachYAMLDocument parses the documents of a YAML (or JSON) file one at a
// time, calling fn with each that is not empty; no tree outlives its call.
// It refuses a file over MaxFileSize, alias bombs, excessive nesting and
// whatever passes the YAML limits of b, checked as the documents are built.
// Errors name file (and the line, for malformed YAML) and wrap ErrInvalid or
// ErrLimit, or the budget's context error.
func eachYAMLDocument(file string, data []byte, b *yamlBudget, fn func(*yaml.Node) error) error {
	if int64(len(data)) > b.limits.MaxFileSize {
		return overLimit(file, "YAML file is larger than %d bytes", b.limits.MaxFileSize)
	}
	r := &yamlReader{file: file, data: data, b: b}
	dec := yaml.NewDecoder(r)
	c := yamlCheck{file: file, size: make(map[*yaml.Node]int64), height: make(map[*yaml.Node]int), busy: make(map[*yaml.Node]bool)}
	for docs := 1; ; docs++ {
		var doc yaml.Node
		err := dec.Decode(&doc)
		switch {
		case r.err != nil:
			return r.err
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return invalid(file, "malformed YAML: %s", yamlMessage(err))
		}
		nodes, _, err := c.walk(&doc)
		if err != nil {
			return err
		}
		if err := b.document(file, docs, nodes); err != nil {
			return err
		}
		r.nextDocument()
		if emptyDocument(&doc) {
			continue
		}
		if err := fn(&doc); err != nil {
			return err
		}
	}
}

// errSecondDocument stops decodeYAML at a file's second document.
var errSecondDocument = errors.New("a second document")

// decodeYAML decodes the one document of a YAML file into out (left as is
// when the file is empty). Errors name file and the line and wrap ErrInvalid
// or ErrLimit, or the budget's context error.
func decodeYAML(file string, data []byte, b *yamlBudget, out any) error {
	var first *yaml.Node
	err := eachYAMLDocument(file, data, b, func(doc *yaml.Node) error {
		if first != nil {
			return errSecondDocument
		}
		first = doc
		return nil
	})
	switch {
	case errors.Is(err, errSecondDocument):
		return invalid(file, "expected one YAML document, found more")
	case err != nil:
		return err
	case first == nil:
		return nil
	}
	return decodeNode(file, first, out)
}

// decodeNode decodes a parsed (and checked) YAML node into out.
func decodeNode(file string, n *yaml.Node, out any) error {
	if err := n.Decode(out); err != nil {
		return invalid(file, "%s", yamlMessage(err))
	}
	return nil
}

// yamlMessage is a one-line form of a yaml.v3 error, which carries the line.
func yamlMessage(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return strings.Join(te.Errors, "; ")
	}
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

// emptyDocument reports whether doc holds nothing (or only null).
func emptyDocument(doc *yaml.Node) bool {
	if doc.Kind != yaml.DocumentNode {
		return false
	}
	if len(doc.Content) == 0 {
		return true
	}
	c := doc.Content[0]
	return c.Kind == yaml.ScalarNode && c.Tag == "!!null"
}

// yamlCheck measures YAML documents with their aliases expanded, remembering
// the measure of every anchored node so that the work stays linear.
type yamlCheck struct {
	file       string
	size       map[*yaml.Node]int64
	height     map[*yaml.Node]int
	busy       map[*yaml.Node]bool
	aliasNodes int64
}

// walk returns the number of nodes under n and its height, aliases expanded.
func (c *yamlCheck) walk(n *yaml.Node) (int64, int, error) {
	if n.Kind == yaml.AliasNode {
		target := n.Alias
		if target == nil {
			return 0, 0, invalid(c.file, "line %d: alias to an unknown anchor", n.Line)
		}
		if c.busy[target] {
			return 0, 0, invalid(c.file, "line %d: alias *%s refers to a node that contains it", n.Line, n.Value)
		}
		size, height, err := c.walk(target)
		if err != nil {
			return 0, 0, err
		}
		c.aliasNodes += size
		if c.aliasNodes > maxAliasNodes {
			return 0, 0, invalid(c.file, "line %d: YAML aliases expand to more than %d nodes (alias bomb)", n.Line, maxAliasNodes)
		}
		return size, height, nil
	}
	if n.Anchor != "" {
		if size, ok := c.size[n]; ok {
			return size, c.height[n], nil
		}
		c.busy[n] = true
		defer delete(c.busy, n)
	}
	if n.Kind == yaml.MappingNode {
		if err := c.uniqueKeys(n); err != nil {
			return 0, 0, err
		}
	}
	size, height := int64(1), 0
	for _, child := range n.Content {
		s, h, err := c.walk(child)
		if err != nil {
			return 0, 0, err
		}
		size += s
		height = max(height, h)
		if height >= maxYAMLDepth {
			return 0, 0, invalid(c.file, "line %d: YAML is nested deeper than %d levels", n.Line, maxYAMLDepth)
		}
	}
	height++
	if n.Anchor != "" {
		c.size[n], c.height[n] = size, height
	}
	return size, height, nil
}

// uniqueKeys refuses a mapping with too many keys, or with a scalar key
// twice, before yaml.v3's decoder would compare (and report) every pair.
func (c *yamlCheck) uniqueKeys(m *yaml.Node) error {
	keys := len(m.Content) / 2
	if keys > maxMappingKeys {
		return overLimit(c.file, "line %d: YAML mapping has more than %d keys", m.Line, maxMappingKeys)
	}
	duplicate := func(first, again *yaml.Node) error {
		return invalid(c.file, "line %d: mapping key %q already defined at line %d", again.Line, again.Value, first.Line)
	}
	if keys <= fewKeys {
		for i := 0; i < len(m.Content); i += 2 {
			for j := i + 2; j < len(m.Content); j += 2 {
				if a, b := m.Content[i], m.Content[j]; a.Kind == yaml.ScalarNode && b.Kind == yaml.ScalarNode && a.Value == b.Value {
					return duplicate(a, b)
				}
			}
		}
		return nil
	}
	seen := make(map[string]*yaml.Node, keys)
	for i := 0; i < len(m.Content); i += 2 {
		k := m.Content[i]
		if k.Kind != yaml.ScalarNode {
			continue
		}
		if first, ok := seen[k.Value]; ok {
			return duplicate(first, k)
		}
		seen[k.Value] = k
	}
	return nil
}
