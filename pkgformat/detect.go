package pkgformat

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Files that mark a package format at the package root.
const (
	kudoOperatorFile   = "operator.yaml"
	helmChartFile      = "Chart.yaml"
	bundleAnnotations  = "metadata/annotations.yaml"
	bundleDependencies = "metadata/dependencies.yaml"
	manifestsDir       = "manifests"
	readmeFile         = "README.md"
	csvSuffix          = ".clusterserviceversion.yaml"
)

// expectedLayouts says what detection looks for, for the error when nothing matches.
const expectedLayouts = "expected operator.yaml (KUDO), Chart.yaml (Helm), manifests/*" + csvSuffix +
	" with " + bundleAnnotations + " (OLM bundle), one *" + csvSuffix + " (OLM package-manifest version folder) or manifests/ of Kubernetes YAML (plain)"

// layout is a recognised package layout.
type layout int

const (
	layoutNone layout = iota
	layoutKUDO
	layoutHelm
	layoutBundle  // OLM registry+v1 bundle
	layoutOLMFlat // a version folder of the OLM package-manifest layout
	layoutPlain
)

// pkgFiles gives the format readers access to a package's files.
type pkgFiles struct {
	files  []File // sorted by Path
	byPath map[string]*File
	yaml   *yamlBudget // the package's YAML limits
	opts   Options
}

func newPkgFiles(files []File, opts Options) *pkgFiles {
	pf := &pkgFiles{files: files, byPath: make(map[string]*File, len(files)), yaml: newYAMLBudget(opts.Context, opts.Limits), opts: opts}
	for i := range files {
		pf.byPath[files[i].Path] = &files[i]
	}
	return pf
}

// data returns the content of file p, or nil when there is no such file.
func (pf *pkgFiles) data(p string) []byte {
	if f := pf.byPath[p]; f != nil {
		return f.Data
	}
	return nil
}

// has reports whether the package has file p.
func (pf *pkgFiles) has(p string) bool { return pf.byPath[p] != nil }

// under returns the files below folder dir, at any depth.
func (pf *pkgFiles) under(dir string) []File {
	var out []File
	for _, f := range pf.files {
		if strings.HasPrefix(f.Path, dir+"/") {
			out = append(out, f)
		}
	}
	return out
}

// rootCSVs returns the ClusterServiceVersion files at the package root.
func (pf *pkgFiles) rootCSVs() []string {
	var out []string
	for _, f := range pf.files {
		if !strings.Contains(f.Path, "/") && strings.HasSuffix(f.Path, csvSuffix) {
			out = append(out, f.Path)
		}
	}
	return out
}

// hasBundleCSV reports whether manifests/ holds a ClusterServiceVersion file.
func (pf *pkgFiles) hasBundleCSV() bool {
	for _, f := range pf.under(manifestsDir) {
		if path.Dir(f.Path) == manifestsDir && strings.HasSuffix(f.Path, csvSuffix) {
			return true
		}
	}
	return false
}

// detect recognises the layout at the package root. Several formats at once
// is an error naming their marker files.
func (pf *pkgFiles) detect() (layout, error) {
	var found []layout
	var markers []string
	if pf.has(kudoOperatorFile) {
		found, markers = append(found, layoutKUDO), append(markers, kudoOperatorFile)
	}
	if pf.has(helmChartFile) {
		found, markers = append(found, layoutHelm), append(markers, helmChartFile)
	}
	if pf.has(bundleAnnotations) && len(pf.under(manifestsDir)) > 0 || pf.hasBundleCSV() {
		found, markers = append(found, layoutBundle), append(markers, bundleAnnotations)
	} else if csvs := pf.rootCSVs(); len(csvs) > 0 {
		found, markers = append(found, layoutOLMFlat), append(markers, csvs...)
	}
	switch {
	case len(found) > 1:
		return layoutNone, invalid(rootName, "ambiguous package: %s mark different formats", strings.Join(markers, ", "))
	case len(found) == 1:
		return found[0], nil
	case len(yamlFiles(pf.under(manifestsDir))) > 0:
		return layoutPlain, nil
	}
	return layoutNone, nil
}

// yamlFiles keeps the YAML and JSON files of files.
func yamlFiles(files []File) []File {
	var out []File
	for _, f := range files {
		if IsManifestFile(f.Path) {
			out = append(out, f)
		}
	}
	return out
}

// IsManifestFile reports whether the file at p is YAML or JSON, by its
// extension: what pkgformat reads as Kubernetes manifests, and what an OLM
// bundle image carries under manifests/ (package olm).
func IsManifestFile(p string) bool {
	switch path.Ext(p) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// commonFolder returns the one top-level folder all files are in, or "".
func commonFolder(files []File) string {
	var top string
	for _, f := range files {
		dir, _, ok := strings.Cut(f.Path, "/")
		if !ok || (top != "" && dir != top) {
			return ""
		}
		top = dir
	}
	return top
}

// stripFolder returns files with the leading folder dir removed from their paths.
func stripFolder(files []File, dir string) []File {
	out := make([]File, len(files))
	for i, f := range files {
		out[i] = File{Path: strings.TrimPrefix(f.Path, dir+"/"), Mode: f.Mode, Data: f.Data}
	}
	return out
}

// New recognises the format of a package from its files (at the root, or,
// when nothing is recognised there and all files share one top-level folder as
// in a `helm package` tarball, inside that folder, which then becomes the
// package root), reads its metadata and validates it.
//
// Errors name the file and the rule broken and wrap ErrInvalid (unsafe paths,
// unknown or ambiguous format, malformed YAML, a missing required field, an
// invalid name or version, a name or version that differs from opts) or
// ErrLimit (a cap of opts.Limits).
func New(files []File, opts Options) (*Package, error) {
	p, _, err := build(files, opts)
	return p, err
}

// build is New that also returns the OLM upgrade edges of the package (nil for
// other formats), which LoadRepository needs to place versions in channels.
func build(files []File, opts Options) (*Package, *olmEdges, error) {
	opts.Limits = opts.Limits.withDefaults()
	files, err := checkFiles(files, opts.Limits)
	if err != nil {
		return nil, nil, err
	}
	pf := newPkgFiles(files, opts)
	kind, err := pf.detect()
	if err != nil {
		return nil, nil, err
	}
	if kind == layoutNone {
		if dir := commonFolder(files); dir != "" {
			inner := newPkgFiles(stripFolder(files, dir), opts)
			if kind, err = inner.detect(); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", dir, err)
			}
			pf = inner
		}
	}
	var r *parsed
	switch kind {
	case layoutKUDO:
		r, err = readKUDO(pf)
	case layoutHelm:
		r, err = readHelm(pf)
	case layoutBundle:
		r, err = readBundle(pf)
	case layoutOLMFlat:
		r, err = readOLMFlat(pf)
	case layoutPlain:
		r, err = readPlain(pf)
	default:
		return nil, nil, invalid(rootName, "no package format recognised: %s", expectedLayouts)
	}
	if err != nil {
		return nil, nil, err
	}
	if err := finish(r, pf); err != nil {
		return nil, nil, err
	}
	return &Package{Metadata: *r.md, Files: pf.files}, r.edges, nil
}

// parsed is what a format reader returns: the metadata, the files its name
// and version came from (for errors) and, for OLM, the upgrade edges.
type parsed struct {
	md                    *Metadata
	nameFile, versionFile string
	edges                 *olmEdges
}

// finish fills what every format shares (schema version, readme fallback, file
// list), checks name and version against the rules and opts, and sorts and
// deduplicates the metadata lists.
func finish(src *parsed, pf *pkgFiles) error {
	md := src.md
	md.SchemaVersion = MetadataSchemaVersion
	if md.Readme == "" {
		md.Readme = string(pf.data(readmeFile))
	}
	md.Files = make([]FileInfo, len(pf.files))
	for i, f := range pf.files {
		md.Files[i] = FileInfo{Path: f.Path, Size: int64(len(f.Data))}
	}
	if err := ValidName(md.Name); err != nil {
		return fmt.Errorf("%s: %w", src.nameFile, err)
	}
	if want := pf.opts.Name; want != "" && want != md.Name {
		return invalid(src.nameFile, "package name %q does not match the expected name %q", md.Name, want)
	}
	if err := ValidVersion(md.Version); err != nil {
		return fmt.Errorf("%s: %w", src.versionFile, err)
	}
	if want := pf.opts.Version; want != "" && Tag(want) != Tag(md.Version) {
		return invalid(src.versionFile, "version %q does not match the expected version %q", md.Version, want)
	}
	normalize(md)
	return nil
}

// Load reads the package at path, a package directory or a gzipped tarball
// (.tgz, .tar.gz), with ReadDir or ReadArchive and then New. Errors are those
// of ReadDir, ReadArchive and New, prefixed with path; a path that is neither a
// directory nor a regular file wraps ErrInvalid.
func Load(path string, opts Options) (*Package, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	var files []File
	switch {
	case info.IsDir() && hasPackageManifest(filepath.Dir(filepath.Clean(path))):
		p, err := loadVersionFolder(filepath.Dir(filepath.Clean(path)), filepath.Base(filepath.Clean(path)), opts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return p, nil
	case info.IsDir():
		files, err = ReadDir(path, opts.Limits)
	case info.Mode().IsRegular():
		files, err = readArchiveFile(path, opts.Limits)
	default:
		return nil, invalid(path, "not a directory or a regular file")
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	p, err := New(files, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// readArchiveFile reads the gzipped tarball at path.
func readArchiveFile(path string, limits Limits) ([]File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadArchive(f, limits)
}
