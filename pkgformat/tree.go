package pkgformat

import (
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
)

// maxLinkHops bounds how many links are followed to reach a regular file.
const maxLinkHops = 40

// entryKind is the kind of one entry of a package being read.
type entryKind int

const (
	kindFile entryKind = iota
	kindLink           // a symlink or hardlink; target is the package path it names
	kindDir
)

// entry is one entry of a package being read from a tarball or directory.
type entry struct {
	kind   entryKind
	mode   fs.FileMode
	data   []byte
	target string
}

// tree collects the entries of a package as they are read, then resolves links
// into regular files. Links are never created: a link to a file of the package
// becomes a copy of that file.
type tree struct {
	limits  Limits
	entries map[string]*entry
	files   int // regular files and links
	total   int64
}

func newTree(limits Limits) *tree {
	return &tree{limits: limits, entries: make(map[string]*entry)}
}

// add records the entry at p (a path returned by cleanPath). It refuses
// duplicates and enforces MaxFiles; the size of a regular file must have been
// reserved before it was read.
func (t *tree) add(p string, e *entry) error {
	if p == "." {
		if e.kind == kindDir {
			return nil
		}
		return invalid(rootName, "must be a directory, not a file or link")
	}
	if _, dup := t.entries[p]; dup {
		return invalid(p, "duplicate entry")
	}
	if e.kind != kindDir {
		t.files++
		if t.files > t.limits.MaxFiles {
			return overLimit(p, "more than %d files", t.limits.MaxFiles)
		}
	}
	t.entries[p] = e
	return nil
}

// reserve checks that a file of n bytes at p fits within MaxFileSize and,
// together with what was read before, MaxTotalSize, and counts it.
func (t *tree) reserve(p string, n int64) error {
	if n > t.limits.MaxFileSize {
		return overLimit(p, "file is larger than %d bytes", t.limits.MaxFileSize)
	}
	if t.total+n > t.limits.MaxTotalSize {
		return overLimit(p, "files together are larger than %d bytes", t.limits.MaxTotalSize)
	}
	t.total += n
	return nil
}

// symlinkTarget resolves the target of a symlink at p relative to its folder
// and refuses a target outside the package.
func symlinkTarget(p, linkname string) (string, error) {
	if linkname == "" {
		return "", invalid(p, "symlink has an empty target")
	}
	if strings.HasPrefix(linkname, "/") {
		return "", invalid(p, "symlink points outside the package (absolute target %s)", displayPath(linkname))
	}
	target := path.Join(path.Dir(p), linkname)
	if target == ".." || strings.HasPrefix(target, "../") {
		return "", invalid(p, "symlink points outside the package (target %s)", displayPath(linkname))
	}
	if target == "." {
		return "", invalid(p, "symlink points to a directory (the package root)")
	}
	return target, nil
}

// result resolves links and returns the regular files, sorted by Path. A
// link's size counts against MaxTotalSize again, as its copy does.
func (t *tree) result() ([]File, error) {
	dirs := make(map[string]bool)
	for p, e := range t.entries {
		if e.kind == kindDir {
			dirs[p] = true
		}
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	files := make([]File, 0, t.files)
	for _, p := range slices.Sorted(maps.Keys(t.entries)) {
		e := t.entries[p]
		switch e.kind {
		case kindFile:
			files = append(files, File{Path: p, Mode: normalMode(e.mode), Data: e.data})
		case kindLink:
			f, err := t.resolve(p, e, dirs)
			if err != nil {
				return nil, err
			}
			if err := t.reserve(p, int64(len(f.Data))); err != nil {
				return nil, err
			}
			files = append(files, f)
		}
	}
	if err := checkTree(files); err != nil {
		return nil, err
	}
	return files, nil
}

// resolve follows the link at p to a regular file of the package.
func (t *tree) resolve(p string, e *entry, dirs map[string]bool) (File, error) {
	for range maxLinkHops {
		target := e.target
		e = t.entries[target]
		switch {
		case e == nil && dirs[target]:
			return File{}, invalid(p, "link points to a directory (%s)", displayPath(target))
		case e == nil:
			return File{}, invalid(p, "link target %s does not exist in the package", displayPath(target))
		case e.kind == kindDir:
			return File{}, invalid(p, "link points to a directory (%s)", displayPath(target))
		case e.kind == kindFile:
			return File{Path: p, Mode: normalMode(e.mode), Data: e.data}, nil
		}
	}
	return File{}, invalid(p, "more than %d levels of links", maxLinkHops)
}
