package auth

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Rotation bounds an audit file: when a write would take it past MaxSize,
// FILE becomes FILE.1, FILE.1 becomes FILE.2, and so on, the one beyond
// FILE.MaxFiles is deleted, and a new FILE is started. The log so takes at
// most MaxSize * (MaxFiles + 1) bytes.
type Rotation struct {
	// MaxSize is the size a file may reach, in bytes (at least 1).
	MaxSize int64
	// MaxFiles is how many rotated files are kept (at least 1).
	MaxFiles int
	// OnError hears of a failed rotation; the event is then written to
	// the current file, past MaxSize, rather than lost. Nil: ignored.
	OnError func(error)
}

// rotatingFile is an audit file that Rotation bounds. Each Write is one
// event (slog's handler writes a record in one call), kept whole in one
// file. It serializes its writers; it assumes it is the only process
// writing the file (each berth has its own data directory, which holds the
// file by default).
type rotatingFile struct {
	mu   sync.Mutex
	name string
	rot  Rotation
	f    *os.File
	size int64
}

// openRotating opens name for appending (mode 0600, its directory made
// 0750) and deletes rotated files beyond rot.MaxFiles.
func openRotating(name string, rot Rotation) (*rotatingFile, error) {
	if rot.MaxSize < 1 || rot.MaxFiles < 1 {
		return nil, fmt.Errorf("audit rotation: want a positive size and file count (got %d bytes, %d files)", rot.MaxSize, rot.MaxFiles)
	}
	if err := os.MkdirAll(filepath.Dir(name), 0o750); err != nil {
		return nil, err
	}
	r := &rotatingFile{name: name, rot: rot}
	f, size, err := r.open()
	if err != nil {
		return nil, err
	}
	r.f, r.size = f, size
	return r, r.prune()
}

func (r *rotatingFile) open() (*os.File, int64, error) {
	f, err := os.OpenFile(r.name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// Write appends p, one event, rotating first when p would take the file
// past MaxSize. An event larger than MaxSize gets a file of its own.
func (r *rotatingFile) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return 0, fs.ErrClosed
	}
	if r.size > 0 && r.size+int64(len(p)) > r.rot.MaxSize {
		if err := r.rotate(); err != nil && r.rot.OnError != nil {
			r.rot.OnError(fmt.Errorf("rotate the audit log %s: %w", r.name, err))
		}
	}
	n, err := r.f.Write(p)
	r.size += int64(n)
	return n, err
}

// rotate shifts the rotated files up by one, the oldest beyond MaxFiles
// replaced, renames the file to FILE.1 and starts a new one. Until the new
// one is open, writes go on to the old one, wherever it was renamed.
func (r *rotatingFile) rotate() error {
	for i := r.rot.MaxFiles - 1; i >= 1; i-- {
		if err := os.Rename(r.rotated(i), r.rotated(i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := os.Rename(r.name, r.rotated(1)); err != nil {
		return err
	}
	f, size, err := r.open()
	if err != nil {
		return err
	}
	old := r.f
	r.f, r.size = f, size
	return old.Close()
}

// rotated is the name of the i-th rotated file.
func (r *rotatingFile) rotated(i int) string { return r.name + "." + strconv.Itoa(i) }

// prune deletes the rotated files beyond MaxFiles, left by a larger
// setting before.
func (r *rotatingFile) prune() error {
	entries, err := os.ReadDir(filepath.Dir(r.name))
	if err != nil {
		return err
	}
	prefix := filepath.Base(r.name) + "."
	for _, e := range entries {
		suffix, ok := strings.CutPrefix(e.Name(), prefix)
		if i, err := strconv.Atoi(suffix); !ok || err != nil || i <= r.rot.MaxFiles || strconv.Itoa(i) != suffix {
			continue
		}
		if err := os.Remove(filepath.Join(filepath.Dir(r.name), e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Close closes the file; later writes fail.
func (r *rotatingFile) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return fs.ErrClosed
	}
	err := r.f.Close()
	r.f = nil
	return err
}
