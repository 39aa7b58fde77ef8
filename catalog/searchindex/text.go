package searchindex

import (
	"unicode"
	"unicode/utf8"
)

// maxQueryTokens bounds the work one search text can ask for; words past it
// are ignored.
const maxQueryTokens = 16

// Relevance weights of the full-text fields: a word in the name counts ten
// times one in the description.
const (
	weightName        = 10
	weightDisplayName = 5
	weightKeywords    = 3
	weightAPIs        = 2
	weightDescription = 1
	weightMaintainers = 1
)

// isWordRune reports whether r belongs to a word: letters, marks and digits.
// Every other character, including quotes, operators, punctuation, NUL and the
// replacement character of invalid UTF-8, separates words.
func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
}

// tokens calls fn with each word of s, folded by fold, in order. buf is
// scratch space; the token passed to fn is valid only during the call.
func tokens(s string, buf []byte, fn func(tok []byte)) []byte {
	for i := 0; i < len(s); {
		// Skip separators.
		c := s[i]
		if c < utf8.RuneSelf {
			if !isASCIIWord(c) {
				i++
				continue
			}
		} else if r, n := utf8.DecodeRuneInString(s[i:]); !isWordRune(r) {
			i += n
			continue
		}
		buf = buf[:0]
		for i < len(s) {
			c := s[i]
			if c < utf8.RuneSelf {
				if !isASCIIWord(c) {
					break
				}
				if 'A' <= c && c <= 'Z' {
					c += 'a' - 'A'
				}
				buf = append(buf, c)
				i++
				continue
			}
			r, n := utf8.DecodeRuneInString(s[i:])
			if !isWordRune(r) {
				break
			}
			if r = fold(r); r >= 0 {
				buf = utf8.AppendRune(buf, r)
			}
			i += n
		}
		if len(buf) > 0 {
			fn(buf)
		}
	}
	return buf
}

func isASCIIWord(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// queryTokens returns the words of search text as tokens, at most
// maxQueryTokens of them.
func queryTokens(text string) []string {
	var out []string
	tokens(text, nil, func(tok []byte) {
		if len(out) < maxQueryTokens {
			out = append(out, string(tok))
		}
	})
	return out
}

// eachField calls fn with each full-text field of d and its weight.
func eachField(d *Doc, fn func(text string, weight uint32)) {
	s := &d.Summary
	fn(s.Name, weightName)
	fn(s.DisplayName, weightDisplayName)
	fn(s.Description, weightDescription)
	for _, k := range s.Keywords {
		fn(k, weightKeywords)
	}
	fn(d.Maintainers, weightMaintainers)
	fn(d.APIs, weightAPIs)
}
