package auth_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/berth-registry/berth/auth"
)

// auditFiles reads the audit log file and its rotated files, newest last:
// for each, its size, mode and the resource of each event, checking that
// every line is one whole JSON event.
func auditFiles(t *testing.T, file string, maxFiles int) (sizes []int64, resources [][]string) {
	t.Helper()
	for i := maxFiles + 3; i >= 0; i-- {
		name := file
		if i > 0 {
			name = fmt.Sprintf("%s.%d", file, i)
		}
		f, err := os.Open(name)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", name, st.Mode().Perm())
		}
		if i > maxFiles {
			t.Errorf("%s is kept beyond the %d rotated files", name, maxFiles)
		}
		var res []string
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var e struct{ Resource, Msg string }
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Msg != "audit" {
				t.Fatalf("%s: a line that is not a whole event (%v): %q", name, err, sc.Text())
			}
			res = append(res, e.Resource)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, st.Size())
		resources = append(resources, res)
	}
	return sizes, resources
}

func openAudit(t *testing.T, file string, rot auth.Rotation) *auth.Auditor {
	t.Helper()
	a, closer, err := auth.OpenAuditor(file, rot)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	return a
}

// TestAuditRotatesAtSize: the file is rotated before an event would take it
// past the size, the rotated files shift up, the oldest beyond the count is
// deleted, and every event is whole in one file, in order.
func TestAuditRotatesAtSize(t *testing.T) {
	file := filepath.Join(t.TempDir(), "audit", "audit.log")
	// Events are alike: each line is as long as the first.
	a := openAudit(t, file, auth.Rotation{MaxSize: 1000, MaxFiles: 2})
	a.Record(nil, auth.Event{Resource: "r0000"})
	st, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	line := st.Size()
	perFile := 1000 / line
	for i := 1; i < int(perFile*5); i++ {
		a.Record(nil, auth.Event{Resource: fmt.Sprintf("r%04d", i)})
	}
	sizes, res := auditFiles(t, file, 2)
	if len(sizes) != 3 {
		t.Fatalf("%d files, want the log and 2 rotated ones", len(sizes))
	}
	for i, s := range sizes {
		if s > 1000 {
			t.Errorf("file %d holds %d bytes, past the size 1000", i, s)
		}
	}
	for i := range 2 {
		if int64(len(res[i])) != perFile {
			t.Errorf("rotated file %d holds %d events, want %d: rotated at the size", i, len(res[i]), perFile)
		}
	}
	// The newest events, in order: the oldest two files' worth were deleted.
	all := strings.Join(append(append(res[0], res[1]...), res[2]...), " ")
	first := int(perFile * 2)
	if want := fmt.Sprintf("r%04d", first); !strings.HasPrefix(all, want) || !strings.HasSuffix(all, fmt.Sprintf("r%04d", perFile*5-1)) {
		t.Errorf("events kept %q, want r%04d to r%04d in order", all, first, perFile*5-1)
	}
}

// TestAuditConcurrentWriters: events recorded by many goroutines at once are
// each whole in one file, none lost, and no file goes past the size.
func TestAuditConcurrentWriters(t *testing.T) {
	const writers, each = 8, 300
	file := filepath.Join(t.TempDir(), "audit.log")
	// Room for every event, so that none is deleted.
	a := openAudit(t, file, auth.Rotation{MaxSize: 4096, MaxFiles: 200})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				a.Record(httptest.NewRequest("PUT", "/v2/a/b/blobs/uploads/x", nil), auth.Event{Resource: fmt.Sprintf("w%d-%d", w, i)})
			}
		})
	}
	wg.Wait()
	sizes, res := auditFiles(t, file, 200)
	seen := map[string]bool{}
	for i, r := range res {
		if sizes[i] > 4096 {
			t.Errorf("file %d holds %d bytes, past the size 4096", i, sizes[i])
		}
		for _, id := range r {
			if seen[id] {
				t.Errorf("event %s recorded twice", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != writers*each {
		t.Errorf("%d events in the files, want %d", len(seen), writers*each)
	}
}

// TestAuditPrunesAtOpen: opening the log deletes rotated files beyond the
// count (left by a larger setting), and nothing else beside it.
func TestAuditPrunesAtOpen(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "audit.log")
	for _, name := range []string{"audit.log.1", "audit.log.3", "audit.log.4", "audit.log.12", "audit.log.01", "audit.log.old", "other.log.5"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	openAudit(t, file, auth.Rotation{MaxSize: 1 << 20, MaxFiles: 3})
	for name, kept := range map[string]bool{"audit.log.1": true, "audit.log.3": true, "audit.log.4": false, "audit.log.12": false,
		"audit.log.01": true, "audit.log.old": true, "other.log.5": true} {
		if _, err := os.Stat(filepath.Join(dir, name)); (err == nil) != kept {
			t.Errorf("%s: kept %v, want %v", name, err == nil, kept)
		}
	}
}

// TestAuditRotationFails: when the file cannot be rotated the event is
// written to it anyway, past the size, and the failure is reported.
func TestAuditRotationFails(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "audit.log")
	// A directory that is not empty where the rotated file would go.
	if err := os.MkdirAll(filepath.Join(dir, "audit.log.1", "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	var failures []error
	a := openAudit(t, file, auth.Rotation{MaxSize: 100, MaxFiles: 1, OnError: func(err error) { failures = append(failures, err) }})
	a.Record(nil, auth.Event{Resource: "first"})
	a.Record(nil, auth.Event{Resource: "second"})
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), `"resource":"`); n != 2 {
		t.Errorf("%d events in the file, want both", n)
	}
	if len(failures) != 1 || !strings.Contains(failures[0].Error(), "rotate the audit log "+file) {
		t.Errorf("failures %v, want one naming the file", failures)
	}
}

// TestAuditClipsLongFields: a request path of a megabyte makes an event of a
// few kilobytes, valid UTF-8, well below the smallest rotation size.
func TestAuditClipsLongFields(t *testing.T) {
	file := filepath.Join(t.TempDir(), "audit.log")
	a := openAudit(t, file, auth.Rotation{MaxSize: 1 << 20, MaxFiles: 1})
	long := "/v2/" + strings.Repeat("é", 512<<10)
	a.Record(httptest.NewRequest("GET", "http://berth"+long, nil), auth.Event{Resource: long, Reason: long})
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 16<<10 || !utf8.Valid(b) || !strings.Contains(string(b), "…(clipped)") {
		t.Errorf("event of %d bytes (valid UTF-8 %v), want a clipped one below 16KiB", len(b), utf8.Valid(b))
	}
}
