package searchindex

import "unicode"

// Diacritic-free forms of the Latin letters in two blocks, one byte per code
// point from the block's first: the ASCII letter a code point's canonical
// decomposition (Unicode NFD) starts with when the rest of it is combining
// diacritical marks (U+0300–U+036F), '.' when there is none. So "é" folds to
// "e" and "Ǖ" to "U", as SQLite FTS5's remove_diacritics does.
const (
	latin1ExtFirst = 0x00C0 // Latin-1 Supplement letters, Latin Extended-A and -B
	latin1Ext      = "AAAAAA.CEEEEIIII.NOOOOO..UUUUY..aaaaaa.ceeeeiiii.nooooo..uuuuy.y" +
		"AaAaAaCcCcCcCcDd..EeEeEeEeEeGgGgGgGgHh..IiIiIiIiI...JjKk.LlLlLl....NnNnNn...OoOoOo.." +
		"RrRrRrSsSsSsSsTtTt..UuUuUuUuUuUuWwYyYZzZzZz.................................Oo......" +
		".......Uu............................AaIiOoUuUuUuUuUu.AaAa....GgKkOoOo..j...Gg..NnAa" +
		"....AaAaEeEeIiIiOoOoRrRrUuUuSsTt..Hh......AaEeOoOoOoOoYy............................"
	latinAddFirst = 0x1E00 // Latin Extended Additional
	latinAdd      = "AaBbBbBbCcDdDdDdDdDdEeEeEeEeEeFfGgHhHhHhHhHhIiIiKkKkKkLlLlLlLlMmMmMmNnNnNnNnOoOoOoOo" +
		"PpPpRrRrRrRrSsSsSsSsSsTtTtTtTtUuUuUuUuUuVvVvWwWwWwWwWwXxXxYyZzZzZzhtwy......AaAaAaAaAa" +
		"AaAaAaAaAaAaAaEeEeEeEeEeEeEeEeIiIiOoOoOoOoOoOoOoOoOoOoOoOoUuUuUuUuUuUuUuYyYyYyYy......"
)

// fold returns the form of a non-ASCII word character that the index keeps:
// lower case, without diacritics. It returns -1 for a combining diacritical
// mark, which is dropped.
func fold(r rune) rune {
	switch {
	case 0x0300 <= r && r <= 0x036F:
		return -1
	case latin1ExtFirst <= r && r < latin1ExtFirst+rune(len(latin1Ext)):
		if c := latin1Ext[r-latin1ExtFirst]; c != '.' {
			r = rune(c)
		}
	case latinAddFirst <= r && r < latinAddFirst+rune(len(latinAdd)):
		if c := latinAdd[r-latinAddFirst]; c != '.' {
			r = rune(c)
		}
	}
	return unicode.ToLower(r)
}
