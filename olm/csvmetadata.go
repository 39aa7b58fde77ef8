package olm

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/berth-registry/berth/pkgformat"
)

// The FBC property types of a bundle.
const (
	propPackage         = "olm.package"
	propGVK             = "olm.gvk"
	propGVKRequired     = "olm.gvk.required"
	propPackageRequired = "olm.package.required"
	propCSVMetadata     = "olm.csv.metadata"
	propBundleObject    = "olm.bundle.object"
	propChannel         = "olm.channel"
	// csvPropertiesAnnotation is the CSV annotation that declares more
	// properties, a JSON list.
	csvPropertiesAnnotation = "olm.properties"
	// installStrategyDeployment is the one install strategy whose images
	// operator-registry lists.
	installStrategyDeployment = "deployment"
)

// csvObject is the part of a ClusterServiceVersion a bundle record is made
// of. Its JSON names and types are those of operator-framework's
// v1alpha1 API, so that olm.csv.metadata is written as opm writes it.
type csvObject struct {
	Metadata struct {
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations"`
		Labels      map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Version        string                `json:"version"`
		Release        json.RawMessage       `json:"release"`
		Description    string                `json:"description"`
		DisplayName    string                `json:"displayName"`
		Keywords       []string              `json:"keywords"`
		Maintainers    []maintainer          `json:"maintainers"`
		Links          []appLink             `json:"links"`
		Provider       appLink               `json:"provider"`
		Maturity       string                `json:"maturity"`
		MinKubeVersion string                `json:"minKubeVersion"`
		NativeAPIs     []groupVersionKind    `json:"nativeAPIs"`
		InstallModes   []installMode         `json:"installModes"`
		CRDs           crdDefinitions        `json:"customresourcedefinitions"`
		APIServices    apiServiceDefinitions `json:"apiservicedefinitions"`
		Icon           []struct {
			Data      string `json:"base64data"`
			MediaType string `json:"mediatype"`
		} `json:"icon"`
		RelatedImages []RelatedImage `json:"relatedImages"`
		Install       struct {
			Strategy string `json:"strategy"`
			Spec     struct {
				Deployments []struct {
					Spec struct {
						Template struct {
							Spec struct {
								Containers     []containerImage `json:"containers"`
								InitContainers []containerImage `json:"initContainers"`
							} `json:"spec"`
						} `json:"template"`
					} `json:"spec"`
				} `json:"deployments"`
			} `json:"spec"`
		} `json:"install"`
	} `json:"spec"`
}

type containerImage struct {
	Image string `json:"image"`
}

type maintainer struct {
	Name  string `json:"name,omitempty"`
	Email string `json:"email,omitempty"`
}

type appLink struct {
	Name string `json:"name,omitempty"`
	URL  string `json:"url,omitempty"`
}

type groupVersionKind struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

type installMode struct {
	Type      string `json:"type"`
	Supported bool   `json:"supported"`
}

type crdDefinitions struct {
	Owned    []crdDescription `json:"owned,omitempty"`
	Required []crdDescription `json:"required,omitempty"`
}

type apiServiceDefinitions struct {
	Owned    []apiServiceDescription `json:"owned,omitempty"`
	Required []apiServiceDescription `json:"required,omitempty"`
}

type crdDescription struct {
	Name              string              `json:"name"`
	Version           string              `json:"version"`
	Kind              string              `json:"kind"`
	DisplayName       string              `json:"displayName,omitempty"`
	Description       string              `json:"description,omitempty"`
	Resources         []resourceReference `json:"resources,omitempty"`
	StatusDescriptors []descriptor        `json:"statusDescriptors,omitempty"`
	SpecDescriptors   []descriptor        `json:"specDescriptors,omitempty"`
	ActionDescriptors []descriptor        `json:"actionDescriptors,omitempty"`
}

type apiServiceDescription struct {
	Name              string              `json:"name"`
	Group             string              `json:"group"`
	Version           string              `json:"version"`
	Kind              string              `json:"kind"`
	DeploymentName    string              `json:"deploymentName,omitempty"`
	ContainerPort     int32               `json:"containerPort,omitempty"`
	DisplayName       string              `json:"displayName,omitempty"`
	Description       string              `json:"description,omitempty"`
	Resources         []resourceReference `json:"resources,omitempty"`
	StatusDescriptors []descriptor        `json:"statusDescriptors,omitempty"`
	SpecDescriptors   []descriptor        `json:"specDescriptors,omitempty"`
	ActionDescriptors []descriptor        `json:"actionDescriptors,omitempty"`
}

type resourceReference struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Version string `json:"version"`
}

type descriptor struct {
	Path         string          `json:"path"`
	DisplayName  string          `json:"displayName,omitempty"`
	Description  string          `json:"description,omitempty"`
	XDescriptors []string        `json:"x-descriptors,omitempty"`
	Value        json.RawMessage `json:"value,omitempty"`
}

// csvMetadata is the value of olm.csv.metadata.
type csvMetadata struct {
	Annotations           map[string]string     `json:"annotations,omitempty"`
	APIServiceDefinitions apiServiceDefinitions `json:"apiServiceDefinitions,omitempty"`
	CRDDescriptions       crdDefinitions        `json:"crdDescriptions,omitempty"`
	Description           string                `json:"description,omitempty"`
	DisplayName           string                `json:"displayName,omitempty"`
	InstallModes          []installMode         `json:"installModes,omitempty"`
	Keywords              []string              `json:"keywords,omitempty"`
	Labels                map[string]string     `json:"labels,omitempty"`
	Links                 []appLink             `json:"links,omitempty"`
	Maintainers           []maintainer          `json:"maintainers,omitempty"`
	Maturity              string                `json:"maturity,omitempty"`
	MinKubeVersion        string                `json:"minKubeVersion,omitempty"`
	NativeAPIs            []groupVersionKind    `json:"nativeAPIs,omitempty"`
	Provider              appLink               `json:"provider,omitempty"`
}

// The values of the package and API properties.
type (
	packageValue struct {
		PackageName string `json:"packageName"`
		Version     string `json:"version"`
		Release     string `json:"release,omitzero"`
	}
	packageRequiredValue struct {
		PackageName  string `json:"packageName"`
		VersionRange string `json:"versionRange"`
	}
	gvkValue struct {
		Group   string `json:"group"`
		Kind    string `json:"kind"`
		Version string `json:"version"`
	}
	// dependencyPackage is an olm.package entry of dependencies.yaml.
	dependencyPackage struct {
		PackageName string `json:"packageName"`
		Version     string `json:"version"`
	}
)

// record returns the bundle record of b in the package named pkg, its
// properties as opm render writes them for the bundle image: every
// property but olm.csv.metadata sorted by type and then value, and
// olm.csv.metadata last.
func (b *parsedBundle) record(pkg string) (*BundleRecord, error) {
	csv := b.csv
	release, err := csvRelease(csv.Spec.Release)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.csvPath, err)
	}
	owned, required, err := b.apis()
	if err != nil {
		return nil, err
	}
	provided := make(map[gvkValue]bool)
	for _, a := range owned {
		provided[gvkValue{Group: a.group, Kind: a.kind, Version: a.version}] = true
	}
	needed := make(map[gvkValue]bool)
	for _, a := range required {
		needed[gvkValue{Group: a.group, Kind: a.kind, Version: a.version}] = true
	}
	declared := slices.Clone(b.properties)
	declared = append(declared, mustProperty(propPackage, packageValue{PackageName: pkg, Version: csv.Spec.Version, Release: release}))
	declared = append(declared, annotationProperties(csv.Metadata.Annotations[csvPropertiesAnnotation])...)

	var pkgProp *Property
	var others, packagesRequired []Property
	for _, p := range dedupe(declared) {
		switch p.Type {
		case propGVK:
			var v gvkValue
			if err := json.Unmarshal(p.Value, &v); err != nil {
				return nil, fmt.Errorf("property %s %s: %v: %w", p.Type, p.Value, err, pkgformat.ErrInvalid)
			}
			provided[v] = true
		case propPackage:
			var v packageValue
			if err := json.Unmarshal(p.Value, &v); err != nil {
				return nil, fmt.Errorf("property %s %s: %v: %w", p.Type, p.Value, err, pkgformat.ErrInvalid)
			}
			prop := mustProperty(propPackage, v)
			pkgProp = &prop
		default:
			others = append(others, p)
		}
	}
	for _, d := range b.dependencies {
		switch d.Type {
		case propGVK:
			var v gvkValue
			if err := json.Unmarshal(d.Value, &v); err != nil {
				return nil, fmt.Errorf("%s: %s %s: %v: %w", bundleDependenciesFile, d.Type, d.Value, err, pkgformat.ErrInvalid)
			}
			needed[v] = true
		case propPackage:
			var v dependencyPackage
			if err := json.Unmarshal(d.Value, &v); err != nil {
				return nil, fmt.Errorf("%s: %s %s: %v: %w", bundleDependenciesFile, d.Type, d.Value, err, pkgformat.ErrInvalid)
			}
			packagesRequired = append(packagesRequired, mustProperty(propPackageRequired, packageRequiredValue{PackageName: v.PackageName, VersionRange: v.Version}))
		default:
			others = append(others, compactProperty(d))
		}
	}
	props := []Property{*pkgProp}
	for v := range provided {
		props = append(props, mustProperty(propGVK, v))
	}
	for v := range needed {
		props = append(props, mustProperty(propGVKRequired, v))
	}
	props = append(append(props, packagesRequired...), others...)
	slices.SortFunc(props, func(a, b Property) int {
		return cmp.Or(strings.Compare(a.Type, b.Type), bytes.Compare(a.Value, b.Value))
	})
	props = append(props, mustProperty(propCSVMetadata, csv.metadata()))
	return &BundleRecord{
		Name:          csv.Metadata.Name,
		Properties:    props,
		RelatedImages: csv.relatedImages(),
		Icon:          csv.icon(),
		Description:   csv.Spec.Description,
	}, nil
}

// apis returns the APIs the bundle provides (its CRDs' and the CSV's owned
// API services) and requires (the CSV's required CRDs and API services),
// and checks that every CRD the CSV owns is among its CRDs, as opm does.
func (b *parsedBundle) apis() (owned, required []apiKey, err error) {
	spec := &b.csv.Spec
	owned = slices.Clone(b.crds)
	for _, a := range spec.APIServices.Owned {
		owned = append(owned, apiKey{group: a.Group, version: a.Version, kind: a.Kind, plural: a.Name})
	}
	for _, c := range spec.CRDs.Owned {
		plural, group, ok := strings.Cut(c.Name, ".")
		if !ok {
			return nil, nil, fmt.Errorf("%s: owned CRD name %q is not <plural>.<group>: %w", b.csvPath, c.Name, pkgformat.ErrInvalid)
		}
		if !slices.Contains(b.crds, apiKey{group: group, version: c.Version, kind: c.Kind, plural: plural}) {
			return nil, nil, fmt.Errorf("%s: owned CRD %s %s (kind %s) has no CustomResourceDefinition in %s: %w",
				b.csvPath, c.Name, c.Version, c.Kind, manifestsDir, pkgformat.ErrInvalid)
		}
	}
	for _, c := range spec.CRDs.Required {
		plural, group, ok := strings.Cut(c.Name, ".")
		if !ok {
			return nil, nil, fmt.Errorf("%s: required CRD name %q is not <plural>.<group>: %w", b.csvPath, c.Name, pkgformat.ErrInvalid)
		}
		required = append(required, apiKey{group: group, version: c.Version, kind: c.Kind, plural: plural})
	}
	for _, a := range spec.APIServices.Required {
		required = append(required, apiKey{group: a.Group, version: a.Version, kind: a.Kind, plural: a.Name})
	}
	return owned, required, nil
}

// csvRelease is a CSV's spec.release, a string or a number.
func csvRelease(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return "", fmt.Errorf("spec.release %s is neither a string nor a number: %w", raw, pkgformat.ErrInvalid)
	}
	if f == float64(int64(f)) {
		return strconv.FormatInt(int64(f), 10), nil
	}
	return strconv.FormatFloat(f, 'g', -1, 64), nil
}

// annotationProperties are the properties a CSV declares in its
// olm.properties annotation; none when it is not a JSON list of them.
func annotationProperties(value string) []Property {
	var props []Property
	if value == "" || json.Unmarshal([]byte(value), &props) != nil {
		return nil
	}
	for i := range props {
		props[i] = compactProperty(props[i])
	}
	return props
}

// compactProperty is p with its value compacted.
func compactProperty(p Property) Property {
	var buf bytes.Buffer
	if json.Compact(&buf, p.Value) == nil {
		p.Value = buf.Bytes()
	}
	return p
}

// dedupe returns props without repeats, first occurrences first.
func dedupe(props []Property) []Property {
	seen := make(map[string]bool, len(props))
	var out []Property
	for _, p := range props {
		key := p.Type + "\x00" + string(p.Value)
		if !seen[key] {
			seen[key] = true
			out = append(out, p)
		}
	}
	return out
}

// mustProperty returns a property of type typ and value v, written as opm
// writes property values: compact JSON, HTML characters not escaped. v is
// one of this file's value types, which always encode.
func mustProperty(typ string, v any) Property {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("olm: encode %s: %v", typ, err))
	}
	return Property{Type: typ, Value: bytes.TrimSuffix(buf.Bytes(), []byte("\n"))}
}

// metadata returns the olm.csv.metadata value of c.
func (c *csvObject) metadata() csvMetadata {
	s := &c.Spec
	return csvMetadata{
		Annotations:           c.Metadata.Annotations,
		APIServiceDefinitions: s.APIServices,
		CRDDescriptions:       s.CRDs,
		Description:           s.Description,
		DisplayName:           s.DisplayName,
		InstallModes:          s.InstallModes,
		Keywords:              s.Keywords,
		Labels:                c.Metadata.Labels,
		Links:                 s.Links,
		Maintainers:           s.Maintainers,
		Maturity:              s.Maturity,
		MinKubeVersion:        s.MinKubeVersion,
		NativeAPIs:            s.NativeAPIs,
		Provider:              s.Provider,
	}
}

// relatedImages returns the CSV's spec.relatedImages and, for the
// deployment install strategy, the images of its deployments' containers
// and init containers not already listed, with no name: without repeats or
// empty images, sorted by image and then name.
func (c *csvObject) relatedImages() []RelatedImage {
	var out []RelatedImage
	listed := make(map[string]bool)
	for _, ri := range c.Spec.RelatedImages {
		if ri.Image != "" && !slices.Contains(out, ri) {
			out = append(out, ri)
			listed[ri.Image] = true
		}
	}
	if c.Spec.Install.Strategy == installStrategyDeployment {
		for _, d := range c.Spec.Install.Spec.Deployments {
			pod := &d.Spec.Template.Spec
			for _, ct := range slices.Concat(pod.Containers, pod.InitContainers) {
				if ct.Image != "" && !listed[ct.Image] {
					listed[ct.Image] = true
					out = append(out, RelatedImage{Image: ct.Image})
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b RelatedImage) int {
		return cmp.Or(strings.Compare(a.Image, b.Image), strings.Compare(a.Name, b.Name))
	})
	return out
}

// icon returns the CSV's first icon, or nil when it has none or its data
// does not decode (pkgformat.DecodeIcon).
func (c *csvObject) icon() *Icon {
	if len(c.Spec.Icon) == 0 {
		return nil
	}
	first := c.Spec.Icon[0]
	raw := pkgformat.DecodeIcon(first.Data)
	if raw == nil {
		return nil
	}
	return &Icon{Data: raw, MediaType: first.MediaType}
}
