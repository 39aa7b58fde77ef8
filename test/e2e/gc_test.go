package e2e

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestGCUnderLoad pushes with oras, which does not retry, while garbage
// collections run back to back, on demand (berth gc) and every second (the
// leader's gc.interval): none of the pushes may fail. Each push sends a
// fresh layer, and most also one of many shared layers, into a repository
// of its own; those are deleted again (oras manifest delete), so that the
// shared layers are orphans, old enough to collect, that a later push
// uploads again: the case of a blob linked moments before its manifest
// while a sweep runs. Time is made to pass by aging on disk what was
// written more than agedAfter ago; a push takes far less. What the kept
// pushes reference must still be there at the end.
func TestGCUnderLoad(t *testing.T) {
	requireOras(t)
	const (
		workers   = 4
		duration  = 45 * time.Second
		agedAfter = 10 * time.Second
	)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "berth.yaml")
	if err := os.WriteFile(cfg, []byte("gc:\n  interval: 1s\n  grace: 1m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "", "--config", cfg)
	work := t.TempDir()
	// Enough shared layers that each goes unused for longer than agedAfter
	// (some six pushes a second use one), and so is an old orphan when a
	// push uploads it again, and few enough that each is used several times.
	const shared = 96
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
		next   atomic.Int64
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
				keep := i%4 == 0
				files := []string{fresh}
				if !keep {
					files = append(files, fmt.Sprintf("shared-%d.txt", next.Add(1)%shared))
				}
				r := run(t, work, orasBin, append([]string{"push", "--plain-http", ref}, files...)...)
				mu.Lock()
				count++
				if r.code != 0 {
					failed = append(failed, ref+": "+r.stderr)
				}
				mu.Unlock()
				if r.code != 0 {
					continue
				}
				if keep {
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
	_, metrics := s.get(t, "/metrics")
	deleted := regexp.MustCompile(`(?m)^berth_gc_blobs_deleted_total\{dry_run="false"\} (\d+)$`).FindStringSubmatch(metrics)
	if runs == 0 || deleted == nil || deleted[1] == "0" {
		t.Errorf("%d on-demand collections, blobs deleted by all %v: the load never met a collection that collected", runs, deleted)
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

// TestGCAndDeleteWithAuth runs berth gc and berth delete against a server
// with auth, as the logged-in users of the auth tests: only an
// administrator of everything may collect, only who may delete in a
// namespace may delete there, and the others are told why.
func TestGCAndDeleteWithAuth(t *testing.T) {
	s := startAuthServer(t, authOptions{})
	admin, alice, bob := s.users["admin"], s.users["alice"], s.users["bob"]
	for _, a := range []*account{admin, alice, bob} {
		a.login(t, berthBin, "login")
	}
	alice.pushFixture(t, "kafka", "2.5.0-1.3.1", "a/kafka")
	ref := s.addr + "/a/kafka:2.5.0_1.3.1"

	for _, tt := range []struct {
		who  *account
		args []string
		want string
	}{
		{bob, []string{"gc", "--dry-run"}, "gc: denied: the admin API is for administrators: "},
		{alice, []string{"gc"}, "gc: denied: the admin API is for administrators: "},
		{s.account(t, "", ""), []string{"gc"}, "gc: unauthorized: " + s.url() + "/api/v1 asks for credentials and none are stored for its host (run berth login " + s.addr + ")"},
		{bob, []string{"delete", ref}, "delete " + ref + ": denied: HTTP 403 Forbidden (deleting needs pull and delete on a/kafka: berth login " + s.addr + " as someone who has them)"},
	} {
		msg := tt.who.refused(t, berthBin, tt.args...)
		t.Logf("%s: berth %s: %s", tt.who.name(), strings.Join(tt.args, " "), msg)
		if !strings.Contains(msg, tt.want) {
			t.Errorf("%s: berth %s: %q, want it to say %q", tt.who.name(), strings.Join(tt.args, " "), msg, tt.want)
		}
	}
	var rep struct{ DryRun bool }
	if err := json.Unmarshal([]byte(admin.must(t, berthBin, "gc", "--dry-run", "--format", "json").stdout), &rep); err != nil || !rep.DryRun {
		t.Errorf("admin: berth gc --dry-run: %+v %v", rep, err)
	}
	alice.must(t, berthBin, "delete", ref)
	if msg := alice.refused(t, berthBin, "delete", ref); !strings.Contains(msg, "not found: a/kafka has no version 2.5.0_1.3.1") {
		t.Errorf("deleting again: %q", msg)
	}
	admin.must(t, berthBin, "gc")
}
