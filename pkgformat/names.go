package pkgformat

import (
	"fmt"
	"regexp"
	"strings"
)

// maxNameLength is the longest package name ValidName accepts, in bytes.
const maxNameLength = 128

var (
	nameRE = regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*$`)
	// tagRE is the OCI distribution grammar of a tag (its length is checked apart).
	tagRE = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9._-]*$`)
)

// ValidName reports whether name can be a package name: one OCI repository
// path component, [a-z0-9]+([._-][a-z0-9]+)*, at most 128 bytes. The error
// wraps ErrInvalid and says which rule is broken.
func ValidName(name string) error {
	return validComponent("package name", name)
}

// ReservedName is the one valid name no package may be pushed under: the
// repository <namespace>/olm/catalog holds the namespace's OLM catalog
// image (docs/olm.md), and a package <namespace>/olm would hold it in its
// repository's path.
const ReservedName = "olm"

// ErrReservedName says why no package may be pushed under ReservedName.
var ErrReservedName = fmt.Errorf("package name %q is reserved: <namespace>/%s/catalog is the namespace's OLM catalog image (docs/olm.md); push the package under another name", ReservedName, ReservedName)

// NotReserved reports whether a package may be pushed under name: the error
// wraps ErrReservedName and ErrInvalid for ReservedName. A package of that
// name stored before it was reserved can still be read and deleted, so
// readers check ValidName alone.
func NotReserved(name string) error {
	if name == ReservedName {
		return fmt.Errorf("%w: %w", ErrReservedName, ErrInvalid)
	}
	return nil
}

// ValidNamespace reports whether ns can be a namespace: the rule of
// ValidName, with errors that name it a namespace.
func ValidNamespace(ns string) error {
	return validComponent("namespace", ns)
}

// validComponent checks one repository path component, naming it what.
func validComponent(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%s is empty: %w", what, ErrInvalid)
	case len(s) > maxNameLength:
		return fmt.Errorf("%s %q is longer than %d bytes: %w", what, s, maxNameLength, ErrInvalid)
	case !nameRE.MatchString(s):
		return fmt.Errorf("%s %q must be lowercase letters and digits separated by single '.', '_' or '-': %w", what, s, ErrInvalid)
	}
	return nil
}

// Tag returns the OCI tag of a package version: the version with '+' written
// '_', as Helm does, since '+' is not allowed in a tag.
func Tag(version string) string {
	return strings.ReplaceAll(version, "+", "_")
}

// maxTagLength is the longest OCI tag.
const maxTagLength = 128

// ValidVersion reports whether version can be written as an OCI tag (with '+'
// written '_', see Tag). The error says what is wrong and wraps ErrInvalid.
func ValidVersion(version string) error {
	tag := Tag(version)
	switch {
	case version == "":
		return fmt.Errorf("version is empty: %w", ErrInvalid)
	case len(tag) > maxTagLength:
		return fmt.Errorf("version is %d characters long, the limit is %d: %w", len(tag), maxTagLength, ErrInvalid)
	case !tagRE.MatchString(tag):
		return fmt.Errorf("version %q is not a valid tag (OCI tag grammar): use letters, digits, '_', '.', '-' and '+' (written '_'), not starting with '.' or '-': %w", version, ErrInvalid)
	}
	return nil
}

// ValidTag reports whether tag is a valid OCI tag: the distribution
// grammar, at most 128 characters. The error wraps ErrInvalid.
func ValidTag(tag string) error {
	if len(tag) > maxTagLength || !tagRE.MatchString(tag) {
		return fmt.Errorf("%q is not a valid OCI tag: %w", tag, ErrInvalid)
	}
	return nil
}

// ValidRepository reports whether repository is a package repository,
// namespace/name, each a valid component. The error wraps ErrInvalid.
func ValidRepository(repository string) error {
	ns, name, ok := strings.Cut(repository, "/")
	if !ok {
		return fmt.Errorf("repository %q is not namespace/name: %w", repository, ErrInvalid)
	}
	if err := ValidNamespace(ns); err != nil {
		return err
	}
	return ValidName(name)
}

// ContentTitle is the file name of a package's content tarball,
// "<name>-<version>.tgz"; the content layer carries it as
// org.opencontainers.image.title so that `oras pull` writes a file of that name.
func ContentTitle(name, version string) string {
	return name + "-" + version + ".tgz"
}

// maxChannelLength is the longest channel name ValidChannel accepts, as
// OLM v1 bounds a ClusterExtension's channel.
const maxChannelLength = 253

// channelRE is the grammar of a channel name.
var channelRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)

// ValidChannel reports whether name can be a channel name: 1 to 253
// letters, digits, '.', '_' and '-', starting and ending with a letter or
// digit. That is OLM v1's channel grammar (a DNS-1123 subdomain), widened
// to capitals and '_', which community catalogs use (original_40). Every
// reader of channels (OLM bundle annotations, package manifests) checks
// it. The error names the channel and the rule, and wraps ErrInvalid.
func ValidChannel(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("channel name is empty: %w", ErrInvalid)
	case len(name) > maxChannelLength:
		return fmt.Errorf("channel name %q is longer than %d bytes: %w", name, maxChannelLength, ErrInvalid)
	case !channelRE.MatchString(name):
		return fmt.Errorf("channel name %q must be letters, digits, '.', '_' and '-', starting and ending with a letter or digit: %w", name, ErrInvalid)
	}
	return nil
}
