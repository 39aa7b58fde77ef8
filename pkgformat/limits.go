package pkgformat

import (
	"fmt"
	"io/fs"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultLimits returns the limits used for every zero (or negative) field of
// a Limits: 16 MiB per file, 128 MiB for all files, 10000 files, 128 MiB of
// compressed archive and 1024 bytes per path; for YAML, 10000 documents per
// file, 250000 nodes per document (some 50 MiB of yaml.v3 nodes), 1000000
// nodes and 64 MiB parsed per package; for rendering templates, 1,000,000
// steps and 10 seconds.
func DefaultLimits() Limits {
	return Limits{
		MaxFileSize:          16 << 20,
		MaxTotalSize:         128 << 20,
		MaxFiles:             10000,
		MaxArchiveSize:       128 << 20,
		MaxPathLength:        1024,
		MaxYAMLDocuments:     10000,
		MaxYAMLDocumentNodes: 250000,
		MaxYAMLNodes:         1000000,
		MaxYAMLSize:          64 << 20,
		MaxRenderSteps:       1_000_000,
		RenderTimeout:        10 * time.Second,
	}
}

// unlimited checks paths only: it is used where files are written, not read.
var unlimited = Limits{
	MaxFileSize:    math.MaxInt64,
	MaxTotalSize:   math.MaxInt64,
	MaxFiles:       math.MaxInt,
	MaxArchiveSize: math.MaxInt64,
	MaxPathLength:  math.MaxInt,
}

// withDefaults returns l with every unset field set to its default.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	l.MaxFileSize = orDefault(l.MaxFileSize, d.MaxFileSize)
	l.MaxTotalSize = orDefault(l.MaxTotalSize, d.MaxTotalSize)
	l.MaxFiles = orDefault(l.MaxFiles, d.MaxFiles)
	l.MaxArchiveSize = orDefault(l.MaxArchiveSize, d.MaxArchiveSize)
	l.MaxPathLength = orDefault(l.MaxPathLength, d.MaxPathLength)
	l.MaxYAMLDocuments = orDefault(l.MaxYAMLDocuments, d.MaxYAMLDocuments)
	l.MaxYAMLDocumentNodes = orDefault(l.MaxYAMLDocumentNodes, d.MaxYAMLDocumentNodes)
	l.MaxYAMLNodes = orDefault(l.MaxYAMLNodes, d.MaxYAMLNodes)
	l.MaxYAMLSize = orDefault(l.MaxYAMLSize, d.MaxYAMLSize)
	l.MaxRenderSteps = orDefault(l.MaxRenderSteps, d.MaxRenderSteps)
	l.RenderTimeout = orDefault(l.RenderTimeout, d.RenderTimeout)
	return l
}

// orDefault is v, or def when v is zero or negative.
func orDefault[T ~int | ~int64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// rootName names the package as a whole in errors that are about no one file.
const rootName = "package root"

// invalid returns an error naming file and the rule it broke, wrapping ErrInvalid.
func invalid(file, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %w", displayPath(file), fmt.Sprintf(format, args...), ErrInvalid)
}

// overLimit returns an error naming file and the limit it exceeded, wrapping ErrLimit.
func overLimit(file, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %w", displayPath(file), fmt.Sprintf(format, args...), ErrLimit)
}

// displayPath makes a path from untrusted input safe to print: quoted when it
// holds anything unusual, and shortened when very long.
func displayPath(p string) string {
	const maxShown = 200
	if len(p) > maxShown {
		p = p[:maxShown] + "..."
	}
	for _, r := range p {
		if r == utf8.RuneError || isControl(r) || r == '\\' || r == '"' {
			return strconv.Quote(p)
		}
	}
	if p == "" {
		return `""`
	}
	return p
}

// isControl reports whether r is a C0 or C1 control character or DEL
// (U+0000–U+001F, U+007F–U+009F), none of which a package path may hold.
func isControl(r rune) bool { return r < 0x20 || (r >= 0x7f && r <= 0x9f) }

// cleanPath checks a path read from a tarball or directory and returns it in
// canonical form (slash-separated, relative, clean, no control characters).
// A leading "./" and, for directories, a trailing "/" are tolerated and
// removed. The error names the
// path and the rule broken, wrapping ErrInvalid or, for the length, ErrLimit.
func cleanPath(name string, limits Limits) (string, error) {
	if len(name) > limits.MaxPathLength {
		return "", overLimit(name, "path is longer than %d bytes", limits.MaxPathLength)
	}
	if !utf8.ValidString(name) {
		return "", invalid(name, "path is not valid UTF-8")
	}
	if strings.IndexByte(name, 0) >= 0 {
		return "", invalid(name, "path contains a NUL byte")
	}
	if i := strings.IndexFunc(name, isControl); i >= 0 {
		r, _ := utf8.DecodeRuneInString(name[i:])
		return "", invalid(name, "path contains the control character %U (C0, DEL and C1 control characters are not allowed)", r)
	}
	if strings.IndexByte(name, '\\') >= 0 {
		return "", invalid(name, "path contains a backslash")
	}
	if strings.HasPrefix(name, "/") {
		return "", invalid(name, "path is absolute")
	}
	if len(name) >= 2 && name[1] == ':' {
		return "", invalid(name, "path starts with a drive letter")
	}
	p := strings.TrimSuffix(strings.TrimPrefix(name, "./"), "/")
	for _, elem := range strings.Split(p, "/") {
		if elem == ".." {
			return "", invalid(name, "path escapes the package root (..)")
		}
	}
	if p == "" || p == "." {
		return ".", nil
	}
	if path.Clean(p) != p {
		return "", invalid(name, "path is not clean (empty or . elements)")
	}
	return p, nil
}

// checkFiles validates a list of files as a whole (paths, duplicates, a path
// that is both a file and a directory, counts and sizes) and returns a copy
// sorted by Path, with modes normalised to 0644 or 0755.
func checkFiles(files []File, limits Limits) ([]File, error) {
	if len(files) > limits.MaxFiles {
		return nil, overLimit(rootName, "more than %d files", limits.MaxFiles)
	}
	out := make([]File, len(files))
	var total int64
	for i, f := range files {
		p, err := cleanPath(f.Path, limits)
		if err != nil {
			return nil, err
		}
		if p != f.Path || p == "." {
			return nil, invalid(f.Path, "path is not clean and relative")
		}
		if int64(len(f.Data)) > limits.MaxFileSize {
			return nil, overLimit(p, "file is larger than %d bytes", limits.MaxFileSize)
		}
		total += int64(len(f.Data))
		if total > limits.MaxTotalSize {
			return nil, overLimit(p, "files together are larger than %d bytes", limits.MaxTotalSize)
		}
		out[i] = File{Path: p, Mode: normalMode(f.Mode), Data: f.Data}
	}
	sortFiles(out)
	if err := checkTree(out); err != nil {
		return nil, err
	}
	return out, nil
}

// checkTree refuses duplicate paths and a path that is both a file and a
// directory. files must be sorted by Path.
func checkTree(files []File) error {
	isFile := make(map[string]bool, len(files))
	for i, f := range files {
		if i > 0 && files[i-1].Path == f.Path {
			return invalid(f.Path, "duplicate entry")
		}
		isFile[f.Path] = true
	}
	for _, f := range files {
		for dir := path.Dir(f.Path); dir != "."; dir = path.Dir(dir) {
			if isFile[dir] {
				return invalid(dir, "path is both a file and a directory (%s)", f.Path)
			}
		}
	}
	return nil
}

// normalMode is 0755 if any execute bit of m is set, else 0644.
func normalMode(m fs.FileMode) fs.FileMode {
	if m&0o111 != 0 {
		return 0o755
	}
	return 0o644
}

// sortFiles sorts files by Path.
func sortFiles(files []File) {
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
}
