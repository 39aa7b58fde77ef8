package catalog_test

import (
	"fmt"
	"testing"

	"github.com/berth-registry/berth/pkgformat"
)

// BenchmarkRebuild measures a full rebuild: a reconciliation that indexes
// every version of a registry the catalog has never seen.
func BenchmarkRebuild(b *testing.B) {
	const versions = 500
	for b.Loop() {
		b.StopTimer()
		e := newEnv(b, envOptions{lose: true})
		for i := range versions {
			p, err := pkgformat.New([]pkgformat.File{{Path: "manifests/cm.yaml", Mode: 0o644, Data: []byte(fmt.Sprintf(
				"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c%d\n  annotations: {description: a config map for the rebuild benchmark}\n", i))}},
				pkgformat.Options{Name: fmt.Sprintf("pkg%d", i/5), Version: fmt.Sprintf("1.0.%d", i%5)})
			if err != nil {
				b.Fatal(err)
			}
			e.pushPackage("bench", p)
		}
		b.StartTimer()
		st, err := e.cat.Reconcile(e.ctx)
		if err != nil || st.Indexed != versions {
			b.Fatalf("%+v %v", st, err)
		}
	}
	b.ReportMetric(float64(versions)*float64(b.N)/b.Elapsed().Seconds(), "versions/s")
}
