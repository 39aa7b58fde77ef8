// Package searchindex is the catalog's package search, held in memory: one
// document per package (its latest version's summary and full text, and what
// the filters need over all its indexed versions), an inverted index of the
// words of those documents, and Search, which answers a catalog.Query with the
// ranking, filters, facets and pages that catalog.Store documents.
//
// The index does no I/O: a store keeps it beside its tables, builds it when it
// opens and replaces a package's document after each commit that changed the
// package (catalog/sqlite does). Relevance is BM25 computed as SQLite FTS5's
// bm25() does, with the fields weighted; docs/catalog-store.md describes the
// ranking and its cost.
package searchindex

import (
	"cmp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
)

// Doc is one package as the index knows it.
type Doc struct {
	// Summary describes the package by its latest indexed version; its
	// Namespace and Name identify the package. Name, DisplayName,
	// Description and Keywords are full text; Format, Verified and Updated
	// are filtered or sorted on.
	Summary apiv1.PackageSummary
	// Maintainers and APIs are more full text of the latest version: its
	// maintainers' names, and the kinds and groups of the APIs it provides.
	Maintainers, APIs string
	// Channels, Provides, Kube and Images cover every indexed version of
	// the package, for the Channel, Provides, KubeVersion and Image
	// filters. Provides match case-insensitively.
	Channels []string
	Provides []catalog.APIFilter
	Kube     []KubeRange
	Images   []catalog.ImageRef
}

// KubeRange is the range of Kubernetes versions one version of a package
// supports, as catalog.KubeVersionKey keys; an empty bound is no bound.
type KubeRange struct {
	Min, Max string
}

// Index is an in-memory search index of packages. It is safe for concurrent
// use: searches run in parallel, and each Set or Remove is seen by a search
// either entirely or not at all. The zero value is not usable; call New.
type Index struct {
	mu sync.RWMutex
	// docs and hot are the documents by id, in two parts: what searches
	// read for every match, densely, and the rest. A free slot is not live.
	docs  []doc
	hot   []hot
	free  []int32
	ids   map[docKey]int32
	live  int
	total int64 // tokens in all live documents
	// byName holds the ids of live documents ordered by compareByName, for
	// name-prefix matches; nameOrder holds them ordered by name, then
	// namespace, and hot.rank is each one's position in it, so that sorting
	// compares numbers.
	byName, nameOrder []int32

	termIDs   map[string]int32
	terms     []term // by id; a free id has no postings
	freeTerms []int32
	// dict and pending hold every term id, each ordered by term text, for
	// prefix expansion. New terms go to the short pending list, merged
	// into dict when it grows past maxPending, so that adding a term never
	// moves the whole dictionary.
	dict, pending []int32
	// added are the terms new in the Set being applied, in no order.
	added []int32
	// The document being indexed: the weighted frequency of each term
	// by term id, the terms seen, the tokens counted.
	docFreq   []uint32
	docTerms  []int32
	docTokens int
	tokenBuf  []byte

	// Symbols of the fields filtered and counted on: namespaces, formats,
	// values (channels, and lower-case API groups and kinds), and image
	// repositories, tags and digests.
	namespaces, formats, values, images symbols
	// imageDocs lists, by image repository symbol, the live documents
	// running an image of it, in no order: "which packages run this
	// image?" reads the packages that do, not every package.
	imageDocs map[int32][]int32

	scratch sync.Pool // *scratch, one per search in flight
}

// maxPending bounds the unmerged part of the term dictionary.
const maxPending = 512

type docKey struct{ namespace, name string }

// hot is the part of a package that searches read for every candidate.
type hot struct {
	live, verified    bool
	namespace, format int32
	length            int32 // tokens in all full-text fields
	rank              int32 // position in nameOrder
	updated           int64 // Summary.Updated in Unix nanoseconds, 0 for the zero time
}

// doc is the rest of a package.
type doc struct {
	summary   apiv1.PackageSummary
	nameLower string
	terms     []int32 // distinct terms, to remove the postings
	channels  []int32
	provides  []apiID
	kube      []KubeRange
	images    []imageID
}

// apiID is a provided API as value symbols.
type apiID struct{ group, kind int32 }

// imageID is an image reference as image symbols; -1 for no tag or digest.
type imageID struct{ repository, tag, digest int32 }

// term is one distinct token and the documents that hold it.
type term struct {
	text     string
	postings []posting
}

// posting is one document holding a term, with the term's frequency weighted
// by field.
type posting struct {
	doc  int32
	freq uint32
}

// New returns an empty index.
func New() *Index {
	return &Index{ids: map[docKey]int32{}, termIDs: map[string]int32{}, imageDocs: map[int32][]int32{}}
}

// Len returns the number of packages in the index.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.live
}

// Set adds the documents of packages, each replacing the one its package had,
// all at once. The index keeps copies of what it needs; docs may be reused
// after Set returns. Setting many documents in one call is cheaper than one
// at a time.
func (ix *Index) Set(docs ...*Doc) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if n := len(docs) - len(ix.free); n > 0 {
		ix.docs, ix.hot = slices.Grow(ix.docs, n), slices.Grow(ix.hot, n)
	}
	var added []int32
	for _, d := range docs {
		if id, ok := ix.set(d); ok {
			added = append(added, id)
		}
	}
	ix.mergeAdded()
	if len(added) > 0 {
		ix.byName = mergeInto(ix.byName, slices.Clone(added), ix.compareByName)
		ix.nameOrder = mergeInto(ix.nameOrder, added, ix.compareName)
		ix.renumber()
	}
}

// set sets one document; its id is new when added.
func (ix *Index) set(d *Doc) (id int32, added bool) {
	s := d.Summary
	key := docKey{s.Namespace, s.Name}
	id, ok := ix.ids[key]
	if ok {
		ix.unpost(id)
	} else {
		id = ix.alloc()
		ix.ids[key] = id
		ix.live++
	}
	eachField(d, ix.addText)
	h := &ix.hot[id]
	*h = hot{
		live:      true,
		verified:  s.Verified,
		namespace: ix.namespaces.id(s.Namespace),
		format:    ix.formats.id(string(s.Format)),
		length:    int32(min(ix.docTokens, 1<<31-1)),
		rank:      h.rank,
		updated:   unixNano(s.Updated),
	}
	x := &ix.docs[id]
	*x = doc{summary: s, nameLower: strings.ToLower(s.Name), terms: slices.Clone(ix.docTerms)}
	x.summary.Namespace = ix.namespaces.names[h.namespace]
	x.summary.Keywords = cloneStrings(s.Keywords)
	x.summary.Channels = cloneStrings(s.Channels)
	if s.Created != nil {
		c := *s.Created
		x.summary.Created = &c
	}
	for _, c := range d.Channels {
		if v := ix.values.id(c); !slices.Contains(x.channels, v) {
			x.channels = append(x.channels, v)
		}
	}
	for _, a := range d.Provides {
		v := apiID{ix.values.id(strings.ToLower(a.Group)), ix.values.id(strings.ToLower(a.Kind))}
		if !slices.Contains(x.provides, v) {
			x.provides = append(x.provides, v)
		}
	}
	for _, k := range d.Kube {
		if !slices.Contains(x.kube, k) {
			x.kube = append(x.kube, k)
		}
	}
	seen := make(map[imageID]bool, len(d.Images))
	for _, r := range d.Images {
		v := imageID{ix.images.id(r.Repository), ix.images.optionalID(r.Tag), ix.images.optionalID(r.Digest)}
		if seen[v] {
			continue
		}
		seen[v] = true
		x.images = append(x.images, v)
		if !seen[imageID{v.repository, -1, -1}] {
			seen[imageID{v.repository, -1, -1}] = true
			ix.imageDocs[v.repository] = append(ix.imageDocs[v.repository], id)
		}
	}
	for _, t := range ix.docTerms {
		ix.terms[t].postings = append(ix.terms[t].postings, posting{doc: id, freq: ix.docFreq[t]})
		ix.docFreq[t] = 0
	}
	ix.docTerms, ix.docTokens = ix.docTerms[:0], 0
	ix.total += int64(h.length)
	return id, !ok
}

// addText counts the tokens of text, each weighing weight, in the document
// being indexed.
func (ix *Index) addText(text string, weight uint32) {
	ix.tokenBuf = tokens(text, ix.tokenBuf, func(tok []byte) {
		t, ok := ix.termIDs[string(tok)] // not allocated
		if !ok {
			t = ix.newTerm(string(tok))
		}
		if int(t) >= len(ix.docFreq) {
			ix.docFreq = append(ix.docFreq, make([]uint32, int(t)+1-len(ix.docFreq)+len(ix.docFreq)/2)...)
		}
		if ix.docFreq[t] == 0 {
			ix.docTerms = append(ix.docTerms, t)
		}
		ix.docFreq[t] += weight
		ix.docTokens++
	})
}

// Remove removes the document of a package; removing an absent one does
// nothing.
func (ix *Index) Remove(namespace, name string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	key := docKey{namespace, name}
	id, ok := ix.ids[key]
	if !ok {
		return
	}
	if i, found := slices.BinarySearchFunc(ix.byName, id, ix.compareByName); found {
		ix.byName = slices.Delete(ix.byName, i, i+1)
	}
	ix.nameOrder = slices.Delete(ix.nameOrder, int(ix.hot[id].rank), int(ix.hot[id].rank)+1)
	ix.unpost(id)
	ix.docs[id], ix.hot[id] = doc{}, hot{}
	ix.free = append(ix.free, id)
	delete(ix.ids, key)
	ix.live--
	ix.renumber()
}

// renumber sets the rank of every document from nameOrder.
func (ix *Index) renumber() {
	for i, id := range ix.nameOrder {
		ix.hot[id].rank = int32(i)
	}
}

// compareByName orders documents by lower-case name, then namespace and name.
func (ix *Index) compareByName(a, b int32) int {
	x, y := &ix.docs[a], &ix.docs[b]
	return cmp.Or(strings.Compare(x.nameLower, y.nameLower),
		strings.Compare(x.summary.Namespace, y.summary.Namespace),
		strings.Compare(x.summary.Name, y.summary.Name))
}

// compareName orders documents by name, then namespace.
func (ix *Index) compareName(a, b int32) int {
	x, y := &ix.docs[a].summary, &ix.docs[b].summary
	return cmp.Or(strings.Compare(x.Name, y.Name), strings.Compare(x.Namespace, y.Namespace))
}

// compareTerm orders terms by text.
func (ix *Index) compareTerm(a, b int32) int {
	return strings.Compare(ix.terms[a].text, ix.terms[b].text)
}

// mergeInto adds to list, ordered by cmp, the elements of add, which it
// sorts: a few by binary search, more by merging.
func mergeInto(list, add []int32, cmp func(a, b int32) int) []int32 {
	if len(add) <= 8 {
		for _, x := range add {
			i, _ := slices.BinarySearchFunc(list, x, cmp)
			list = slices.Insert(list, i, x)
		}
		return list
	}
	slices.SortFunc(add, cmp)
	n := len(list)
	list = slices.Grow(list, len(add))[:n+len(add)]
	i, j := n-1, len(add)-1
	for w := len(list) - 1; j >= 0; w-- {
		if i >= 0 && cmp(list[i], add[j]) > 0 {
			list[w], i = list[i], i-1
		} else {
			list[w], j = add[j], j-1
		}
	}
	return list
}

// alloc returns a free document id.
func (ix *Index) alloc() int32 {
	if n := len(ix.free); n > 0 {
		id := ix.free[n-1]
		ix.free = ix.free[:n-1]
		return id
	}
	ix.docs = append(ix.docs, doc{})
	ix.hot = append(ix.hot, hot{})
	return int32(len(ix.docs) - 1)
}

// unpost removes the postings of document id, and the terms left without one.
func (ix *Index) unpost(id int32) {
	x := &ix.docs[id]
	for _, t := range x.terms {
		ps := ix.terms[t].postings
		i := slices.IndexFunc(ps, func(p posting) bool { return p.doc == id })
		ps[i] = ps[len(ps)-1]
		ps = ps[:len(ps)-1]
		ix.terms[t].postings = ps
		if len(ps) == 0 {
			ix.dropTerm(t)
		}
	}
	ix.total -= int64(ix.hot[id].length)
	x.terms = nil
	for _, im := range x.images {
		docs := ix.imageDocs[im.repository]
		if i := slices.Index(docs, id); i >= 0 {
			docs[i] = docs[len(docs)-1]
			ix.imageDocs[im.repository] = docs[:len(docs)-1]
		}
	}
	x.images = nil
}

// newTerm adds the term tok and returns its id.
func (ix *Index) newTerm(tok string) int32 {
	var t int32
	if n := len(ix.freeTerms); n > 0 {
		t = ix.freeTerms[n-1]
		ix.freeTerms = ix.freeTerms[:n-1]
	} else {
		ix.terms = append(ix.terms, term{})
		t = int32(len(ix.terms) - 1)
	}
	ix.terms[t] = term{text: tok}
	ix.termIDs[tok] = t
	ix.added = append(ix.added, t)
	return t
}

// dropTerm forgets a term without postings.
func (ix *Index) dropTerm(t int32) {
	text := ix.terms[t].text
	if i, ok := ix.findTerm(ix.pending, text); ok {
		ix.pending = slices.Delete(ix.pending, i, i+1)
	} else if i, ok := ix.findTerm(ix.dict, text); ok {
		ix.dict = slices.Delete(ix.dict, i, i+1)
	} else if i := slices.Index(ix.added, t); i >= 0 {
		ix.added = slices.Delete(ix.added, i, i+1)
	}
	delete(ix.termIDs, text)
	ix.terms[t] = term{}
	ix.freeTerms = append(ix.freeTerms, t)
}

// mergeAdded puts the terms added by a Set in the dictionary: in pending, and
// all pending terms in dict when there are more than maxPending.
func (ix *Index) mergeAdded() {
	ix.pending = mergeInto(ix.pending, ix.added, ix.compareTerm)
	ix.added = ix.added[:0]
	if len(ix.pending) > maxPending {
		ix.dict = mergeInto(ix.dict, ix.pending, ix.compareTerm)
		ix.pending = ix.pending[:0]
	}
}

// findTerm finds the position of text in list, a list of term ids ordered by
// text, and whether it is there.
func (ix *Index) findTerm(list []int32, text string) (int, bool) {
	return slices.BinarySearchFunc(list, text, func(t int32, text string) int {
		return strings.Compare(ix.terms[t].text, text)
	})
}

// expand calls fn with every term that starts with prefix.
func (ix *Index) expand(prefix string, fn func(*term)) {
	for _, list := range [2][]int32{ix.dict, ix.pending} {
		i, _ := ix.findTerm(list, prefix)
		for ; i < len(list) && strings.HasPrefix(ix.terms[list[i]].text, prefix); i++ {
			fn(&ix.terms[list[i]])
		}
	}
}

// prefixed returns the ids of the documents whose lower-case name starts
// with prefix.
func (ix *Index) prefixed(prefix string) []int32 {
	i := sort.Search(len(ix.byName), func(i int) bool { return ix.docs[ix.byName[i]].nameLower >= prefix })
	j := i + sort.Search(len(ix.byName)-i, func(k int) bool {
		return !strings.HasPrefix(ix.docs[ix.byName[i+k]].nameLower, prefix)
	})
	return ix.byName[i:j]
}

// symbols numbers the distinct values of a field. Numbers are never reused,
// so that they stay valid while the index lives; there are as many as
// distinct values were ever indexed.
type symbols struct {
	ids   map[string]int32
	names []string
}

// id returns the number of name, numbering it when new.
func (s *symbols) id(name string) int32 {
	if id, ok := s.ids[name]; ok {
		return id
	}
	if s.ids == nil {
		s.ids = map[string]int32{}
	}
	id := int32(len(s.names))
	s.names = append(s.names, name)
	s.ids[name] = id
	return id
}

// optionalID is id, and -1 for the empty name.
func (s *symbols) optionalID(name string) int32 {
	if name == "" {
		return -1
	}
	return s.id(name)
}

// lookup returns the number of name, or -1 when it has none.
func (s *symbols) lookup(name string) int32 {
	if id, ok := s.ids[name]; ok {
		return id
	}
	return -1
}

// cloneStrings copies ss, nil when it is empty.
func cloneStrings(ss []string) []string {
	if len(ss) == 0 {
		return nil
	}
	return slices.Clone(ss)
}

// unixNano is t in Unix nanoseconds, 0 for the zero time.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}
