package ui

import (
	"bytes"
	"html/template"
	"regexp"
	"strings"

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
// dangerous URL such as javascript:) nor the content of raw-text elements
// such as script and style, headings moved down under the page's own, and
// links marked nofollow.
var markdown = goldmark.New(
	goldmark.WithExtensions(extension.GFM),
	goldmark.WithParserOptions(parser.WithASTTransformers(
		util.Prioritized(rawTextDropper{}, 50), util.Prioritized(readmeTransformer{}, 100))),
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

// rawTextTag matches a start or end tag of an element whose content a
// browser never shows as text of the page: script and style, the raw-text
// elements (RCDATA included) and those whose content stands in for
// something else. Goldmark omits their tags as raw HTML but would show what
// is between them as text.
var rawTextTag = regexp.MustCompile(`(?i)<(/?)(script|style|textarea|title|iframe|noscript|noembed|noframes|template)(?:[\s/>]|$)`)

// htmlComment matches an HTML comment, in which a tag is no tag.
var htmlComment = regexp.MustCompile(`(?s)<!--.*?-->`)

// rawTextDropper drops everything from a raw-text element's start tag to
// its end tag, or to the end of the README when it has none, as a browser
// would: text, code and whole blocks between them, and what they leave
// empty.
type rawTextDropper struct{}

func (rawTextDropper) Transform(doc *ast.Document, reader text.Reader, _ parser.Context) {
	source := reader.Source()
	var open string // the element the walk is in, lower case; "" outside
	var drop []ast.Node
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.RawHTML:
			open = rawTextState(open, n.Segments.Value(source))
		case *ast.HTMLBlock:
			raw := n.Lines().Value(source)
			if n.HasClosure() {
				raw = append(raw, n.ClosureLine.Value(source)...)
			}
			open = rawTextState(open, raw)
		default:
			if open != "" && n.ChildCount() == 0 {
				drop = append(drop, n)
			}
		}
		return ast.WalkContinue, nil
	})
	for _, n := range drop {
		for n != ast.Node(doc) {
			parent := n.Parent()
			parent.RemoveChild(parent, n)
			if parent.ChildCount() > 0 {
				break
			}
			n = parent
		}
	}
}

// rawTextState returns the raw-text element a walk is in after raw HTML,
// having been in open before it ("" for none).
func rawTextState(open string, raw []byte) string {
	for _, m := range rawTextTag.FindAllSubmatch(htmlComment.ReplaceAll(raw, nil), -1) {
		closing, name := len(m[1]) > 0, strings.ToLower(string(m[2]))
		switch {
		case open == "" && !closing:
			open = name
		case open == name && closing:
			open = ""
		}
	}
	return open
}
