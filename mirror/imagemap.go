package mirror

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/berth-registry/berth/catalog/apiv1"
)

// DefaultImagePrefix is the repository path of the target under which
// import puts images when no --image-prefix names one.
const DefaultImagePrefix = "mirror"

// ImagePrefixes say under which repository path of the target the images
// of each source registry go: quay.io/org/img goes to PREFIX/org/img.
type ImagePrefixes struct {
	// Default is the prefix of registries that have none of their own;
	// DefaultImagePrefix when empty.
	Default string
	// ByRegistry are the prefixes of single registries (quay.io → mirror/quay).
	ByRegistry map[string]string
}

// ParseImagePrefixes parses --image-prefix arguments for an import into
// target: PREFIX (every registry) or REGISTRY=PREFIX (one registry), each
// PREFIX a repository path of target (target's own host before it is
// dropped: 127.0.0.1:5000/mirror is mirror). It fails naming the argument
// whose PREFIX is not a repository path, or names another registry than
// target, whose REGISTRY is not a registry, or that gives a registry, or
// the default, twice.
func ParseImagePrefixes(args []string, target string) (ImagePrefixes, error) {
	p := ImagePrefixes{ByRegistry: map[string]string{}}
	for _, arg := range args {
		from, prefix, perRegistry := strings.Cut(arg, "=")
		if !perRegistry {
			from, prefix = "", arg
		}
		if perRegistry {
			if err := checkRegistryHost(from); err != nil {
				return ImagePrefixes{}, fmt.Errorf("--image-prefix %q: REGISTRY %w", arg, err)
			}
		}
		prefix = strings.TrimPrefix(prefix, target+"/")
		if first, _, _ := strings.Cut(prefix, "/"); checkRegistryHost(first) == nil {
			return ImagePrefixes{}, fmt.Errorf("--image-prefix %q: %s names a registry, but images go to %s: give a repository path of %s, e.g. mirror", arg, first, target, target)
		}
		if err := checkRepositoryPath(prefix); err != nil {
			return ImagePrefixes{}, fmt.Errorf("--image-prefix %q: PREFIX %w", arg, err)
		}
		switch prev, dup := p.ByRegistry[from]; {
		case !perRegistry && p.Default != "":
			return ImagePrefixes{}, fmt.Errorf("--image-prefix %q: a prefix for every registry is given already (%s); give one per registry as REGISTRY=PREFIX", arg, p.Default)
		case !perRegistry:
			p.Default = prefix
		case dup:
			return ImagePrefixes{}, fmt.Errorf("--image-prefix %q: %s has a prefix already (%s)", arg, from, prev)
		default:
			p.ByRegistry[from] = prefix
		}
	}
	return p, nil
}

// target is where the images of source repository host/path go in the
// target: PREFIX/path.
func (p ImagePrefixes) target(host, path string) string {
	prefix, ok := p.ByRegistry[host]
	if !ok {
		prefix = cmp.Or(p.Default, DefaultImagePrefix)
	}
	return prefix + "/" + path
}

// imageMapping is where each source repository of an archive's images
// goes in the target, by source repository.
type imageMapping map[string]string

// mapImages returns where the images of m go in target under p. It fails
// when two source repositories would go to one repository of the target
// (naming both, and suggesting a prefix per registry), or one would go to
// a repository of a package version of m, or a name would be too long.
func mapImages(m *Manifest, p ImagePrefixes, target string) (imageMapping, error) {
	packages := map[string]bool{}
	for _, v := range m.Versions {
		packages[v.Repository] = true
	}
	out := imageMapping{}
	from := map[string]string{}
	for _, img := range m.Images {
		if img.Problem != "" || out[img.Repository] != "" {
			continue
		}
		host, path, err := splitSourceRepository(img.Repository)
		if err != nil {
			return nil, fmt.Errorf("%s: image %s: %w", ManifestFile, img.Reference, err)
		}
		dst := p.target(host, path)
		if err := checkRepositoryPath(dst); err != nil || len(target)+1+len(dst) > 255 {
			return nil, fmt.Errorf("image %s would go to %s/%s, which is not a valid repository name; give a shorter --image-prefix", img.Repository, target, dst)
		}
		if other, ok := from[dst]; ok {
			oh, _, _ := strings.Cut(other, "/")
			return nil, fmt.Errorf("--image-prefix: images %s and %s would both go to %s/%s; give each registry its own prefix: --image-prefix %s=%s/%s --image-prefix %s=%s/%s",
				other, img.Repository, target, dst, oh, DefaultImagePrefix, oh, host, DefaultImagePrefix, host)
		}
		if packages[dst] {
			return nil, fmt.Errorf("--image-prefix: image %s would go to %s/%s, the repository of a package of the archive; give another prefix", img.Repository, target, dst)
		}
		from[dst] = img.Repository
		out[img.Repository] = dst
	}
	return out, nil
}

// mirrors are the mapping as the far berth records it, ordered by source.
func (im imageMapping) mirrors(target string) []apiv1.ImageMirror {
	out := make([]apiv1.ImageMirror, 0, len(im))
	for src, dst := range im {
		out = append(out, apiv1.ImageMirror{Source: src, Mirror: target + "/" + dst})
	}
	slices.SortFunc(out, func(a, b apiv1.ImageMirror) int { return cmp.Compare(a.Source, b.Source) })
	return out
}
