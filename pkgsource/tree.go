package pkgsource

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// tree writes a source's files into a staging directory, through an
// os.Root so that nothing is written outside it, within MaxBytes and
// MaxFiles. Symlinks are kept when they point inside the tree and refused
// otherwise.
type tree struct {
	src   string
	l     Limits
	root  *os.Root
	dir   string
	bytes int64
	files map[string]bool
}

func newTree(src, staging string, l Limits) (*tree, error) {
	root, err := os.OpenRoot(staging)
	if err != nil {
		return nil, err
	}
	return &tree{src: src, l: l, root: root, dir: staging, files: map[string]bool{}}, nil
}

func (t *tree) close() { t.root.Close() }

// clean checks name, a slash-separated path of the source, and returns it
// cleaned.
func (t *tree) clean(name string) (string, error) {
	clean := path.Clean(strings.TrimSuffix(name, "/"))
	if name == "" || path.IsAbs(name) || clean == ".." || strings.HasPrefix(clean, "../") ||
		strings.Contains(name, "\\") || strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("%s: path %q is absolute or goes out of the directory: %w", t.src, name, ErrInvalid)
	}
	return clean, nil
}

func (t *tree) count(name string) error {
	if t.files[name] {
		return nil
	}
	t.files[name] = true
	if len(t.files) > t.l.MaxFiles {
		return fmt.Errorf("%s: more than %d files (at %s): %w", t.src, t.l.MaxFiles, name, ErrLimit)
	}
	return nil
}

func (t *tree) mkdirs(name string) error {
	dir := path.Dir(name)
	if dir == "." {
		return nil
	}
	return t.root.MkdirAll(dir, 0o755)
}

// file writes a regular file; a later file of the same name replaces it.
func (t *tree) file(name string, mode fs.FileMode, r io.Reader) error {
	name, err := t.clean(name)
	if err != nil {
		return err
	}
	if err := t.count(name); err != nil {
		return err
	}
	if err := t.mkdirs(name); err != nil {
		return fmt.Errorf("%s: %s: %w", t.src, name, err)
	}
	perm := fs.FileMode(0o644)
	if mode&0o111 != 0 {
		perm = 0o755
	}
	_ = t.root.Remove(name)
	f, err := t.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", t.src, name, err)
	}
	budget := t.l.MaxBytes - t.bytes
	n, err := io.Copy(f, io.LimitReader(r, budget+1))
	t.bytes += n
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %s: %w", t.src, name, err)
	}
	if n > budget {
		return fmt.Errorf("%s: more than %d bytes unpacked (at %s): %w", t.src, t.l.MaxBytes, name, ErrLimit)
	}
	return nil
}

// symlink keeps a link whose target stays inside the tree.
func (t *tree) symlink(name, target string) error {
	name, err := t.clean(name)
	if err != nil {
		return err
	}
	resolved := path.Join(path.Dir(name), target)
	if path.IsAbs(target) || resolved == ".." || strings.HasPrefix(resolved, "../") {
		return fmt.Errorf("%s: symlink %s points out of the directory (to %s): %w", t.src, name, target, ErrInvalid)
	}
	if err := t.count(name); err != nil {
		return err
	}
	if err := t.mkdirs(name); err != nil {
		return fmt.Errorf("%s: %s: %w", t.src, name, err)
	}
	_ = t.root.Remove(name)
	if err := t.root.Symlink(target, name); err != nil {
		return fmt.Errorf("%s: %s: %w", t.src, name, err)
	}
	return nil
}

// untar unpacks a gzipped tar into the tree: the entries under dir (a
// slash-separated directory of the archive, "" for all), with dir taken
// off their names. Whiteouts (layered deletes) and special files are
// refused.
func (t *tree) untar(r io.Reader, dir string) error {
	zr, err := gzip.NewReader(r)
	if e := ours(t.src, err); e != nil {
		return e
	}
	if err != nil {
		return fmt.Errorf("%s: not a gzipped tar: %w: %w", t.src, err, ErrInvalid)
	}
	defer zr.Close()
	return t.untarPlain(zr, dir)
}

// untarPlain is untar for a tar that is not compressed (an OCI layer of
// media type application/vnd.oci.image.layer.v1.tar).
func (t *tree) untarPlain(r io.Reader, dir string) error {
	// A bomb: the tar stream is bounded by what the files may hold plus
	// the headers of MaxFiles entries.
	capped := &capReader{r: r, max: t.l.MaxBytes + int64(t.l.MaxFiles+1)*1024,
		err: fmt.Errorf("%s: the archive unpacks to more than %d bytes: %w", t.src, t.l.MaxBytes, ErrLimit)}
	tr := tar.NewReader(capped)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil && !errors.Is(err, tar.ErrInsecurePath) {
			if capped.over {
				return capped.err
			}
			if e := ours(t.src, err); e != nil {
				return e
			}
			return fmt.Errorf("%s: reading the archive: %w: %w", t.src, err, ErrInvalid)
		}
		name, err := t.clean(hdr.Name)
		if err != nil {
			return err
		}
		if base := path.Base(name); strings.HasPrefix(base, ".wh.") {
			return fmt.Errorf("%s: %s is a whiteout (a layered delete), which is not supported: %w", t.src, name, ErrInvalid)
		}
		rel, ok := under(name, dir)
		if !ok || (rel == "." && hdr.Typeflag != tar.TypeDir) {
			if _, err := io.Copy(io.Discard, tr); err != nil {
				return capped.errOr(err)
			}
			continue
		}
		switch hdr.Typeflag {
		case tar.TypeReg:
			if err := t.file(rel, hdr.FileInfo().Mode(), tr); err != nil {
				return capped.errOr(err)
			}
		case tar.TypeDir:
			if rel != "." {
				if err := t.root.MkdirAll(rel, 0o755); err != nil {
					return fmt.Errorf("%s: %s: %w", t.src, name, err)
				}
			}
		case tar.TypeSymlink:
			if err := t.symlink(rel, hdr.Linkname); err != nil {
				return err
			}
		case tar.TypeXGlobalHeader:
		default:
			return fmt.Errorf("%s: %s is a %s, not a file, directory or symlink: %w",
				t.src, name, typeName(hdr.Typeflag), ErrInvalid)
		}
	}
}

func typeName(flag byte) string {
	switch flag {
	case tar.TypeLink:
		return "hard link"
	case tar.TypeChar:
		return "character device"
	case tar.TypeBlock:
		return "block device"
	case tar.TypeFifo:
		return "FIFO"
	}
	return fmt.Sprintf("tar entry of type %q", flag)
}

// under returns name relative to dir when it is dir or below it. dir "*"
// is any top-level directory (a Helm chart's).
func under(name, dir string) (string, bool) {
	if dir == "" || dir == "." {
		return name, true
	}
	if dir == "*" {
		_, rel, ok := strings.Cut(name, "/")
		if !ok {
			return ".", true
		}
		return rel, true
	}
	if name == dir {
		return ".", true
	}
	rel, ok := strings.CutPrefix(name, dir+"/")
	return rel, ok
}

// capReader fails with err once more than max bytes were read.
type capReader struct {
	r    io.Reader
	max  int64
	n    int64
	over bool
	err  error
}

func (c *capReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.max {
		c.over = true
		return n, c.err
	}
	return n, err
}

func (c *capReader) errOr(err error) error {
	if c.over {
		return c.err
	}
	return err
}

// cleanDir checks Spec.Dir or Spec.Destination (field) and returns it
// slash-separated and clean, "" for the root.
func cleanDir(src, field, dir string) (string, error) {
	if dir == "" {
		return "", nil
	}
	clean := path.Clean(filepath.ToSlash(dir))
	clean = strings.TrimPrefix(clean, "/")
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%s: %s %q goes out of the directory: %w", src, field, dir, ErrInvalid)
	}
	if clean == "." {
		return "", nil
	}
	return clean, nil
}
