// Package pkgformat reads operator packages (KUDO, OLM, Helm, plain manifests)
// into berth's one metadata model, and builds and reads their content tarballs
// reproducibly and safely.
//
// Reading never trusts the input: paths are cleaned and must stay inside the
// package, links may not point out of it, device files are refused, and sizes
// and entry counts are capped by Limits. Every error names the file and the rule
// it broke and wraps ErrInvalid (or ErrLimit for a cap).
package pkgformat

import (
	"context"
	"errors"
	"io/fs"
	"time"
)

// Sentinel errors; every error about the content of a package wraps one of
// them. I/O errors (a missing directory, a failed write) are returned wrapped
// with the path, so that errors.Is(err, fs.ErrNotExist) and the like work.
var (
	// ErrInvalid: the input is not a well-formed, safe package.
	ErrInvalid = errors.New("invalid package")
	// ErrLimit: the input exceeds a configured size or count limit.
	ErrLimit = errors.New("package limit exceeded")
)

// Limits caps what reading a package may consume. A zero field means its default.
type Limits struct {
	MaxFileSize    int64 // largest single file, uncompressed
	MaxTotalSize   int64 // all files together, uncompressed
	MaxFiles       int   // number of files
	MaxArchiveSize int64 // the compressed tarball
	MaxPathLength  int   // bytes in one path

	// The YAML limits bound what parsing a package's YAML costs: the node
	// trees yaml.v3 builds (about 200 bytes a node) and the time taken. They
	// are checked while parsing, so a hostile file is stopped early.
	MaxYAMLDocuments     int   // documents in one YAML file
	MaxYAMLDocumentNodes int64 // nodes of one YAML document, the tree held at a time
	MaxYAMLNodes         int64 // nodes of all YAML documents of the package, aliases expanded
	MaxYAMLSize          int64 // bytes of YAML parsed for the package, a file parsed twice counting twice

	// The render limits bound what rendering a Helm chart's or a KUDO
	// operator's templates costs (docs/package-format.md, "Images"); what
	// they render is YAML read under the limits above, and no template
	// writes more than MaxFileSize.
	MaxRenderSteps int64         // function calls, range iterations and template calls, weighted by the data they handle
	RenderTimeout  time.Duration // the time rendering the package may take
}

// File is one regular file of a package. Path is slash-separated, clean and
// relative to the package root.
type File struct {
	Path string
	Mode fs.FileMode // 0o644 or 0o755
	Data []byte
}

// Options tune how a package is recognised.
type Options struct {
	Limits Limits
	// Name and Version are used where the format does not carry them (plain
	// manifests) and must match where it does.
	Name    string
	Version string
	// Context, when set, stops the reading when it ends: the YAML of the
	// package is parsed only while it lasts, and the error wraps its Err.
	Context context.Context
}

// Package is a package read from a directory or tarball.
type Package struct {
	Metadata Metadata
	Files    []File // sorted by Path
}
