package mirror

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/pkgformat"
)

// imageRef is an image reference the content of a version names, parsed.
type imageRef struct {
	// ref is the normalised reference: docker.io/library/nginx:1.25. A
	// reference with neither tag nor digest names the tag latest.
	ref string
	// repository is the normalised repository, host is its registry and
	// path the rest (docker.io, library/nginx).
	repository, host, path string
	tag                    string
	digest                 digest.Digest
}

// parseImageRef parses an image reference as a container runtime does
// (github.com/distribution/reference's normalisation).
func parseImageRef(s string) (imageRef, error) {
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return imageRef{}, fmt.Errorf("%q is not a valid image reference: %w", s, err)
	}
	named = reference.TagNameOnly(named)
	r := imageRef{ref: named.String(), repository: named.Name(), host: reference.Domain(named), path: reference.Path(named)}
	if t, ok := named.(reference.Tagged); ok {
		r.tag = t.Tag()
	}
	if d, ok := named.(reference.Digested); ok {
		r.digest = d.Digest()
	}
	return r, nil
}

// splitSourceRepository splits a normalised source repository
// (quay.io/org/img) into its registry and path, or fails naming it.
func splitSourceRepository(repo string) (host, path string, err error) {
	named, err := reference.ParseNamed(repo)
	if err != nil || !reference.IsNameOnly(named) {
		return "", "", fmt.Errorf("%q is not a normalised image repository (host/path)", repo)
	}
	return reference.Domain(named), reference.Path(named), nil
}

// registryHostRE is distribution's grammar of a registry, host[:port].
var registryHostRE = regexp.MustCompile("^" + reference.DomainRegexp.String() + "$")

// checkRegistryHost checks that s is a registry, host[:port], as the first
// component of an image reference names one: with a dot or a port, or
// localhost.
func checkRegistryHost(s string) error {
	if !registryHostRE.MatchString(s) || !pkgformat.LooksLikeRegistryHost(s) {
		return fmt.Errorf("%q is not a registry host[:port]", s)
	}
	return nil
}

// checkRepositoryPath checks that s is a repository path (lower case
// components separated by /, no registry) that a name can be put under.
func checkRepositoryPath(s string) error {
	named, err := reference.ParseNamed("registry.invalid/" + s)
	if err != nil || reference.Path(named) != s {
		return fmt.Errorf("%q is not a repository path (lower-case components separated by /)", s)
	}
	return nil
}

// RegistryMap says where images of a registry are read from: FROM=TO reads
// the images named FROM/path from TO/path (TO is host[:port], optionally
// with a path prefix), while they keep their FROM name everywhere.
type RegistryMap map[string]string

// ParseRegistryMap parses --registry-map arguments, FROM=TO each. It
// fails naming the argument that is not of that form, whose FROM is not a
// registry or whose TO is not a registry with an optional path, or whose
// FROM was given twice.
func ParseRegistryMap(args []string) (RegistryMap, error) {
	m := RegistryMap{}
	for _, arg := range args {
		from, to, ok := strings.Cut(arg, "=")
		if !ok || from == "" || to == "" {
			return nil, fmt.Errorf("--registry-map %q: want FROM=TO, e.g. quay.io=127.0.0.1:5001", arg)
		}
		if err := checkRegistryHost(from); err != nil {
			return nil, fmt.Errorf("--registry-map %q: FROM %w", arg, err)
		}
		host, path, _ := strings.Cut(to, "/")
		if err := checkRegistryHost(host); err != nil {
			return nil, fmt.Errorf("--registry-map %q: TO %w", arg, err)
		}
		if path != "" {
			if err := checkRepositoryPath(path); err != nil {
				return nil, fmt.Errorf("--registry-map %q: TO's path %w", arg, err)
			}
		}
		if prev, dup := m[from]; dup {
			return nil, fmt.Errorf("--registry-map %q: %s is mapped already, to %s", arg, from, prev)
		}
		m[from] = to
	}
	return m, nil
}

// dockerHubHost is where images named docker.io are read from.
const dockerHubHost = "registry-1.docker.io"

// readFrom returns the registry and repository path where the image
// repository host/path is read.
func (m RegistryMap) readFrom(host, path string) (string, string) {
	to, ok := m[host]
	switch {
	case !ok && host == "docker.io":
		return dockerHubHost, path
	case !ok:
		return host, path
	}
	toHost, prefix, _ := strings.Cut(to, "/")
	if prefix != "" {
		path = prefix + "/" + path
	}
	return toHost, path
}

// ParsePlatforms parses --platform arguments, each one or more
// OS/ARCH[/VARIANT] separated by commas. It fails naming a platform not of
// that form.
func ParsePlatforms(args []string) ([]ocispec.Platform, error) {
	var out []ocispec.Platform
	for _, arg := range args {
		for _, s := range strings.Split(arg, ",") {
			parts := strings.Split(strings.TrimSpace(s), "/")
			if len(parts) < 2 || len(parts) > 3 || slices.Contains(parts, "") {
				return nil, fmt.Errorf("--platform %q: want OS/ARCH[/VARIANT], e.g. linux/amd64 or linux/arm64/v8", s)
			}
			p := ocispec.Platform{OS: parts[0], Architecture: parts[1]}
			if len(parts) == 3 {
				p.Variant = parts[2]
			}
			out = append(out, p)
		}
	}
	return out, nil
}

// platformString is p as OS/ARCH[/VARIANT].
func platformString(p ocispec.Platform) string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// platformFilter keeps, of an index's entries, those of the platforms
// wanted, and the attestation manifests (buildx's, of platform
// unknown/unknown) of the entries kept. It returns the entries kept and
// the platforms they are for.
func platformFilter(want []ocispec.Platform) func([]ocispec.Descriptor) ([]ocispec.Descriptor, []string) {
	return func(children []ocispec.Descriptor) ([]ocispec.Descriptor, []string) {
		var (
			kept      []ocispec.Descriptor
			platforms []string
			keptSet   = map[digest.Digest]bool{}
		)
		for _, c := range children {
			if c.Platform == nil || !slices.ContainsFunc(want, func(p ocispec.Platform) bool { return platformMatches(p, *c.Platform) }) {
				continue
			}
			kept = append(kept, c)
			keptSet[c.Digest] = true
			if s := platformString(*c.Platform); !slices.Contains(platforms, s) {
				platforms = append(platforms, s)
			}
		}
		for _, c := range children {
			if c.Annotations[attestationTypeAnnotation] == "attestation-manifest" && keptSet[digest.Digest(c.Annotations[attestationDigestAnnotation])] {
				kept = append(kept, c)
			}
		}
		slices.Sort(platforms)
		return kept, platforms
	}
}

// Annotations buildx puts on the attestation manifests of an index.
const (
	attestationTypeAnnotation   = "vnd.docker.reference.type"
	attestationDigestAnnotation = "vnd.docker.reference.digest"
)

// platformMatches reports whether platform have is the platform want asks
// for: the same OS and architecture, and the same variant when want names
// one.
func platformMatches(want, have ocispec.Platform) bool {
	return want.OS == have.OS && want.Architecture == have.Architecture && (want.Variant == "" || want.Variant == have.Variant)
}
