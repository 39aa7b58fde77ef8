package pkgsource

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/berth-registry/berth/pkgformat"
)

// Naming is the name and version a package is built with.
type Naming struct {
	// Name and Version are given to formats that carry none (plain
	// manifests) and must match where the format carries them.
	Name, Version string
	// DefaultName and DefaultVersion are tried when the package cannot be
	// read without a name or version and Name or Version is empty: those
	// of the reference it is pushed to, or a tag of its source.
	DefaultName, DefaultVersion string
}

// LoadPackage reads the package at path (a directory or tarball) with
// pkgformat.Load. Formats that carry their own name and version are read
// as they are, so that a caller whose reference contradicts them can say
// so; a package that needs a name or version (plain manifests) is read
// again with the defaults of n.
func LoadPackage(path string, n Naming) (*pkgformat.Package, error) {
	pkg, err := pkgformat.Load(path, pkgformat.Options{Name: n.Name, Version: n.Version})
	if err != nil && !errors.Is(err, fs.ErrNotExist) && (n.Name == "" || (n.Version == "" && n.DefaultVersion != "")) {
		pkg, err = pkgformat.Load(path, pkgformat.Options{Name: cmp.Or(n.Name, n.DefaultName), Version: cmp.Or(n.Version, n.DefaultVersion)})
	}
	return pkg, err
}

// ComposeFunc fetches specs into dir as Compose does.
type ComposeFunc func(ctx context.Context, specs []Spec, dir string, l Limits) ([]Resolved, error)

// BuildOptions are how Build fetches and reads a package.
type BuildOptions struct {
	Limits Limits
	Naming Naming
	// Format, when set, refuses a package of another format (ErrInvalid).
	Format pkgformat.Format
	// Compose fetches the specs; nil means Compose.
	Compose ComposeFunc
	// Check, when set, is called with the package once it is read, before
	// its artifact is made; its error ends the build (berth import checks
	// the package's name and version against its reference).
	Check func(*pkgformat.Package) error
}

// Build is a package built from sources.
type Build struct {
	// Sources are what each spec resolved to, in order.
	Sources  []Built
	Package  *pkgformat.Package
	Artifact *pkgformat.Artifact
}

// FetchedContent is how errors about the package built name the
// temporary directory its sources were fetched into.
const FetchedContent = "fetched content"

// BuildPackage fetches specs into a temporary directory, which it
// removes, reads the package there as berth package does (LoadPackage),
// checks its format, and makes its artifact, annotated with what each
// source resolved to (Annotations). Errors of the fetch are Compose's;
// those of the package wrap pkgformat's errors (pkgformat.ErrInvalid,
// pkgformat.ErrLimit) and name the directory "fetched content".
func BuildPackage(ctx context.Context, specs []Spec, opts BuildOptions) (*Build, error) {
	compose := opts.Compose
	if compose == nil {
		compose = Compose
	}
	tmp, err := os.MkdirTemp("", "berth-build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	// The package is a folder of its own: pkgformat.Load reads the folder
	// beside a version folder, which must not be the system's temp dir.
	dir := filepath.Join(tmp, "package")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	resolved, err := compose(ctx, specs, dir, opts.Limits)
	if err != nil {
		return nil, fetchedError{err: err, dir: dir}
	}
	if len(resolved) != len(specs) {
		return nil, fmt.Errorf("the fetcher resolved %d sources of %d", len(resolved), len(specs))
	}
	b := &Build{Sources: make([]Built, len(specs))}
	for i, r := range resolved {
		b.Sources[i] = Built{Resolved: r, Destination: specs[i].Destination}
	}
	if b.Package, err = LoadPackage(dir, opts.Naming); err != nil {
		return nil, fetchedError{err: err, dir: dir}
	}
	if f := b.Package.Metadata.Format; opts.Format != "" && f != opts.Format {
		return nil, fmt.Errorf("the package is of format %s, not %s as the source says: %w", f, opts.Format, pkgformat.ErrInvalid)
	}
	if opts.Check != nil {
		if err := opts.Check(b.Package); err != nil {
			return nil, fetchedError{err: err, dir: dir}
		}
	}
	annotations, err := Annotations(b.Sources)
	if err != nil {
		return nil, err
	}
	if b.Artifact, err = b.Package.ArtifactWith(annotations); err != nil {
		return nil, err
	}
	return b, nil
}

// fetchedError is an error about the fetched content, which names its
// temporary directory FetchedContent.
type fetchedError struct {
	err error
	dir string
}

func (e fetchedError) Error() string {
	return strings.ReplaceAll(e.err.Error(), e.dir, FetchedContent)
}

func (e fetchedError) Unwrap() error { return e.err }
