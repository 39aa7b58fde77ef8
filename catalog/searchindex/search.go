package searchindex

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
)

// Search returns one page of the packages that match q, ranked, with Total and
// the facets over every match, as catalog.Store documents:
//
//   - Text matches names (case-insensitively: exact, then as a prefix) and the
//     full text. Its words (runs of letters, marks and digits, at most 16,
//     lower-cased and without diacritics) must all occur in a package's
//     full text, the last one as a prefix. Nothing in the text is syntax.
//   - SortRelevance ranks exact names first, then name prefixes, then full
//     text only; within each, by BM25 (FTS5's formula, fields weighted: name
//     10, display name 5, keywords 3, APIs 2, description and maintainers 1),
//     then name and namespace. Without text it orders by name, namespace.
//   - SortName orders by name, namespace; SortUpdated by the latest version's
//     indexed time, newest first, then name, namespace.
//
// A negative Limit or Offset, or an unknown Sort, is an error wrapping
// catalog.ErrInvalid.
func (ix *Index) Search(q catalog.Query) (*catalog.SearchResult, error) {
	if q.Limit < 0 || q.Offset < 0 {
		return nil, fmt.Errorf("%w: negative limit or offset", catalog.ErrInvalid)
	}
	switch q.Sort {
	case "", catalog.SortRelevance, catalog.SortName, catalog.SortUpdated:
	default:
		return nil, fmt.Errorf("%w: unknown sort %q", catalog.ErrInvalid, q.Sort)
	}
	text := strings.TrimSpace(q.Text)
	size := catalog.PageSize(q.Limit)
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	s := ix.getScratch()
	defer ix.scratch.Put(s)
	var page []int32
	switch f := ix.filter(q); {
	case f.none:
	case text == "" && q.Sort != catalog.SortUpdated && f.image.repository < 0:
		page = ix.listByName(f, q.Offset, size, s)
	default:
		var ms []match
		switch {
		case text != "":
			ms = ix.matchText(text, q.Sort == "" || q.Sort == catalog.SortRelevance, f, s)
		case f.image.repository >= 0:
			ms = ix.matchAmong(ix.imageDocs[f.image.repository], f, s)
		default:
			ms = ix.matchAll(f, s)
		}
		lo := min(q.Offset, len(ms))
		hi := lo + min(size, len(ms)-lo)
		sortRange(ms, lo, hi, order(q.Sort, text != ""))
		for _, m := range ms[lo:hi] {
			page = append(page, m.doc)
		}
		s.matches = ms[:0]
	}
	res := &catalog.SearchResult{
		Packages: make([]apiv1.PackageSummary, 0, len(page)),
		Facets: apiv1.Facets{
			Format:    counts(s.formats, ix.formats.names),
			Namespace: counts(s.namespaces, ix.namespaces.names),
			Verified:  s.verified,
		},
		Total: s.total,
	}
	for _, id := range page {
		res.Packages = append(res.Packages, ix.docs[id].summaryCopy())
	}
	return res, nil
}

// match is a package that matches a search, with what it is sorted by.
type match struct {
	doc int32
	// tier is 1 for an exact name match, 2 for a name prefix, 3 for full
	// text only.
	tier int32
	// rank is the package's position in name order.
	rank int32
	// score is minus the BM25 relevance, so that better sorts first; 0 when
	// not ranked by relevance or matched by name only.
	score   float64
	updated int64
}

// newMatch returns the match of document id.
func (ix *Index) newMatch(id int32) match {
	h := &ix.hot[id]
	return match{doc: id, rank: h.rank, updated: h.updated}
}

// scratch is the working memory of one search, by document id, and its
// counts.
type scratch struct {
	freq           []uint32  // weighted frequency of the phrase being read
	score          []float64 // BM25 summed over the phrases read
	seen           []bool    // matched by full text
	tier           []int8    // 1 or 2 for names that start with the text
	touched, cands []int32
	matches        []match
	// Matches counted by format and namespace symbol, verified, and in all.
	formats, namespaces []int
	verified, total     int
}

// getScratch returns scratch space for as many documents as the index has,
// its counts zero.
func (ix *Index) getScratch() *scratch {
	s, _ := ix.scratch.Get().(*scratch)
	if s == nil {
		s = &scratch{}
	}
	if n := len(ix.docs); len(s.freq) < n {
		n += n / 4
		s.freq, s.score, s.seen, s.tier = make([]uint32, n), make([]float64, n), make([]bool, n), make([]int8, n)
	}
	s.formats = append(s.formats[:0], make([]int, len(ix.formats.names))...)
	s.namespaces = append(s.namespaces[:0], make([]int, len(ix.namespaces.names))...)
	s.verified, s.total = 0, 0
	return s
}

// count counts the match of h.
func (s *scratch) count(h *hot) {
	s.formats[h.format]++
	s.namespaces[h.namespace]++
	if h.verified {
		s.verified++
	}
	s.total++
}

// filter is what a query asks of a package besides its text.
type filter struct {
	// none is set when no package can match.
	none bool
	// Symbols the package must have; -1 when not filtered on.
	namespace, format, channel, group, kind int32
	image                                   imageID
	verified                                int8 // -1, or 0 or 1
	kube                                    string
	// access is what the caller may pull; nil when it may pull everything.
	access *catalog.Access
	// covers caches the access's coverage of each namespace symbol for the
	// query, plus one: 0 until asked.
	covers []int8
}

// filter compiles the filters of q.
func (ix *Index) filter(q catalog.Query) *filter {
	f := &filter{namespace: -1, format: -1, channel: -1, group: -1, kind: -1, image: imageID{-1, -1, -1}, verified: -1, kube: q.KubeVersion}
	need := func(s *symbols, value string) int32 {
		id := s.lookup(value)
		f.none = f.none || id < 0
		return id
	}
	if q.Namespace != "" {
		f.namespace = need(&ix.namespaces, q.Namespace)
	}
	if q.Format != "" {
		f.format = need(&ix.formats, string(q.Format))
	}
	if q.Channel != "" {
		f.channel = need(&ix.values, q.Channel)
	}
	if q.Provides.Group != "" {
		f.group = need(&ix.values, strings.ToLower(q.Provides.Group))
	}
	if q.Provides.Kind != "" {
		f.kind = need(&ix.values, strings.ToLower(q.Provides.Kind))
	}
	if q.Image.Repository != "" {
		f.image.repository = need(&ix.images, q.Image.Repository)
	}
	if q.Image.Tag != "" {
		f.image.tag = need(&ix.images, q.Image.Tag)
	}
	if q.Image.Digest != "" {
		f.image.digest = need(&ix.images, q.Image.Digest)
	}
	if q.Verified != nil {
		f.verified = 0
		if *q.Verified {
			f.verified = 1
		}
	}
	if !q.Access.All {
		f.access = &q.Access
		f.covers = make([]int8, len(ix.namespaces.names))
		f.none = f.none || q.Access.Pull == nil
	}
	return f
}

// ok reports whether the document of h and d passes the filters, the
// caller's access last, as it may be the dearest to ask.
func (f *filter) ok(h *hot, d *doc) bool {
	switch {
	case f.namespace >= 0 && h.namespace != f.namespace,
		f.format >= 0 && h.format != f.format,
		f.verified >= 0 && h.verified != (f.verified == 1),
		f.channel >= 0 && !slices.Contains(d.channels, f.channel):
		return false
	}
	if f.group >= 0 || f.kind >= 0 {
		if !slices.ContainsFunc(d.provides, func(a apiID) bool {
			return (f.group < 0 || a.group == f.group) && (f.kind < 0 || a.kind == f.kind)
		}) {
			return false
		}
	}
	if f.image.repository >= 0 && !slices.ContainsFunc(d.images, func(i imageID) bool {
		return i.repository == f.image.repository &&
			(f.image.tag < 0 || i.tag == f.image.tag) && (f.image.digest < 0 || i.digest == f.image.digest)
	}) {
		return false
	}
	if f.kube != "" && !slices.ContainsFunc(d.kube, func(r KubeRange) bool {
		return (r.Min == "" || r.Min <= f.kube) && (r.Max == "" || r.Max >= f.kube)
	}) {
		return false
	}
	return f.allows(h, d)
}

// allows reports whether the caller may pull the package of h and d, asking
// the access once per namespace and query, and per package only in the
// namespaces it covers in part.
func (f *filter) allows(h *hot, d *doc) bool {
	if f.access == nil {
		return true
	}
	c := f.covers[h.namespace]
	if c == 0 {
		c = int8(f.access.Covers(d.summary.Namespace)) + 1
		f.covers[h.namespace] = c
	}
	switch catalog.Coverage(c - 1) {
	case catalog.CoversAll:
		return true
	case catalog.CoversNone:
		return false
	}
	return f.access.Pull(d.summary.Namespace, d.summary.Name)
}

// listByName counts the packages that pass f and returns the page of them,
// in name order, that starts at offset: no sorting, as name order is kept.
func (ix *Index) listByName(f *filter, offset, size int, s *scratch) []int32 {
	var page []int32
	for _, id := range ix.nameOrder {
		if h := &ix.hot[id]; f.ok(h, &ix.docs[id]) {
			if s.total >= offset && len(page) < size {
				page = append(page, id)
			}
			s.count(h)
		}
	}
	return page
}

// matchAll returns and counts every package that passes f.
func (ix *Index) matchAll(f *filter, s *scratch) []match {
	ms := s.matches[:0]
	for id := range ix.hot {
		if h := &ix.hot[id]; h.live && f.ok(h, &ix.docs[id]) {
			ms = append(ms, ix.newMatch(int32(id)))
			s.count(h)
		}
	}
	return ms
}

// matchAmong returns and counts the live packages of ids that pass f.
func (ix *Index) matchAmong(ids []int32, f *filter, s *scratch) []match {
	ms := s.matches[:0]
	for _, id := range ids {
		if h := &ix.hot[id]; f.ok(h, &ix.docs[id]) {
			ms = append(ms, ix.newMatch(id))
			s.count(h)
		}
	}
	return ms
}

// matchText returns and counts the packages that pass f and whose name starts
// with text or whose full text matches it, with their tier, and their score
// when rank.
func (ix *Index) matchText(text string, rank bool, f *filter, s *scratch) []match {
	lower := strings.ToLower(text)
	prefixed := ix.prefixed(lower)
	for _, id := range prefixed {
		s.tier[id] = 2
		if ix.docs[id].nameLower == lower {
			s.tier[id] = 1
		}
	}
	ms := s.matches[:0]
	add := func(id int32, score float64) {
		h := &ix.hot[id]
		if !f.ok(h, &ix.docs[id]) {
			return
		}
		m := ix.newMatch(id)
		m.tier, m.score = int32(s.tier[id]), score
		if m.tier == 0 {
			m.tier = 3
		}
		ms = append(ms, m)
		s.count(h)
	}
	var cands []int32
	if words := queryTokens(text); len(words) > 0 {
		cands = ix.fullText(words, rank, s)
		for _, id := range cands {
			s.seen[id] = true
			score := 0.0
			if rank {
				score = -s.score[id]
			}
			add(id, score)
		}
	}
	// Names that start with the text rank above full-text matches even
	// when the full text does not match them (the text has no word, say);
	// those have no score.
	for _, id := range prefixed {
		if !s.seen[id] {
			add(id, 0)
		}
		s.tier[id] = 0
	}
	for _, id := range cands {
		s.seen[id] = false
	}
	return ms
}

// fullText returns the documents that hold every word, the last one as a
// prefix, and when rank sets their BM25 in s.score. The BM25 is FTS5's: per
// word, idf × f·(k1+1) / (f + k1·(1 − b + b·|D|/avgdl)), where f is the
// word's frequency in the document weighted by field, |D| the document's
// length in tokens, and idf = ln((N − n + 0.5) / (n + 0.5)) (1e-6 when not
// positive) for n documents holding the word among N.
func (ix *Index) fullText(words []string, rank bool, s *scratch) []int32 {
	k1, b := 1.2, 0.75
	n := ix.live
	avgdl := float64(ix.total) / float64(n)
	cands := s.cands[:0]
	for i, w := range words {
		touched := s.touched[:0]
		add := func(t *term) {
			for _, p := range t.postings {
				if s.freq[p.doc] == 0 {
					touched = append(touched, p.doc)
				}
				s.freq[p.doc] += p.freq
			}
		}
		if i == len(words)-1 {
			ix.expand(w, add)
		} else if t, ok := ix.termIDs[w]; ok {
			add(&ix.terms[t])
		}
		idf := math.Log((float64(n-len(touched)) + 0.5) / (float64(len(touched)) + 0.5))
		if idf <= 0 {
			idf = 1e-6
		}
		bm25 := func(id int32) float64 {
			f, dl := float64(s.freq[id]), float64(ix.hot[id].length)
			return idf * (f * (k1 + 1)) / (f + k1*(1-b+b*dl/avgdl))
		}
		if i == 0 {
			cands = append(cands, touched...)
			if rank {
				for _, id := range cands {
					s.score[id] = bm25(id)
				}
			}
		} else {
			kept := cands[:0]
			for _, id := range cands {
				if s.freq[id] > 0 {
					if rank {
						s.score[id] += bm25(id)
					}
					kept = append(kept, id)
				}
			}
			cands = kept
		}
		for _, id := range touched {
			s.freq[id] = 0
		}
		s.touched = touched
		if len(cands) == 0 {
			break
		}
	}
	s.cands = cands
	return cands
}

// counts maps the names of the symbols counted to their non-zero counts.
func counts(n []int, names []string) map[string]int {
	m := map[string]int{}
	for id, c := range n {
		if c > 0 {
			m[names[id]] = c
		}
	}
	return m
}

// order returns the comparison of matches for sort: relevance (with text)
// is tier, then score, then name, namespace; name (and relevance without
// text) is name, namespace; updated is newest first, then name, namespace.
func order(sort catalog.Sort, text bool) func(a, b *match) int {
	switch {
	case sort == catalog.SortUpdated:
		return byUpdated
	case sort == catalog.SortName || !text:
		return byName
	}
	return byRelevance
}

func byName(a, b *match) int { return int(a.rank - b.rank) }

func byUpdated(a, b *match) int {
	switch {
	case a.updated > b.updated:
		return -1
	case a.updated < b.updated:
		return 1
	}
	return int(a.rank - b.rank)
}

func byRelevance(a, b *match) int {
	switch {
	case a.tier != b.tier:
		return int(a.tier - b.tier)
	case a.score < b.score:
		return -1
	case a.score > b.score:
		return 1
	}
	return int(a.rank - b.rank)
}

// summaryCopy returns the summary of d, sharing no memory with the index.
func (d *doc) summaryCopy() apiv1.PackageSummary {
	s := d.summary
	s.Keywords = slices.Clone(s.Keywords)
	s.Channels = slices.Clone(s.Channels)
	if s.Created != nil {
		c := *s.Created
		s.Created = &c
	}
	return s
}
