package ui

import (
	"bytes"
	"html/template"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// maxMarkdown bounds the README rendered as Markdown; a longer one is shown
// as plain text.
const maxMarkdown = 256 << 10

// markdown renders READMEs: GitHub's flavour, without raw HTML (goldmark
// drops it unless told otherwise, and never writes a link or image with a
// dangerous URL such as javascript:), headings moved down under the page's
// own, and links marked nofollow.
var markdown = goldmark.New(
	goldmark.WithExtensions(extension.GFM),
	goldmark.WithParserOptions(parser.WithASTTransformers(util.Prioritized(readmeTransformer{}, 100))),
)

// readme is a README as a page shows it.
type readme struct {
	// HTML is the rendered Markdown; empty when Text is set.
	HTML template.HTML
	// Text is the README as plain text, when too long to render.
	Text string
}

// renderReadme renders src, or returns it as text when it is longer than
// maxMarkdown or cannot be rendered.
func renderReadme(src string) readme {
	if len(src) > maxMarkdown {
		return readme{Text: src}
	}
	var buf bytes.Buffer
	if err := markdown.Convert([]byte(src), &buf); err != nil {
		return readme{Text: src}
	}
	return readme{HTML: template.HTML(buf.String())} //nolint:gosec // goldmark without WithUnsafe: raw HTML dropped, dangerous URLs not written
}

// readmeTransformer moves headings two levels down (a README's # is under
// the page's h1 and the section's h2) and marks links nofollow.
type readmeTransformer struct{}

func (readmeTransformer) Transform(doc *ast.Document, _ text.Reader, _ parser.Context) {
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Heading:
			n.Level = min(n.Level+2, 6)
		case *ast.Link, *ast.AutoLink:
			n.SetAttributeString("rel", []byte("nofollow noopener noreferrer"))
		}
		return ast.WalkContinue, nil
	})
}
