// Package atomicfile writes a file so that its path never holds a partial
// one: through a temporary file in the same directory, synced to disk and
// renamed over the path.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write writes data to path, mode 0644. A reader of path sees the old file
// or the new one, never part of it; once Write returned, the new one is on
// disk.
func Write(path string, data []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
