package pkgformat

import (
	"fmt"
	"io"
	"io/fs"
	"os"
)

// vcsDirs are the version-control folders ReadDir skips, at any depth.
var vcsDirs = map[string]bool{".git": true, ".hg": true, ".svn": true}

// ReadDir reads the package in directory dir and returns its regular files
// sorted by Path. Version-control folders (.git, .hg, .svn) are skipped and
// nothing else. A symlink to a file of the package is read as a copy of that
// file; no link is followed out of dir (the directory is opened as an os.Root).
//
// Errors name the file and the rule it broke and wrap ErrInvalid (unsafe or
// non-UTF-8 name, link out of the package, to a directory or to a missing
// file, device, FIFO, socket) or ErrLimit (a cap of limits; zero fields:
// DefaultLimits). I/O errors, such as a missing dir, are returned wrapped with
// the path and match fs.ErrNotExist and the like.
func ReadDir(dir string, limits Limits) ([]File, error) {
	limits = limits.withDefaults()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	t := newTree(limits)
	err = fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		if name == "." {
			return nil
		}
		if d.IsDir() && vcsDirs[d.Name()] {
			return fs.SkipDir
		}
		p, err := cleanPath(name, limits)
		if err != nil {
			return err
		}
		switch typ := d.Type(); {
		case typ.IsDir():
			return t.add(p, &entry{kind: kindDir})
		case typ.IsRegular():
			return readDirFile(root, t, p)
		case typ&fs.ModeSymlink != 0:
			linkname, err := root.Readlink(p)
			if err != nil {
				return fmt.Errorf("%s: %w", dir, err)
			}
			target, err := symlinkTarget(p, linkname)
			if err != nil {
				return err
			}
			return t.add(p, &entry{kind: kindLink, target: target})
		case typ&fs.ModeDevice != 0:
			return invalid(p, "device files are not allowed")
		case typ&fs.ModeNamedPipe != 0:
			return invalid(p, "FIFOs are not allowed")
		case typ&fs.ModeSocket != 0:
			return invalid(p, "sockets are not allowed")
		default:
			return invalid(p, "only regular files, directories and links are allowed (mode %s)", typ)
		}
	})
	if err != nil {
		return nil, err
	}
	return t.result()
}

// readDirFile reads the regular file p of root into t, checking its size
// before reading it.
func readDirFile(root *os.Root, t *tree, p string) error {
	f, err := root.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return invalid(p, "changed from a regular file while being read")
	}
	if err := t.reserve(p, info.Size()); err != nil {
		return err
	}
	data, err := io.ReadAll(io.LimitReader(f, info.Size()+1))
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if int64(len(data)) != info.Size() {
		return invalid(p, "file changed size while being read")
	}
	return t.add(p, &entry{kind: kindFile, mode: info.Mode(), data: data})
}
