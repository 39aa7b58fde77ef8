package pkgformat

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"path"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Annotations of an OLM bundle (metadata/annotations.yaml) and CSV.
const (
	annotationPackage        = "operators.operatorframework.io.bundle.package.v1"
	annotationChannels       = "operators.operatorframework.io.bundle.channels.v1"
	annotationDefaultChannel = "operators.operatorframework.io.bundle.channel.default.v1"
	annotationMediaType      = "operators.operatorframework.io.bundle.mediatype.v1"
	annotationManifests      = "operators.operatorframework.io.bundle.manifests.v1"
	annotationMetadata       = "operators.operatorframework.io.bundle.metadata.v1"
	annotationSkipRange      = "olm.skipRange"
)

// csvDocument is the part of an OLM ClusterServiceVersion berth indexes.
type csvDocument struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name        string            `yaml:"name"`
		Annotations map[string]string `yaml:"annotations"`
	} `yaml:"metadata"`
	Spec struct {
		Version     string       `yaml:"version"`
		Replaces    string       `yaml:"replaces"`
		Skips       []string     `yaml:"skips"`
		DisplayName string       `yaml:"displayName"`
		Description string       `yaml:"description"`
		Keywords    []string     `yaml:"keywords"`
		Maintainers []Maintainer `yaml:"maintainers"`
		Links       []Link       `yaml:"links"`
		Provider    struct {
			Name string `yaml:"name"`
		} `yaml:"provider"`
		Icon []struct {
			Data      string `yaml:"base64data"`
			MediaType string `yaml:"mediatype"`
		} `yaml:"icon"`
		MinKubeVersion string `yaml:"minKubeVersion"`
		CRDs           struct {
			Owned    []csvCRD `yaml:"owned"`
			Required []csvCRD `yaml:"required"`
		} `yaml:"customresourcedefinitions"`
		APIServices struct {
			Owned    []csvAPIService `yaml:"owned"`
			Required []csvAPIService `yaml:"required"`
		} `yaml:"apiservicedefinitions"`
		Install struct {
			Spec struct {
				Deployments        []yaml.Node     `yaml:"deployments"`
				Permissions        []csvPermission `yaml:"permissions"`
				ClusterPermissions []csvPermission `yaml:"clusterPermissions"`
			} `yaml:"spec"`
		} `yaml:"install"`
		RelatedImages []struct {
			Name  string `yaml:"name"`
			Image string `yaml:"image"`
		} `yaml:"relatedImages"`
	} `yaml:"spec"`
}

// csvCRD is a CRD a CSV owns or requires; Name is "<plural>.<group>".
type csvCRD struct {
	Name    string `yaml:"name"`
	Version string `yaml:"version"`
	Kind    string `yaml:"kind"`
}

func (c csvCRD) api() API {
	plural, group, _ := strings.Cut(c.Name, ".")
	return API{Group: group, Version: c.Version, Kind: c.Kind, Plural: plural}
}

// csvAPIService is an aggregated API a CSV owns or requires.
type csvAPIService struct {
	Name    string `yaml:"name"`
	Group   string `yaml:"group"`
	Version string `yaml:"version"`
	Kind    string `yaml:"kind"`
}

func (a csvAPIService) api() API {
	return API{Group: a.Group, Version: a.Version, Kind: a.Kind, Plural: a.Name}
}

type csvPermission struct {
	Rules []rbacRule `yaml:"rules"`
}

// olmEdges are a CSV's upgrade edges, which belong to each channel it is in.
type olmEdges struct {
	replaces  string
	skips     []string
	skipRange string
}

// channel returns the channel name with these edges.
func (e *olmEdges) channel(name string) Channel {
	return Channel{Name: name, Replaces: e.replaces, Skips: e.skips, SkipRange: e.skipRange}
}

// bundleAnnotationsFile is metadata/annotations.yaml.
type bundleAnnotationsFile struct {
	Annotations map[string]string `yaml:"annotations"`
}

// bundleDependenciesFile is metadata/dependencies.yaml.
type bundleDependenciesFile struct {
	Dependencies []struct {
		Type  string `yaml:"type"`
		Value struct {
			PackageName string `yaml:"packageName"`
			Version     string `yaml:"version"`
			Group       string `yaml:"group"`
			Kind        string `yaml:"kind"`
		} `yaml:"value"`
	} `yaml:"dependencies"`
}

// readBundle reads an OLM registry+v1 bundle: metadata/annotations.yaml for
// the package name and channels (the default channel is the only one when
// none is named, as in OLM), the CSV in manifests/ for everything else,
// metadata/dependencies.yaml for required packages and APIs.
func readBundle(pf *pkgFiles) (*parsed, error) {
	if !pf.has(bundleAnnotations) {
		return nil, invalid(bundleAnnotations, "missing: an OLM bundle names its package and channels there")
	}
	var ann bundleAnnotationsFile
	if err := decodeYAML(bundleAnnotations, pf.data(bundleAnnotations), pf.yaml, &ann); err != nil {
		return nil, err
	}
	name := strings.TrimSpace(ann.Annotations[annotationPackage])
	if name == "" {
		return nil, invalid(bundleAnnotations, "missing annotation %s (the package name)", annotationPackage)
	}
	csvFile, err := bundleCSV(pf)
	if err != nil {
		return nil, err
	}
	r, err := readCSV(pf, csvFile)
	if err != nil {
		return nil, err
	}
	r.md.Name, r.nameFile = name, bundleAnnotations
	for _, ch := range strings.Split(ann.Annotations[annotationChannels], ",") {
		if ch = strings.TrimSpace(ch); ch != "" {
			if err := ValidChannel(ch); err != nil {
				return nil, fmt.Errorf("%s: annotation %s: %w", displayPath(bundleAnnotations), annotationChannels, err)
			}
			r.md.Channels = append(r.md.Channels, r.edges.channel(ch))
		}
	}
	r.md.DefaultChannel = strings.TrimSpace(ann.Annotations[annotationDefaultChannel])
	if r.md.DefaultChannel != "" {
		if err := ValidChannel(r.md.DefaultChannel); err != nil {
			return nil, fmt.Errorf("%s: annotation %s: %w", displayPath(bundleAnnotations), annotationDefaultChannel, err)
		}
	}
	if r.md.DefaultChannel == "" && len(r.md.Channels) == 1 {
		r.md.DefaultChannel = r.md.Channels[0].Name
	}
	if data := pf.data(bundleDependencies); data != nil {
		var deps bundleDependenciesFile
		if err := decodeYAML(bundleDependencies, data, pf.yaml, &deps); err != nil {
			return nil, err
		}
		for _, d := range deps.Dependencies {
			switch v := d.Value; d.Type {
			case "olm.package":
				r.md.RequiredPackages = append(r.md.RequiredPackages, PackageRequirement{Name: v.PackageName, VersionRange: v.Version})
			case "olm.gvk":
				r.md.RequiredAPIs = append(r.md.RequiredAPIs, API{Group: v.Group, Version: v.Version, Kind: v.Kind})
			}
		}
	}
	return r, nil
}

// bundleCSV finds the one ClusterServiceVersion in manifests/: by its file
// name, or else by its kind.
func bundleCSV(pf *pkgFiles) (string, error) {
	var named, all []string
	for _, f := range yamlFiles(pf.under(manifestsDir)) {
		if path.Dir(f.Path) != manifestsDir {
			continue
		}
		all = append(all, f.Path)
		if strings.HasSuffix(f.Path, csvSuffix) {
			named = append(named, f.Path)
		}
	}
	if len(named) == 0 {
		for _, p := range all {
			var h objectHeader
			if decodeYAML(p, pf.data(p), pf.yaml, &h) == nil && h.Kind == "ClusterServiceVersion" {
				named = append(named, p)
			}
		}
	}
	switch len(named) {
	case 0:
		return "", invalid(manifestsDir+"/", "OLM bundle has no ClusterServiceVersion")
	case 1:
		return named[0], nil
	default:
		return "", invalid(manifestsDir+"/", "OLM bundle has several ClusterServiceVersions (%s)", strings.Join(named, ", "))
	}
}

// readOLMFlat reads a version folder of the OLM package-manifest layout: one
// CSV at the root beside its CRDs. The folder does not name its package, so
// the name comes from Options.Name.
func readOLMFlat(pf *pkgFiles) (*parsed, error) {
	csvs := pf.rootCSVs()
	if len(csvs) > 1 {
		return nil, invalid(rootName, "OLM version folder has several ClusterServiceVersions (%s)", strings.Join(csvs, ", "))
	}
	if pf.opts.Name == "" {
		return nil, invalid(csvs[0], "a version folder of the OLM package-manifest layout does not name its package: give the package name, or use the folder that holds the *.package.yaml")
	}
	r, err := readCSV(pf, csvs[0])
	if err != nil {
		return nil, err
	}
	r.md.Name, r.nameFile = pf.opts.Name, "the given name"
	return r, nil
}

// readCSV maps a ClusterServiceVersion onto Metadata (all but the package
// name and channels, which come from elsewhere).
func readCSV(pf *pkgFiles, file string) (*parsed, error) {
	var csv csvDocument
	if err := decodeYAML(file, pf.data(file), pf.yaml, &csv); err != nil {
		return nil, err
	}
	if csv.Kind != "ClusterServiceVersion" {
		return nil, invalid(file, "kind is %q, not ClusterServiceVersion", csv.Kind)
	}
	spec, ann := &csv.Spec, csv.Metadata.Annotations
	version := strings.TrimSpace(spec.Version)
	if version == "" {
		return nil, invalid(file, "missing required field spec.version")
	}
	md := &Metadata{
		Format:         OLM,
		Version:        version,
		CSVName:        strings.TrimSpace(csv.Metadata.Name),
		DisplayName:    strings.TrimSpace(spec.DisplayName),
		Description:    csvDescription(ann["description"], spec.Description),
		Readme:         strings.TrimSpace(spec.Description),
		Keywords:       spec.Keywords,
		Maintainers:    spec.Maintainers,
		Links:          spec.Links,
		Vendor:         strings.TrimSpace(spec.Provider.Name),
		Created:        parseCreated(ann["createdAt"]),
		Source:         strings.TrimSpace(ann["repository"]),
		MinKubeVersion: strings.TrimSpace(spec.MinKubeVersion),
	}
	if len(spec.Icon) > 0 {
		md.Icon = csvIcon(file, spec.Icon[0].Data, spec.Icon[0].MediaType)
	}
	for _, c := range spec.CRDs.Owned {
		md.ProvidedAPIs = append(md.ProvidedAPIs, c.api())
	}
	for _, c := range spec.CRDs.Required {
		md.RequiredAPIs = append(md.RequiredAPIs, c.api())
	}
	for _, a := range spec.APIServices.Owned {
		md.ProvidedAPIs = append(md.ProvidedAPIs, a.api())
	}
	for _, a := range spec.APIServices.Required {
		md.RequiredAPIs = append(md.RequiredAPIs, a.api())
	}
	var perms Permissions
	for _, p := range spec.Install.Spec.ClusterPermissions {
		perms.Cluster = append(perms.Cluster, policyRules(p.Rules)...)
	}
	for _, p := range spec.Install.Spec.Permissions {
		perms.Namespaced = append(perms.Namespaced, policyRules(p.Rules)...)
	}
	md.Permissions = &perms
	var images imageSet
	for _, img := range spec.RelatedImages {
		md.RelatedImages = append(md.RelatedImages, img.Image)
		where := "CSV spec.relatedImages"
		if name := strings.TrimSpace(img.Name); name != "" {
			where += " (" + name + ")"
		}
		images.add(img.Image, where)
	}
	for i := range spec.Install.Spec.Deployments {
		d := &spec.Install.Spec.Deployments[i]
		md.RelatedImages = appendImages(md.RelatedImages, d)
		images.addContainers(d, "CSV deployment "+orUnnamed(mappingValue(d, "name")))
	}
	md.Images = images.list()
	edges := &olmEdges{
		replaces:  strings.TrimSpace(spec.Replaces),
		skips:     sortedStrings(spec.Skips),
		skipRange: strings.TrimSpace(ann[annotationSkipRange]),
	}
	return &parsed{md: md, versionFile: file, edges: edges}, nil
}

// csvDescription is the CSV's description annotation, or else the first
// paragraph of spec.description.
func csvDescription(annotation, long string) string {
	if d := strings.TrimSpace(annotation); d != "" {
		return d
	}
	first, _, _ := strings.Cut(strings.TrimSpace(strings.ReplaceAll(long, "\r\n", "\n")), "\n\n")
	return strings.TrimSpace(first)
}

// csvIcon describes a CSV's base64 icon by digest; the data stays in the CSV
// file. An icon that does not decode is left out.
func csvIcon(file, data, mediaType string) *Icon {
	raw := DecodeIcon(data)
	if raw == nil {
		return nil
	}
	sum := sha256.Sum256(raw)
	return &Icon{
		MediaType: strings.TrimSpace(mediaType),
		Digest:    "sha256:" + hex.EncodeToString(sum[:]),
		Size:      int64(len(raw)),
		Path:      file,
	}
}

// DecodeIcon decodes the base64 data of a CSV icon, with or without
// padding, ignoring the spaces, tabs and line breaks that YAML folding leaves
// in it. It returns nil when the data does not decode or is empty. It is the
// one reading of an icon: Metadata.Icon's digest and the icon OLM's catalog
// carries (package olm) are of the same bytes.
func DecodeIcon(data string) []byte {
	data = strings.Map(func(r rune) rune {
		if r == ' ' || r == '\n' || r == '\r' || r == '\t' {
			return -1
		}
		return r
	}, data)
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		if raw, err = base64.RawStdEncoding.DecodeString(data); err != nil {
			return nil
		}
	}
	if len(raw) == 0 {
		return nil
	}
	return raw
}
