package pkgformat

import (
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
	"go.yaml.in/yaml/v3"
)

// packageManifestSuffix names the package file of the OLM package-manifest layout.
const packageManifestSuffix = ".package.yaml"

// packageManifest is the <package>.package.yaml of the OLM package-manifest layout.
type packageManifest struct {
	PackageName string `yaml:"packageName"`
	Channels    []struct {
		Name       string `yaml:"name"`
		CurrentCSV string `yaml:"currentCSV"`
	} `yaml:"channels"`
	DefaultChannel string `yaml:"defaultChannel"`
}

// IsRepository reports whether dir holds one folder per version rather than
// one package: the OLM package-manifest layout (a *.package.yaml beside the
// version folders) or a folder of OLM bundles (sub-folders holding
// metadata/annotations.yaml). It reports false when dir cannot be read.
func IsRepository(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case e.Type().IsRegular() && strings.HasSuffix(name, packageManifestSuffix):
			return true
		case name == kudoOperatorFile, name == helmChartFile, name == manifestsDir, strings.HasSuffix(name, csvSuffix):
			return false
		}
	}
	for _, e := range entries {
		if e.IsDir() && !vcsDirs[e.Name()] {
			if info, err := os.Stat(filepath.Join(dir, e.Name(), filepath.FromSlash(bundleAnnotations))); err == nil && info.Mode().IsRegular() {
				return true
			}
		}
	}
	return false
}

// LoadRepository reads every version folder of dir (see IsRepository) as a
// Package of its own and returns them sorted by version (SemVer order where
// versions parse, else by string).
//
// In the package-manifest layout the package name is the packageName of the
// *.package.yaml, and a version belongs to a channel when OLM would put it
// there: on the replaces chain from the channel's currentCSV, or named by the
// skips of a version on it. A replaces naming a CSV that is not present ends
// the chain; a version in no channel has no channels. Bundle folders add the
// channels of their own annotations. In a folder of bundles each bundle's
// annotations alone give its name and channels.
//
// opts.Name, when set, must match the package name; opts.Version is ignored.
// Errors name the folder and file and wrap ErrInvalid (a folder that holds no
// OLM package, two folders with the same version, a bad package file, or any
// error of ReadDir and New) or ErrLimit.
func LoadRepository(dir string, opts Options) ([]*Package, error) {
	pkgs, _, err := loadRepository(dir, opts)
	return pkgs, err
}

// loadVersionFolder loads folder, a version folder of the package-manifest
// layout in dir, as LoadRepository does, so that it gets the package name and
// channels of the package file beside it.
func loadVersionFolder(dir, folder string, opts Options) (*Package, error) {
	pkgs, folders, err := loadRepository(dir, opts)
	if err != nil {
		return nil, err
	}
	for i, f := range folders {
		if f != folder {
			continue
		}
		if want := opts.Version; want != "" && Tag(want) != Tag(pkgs[i].Metadata.Version) {
			return nil, invalid(folder, "version %q does not match the expected version %q", pkgs[i].Metadata.Version, want)
		}
		return pkgs[i], nil
	}
	return nil, invalid(folder, "not a version folder of %s", dir)
}

// hasPackageManifest reports whether dir holds a *.package.yaml.
func hasPackageManifest(dir string) bool {
	matches, _ := filepath.Glob(filepath.Join(dir, "*"+packageManifestSuffix))
	return len(matches) > 0
}

// loadRepository is LoadRepository; it also returns the folder of each package.
func loadRepository(dir string, opts Options) ([]*Package, []string, error) {
	opts.Limits = opts.Limits.withDefaults()
	opts.Version = ""
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	var manifestFiles, folders []string
	for _, e := range entries {
		switch name := e.Name(); {
		case e.IsDir() && !vcsDirs[name]:
			folders = append(folders, name)
		case e.Type().IsRegular() && strings.HasSuffix(name, packageManifestSuffix):
			manifestFiles = append(manifestFiles, name)
		}
	}
	if len(manifestFiles) > 1 {
		return nil, nil, invalid(dir, "several package files (%s)", strings.Join(manifestFiles, ", "))
	}
	var pm *packageManifest
	if len(manifestFiles) == 1 {
		if pm, err = readPackageManifest(dir, manifestFiles[0], opts); err != nil {
			return nil, nil, err
		}
		opts.Name = pm.PackageName
	}
	if len(folders) == 0 {
		return nil, nil, invalid(dir, "no version folders")
	}
	var pkgs []*Package
	edges := make(map[*Package]*olmEdges)
	folderOf := make(map[string]string)
	for _, folder := range folders {
		files, err := ReadDir(filepath.Join(dir, folder), opts.Limits)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", folder, err)
		}
		p, e, err := build(files, opts)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", folder, err)
		}
		if p.Metadata.Format != OLM {
			return nil, nil, invalid(folder, "holds a %s package, not an OLM version", p.Metadata.Format)
		}
		if other, dup := folderOf[p.Metadata.Version]; dup {
			return nil, nil, invalid(folder, "version %s is also in folder %s", p.Metadata.Version, other)
		}
		folderOf[p.Metadata.Version] = folder
		pkgs, edges[p] = append(pkgs, p), e
	}
	if pm != nil {
		assignChannels(pm, pkgs, edges)
		for i, p := range pkgs {
			if pkgs[i], err = rebuildAsBundle(p, opts); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", folderOf[p.Metadata.Version], err)
			}
		}
	}
	slices.SortFunc(pkgs, func(a, b *Package) int { return compareVersions(a.Metadata.Version, b.Metadata.Version) })
	folders = folders[:0]
	for _, p := range pkgs {
		folders = append(folders, folderOf[p.Metadata.Version])
	}
	return pkgs, folders, nil
}

// readPackageManifest reads and checks the package file name of dir.
func readPackageManifest(dir, name string, opts Options) (*packageManifest, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, opts.Limits.MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var pm packageManifest
	if err := decodeYAML(name, data, newYAMLBudget(opts.Context, opts.Limits), &pm); err != nil {
		return nil, err
	}
	pm.PackageName = strings.TrimSpace(pm.PackageName)
	if pm.PackageName == "" {
		return nil, invalid(name, "missing required field packageName")
	}
	if err := ValidName(pm.PackageName); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if opts.Name != "" && opts.Name != pm.PackageName {
		return nil, invalid(name, "package name %q does not match the expected name %q", pm.PackageName, opts.Name)
	}
	for i, ch := range pm.Channels {
		if err := ValidChannel(ch.Name); err != nil {
			return nil, fmt.Errorf("%s: channels[%d]: %w", displayPath(name), i, err)
		}
	}
	if def := strings.TrimSpace(pm.DefaultChannel); def != "" {
		if err := ValidChannel(def); err != nil {
			return nil, fmt.Errorf("%s: defaultChannel: %w", displayPath(name), err)
		}
	}
	return &pm, nil
}

// assignChannels puts each version into the channels of the package file it
// belongs to, as OLM's registry loader does: from each channel's currentCSV,
// follow replaces while the CSV named is present; the versions a member skips
// are members too. The package file's default channel (or its only channel,
// as OLM has it) applies to all.
func assignChannels(pm *packageManifest, pkgs []*Package, edges map[*Package]*olmEdges) {
	byCSV := make(map[string]*Package, len(pkgs))
	for _, p := range pkgs {
		if p.Metadata.CSVName != "" {
			byCSV[p.Metadata.CSVName] = p
		}
	}
	for _, ch := range pm.Channels {
		member := make(map[*Package]bool)
		add := func(p *Package) {
			if !member[p] {
				member[p] = true
				p.Metadata.Channels = append(p.Metadata.Channels, edges[p].channel(ch.Name))
			}
		}
		walked := make(map[*Package]bool)
		for p := byCSV[strings.TrimSpace(ch.CurrentCSV)]; p != nil && !walked[p]; p = byCSV[edges[p].replaces] {
			walked[p] = true
			add(p)
			for _, skipped := range edges[p].skips {
				if s := byCSV[skipped]; s != nil {
					add(s)
				}
			}
		}
	}
	def := strings.TrimSpace(pm.DefaultChannel)
	if def == "" && len(pm.Channels) == 1 {
		def = pm.Channels[0].Name
	}
	for _, p := range pkgs {
		if def != "" {
			p.Metadata.DefaultChannel = def
		}
		normalize(&p.Metadata)
	}
}

// rebuildAsBundle turns a version of the package-manifest layout, whose
// channels come from the package file beside it, into an OLM registry+v1
// bundle that carries them itself, as operator-sdk's pkgman-to-bundle does: a
// version folder's YAML and JSON files move under manifests/ (a bundle folder
// keeps its layout), and metadata/annotations.yaml names the package, the
// channels and the default channel p was given. The package is then read again from those
// files, so that its metadata is what its content says, as the catalog will
// read it.
func rebuildAsBundle(p *Package, opts Options) (*Package, error) {
	md := &p.Metadata
	ann := bundleAnnotationsFile{Annotations: map[string]string{}}
	files := make([]File, 0, len(p.Files)+1)
	if data := p.fileData(bundleAnnotations); data != nil {
		if err := decodeYAML(bundleAnnotations, data, newYAMLBudget(opts.Context, opts.Limits), &ann); err != nil {
			return nil, err
		}
		if ann.Annotations == nil {
			ann.Annotations = map[string]string{}
		}
		for _, f := range p.Files {
			if f.Path != bundleAnnotations {
				files = append(files, f)
			}
		}
	} else {
		ann.Annotations[annotationMediaType] = "registry+v1"
		ann.Annotations[annotationManifests] = manifestsDir + "/"
		ann.Annotations[annotationMetadata] = path.Dir(bundleAnnotations) + "/"
		for _, f := range p.Files {
			if IsManifestFile(f.Path) {
				f.Path = manifestsDir + "/" + f.Path
			}
			files = append(files, f)
		}
	}
	ann.Annotations[annotationPackage] = md.Name
	delete(ann.Annotations, annotationChannels)
	delete(ann.Annotations, annotationDefaultChannel)
	var channels []string
	for _, ch := range md.Channels {
		channels = append(channels, ch.Name)
	}
	if len(channels) > 0 {
		ann.Annotations[annotationChannels] = strings.Join(channels, ",")
	}
	if md.DefaultChannel != "" {
		ann.Annotations[annotationDefaultChannel] = md.DefaultChannel
	}
	data, err := yaml.Marshal(ann)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", bundleAnnotations, err)
	}
	files = append(files, File{Path: bundleAnnotations, Mode: 0o644, Data: data})
	return New(files, opts) // which sorts the files
}

// fileData returns the content of the package's file at p, or nil.
func (p *Package) fileData(name string) []byte {
	for _, f := range p.Files {
		if f.Path == name {
			return f.Data
		}
	}
	return nil
}

// compareVersions orders versions by SemVer where both parse (then by string,
// so that "1.0" and "1.0.0" still have an order), SemVer before non-SemVer,
// and by string otherwise.
func compareVersions(a, b string) int {
	va, errA := semver.NewVersion(a)
	vb, errB := semver.NewVersion(b)
	switch {
	case errA == nil && errB == nil:
		if c := va.Compare(vb); c != 0 {
			return c
		}
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	return strings.Compare(a, b)
}
