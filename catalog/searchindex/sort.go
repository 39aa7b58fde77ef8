package searchindex

import (
	"math/bits"
	"slices"
)

// maxHeapSelect is the greatest end of a page that sortRange selects with a
// heap; deeper pages are selected by partial quicksort.
const maxHeapSelect = 1024

// sortRange reorders ms so that ms[lo:hi] holds, in order, what sorting all of
// ms by cmp would put there; the rest is left in no particular order. It
// costs time linear in len(ms) however deep the page: the first hi matches
// are kept in a heap of the best seen, or, for a deep page, a quicksort goes
// on only into the parts that overlap [lo, hi). cmp must be a total order:
// no two matches compare equal.
func sortRange(ms []match, lo, hi int, cmp func(a, b *match) int) {
	switch {
	case lo >= hi:
	case hi <= maxHeapSelect:
		selectFirst(ms, hi, cmp)
	default:
		sortRangeDepth(ms, lo, hi, cmp, 2*bits.Len(uint(len(ms))))
	}
}

// selectFirst moves the k smallest matches to ms[:k], in order: ms[:k] is a
// max-heap of the smallest seen while the rest is read, then sorted.
func selectFirst(ms []match, k int, cmp func(a, b *match) int) {
	heap := ms[:k]
	for i := k/2 - 1; i >= 0; i-- {
		siftDown(heap, i, cmp)
	}
	for i := k; i < len(ms); i++ {
		if cmp(&ms[i], &heap[0]) < 0 {
			ms[i], heap[0] = heap[0], ms[i]
			siftDown(heap, 0, cmp)
		}
	}
	for n := k - 1; n > 0; n-- {
		heap[0], heap[n] = heap[n], heap[0]
		siftDown(heap[:n], 0, cmp)
	}
}

// siftDown moves heap[i] down to its place in the max-heap.
func siftDown(heap []match, i int, cmp func(a, b *match) int) {
	for {
		c := 2*i + 1
		if c >= len(heap) {
			return
		}
		if c+1 < len(heap) && cmp(&heap[c+1], &heap[c]) > 0 {
			c++
		}
		if cmp(&heap[c], &heap[i]) <= 0 {
			return
		}
		heap[i], heap[c] = heap[c], heap[i]
		i = c
	}
}

func sortRangeDepth(ms []match, lo, hi int, cmp func(a, b *match) int, depth int) {
	for lo < hi && len(ms) > 12 {
		if depth == 0 {
			// Bad pivots all along: give up on partial work.
			slices.SortFunc(ms, func(a, b match) int { return cmp(&a, &b) })
			return
		}
		depth--
		p := partition(ms, cmp)
		switch {
		case hi <= p:
			ms = ms[:p]
		case lo > p:
			ms, lo, hi = ms[p+1:], lo-p-1, hi-p-1
		default:
			sortRangeDepth(ms[:p], lo, p, cmp, depth)
			ms, lo, hi = ms[p+1:], 0, hi-p-1
		}
	}
	if lo < hi {
		slices.SortFunc(ms, func(a, b match) int { return cmp(&a, &b) })
	}
}

// partition moves a pivot, the median of the first, middle and last
// elements, to its sorted position p, the smaller elements before it and the
// greater after it, and returns p.
func partition(ms []match, cmp func(a, b *match) int) int {
	last := len(ms) - 1
	a, b, c := 0, len(ms)/2, last
	if cmp(&ms[a], &ms[b]) > 0 {
		a, b = b, a
	}
	if cmp(&ms[b], &ms[c]) > 0 {
		b = c
		if cmp(&ms[a], &ms[b]) > 0 {
			b = a
		}
	}
	ms[b], ms[last] = ms[last], ms[b]
	p := 0
	for i := range last {
		if cmp(&ms[i], &ms[last]) < 0 {
			ms[i], ms[p] = ms[p], ms[i]
			p++
		}
	}
	ms[p], ms[last] = ms[last], ms[p]
	return p
}
