package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/pkgformat"
)

// benchPackages is the size of the benchmark catalog: versionsPerPackage
// versions each, 100,000 in all.
const benchPackages = 20000

var bench struct {
	once sync.Once
	path string
	err  error
}

// benchStore opens the benchmark catalog, built once per test binary in a
// temporary directory that TestMain removes.
func benchStore(b *testing.B) *Store {
	b.Helper()
	ctx := context.Background()
	bench.once.Do(func() {
		dir, err := os.MkdirTemp("", "berth-catalog-bench")
		if err != nil {
			bench.err = err
			return
		}
		bench.path = filepath.Join(dir, "catalog.db")
		s, err := Open(ctx, bench.path)
		if err != nil {
			bench.err = err
			return
		}
		defer s.Close()
		start := time.Now()
		entries := genEntries(benchPackages)
		for _, e := range entries {
			if _, err := s.Put(ctx, e); err != nil {
				bench.err = err
				return
			}
		}
		b.Logf("built %d versions in %v", len(entries), time.Since(start).Round(time.Millisecond))
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	s, err := Open(ctx, bench.path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bench.path != "" {
		os.RemoveAll(filepath.Dir(bench.path))
	}
	os.Exit(code)
}

// minSamples is how many searches at least the 99th percentile is computed
// over; searches past b.N are run after the timed loop.
const minSamples = 2000

// BenchmarkSearch runs the searches of the performance target on 100,000
// indexed versions (20,000 packages) and reports, besides ns/op, the 99th
// percentile over at least minSamples searches and the number of matches:
// the most common product (term), a prefix, text with filters, the listing
// without text (facets over everything), the same by update time and its
// last page, the stress cases: a word in half the packages (common-term)
// and a one-letter prefix, and "which packages run this image?": an operand
// every package of a popular product runs (image), narrowed to one tag
// (image-tag).
func BenchmarkSearch(b *testing.B) {
	s := benchStore(b)
	all := catalog.Access{All: true}
	queries := []struct {
		name string
		q    catalog.Query
	}{
		{"term", catalog.Query{Text: "kafka", Access: all}},
		{"prefix", catalog.Query{Text: "postg", Access: all}},
		{"filtered", catalog.Query{Text: "redis backup", Format: pkgformat.Helm, Namespace: "stable", Access: all}},
		{"facets", catalog.Query{Access: all}},
		{"facets-updated", catalog.Query{Sort: catalog.SortUpdated, Access: all}},
		{"last-page", catalog.Query{Offset: benchPackages - 20, Access: all}},
		{"common-term", catalog.Query{Text: "operator", Access: all}},
		{"one-letter", catalog.Query{Text: "k", Access: all}},
		{"image", catalog.Query{Image: catalog.ImageRef{Repository: "docker.io/library/kafka"}, Access: all}},
		{"image-tag", catalog.Query{Image: catalog.ImageRef{Repository: "docker.io/library/kafka", Tag: "3.4"}, Access: all}},
	}
	ctx := context.Background()
	for _, tc := range queries {
		b.Run(tc.name, func(b *testing.B) {
			times := make([]time.Duration, 0, minSamples)
			var total int
			search := func() {
				start := time.Now()
				res, err := s.Search(ctx, tc.q)
				times = append(times, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				total = res.Total
			}
			for b.Loop() {
				search()
			}
			for len(times) < minSamples {
				search()
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)*99/100].Nanoseconds())/1e6, "p99-ms")
			b.ReportMetric(float64(total), "matches")
		})
	}
}

// BenchmarkOpen measures a restart: opening the 100,000-version catalog,
// which builds its search index. It reports the heap the index holds.
func BenchmarkOpen(b *testing.B) {
	benchStore(b).Close()
	ctx := context.Background()
	for b.Loop() {
		s, err := Open(ctx, bench.path)
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
	s := benchStore(b)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ix, err := loadIndex(ctx, s.reader)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), "index-MiB")
	b.ReportMetric(float64(ix.Len()), "packages")
}

// BenchmarkPut measures Put throughput: one transaction per version, into a
// store that already holds the previous ones.
func BenchmarkPut(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "catalog.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	entries := genEntries(b.N/versionsPerPackage + 1)
	b.ResetTimer()
	for i := range b.N {
		if _, err := s.Put(ctx, entries[i]); err != nil {
			b.Fatal(err)
		}
	}
}
