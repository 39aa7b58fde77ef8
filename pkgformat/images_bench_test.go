package pkgformat

import (
	"path/filepath"
	"testing"
)

// BenchmarkKUDOImages measures New on the largest KUDO fixture (spark, by
// bytes) and the one with the most templates (kafka), and the part of it
// that renders the templates and reads their images: New without images
// costs the difference.
func BenchmarkKUDOImages(b *testing.B) {
	for _, dir := range []string{"kudo/spark/3.0.0-1.1.0", "kudo/kafka/2.5.1-1.3.2"} {
		files, err := ReadDir(filepath.Join(fixtures, dir), Limits{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(filepath.Base(filepath.Dir(dir))+"/New", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := New(files, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(filepath.Base(filepath.Dir(dir))+"/images", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				pf := newPkgFiles(files, Options{Limits: DefaultLimits()})
				var op kudoOperator
				if err := decodeYAML(kudoOperatorFile, pf.data(kudoOperatorFile), pf.yaml, &op); err != nil {
					b.Fatal(err)
				}
				if _, incomplete, err := pf.kudoImages(&op); err != nil || incomplete != "" {
					b.Fatal(err, incomplete)
				}
			}
		})
	}
}
