package datalock

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLock: a data directory is held by one lock at a time; the second is
// refused naming the holder, and the directory is free again once the
// first is released.
func TestLock(t *testing.T) {
	dir := t.TempDir()
	release, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Lock(dir)
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "held by process "+strconv.Itoa(os.Getpid())) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("a second lock of %s: %v, want ErrInUse naming this process and the directory", dir, err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	again, err := Lock(dir)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	again()
}

// TestLockBadDirectory: a directory the lock file cannot be made in is an
// error that names it.
func TestLockBadDirectory(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	if _, err := Lock(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Lock(%s) = %v, want an error naming it", missing, err)
	}
}

func TestDescribe(t *testing.T) {
	for holder, want := range map[string]string{
		"":                          "held by a process that recorded nothing yet",
		"garbage":                   "held by a process that recorded nothing yet",
		"x 2026-01-01T00:00:00Z":    "held by a process that recorded nothing yet",
		"42 2026-01-01T00:00:00Z\n": "held by process 42 since 2026-01-01T00:00:00Z",
	} {
		if got := describe([]byte(holder)); got != want {
			t.Errorf("describe(%q) = %q, want %q", holder, got, want)
		}
	}
}
