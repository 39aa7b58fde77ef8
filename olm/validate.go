package olm

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/blang/semver/v4"
	"github.com/distribution/reference"

	"github.com/berth-registry/berth/pkgformat"
)

// maxRelease is the longest olm.package release opm accepts.
const maxRelease = 20

// maxLabel is the longest package name opm accepts, a DNS-1123 label.
const maxLabel = 63

// dns1123Label is the grammar opm requires of a package name.
var dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// ValidateBundle reports whether the olm.bundle and olm.channel entries of
// one version, md as pkgformat read it and rec its bundle record, would
// pass opm's model validation (opm validate, opm serve), which refuses a
// whole catalog for one bad bundle: the package name is a DNS-1123 label;
// the bundle has a name and exactly one olm.package property naming the
// package, whose version is semver and whose release opm's grammar; every
// property value decodes as opm decodes its type; every related image but
// an empty one is an image reference as containers/image parses it; every
// channel name is valid (pkgformat.ValidChannel), no skip is empty and the
// skipRange parses as blang/semver reads it. The indexer leaves a version that fails out of
// the catalog, invalid with the error as its reason, which names the field
// and the rule; the error wraps pkgformat.ErrInvalid.
func ValidateBundle(md *pkgformat.Metadata, rec *BundleRecord) error {
	err := validateBundle(md, rec)
	if err != nil {
		return fmt.Errorf("olm bundle %s %s is not valid for opm, so the namespace's catalog leaves it out: %w: %w", md.Name, md.Version, err, pkgformat.ErrInvalid)
	}
	return nil
}

// validateBundle is ValidateBundle's check, its error unprefixed.
func validateBundle(md *pkgformat.Metadata, rec *BundleRecord) error {
	if len(md.Name) > maxLabel || !dns1123Label.MatchString(md.Name) {
		return fmt.Errorf("package name %q is not a DNS-1123 label (at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit)", md.Name)
	}
	if rec.Name == "" {
		return errors.New("the ClusterServiceVersion has no metadata.name")
	}
	var pkgs []packageValue
	for i, p := range rec.Properties {
		v, err := decodeProperty(p)
		if err != nil {
			return fmt.Errorf("properties[%d] (%s): %w", i, p.Type, err)
		}
		if pv, ok := v.(*packageValue); ok {
			pkgs = append(pkgs, *pv)
		}
	}
	if len(pkgs) != 1 {
		return fmt.Errorf("it has %d %s properties, opm requires exactly one", len(pkgs), propPackage)
	}
	if err := checkPackageProperty(md.Name, rec.Name, pkgs[0]); err != nil {
		return err
	}
	for i, ri := range rec.RelatedImages {
		if ri.Image == "" {
			continue // opm checks none
		}
		if err := validImageReference(ri.Image); err != nil {
			return fmt.Errorf("relatedImages[%d] (%s): %w", i, ri.Name, err)
		}
	}
	for _, ch := range md.Channels {
		if err := pkgformat.ValidChannel(ch.Name); err != nil {
			return err
		}
		for i, s := range ch.Skips {
			if s == "" {
				return fmt.Errorf("channel %q: skips[%d] is empty", ch.Name, i)
			}
		}
		if ch.SkipRange == "" {
			continue
		}
		if _, err := semver.ParseRange(ch.SkipRange); err != nil {
			return fmt.Errorf("channel %q: skipRange %q is not a semver range as OLM reads it (blang/semver): %v", ch.Name, ch.SkipRange, err)
		}
	}
	return nil
}

// checkPackageProperty checks the olm.package property of bundle bundle in
// package pkg as opm does: its package name, its version (semver), its
// release, and the bundle name a release implies.
func checkPackageProperty(pkg, bundle string, p packageValue) error {
	if p.PackageName != pkg {
		return fmt.Errorf("its %s property names package %q, not %q", propPackage, p.PackageName, pkg)
	}
	v, err := semver.Parse(p.Version)
	if err != nil {
		return fmt.Errorf("version %q is not semver: %v", p.Version, err)
	}
	if p.Release == "" {
		return nil
	}
	if len(p.Release) > maxRelease {
		return fmt.Errorf("release %q is longer than %d characters", p.Release, maxRelease)
	}
	for i, seg := range strings.Split(p.Release, ".") {
		if _, err := semver.NewPRVersion(seg); err != nil {
			return fmt.Errorf("release %q: segment %d: %v", p.Release, i, err)
		}
	}
	if len(v.Build) > 0 {
		return fmt.Errorf("version %q has build metadata and a release %q; opm accepts one or the other", p.Version, p.Release)
	}
	if want := pkg + "-v" + v.String() + "-" + p.Release; bundle != want {
		return fmt.Errorf("the ClusterServiceVersion is named %q; with a release, opm requires %q", bundle, want)
	}
	return nil
}

// decodeProperty decodes p's value as opm decodes a property of its type,
// and returns it: a *packageValue for olm.package.
func decodeProperty(p Property) (any, error) {
	var v any
	switch p.Type {
	case propPackage:
		v = &packageValue{}
	case propPackageRequired:
		v = &packageRequiredValue{}
	case propGVK, propGVKRequired:
		v = &gvkValue{}
	case propBundleObject:
		v = &struct {
			Data []byte `json:"data"`
		}{}
	case propChannel:
		v = &struct {
			ChannelName string `json:"channelName"`
			Priority    int    `json:"priority"`
		}{}
	case propCSVMetadata:
		v = &struct {
			Annotations map[string]string `json:"annotations"`
			Labels      map[string]string `json:"labels"`
			Keywords    []string          `json:"keywords"`
			Description string            `json:"description"`
			DisplayName string            `json:"displayName"`
		}{}
	default:
		v = &json.RawMessage{}
	}
	if err := json.Unmarshal(p.Value, v); err != nil {
		return nil, fmt.Errorf("value %s does not decode as opm reads this type: %v", abbreviate(string(p.Value)), err)
	}
	return v, nil
}

// validImageReference reports whether image is an image reference as opm
// reads one (containers/image's docker/reference ParseNormalizedNamed): a
// repository of lowercase path components, optionally after a registry
// host, with a tag, a digest or both. distribution/reference, which berth
// uses, has the same grammar but for three points, checked here apart: it
// reads a first component with capitals as a host, accepts an IPv6 host,
// and bounds the path alone to 255 bytes rather than host and path.
func validImageReference(image string) error {
	named, err := reference.ParseNormalizedNamed(image)
	if err == nil {
		first, _, ok := strings.Cut(image, "/")
		switch {
		case ok && first != "localhost" && !strings.ContainsAny(first, ".:") && strings.ToLower(first) != first:
			err = errors.New("repository name must be lowercase")
		case strings.HasPrefix(reference.Domain(named), "["):
			err = errors.New("an IPv6 registry host is not accepted")
		case len(reference.Domain(named))+1+len(reference.Path(named)) > reference.NameTotalLengthMax:
			err = reference.ErrNameTooLong
		}
	}
	if err != nil {
		return fmt.Errorf("invalid image pull spec %q: %v", image, err)
	}
	return nil
}

// abbreviate shortens s for an error message.
func abbreviate(s string) string {
	const max = 120
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
