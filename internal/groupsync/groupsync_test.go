package groupsync

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
)

// TestSyncWaitsForAFlushStartedAfterIt has many goroutines each "write"
// (take the next number) and then Sync: when Sync returns, a flush that
// started after the write must have ended.
func TestSyncWaitsForAFlushStartedAfterIt(t *testing.T) {
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var written, flushed atomic.Int64
	var flushes atomic.Int64
	s.flush = func(*os.File) error {
		upTo := written.Load() // everything written so far is in this flush
		flushes.Add(1)
		flushed.Store(upTo)
		return nil
	}
	const goroutines, rounds = 16, 50
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				mine := written.Add(1)
				if err := s.Sync(); err != nil {
					t.Error(err)
					return
				}
				if got := flushed.Load(); got < mine {
					t.Errorf("Sync returned after a flush of writes up to %d, before write %d", got, mine)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := flushes.Load(); n < 1 || n > goroutines*rounds {
		t.Errorf("%d flushes for %d syncs", n, goroutines*rounds)
	}
}

// TestFlushErrorsReachTheirCallers: a failed flush fails the Syncs that
// waited for it; the next one succeeds.
func TestFlushErrorsReachTheirCallers(t *testing.T) {
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	broken := errors.New("EIO")
	fail := true
	s.flush = func(*os.File) error {
		if fail {
			return broken
		}
		return nil
	}
	if err := s.Sync(); !errors.Is(err, broken) {
		t.Fatalf("Sync with a failing flush: %v, want %v", err, broken)
	}
	fail = false
	if err := s.Sync(); err != nil {
		t.Fatalf("Sync after the failure: %v", err)
	}
}

// TestMissingDirectoryFailsTheSync: a directory that cannot be opened is an
// error of the Sync, and a later Sync opens it once it exists.
func TestMissingDirectoryFailsTheSync(t *testing.T) {
	dir := t.TempDir() + "/later"
	s, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Sync(); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Sync of a missing directory: %v", err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatalf("Sync once the directory exists (a real syncfs): %v", err)
	}
}
