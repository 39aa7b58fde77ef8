package pkgformat

import (
	"bytes"
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
)

// parseYAML parses every document of a YAML (or JSON) file, refusing a file
// over MaxFileSize, alias bombs and excessive nesting. Empty documents are
// dropped. Errors name file (and the line, for malformed YAML) and wrap
// ErrInvalid or ErrLimit.
func parseYAML(file string, data []byte, limits Limits) ([]*yaml.Node, error) {
	if int64(len(data)) > limits.MaxFileSize {
		return nil, overLimit(file, "YAML file is larger than %d bytes", limits.MaxFileSize)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	c := yamlCheck{file: file, size: make(map[*yaml.Node]int64), height: make(map[*yaml.Node]int), busy: make(map[*yaml.Node]bool)}
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, invalid(file, "malformed YAML: %s", yamlMessage(err))
		}
		if _, _, err := c.walk(&doc); err != nil {
			return nil, err
		}
		if !emptyDocument(&doc) {
			docs = append(docs, &doc)
		}
	}
}

// decodeYAML decodes the one document of a YAML file into out (left as is
// when the file is empty). Errors name file and the line and wrap ErrInvalid.
func decodeYAML(file string, data []byte, limits Limits, out any) error {
	docs, err := parseYAML(file, data, limits)
	if err != nil {
		return err
	}
	switch len(docs) {
	case 0:
		return nil
	case 1:
		return decodeNode(file, docs[0], out)
	default:
		return invalid(file, "expected one YAML document, found %d", len(docs))
	}
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
