package pkgformat

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/berth-registry/berth/pkgformat/render"
	"go.yaml.in/yaml/v3"
)

// maxSubchartDepth bounds how deep subchart archives may nest
// (charts/a.tgz holding charts/b.tgz...).
const maxSubchartDepth = 8

// helmValueFiles are the YAML files Helm's loader parses in every chart
// and subchart.
var helmValueFiles = []string{"Chart.yaml", "values.yaml", "requirements.yaml", "Chart.lock", "requirements.lock"}

// helmImages renders the chart with its default values (render.Helm) and
// reads the images of what it rendered (renderedImages).
func (pf *pkgFiles) helmImages() ([]Image, string, error) {
	files, err := pf.chartFiles()
	if err != nil {
		return nil, "", err
	}
	res, err := render.Helm(files, pf.renderBudget())
	return pf.renderedImages(res, err)
}

// chartFiles returns the files of the chart as render.Helm takes them:
// subchart archives (charts/*.tgz, at any depth) unpacked under
// charts/<name>/ by ReadArchive, all of them within the package's limits;
// and it reads every YAML file Helm's loader parses with the package's YAML
// reader first, so that a hostile values.yaml meets the same limits as
// any other.
func (pf *pkgFiles) chartFiles() ([]render.File, error) {
	limits := pf.yaml.limits
	total := int64(0)
	for _, f := range pf.files {
		total += int64(len(f.Data))
	}
	var out []render.File
	var add func(prefix string, files []File, depth int) error
	add = func(prefix string, files []File, depth int) error {
		for _, f := range files {
			name := prefix + f.Path
			if isSubchartArchive(f.Path) {
				if depth >= maxSubchartDepth {
					return invalid(name, "subchart archives nest deeper than %d", maxSubchartDepth)
				}
				sub := limits
				sub.MaxTotalSize = limits.MaxTotalSize - total
				inner, err := ReadArchive(bytes.NewReader(f.Data), sub)
				if err != nil {
					return fmt.Errorf("%s: %w", displayPath(name), err)
				}
				for _, g := range inner {
					total += int64(len(g.Data))
				}
				if total > limits.MaxTotalSize {
					return overLimit(name, "the package's files and subchart archives unpacked are larger than %d bytes", limits.MaxTotalSize)
				}
				if err := add(path.Dir(name)+"/", inner, depth+1); err != nil {
					return err
				}
				continue
			}
			if isHelmValueFile(f.Path) {
				if err := eachYAMLDocument(name, f.Data, pf.yaml, func(*yaml.Node) error { return nil }); err != nil &&
					(errors.Is(err, ErrLimit) || pf.yaml.ctx.Err() != nil) {
					return err
				}
			}
			out = append(out, render.File{Path: name, Data: f.Data})
		}
		return nil
	}
	return out, add("", pf.files, 0)
}

// isSubchartArchive reports whether p is a chart archive in a charts/ folder.
func isSubchartArchive(p string) bool {
	return path.Base(path.Dir(p)) == "charts" && (strings.HasSuffix(p, ".tgz") || strings.HasSuffix(p, ".tar.gz"))
}

// isHelmValueFile reports whether p is one of helmValueFiles of the chart or
// of a subchart (charts/<name>/...).
func isHelmValueFile(p string) bool {
	dir, base := path.Split(p)
	if !slices.Contains(helmValueFiles, base) {
		return false
	}
	return dir == "" || path.Base(path.Dir(path.Clean(dir))) == "charts"
}
