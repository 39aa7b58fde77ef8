package ui

import (
	"strings"
	"testing"
)

// TestReadmeDropsRawText: a README's script, style and other raw-text
// elements are dropped with their content, whatever the Markdown around
// them, and the text outside them is kept.
func TestReadmeDropsRawText(t *testing.T) {
	for _, tc := range []struct {
		name, src  string
		kept, gone []string
	}{
		{"inline script", "Hello <script>alert('x')</script> world", []string{"Hello", "world"}, []string{"alert"}},
		{"inline style", "front <style>body{display:none}</style> back", []string{"front", "back"}, []string{"display"}},
		{"upper case, attributes", "front <SCRIPT type=text/javascript>alert(2)</SCRIPT> back", []string{"front", "back"}, []string{"alert"}},
		{"tag across lines", "front <script\nsrc=x>alert(4)</script> back", []string{"front", "back"}, []string{"alert"}},
		{"script block", "<script>\n\nalert(1)\n\n</script>\n\nafter", []string{"after"}, []string{"alert"}},
		{"style block", "<style>\nbody { color: red }\n</style>\n\nafter", []string{"after"}, []string{"color"}},
		{"textarea", "front <textarea>secret words</textarea> back", []string{"front", "back"}, []string{"secret"}},
		{"title over blocks", "<title>\n\nTitle text\n\n</title>\n\nafter", []string{"after"}, []string{"Title text"}},
		{"iframe fallback", "<iframe src=x>\n\nfallback text\n\n</iframe>\n\nafter", []string{"after"}, []string{"fallback"}},
		{"noscript", "<noscript>\n\nno script text\n\n</noscript>\n\nafter", []string{"after"}, []string{"no script"}},
		{"template", "front <template>hidden</template> back", []string{"front", "back"}, []string{"hidden"}},
		{"Markdown inside", "front <style>**bold** [link](https://example.com) `code`</style> back", []string{"front", "back"}, []string{"bold", "<a", "code"}},
		{"in a list", "- item <script>alert(3)</script>\n- next", []string{"item", "next"}, []string{"alert"}},
		{"in a table", "| h |\n|---|\n| <style>x{}</style> cell |", []string{"cell"}, []string{"x{}"}},
		{"in a link", "[before <script>alert(7)</script> after](https://example.com)", []string{"before", "after"}, []string{"alert"}},
		{"code block inside", "<noscript>\n\n```\nfenced code\n```\n\n</noscript>\n\nafter", []string{"after"}, []string{"fenced"}},
		{"unclosed", "front <script>alert(5)\n\nmore text", []string{"front"}, []string{"alert", "more text"}},
		{"other end tag", "front <style> inside1 </script> inside2 </style> back", []string{"front", "back"}, []string{"inside1", "inside2"}},
		{"two in one block", "<script>one</script><style>two</style>\n\nafter", []string{"after"}, []string{"one", "two"}},
	} {
		r := renderReadme(tc.src)
		got := string(r.HTML)
		if r.Text != "" {
			t.Errorf("%s: shown as text", tc.name)
			continue
		}
		for _, k := range tc.kept {
			if !strings.Contains(got, k) {
				t.Errorf("%s: %q lost from %q", tc.name, k, got)
			}
		}
		for _, g := range tc.gone {
			if strings.Contains(got, g) {
				t.Errorf("%s: %q shown in %q", tc.name, g, got)
			}
		}
	}
}

// TestReadmeKeepsText: tags in comments and code, elements that are not
// raw text, and look-alike names leave the text alone.
func TestReadmeKeepsText(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"comment", "a <!-- <script> --> visible", "visible"},
		{"code span", "`<script>alert(6)</script>`", "&lt;script&gt;alert(6)&lt;/script&gt;"},
		{"code block", "```html\n<style>p{}</style>\n```", "&lt;style&gt;p{}&lt;/style&gt;"},
		{"bold tag", "a <b>bold</b> c", "bold"},
		{"custom element", "a <script-like>text</script-like> b", "text"},
		{"after a closed one", "<script>x</script>\n\nnext paragraph", "<p>next paragraph</p>"},
	} {
		if got := string(renderReadme(tc.src).HTML); !strings.Contains(got, tc.want) {
			t.Errorf("%s: no %q in %q", tc.name, tc.want, got)
		}
	}
}
