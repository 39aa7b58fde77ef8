package pkgformat

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// tarOverhead is what the tar stream may spend per entry beyond file content
// (headers, PAX records, padding) before it counts as a tar bomb.
const tarOverhead = 8 << 10

// archiveName names the tarball in errors about the stream as a whole.
const archiveName = "archive"

// gzipOS is the operating system byte of the gzip header WriteArchive writes
// ("unknown"), so that the bytes do not depend on the host.
const gzipOS = 255

// ReadArchive reads a package from a gzipped tar and returns its regular files
// sorted by Path, with the package's own links materialised as copies of the
// files they point at. It reads the stream once, counts compressed and
// decompressed bytes as it goes and stops at the caps of limits (zero fields:
// DefaultLimits).
//
// Errors name the entry and the rule it broke and wrap ErrInvalid (unsafe
// path, link out of the package or to a directory or missing file, device,
// FIFO or other special entry, duplicate, corrupt or truncated gzip or tar, data
// after the end of the gzip stream) or ErrLimit (a cap of limits).
func ReadArchive(r io.Reader, limits Limits) ([]File, error) {
	limits = limits.withDefaults()
	compressed := bufio.NewReader(&capReader{r: r, max: limits.MaxArchiveSize,
		err: overLimit(archiveName, "compressed archive is larger than %d bytes", limits.MaxArchiveSize)})
	zr, err := gzip.NewReader(compressed)
	if err != nil {
		return nil, streamError(gzipError{err})
	}
	zr.Multistream(false)
	maxTar := tarBudget(limits)
	stream := &capReader{r: zr, max: maxTar, tagGzip: true,
		err: overLimit(archiveName, "decompressed archive is larger than %d bytes (gzip bomb)", maxTar)}
	tr := tar.NewReader(stream)
	t := newTree(limits)
	for entries := 1; ; entries++ {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil && !errors.Is(err, tar.ErrInsecurePath) {
			return nil, streamError(err)
		}
		if entries > limits.MaxFiles && entries-limits.MaxFiles > limits.MaxFiles {
			return nil, overLimit(archiveName, "more than 2×%d tar entries (files, links and directories)", limits.MaxFiles)
		}
		if err := readEntry(t, tr, hdr); err != nil {
			return nil, err
		}
	}
	if err := drainPadding(stream); err != nil {
		return nil, err
	}
	if _, err := compressed.Peek(1); err == nil {
		return nil, invalid(archiveName, "data after the end of the gzip stream")
	} else if !errors.Is(err, io.EOF) {
		return nil, streamError(err)
	}
	return t.result()
}

// tarBudget is how many decompressed bytes a tar stream within limits may
// take: the file contents plus tarOverhead for each of up to 2*MaxFiles entries
// (files and directories), saturating at math.MaxInt64.
func tarBudget(limits Limits) int64 {
	entries := int64(limits.MaxFiles) + 8
	if entries > (math.MaxInt64-limits.MaxTotalSize)/(2*tarOverhead) {
		return math.MaxInt64
	}
	return limits.MaxTotalSize + 2*entries*tarOverhead
}

// readEntry reads one tar entry into t.
func readEntry(t *tree, tr *tar.Reader, hdr *tar.Header) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil
	}
	p, err := cleanPath(hdr.Name, t.limits)
	if err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeReg:
		if err := t.reserve(p, hdr.Size); err != nil {
			return err
		}
		data := make([]byte, hdr.Size)
		if _, err := io.ReadFull(tr, data); err != nil {
			return streamError(err)
		}
		return t.add(p, &entry{kind: kindFile, mode: hdr.FileInfo().Mode(), data: data})
	case tar.TypeDir:
		return t.add(p, &entry{kind: kindDir})
	case tar.TypeSymlink:
		target, err := symlinkTarget(p, hdr.Linkname)
		if err != nil {
			return err
		}
		return t.add(p, &entry{kind: kindLink, target: target})
	case tar.TypeLink:
		target, err := cleanPath(hdr.Linkname, t.limits)
		if err != nil {
			return invalid(p, "hardlink points outside the package (target %s)", displayPath(hdr.Linkname))
		}
		return t.add(p, &entry{kind: kindLink, target: target})
	case tar.TypeChar, tar.TypeBlock:
		return invalid(p, "device files are not allowed")
	case tar.TypeFifo:
		return invalid(p, "FIFOs are not allowed")
	default:
		return invalid(p, "only regular files, directories and links are allowed (tar type %q)", hdr.Typeflag)
	}
}

// drainPadding reads what is left of the decompressed stream after the end of
// the tar archive: only zero padding may follow it. Reading to the end also
// makes gzip verify its checksum.
func drainPadding(r io.Reader) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if slices.ContainsFunc(buf[:n], func(b byte) bool { return b != 0 }) {
			return invalid(archiveName, "data after the end of the tar archive")
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return streamError(err)
		}
	}
}

// gzipError marks an error of the gzip layer.
type gzipError struct{ err error }

func (e gzipError) Error() string { return e.err.Error() }
func (e gzipError) Unwrap() error { return e.err }

// streamError turns an error reading the archive stream into one that says
// which layer failed; limit errors pass unchanged.
func streamError(err error) error {
	if errors.Is(err, ErrLimit) {
		return err
	}
	var ge gzipError
	if errors.As(err, &ge) {
		return invalid(archiveName, "corrupt or truncated gzip stream: %v", ge.err)
	}
	return invalid(archiveName, "corrupt or truncated tar stream: %v", err)
}

// capReader returns err once more than max bytes have been read from r. With
// tagGzip, other errors of r (but io.EOF) are marked as gzip errors.
type capReader struct {
	r       io.Reader
	n, max  int64
	err     error
	tagGzip bool
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.n > c.max {
		return 0, c.err
	}
	if room := c.max - c.n + 1; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.max {
		return 0, c.err
	}
	if err != nil && c.tagGzip && !errors.Is(err, io.EOF) && !errors.Is(err, ErrLimit) {
		err = gzipError{err}
	}
	return n, err
}

// WriteArchive writes files as a reproducible gzipped tar: regular files only,
// sorted by path, relative to the package root, mtime 0 (Unix epoch), uid and
// gid 0, no user or group names, mode 0644 or 0755 (0755 iff any execute bit
// is set), PAX format (plain USTAR headers unless a path needs a PAX record),
// and a gzip header with no name, zero mtime and OS "unknown" at the default
// compression level. The same files always give the same bytes.
//
// Errors wrap ErrInvalid for an unsafe or duplicate path, or are the errors of w.
func WriteArchive(w io.Writer, files []File) error {
	files, err := checkFiles(files, unlimited)
	if err != nil {
		return err
	}
	zw, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
	if err != nil {
		return err
	}
	zw.Header = gzip.Header{OS: gzipOS}
	tw := tar.NewWriter(zw)
	for _, f := range files {
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     f.Path,
			Size:     int64(len(f.Data)),
			Mode:     int64(f.Mode.Perm()),
			ModTime:  time.Unix(0, 0),
			Format:   tar.FormatPAX,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("%s: write archive: %w", f.Path, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return fmt.Errorf("%s: write archive: %w", f.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("write archive: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("write archive: %w", err)
	}
	return nil
}

// Archive returns the package content as a reproducible gzipped tar
// (WriteArchive of p.Files). Errors wrap ErrInvalid for an unsafe file list.
func (p *Package) Archive() ([]byte, error) {
	var buf bytes.Buffer
	if err := WriteArchive(&buf, p.Files); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
