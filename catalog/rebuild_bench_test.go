package catalog_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/berth-registry/berth/pkgformat"
)

// BenchmarkRebuild measures a full rebuild: a reconciliation that indexes
// every version of a registry the catalog has never seen. The sizes show
// whether a version costs more the more the catalog already holds; besides
// versions/s, cpu-ms/version is the process's CPU time (user and system) per
// version, which a machine busy with other work does not inflate.
func BenchmarkRebuild(b *testing.B) {
	for _, versions := range []int{500, 5000} {
		b.Run(fmt.Sprintf("versions=%d", versions), func(b *testing.B) {
			var cpu time.Duration
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
				before := cpuTime(b)
				st, err := e.cat.Reconcile(e.ctx)
				cpu += cpuTime(b) - before
				if err != nil || st.Indexed != versions {
					b.Fatalf("%+v %v", st, err)
				}
			}
			b.ReportMetric(float64(versions)*float64(b.N)/b.Elapsed().Seconds(), "versions/s")
			b.ReportMetric(float64(cpu.Milliseconds())/float64(versions*b.N), "cpu-ms/version")
		})
	}
}

// cpuTime is the CPU time, user and system, the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
