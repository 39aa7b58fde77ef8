package e2e

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestGCUnderLoad pushes with oras, which does not retry, while garbage
// collections run back to back, on demand (berth gc) and every second (the
// leader's gc.interval): none of the pushes may fail. Each push sends a
// fresh layer and one of a few shared layers into a repository of its own,
// and most pushes are deleted again (oras manifest delete), so that the
// shared layers are orphans, old enough to collect, that the next push
// uploads again: the case of a blob linked moments before its manifest
// while a sweep runs. Time is made to pass by aging on disk what was
// written more than agedAfter ago; a push takes far less. What the kept
// pushes reference must still be there at the end.
func TestGCUnderLoad(t *testing.T) {
	requireOras(t)
	const (
		workers   = 4
		duration  = 40 * time.Second
		agedAfter = 15 * time.Second
	)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "berth.yaml")
	if err := os.WriteFile(cfg, []byte("gc:\n  interval: 1s\n  grace: 1m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "", "--config", cfg)
	work := t.TempDir()
	const shared = 3
	for i := range shared {
		writeLayer(t, filepath.Join(work, fmt.Sprintf("shared-%d.txt", i)), fmt.Sprintf("shared layer %d\n", i))
	}

	stop := make(chan struct{})
	var collections sync.WaitGroup
	collections.Add(1)
	var runs, collected, conflicts int
	go func() {
		defer collections.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			ageBefore(t, filepath.Join(s.data, "registry"), time.Now().Add(-agedAfter), 2*time.Hour)
			r := run(t, work, berthBin, "gc", "--server", s.addr, "--format", "json")
			switch {
			case r.code == 0:
				var rep struct{ Blobs int }
				if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
					t.Errorf("berth gc --format json: %v: %s", err, r.stdout)
					return
				}
				runs++
				collected += rep.Blobs
			case strings.Contains(r.stderr, "conflict: a retention and garbage collection run is already in progress"):
				conflicts++ // the leader's periodic run
			default:
				t.Errorf("berth gc: exit %d: %s", r.code, r.stderr)
				return
			}
		}
	}()

	var (
		pushes sync.WaitGroup
		mu     sync.Mutex
		kept   []string
		failed []string
		count  int
	)
	deadline := time.Now().Add(duration)
	for w := range workers {
		pushes.Add(1)
		go func() {
			defer pushes.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				fresh := fmt.Sprintf("fresh-%d-%d.txt", w, i)
				writeLayer(t, filepath.Join(work, fresh), fmt.Sprintf("fresh layer %d/%d %d\n", w, i, time.Now().UnixNano()))
				ref := fmt.Sprintf("%s/load/w%d-%d:1.0.0", s.addr, w, i)
				r := run(t, work, orasBin, "push", "--plain-http", ref, fresh, fmt.Sprintf("shared-%d.txt", (w+i)%shared))
				mu.Lock()
				count++
				if r.code != 0 {
					failed = append(failed, ref+": "+r.stderr)
				}
				mu.Unlock()
				if r.code != 0 {
					continue
				}
				if i%4 == 0 {
					mu.Lock()
					kept = append(kept, ref)
					mu.Unlock()
					continue
				}
				if r := run(t, work, orasBin, "manifest", "delete", "--plain-http", "--force", ref); r.code != 0 {
					t.Errorf("oras manifest delete %s: %s", ref, r.stderr)
				}
			}
		}()
	}
	pushes.Wait()
	close(stop)
	collections.Wait()
	if len(failed) > 0 {
		t.Errorf("%d of %d pushes failed during garbage collection:\n%s", len(failed), count, strings.Join(failed, "\n"))
	}
	t.Logf("%d pushes, %d on-demand collections (%d blobs collected), %d refused while the periodic run ran", count, runs, collected, conflicts)
	if runs == 0 || collected == 0 {
		t.Errorf("%d collections deleted %d blobs: the load never met a collection that collected", runs, collected)
	}
	for _, ref := range kept {
		out := filepath.Join(t.TempDir(), "out")
		if r := run(t, work, orasBin, "pull", "--plain-http", ref, "-o", out); r.code != 0 {
			t.Errorf("oras pull %s, kept by its tag: %s", ref, r.stderr)
		}
	}
}

// ageBefore sets the modification time of every file under dir written
// before t to d ago, as if that much time had passed since.
func ageBefore(tb testing.TB, dir string, t time.Time, d time.Duration) {
	then := time.Now().Add(-d)
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil // a file deleted meanwhile, or a directory
		}
		if fi, err := e.Info(); err == nil && fi.ModTime().Before(t) && fi.ModTime().After(then) {
			_ = os.Chtimes(p, then, then) // gone meanwhile: nothing to age
		}
		return nil
	})
	if err != nil {
		tb.Error(err)
	}
}

// writeLayer writes a file for oras to push; it may run outside the test's
// goroutine.
func writeLayer(t *testing.T, path, content string) {
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Error(err)
	}
}
