package pkgformat

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkYAMLShapes reads each hostile package of hostileYAML, and a real
// one, with New and reports what it cost the process: the peak RSS above
// what it held before (the kernel's high-water mark, reset per shape), the
// bytes allocated and the CPU time. `make bench-yaml` prints the table.
func BenchmarkYAMLShapes(b *testing.B) {
	shapes := append([]yamlShape{{name: "real: KUDO kafka 2.5.1-1.3.2", files: func() []File {
		files, err := ReadDir("../../shared/fixtures/kudo/kafka/2.5.1-1.3.2", Limits{})
		if err != nil {
			b.Fatal(err)
		}
		return files
	}}}, hostileYAML...)
	for _, shape := range shapes {
		b.Run(shape.name, func(b *testing.B) {
			files := shape.files()
			opts := Options{Limits: shape.limits}
			if shape.want != nil {
				opts.Name, opts.Version = "hostile", "1.0.0"
			}
			var cpu time.Duration
			var rss, alloc uint64
			for b.Loop() {
				runtime.GC()
				debug.FreeOSMemory()
				resetPeakRSS(b)
				before, start := currentRSS(b), cpuTime()
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				_, err := New(files, opts)
				runtime.ReadMemStats(&m1)
				cpu += cpuTime() - start
				if !errors.Is(err, shape.want) && (shape.want != nil || err != nil) {
					b.Fatalf("New = %v, want %v", err, shape.want)
				}
				rss = max(rss, peakRSS(b)-before)
				alloc += m1.TotalAlloc - m0.TotalAlloc
			}
			b.ReportMetric(float64(rss)/(1<<20), "peak-RSS-MiB")
			b.ReportMetric(float64(alloc)/float64(b.N)/(1<<20), "alloc-MiB/op")
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
		})
	}
}

// cpuTime is the CPU time, user and system, the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// resetPeakRSS resets the kernel's RSS high-water mark (VmHWM) to the
// current RSS.
func resetPeakRSS(b *testing.B) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Skipf("cannot reset the peak RSS: %v", err)
	}
}

func currentRSS(b *testing.B) uint64 { return procStatus(b, "VmRSS:") }
func peakRSS(b *testing.B) uint64    { return procStatus(b, "VmHWM:") }

// procStatus reads a size in kB from /proc/self/status, in bytes.
func procStatus(b *testing.B, field string) uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := bytes.CutPrefix(sc.Bytes(), []byte(field)); ok {
			kb, _ := strconv.ParseUint(string(bytes.Fields(rest)[0]), 10, 64)
			return kb << 10
		}
	}
	b.Fatalf("%s not in /proc/self/status", field)
	return 0
}
