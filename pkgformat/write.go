package pkgformat

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
)

// WriteFiles writes files into dir, creating dir and the folders they need.
// An existing regular file of the same path is overwritten; anything else in
// the way (a folder, a symlink, a device) is refused. Every path is checked
// before anything is written, and writing goes through an os.Root, so nothing
// is written outside dir, even through symlinks already in it.
//
// Errors wrap ErrInvalid for an unsafe or duplicate path or a symlink or other
// non-regular file in the way; I/O errors are returned wrapped with the path.
func WriteFiles(dir string, files []File) error {
	files, err := checkFiles(files, unlimited)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, f := range files {
		if err := writeFile(root, f); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes one file below root after checking that no symlink or
// other non-directory stands on its way and no non-regular file at its place.
func writeFile(root *os.Root, f File) error {
	elems := strings.Split(f.Path, "/")
	for i := range elems {
		p := path.Join(elems[:i+1]...)
		info, err := root.Lstat(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				break
			}
			return fmt.Errorf("%s: %w", f.Path, err)
		}
		last := i == len(elems)-1
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			return invalid(f.Path, "refusing to write through the existing symlink %s in the target folder", p)
		case !last && !info.IsDir():
			return invalid(f.Path, "%s exists in the target folder and is not a folder", p)
		case last && !info.Mode().IsRegular():
			return invalid(f.Path, "exists in the target folder and is not a regular file")
		}
	}
	if dir := path.Dir(f.Path); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
	}
	out, err := root.OpenFile(f.Path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, f.Mode)
	if err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	_, err = out.Write(f.Data)
	if err == nil {
		err = out.Chmod(f.Mode)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	return nil
}
