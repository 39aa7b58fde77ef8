package pkgformat

import (
	"regexp"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// helmChart is a Helm Chart.yaml (apiVersion v1 and v2). Helm's OCI config
// blob is the same document as JSON.
type helmChart struct {
	Name         string            `yaml:"name"`
	Version      string            `yaml:"version"`
	AppVersion   string            `yaml:"appVersion"`
	Description  string            `yaml:"description"`
	Home         string            `yaml:"home"`
	Icon         string            `yaml:"icon"`
	KubeVersion  string            `yaml:"kubeVersion"`
	Keywords     []string          `yaml:"keywords"`
	Sources      []string          `yaml:"sources"`
	Maintainers  []Maintainer      `yaml:"maintainers"`
	Dependencies []helmDependency  `yaml:"dependencies"`
	Annotations  map[string]string `yaml:"annotations"`
}

type helmDependency struct {
	Name    string `yaml:"name"`
	Version string `yaml:"version"`
}

// helmLicenseAnnotations are the Chart.yaml annotations that may name the
// license, in order of preference.
var helmLicenseAnnotations = []string{"artifacthub.io/license", "licenses", "org.opencontainers.image.licenses"}

// readHelm reads a Helm chart: Chart.yaml, crds/ for the APIs it provides,
// templates/, read as KUDO's are (templateObjects), for the Roles and
// ClusterRoles it asks for, and the chart rendered with its default values
// for the images it runs (helmImages).
func readHelm(pf *pkgFiles) (*parsed, error) {
	md, err := helmMetadata(helmChartFile, pf.data(helmChartFile), pf.yaml)
	if err != nil {
		return nil, err
	}
	var objs objects
	for _, f := range yamlFiles(pf.under("crds")) {
		if err := objs.addFile(f.Path, f.Data, pf.yaml); err != nil {
			return nil, err
		}
	}
	templates, err := templateObjects(pf, "templates")
	if err != nil {
		return nil, err
	}
	md.ProvidedAPIs, md.Permissions = objs.provided, templates.permissions()
	if md.Images, md.ImagesIncomplete, err = pf.helmImages(); err != nil {
		return nil, err
	}
	return &parsed{md: md, nameFile: helmChartFile, versionFile: helmChartFile}, nil
}

// helmMetadata maps a Chart.yaml (or Helm's JSON config blob) onto Metadata.
// name and a SemVer version (as Helm parses it) are required.
func helmMetadata(file string, data []byte, b *yamlBudget) (*Metadata, error) {
	var c helmChart
	if err := decodeYAML(file, data, b, &c); err != nil {
		return nil, err
	}
	c.Name, c.Version = strings.TrimSpace(c.Name), strings.TrimSpace(c.Version)
	if c.Name == "" {
		return nil, invalid(file, "missing required field name")
	}
	if c.Version == "" {
		return nil, invalid(file, "missing required field version")
	}
	if _, err := semver.NewVersion(c.Version); err != nil {
		return nil, invalid(file, "version %q is not a semantic version", c.Version)
	}
	md := &Metadata{
		Format:      Helm,
		Name:        c.Name,
		Version:     c.Version,
		AppVersion:  strings.TrimSpace(c.AppVersion),
		Description: strings.TrimSpace(c.Description),
		Keywords:    c.Keywords,
		Maintainers: c.Maintainers,
	}
	if c.Home != "" {
		md.Links = append(md.Links, Link{Name: "Home", URL: c.Home})
	}
	for _, s := range c.Sources {
		md.Links = append(md.Links, Link{Name: "Source", URL: s})
		if md.Source == "" {
			md.Source = strings.TrimSpace(s)
		}
	}
	if icon := strings.TrimSpace(c.Icon); icon != "" {
		md.Icon = &Icon{URL: icon}
	}
	md.MinKubeVersion, md.MaxKubeVersion = kubeVersionBounds(c.KubeVersion)
	for _, d := range c.Dependencies {
		md.RequiredPackages = append(md.RequiredPackages, PackageRequirement{Name: d.Name, VersionRange: d.Version})
	}
	for _, key := range helmLicenseAnnotations {
		if l := strings.TrimSpace(c.Annotations[key]); l != "" {
			md.License = l
			break
		}
	}
	return md, nil
}

// kubeComparator matches one comparison of a kubeVersion constraint.
var kubeComparator = regexp.MustCompile(`(>=|<=|!=|==|=|>|<|\^|~>|~)?\s*v?(\d+(?:\.(?:\d+|[xX*])){0,2})(-[0-9A-Za-z.-]+)?`)

// kubeVersionBounds reads the inclusive bounds of a Helm kubeVersion
// constraint where they are expressible: ">=1.19.0-0" gives a minimum,
// "<=1.25" a maximum, "=1.20" or "1.20" both, "^1.20" and "~1.20" a minimum.
// Alternatives (||), exclusive bounds (<, >, !=) and wildcards give nothing
// for their side.
func kubeVersionBounds(constraint string) (minimum, maximum string) {
	if strings.Contains(constraint, "||") {
		return "", ""
	}
	for _, m := range kubeComparator.FindAllStringSubmatch(constraint, -1) {
		version := m[2]
		if strings.ContainsAny(version, "xX*") {
			continue
		}
		if m[3] != "-0" {
			version += m[3]
		}
		switch m[1] {
		case ">=", "^", "~", "~>":
			minimum = version
		case "<=":
			maximum = version
		case "=", "==", "":
			minimum, maximum = version, version
		}
	}
	return minimum, maximum
}
