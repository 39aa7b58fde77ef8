// Package datalock keeps one berth serve to a data directory: two processes
// on one directory would both write its SQLite catalog and its storage, and
// neither would see what the other holds in memory (the tag locks that keep
// versions immutable among them).
package datalock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// File is the name of the lock file in the data directory.
const File = "berth.lock"

// ErrInUse says that another process holds the data directory.
var ErrInUse = errors.New("the data directory is in use by another berth serve")

// Lock takes dir for this process until release is called or the process
// ends, however it ends: the lock is the operating system's lock on
// dir/berth.lock, which the file records the holder's process ID and start
// time in. When another process holds it, the error wraps ErrInUse and
// names that process.
func Lock(dir string) (release func() error, err error) {
	name := filepath.Join(dir, File)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f); err != nil {
		holder, _ := os.ReadFile(name)
		f.Close()
		if errors.Is(err, errLocked) {
			return nil, fmt.Errorf("%w (%s): %s; give each berth serve a --data of its own, and several replicas the shared storage and PostgreSQL of docs/scale-out.md", ErrInUse, dir, describe(holder))
		}
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	if err := f.Truncate(0); err == nil {
		fmt.Fprintf(f, "%d %s\n", os.Getpid(), time.Now().UTC().Format(time.RFC3339))
	}
	return f.Close, nil
}

// describe names the holder a lock file records.
func describe(holder []byte) string {
	pid, started, ok := strings.Cut(strings.TrimSpace(string(holder)), " ")
	if _, err := strconv.Atoi(pid); !ok || err != nil {
		return "held by a process that recorded nothing yet"
	}
	return "held by process " + pid + " since " + started
}
