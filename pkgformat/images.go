package pkgformat

import (
	"fmt"
	"slices"
	"strings"

	"github.com/distribution/reference"
	"go.yaml.in/yaml/v3"
)

// imageSet collects the images a package names, one per normalised
// reference, with every place each was found.
type imageSet struct {
	byRef map[string]*Image
}

// add records that raw was found at where. An empty reference is no image
// and is ignored; one that does not parse is kept as written with the
// reason (Image.Problem).
func (s *imageSet) add(raw, where string) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return
	}
	img := normalizeImage(raw)
	if s.byRef == nil {
		s.byRef = make(map[string]*Image)
	}
	if have, ok := s.byRef[img.Reference]; ok {
		if !slices.Contains(have.Found, where) {
			have.Found = append(have.Found, where)
		}
		return
	}
	img.Found = []string{where}
	s.byRef[img.Reference] = &img
}

// merge adds the images of other.
func (s *imageSet) merge(other imageSet) {
	for _, img := range other.byRef {
		for _, where := range img.Found {
			s.add(img.Reference, where)
		}
	}
}

// list returns the images sorted by reference, each with its places sorted;
// nil when there are none.
func (s *imageSet) list() []Image {
	if len(s.byRef) == 0 {
		return nil
	}
	out := make([]Image, 0, len(s.byRef))
	for _, img := range s.byRef {
		slices.Sort(img.Found)
		out = append(out, *img)
	}
	slices.SortFunc(out, func(a, b Image) int { return strings.Compare(a.Reference, b.Reference) })
	return out
}

// normalizeImage parses an image reference as a container runtime does
// (reference.ParseNormalizedNamed): nginx:1 is docker.io/library/nginx:1,
// and a reference with neither tag nor digest pulls, and so names, the tag
// latest. A reference that does not parse is kept as written, with why.
func normalizeImage(raw string) Image {
	if isTemplated(raw) {
		return unparsed(raw, "a template expression, not an image reference: the template was not rendered")
	}
	named, err := reference.ParseNormalizedNamed(raw)
	if err != nil {
		return unparsed(raw, "not an image reference: "+err.Error())
	}
	named = reference.TagNameOnly(named)
	_, digested := named.(reference.Digested)
	return Image{Reference: named.String(), Mutable: !digested}
}

// LooksLikeRegistryHost tells a registry host from the first path
// component of an image repository as docker does (distribution/reference's
// normalisation): a host has a dot or a port, is a bracketed IPv6 address,
// or is localhost; anything else is a namespace under docker.io.
func LooksLikeRegistryHost(s string) bool {
	return strings.ContainsAny(s, ".:[") || s == "localhost"
}

// maxShownReference is the most of an unparsable reference kept as
// written: a hostile one can be megabytes long.
const maxShownReference = 512

// unparsed is an image whose reference does not parse, kept as written
// (shortened past maxShownReference) with why.
func unparsed(raw, problem string) Image {
	if len(raw) > maxShownReference {
		raw = strings.ToValidUTF8(raw[:maxShownReference], "") + "..."
	}
	return Image{Reference: raw, Problem: problem}
}

// containerKeys name the pod spec fields that hold containers, and what
// their entries are called where an image is found.
var containerKeys = map[string]string{"containers": "container", "initContainers": "init container", "ephemeralContainers": "ephemeral container"}

// eachContainer calls fn with every container found anywhere under n (pods,
// the pod templates of deployments and jobs, a CronJob's job template, an
// OLM CSV's install strategy...): what kind of container it is (containerKeys),
// its name and its image, both as written.
func eachContainer(n *yaml.Node, fn func(kind, name, image string)) {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, value := n.Content[i], n.Content[i+1]
			if kind, ok := containerKeys[key.Value]; ok && value.Kind == yaml.SequenceNode {
				for _, c := range value.Content {
					fn(kind, mappingValue(c, "name"), mappingValue(c, "image"))
				}
			}
		}
	}
	for _, c := range n.Content {
		eachContainer(c, fn)
	}
}

// addContainers records the image of every container under n, found at
// "<object>, <kind> <name>".
func (s *imageSet) addContainers(n *yaml.Node, object string) {
	eachContainer(n, func(kind, name, image string) {
		s.add(image, fmt.Sprintf("%s, %s %s", object, kind, orUnnamed(name)))
	})
}

// maxShownName is the most of an object or container name shown where an
// image is found (Kubernetes names are at most 253 characters).
const maxShownName = 253

// orUnnamed is name, shortened past maxShownName, or a stand-in that says
// it has none.
func orUnnamed(name string) string {
	switch {
	case name == "":
		return "(unnamed)"
	case len(name) > maxShownName:
		return strings.ToValidUTF8(name[:maxShownName], "") + "..."
	}
	return name
}

// appendImages appends the image of every container found anywhere under n
// as written (Metadata.RelatedImages). Images that are templated (KUDO,
// Helm) are left out: they are not references.
func appendImages(images []string, n *yaml.Node) []string {
	eachContainer(n, func(_, _, image string) {
		if image != "" && !isTemplated(image) {
			images = append(images, image)
		}
	})
	return images
}

// mappingValue returns the scalar value of key in mapping n, or "".
func mappingValue(n *yaml.Node, key string) string {
	if n.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key && n.Content[i+1].Kind == yaml.ScalarNode {
			return strings.TrimSpace(n.Content[i+1].Value)
		}
	}
	return ""
}

// isTemplated reports whether s is (or holds) a template expression rather
// than a value.
func isTemplated(s string) bool {
	return strings.Contains(s, "{{") || strings.Contains(s, templatePlaceholder)
}
