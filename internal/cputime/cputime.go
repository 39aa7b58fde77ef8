// Package cputime reports the CPU time a benchmark's process spends per
// iteration, beside the wall-clock time testing measures.
package cputime

import (
	"syscall"
	"testing"
	"time"
)

// Report starts counting the CPU time the process spends (user and system,
// every thread: the work timed and the garbage collector's); the function it
// returns reports it per iteration as cpu-ns/op. Call it after the setup:
//
//	defer cputime.Report(b)()
//	for b.Loop() { ... }
//
// On a shared machine cpu-ns/op varies less than sec/op, since the time
// other processes hold the CPU is not counted.
func Report(b *testing.B) func() {
	start := Process(b)
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(Process(b)-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

// Process is the CPU time the process has spent so far.
func Process(b testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
