package client

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/berth-registry/berth/pkgformat"
)

// ErrInvalidReference is wrapped by every error ParseReference and
// ParseRepositoryPrefix return.
var ErrInvalidReference = errors.New("invalid reference")

const (
	wantPackage    = "want host[:port]/namespace/name[:version]"
	wantRepository = "want host[:port]/namespace"
	// maxRepositoryLength is the longest repository name distribution accepts.
	maxRepositoryLength = 255
)

var (
	// componentRegexp is one path component of an OCI repository name
	// (distribution-spec: [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*).
	componentRegexp = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`)
	// hostnameRegexp is a DNS name or IPv4 address, without port.
	hostnameRegexp = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*$`)
)

// Reference names one package version in a registry:
// host[:port]/namespace/name[:version] or host[:port]/namespace/name@digest.
type Reference struct {
	// Registry is host[:port].
	Registry string
	// Namespace is the first path component of the repository.
	Namespace string
	// Name is the package name, the second path component of the repository.
	Name string
	// Tag is the version tag: the version with '+' written '_' (pkgformat.Tag).
	// Empty when the reference gives no version.
	Tag string
	// Digest is the manifest digest; empty unless the reference gives one.
	Digest digest.Digest
}

// ParseReference parses host[:port]/namespace/name[:version] or
// host[:port]/namespace/name[:version]@sha256:<hex>. A '+' in the version is
// accepted and written '_' in Tag, as Helm does. The namespace and name must be
// lower-case OCI path components.
//
// Errors wrap ErrInvalidReference and say what is wrong, e.g.
// `invalid reference "localhost:5000/kafka": missing namespace: want host[:port]/namespace/name[:version]`.
func ParseReference(s string) (Reference, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", ErrInvalidReference, s, fmt.Sprintf(format, args...))
	}
	if err := checkSyntax(s, wantPackage); err != nil {
		return Reference{}, invalid("%s", err)
	}
	rest, dgst, hasDigest := strings.Cut(s, "@")
	var ref Reference
	if hasDigest {
		d, err := parseDigest(dgst)
		if err != nil {
			return Reference{}, invalid("%s", err)
		}
		ref.Digest = d
	}
	host, path, _ := strings.Cut(rest, "/")
	parts := strings.Split(path, "/")
	switch {
	case path == "" && !pkgformat.LooksLikeRegistryHost(host):
		return Reference{}, invalid("missing registry host, namespace and name: %s", wantPackage)
	case path == "":
		return Reference{}, invalid("missing namespace and name: %s", wantPackage)
	case len(parts) == 1 && !pkgformat.LooksLikeRegistryHost(host):
		return Reference{}, invalid("missing registry host: %s", wantPackage)
	case len(parts) == 1:
		return Reference{}, invalid("missing namespace: %s", wantPackage)
	case len(parts) > 2:
		return Reference{}, invalid("too many path components (%d after the host): %s", len(parts), wantPackage)
	}
	name, version, hasVersion := strings.Cut(parts[1], ":")
	if err := checkHost(host); err != nil {
		return Reference{}, invalid("%s", err)
	}
	if err := checkComponent("namespace", parts[0]); err != nil {
		return Reference{}, invalid("%s", err)
	}
	if err := checkComponent("name", name); err != nil {
		return Reference{}, invalid("%s", err)
	}
	if n := len(parts[0]) + 1 + len(name); n > maxRepositoryLength {
		return Reference{}, invalid("repository %s/%s is %d characters long, the limit is %d", parts[0], name, n, maxRepositoryLength)
	}
	if hasVersion {
		tag, err := versionTag(version)
		if err != nil {
			return Reference{}, invalid("%s", err)
		}
		ref.Tag = tag
	}
	ref.Registry, ref.Namespace, ref.Name = host, parts[0], name
	return ref, nil
}

// Repository returns the repository name, namespace/name.
func (r Reference) Repository() string { return r.Namespace + "/" + r.Name }

// String returns host/namespace/name[:tag][@digest].
func (r Reference) String() string {
	s := r.Registry + "/" + r.Repository()
	if r.Tag != "" {
		s += ":" + r.Tag
	}
	if r.Digest != "" {
		s += "@" + r.Digest.String()
	}
	return s
}

// manifestReference is what the registry resolves: the digest when given
// (it is authoritative), else the tag.
func (r Reference) manifestReference() string {
	if r.Digest != "" {
		return r.Digest.String()
	}
	return r.Tag
}

// RepositoryPrefix names a namespace in a registry, host[:port]/namespace; a
// multi-version push puts each package under it.
type RepositoryPrefix struct {
	// Registry is host[:port].
	Registry string
	// Namespace is the repository's first path component.
	Namespace string
}

// ParseRepositoryPrefix parses host[:port]/namespace. Errors wrap
// ErrInvalidReference and say what is wrong.
func ParseRepositoryPrefix(s string) (RepositoryPrefix, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", ErrInvalidReference, s, fmt.Sprintf(format, args...))
	}
	if err := checkSyntax(s, wantRepository); err != nil {
		return RepositoryPrefix{}, invalid("%s", err)
	}
	host, path, _ := strings.Cut(s, "/")
	switch {
	case strings.Contains(s, "@"):
		return RepositoryPrefix{}, invalid("a digest is not allowed here: %s", wantRepository)
	case path == "" && !pkgformat.LooksLikeRegistryHost(host):
		return RepositoryPrefix{}, invalid("missing registry host and namespace: %s", wantRepository)
	case path == "":
		return RepositoryPrefix{}, invalid("missing namespace: %s", wantRepository)
	case strings.Contains(path, "/"):
		return RepositoryPrefix{}, invalid("too many path components: %s", wantRepository)
	case strings.Contains(path, ":"):
		return RepositoryPrefix{}, invalid("a version is not allowed here: %s", wantRepository)
	}
	if err := checkHost(host); err != nil {
		return RepositoryPrefix{}, invalid("%s", err)
	}
	if err := checkComponent("namespace", path); err != nil {
		return RepositoryPrefix{}, invalid("%s", err)
	}
	return RepositoryPrefix{Registry: host, Namespace: path}, nil
}

// Package returns the reference of one package version under the prefix. The
// version is written as a tag (pkgformat.Tag); the result is not validated.
func (p RepositoryPrefix) Package(name, version string) Reference {
	return Reference{Registry: p.Registry, Namespace: p.Namespace, Name: name, Tag: pkgformat.Tag(version)}
}

// String returns host/namespace.
func (p RepositoryPrefix) String() string { return p.Registry + "/" + p.Namespace }

// checkSyntax rejects what no reference may contain.
func checkSyntax(s, want string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty: %s", want)
	case strings.Contains(s, "://"):
		return fmt.Errorf("remove the URL scheme: %s", want)
	case strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return fmt.Errorf("contains white space or control characters: %s", want)
	case strings.HasSuffix(s, "/"):
		return fmt.Errorf("ends with '/': %s", want)
	}
	return nil
}

// checkHost validates host[:port], where host is a DNS name, an IPv4 address
// or a bracketed IPv6 address.
func checkHost(hostport string) error {
	if hostport == "" {
		return errors.New("empty registry host")
	}
	host, port := hostport, ""
	if strings.HasPrefix(hostport, "[") {
		end := strings.Index(hostport, "]")
		if end < 0 {
			return fmt.Errorf("registry host %q: missing ']' after the IPv6 address", hostport)
		}
		host = hostport[1:end]
		if ip := net.ParseIP(host); ip == nil || ip.To4() != nil {
			return fmt.Errorf("registry host %q: %q is not an IPv6 address", hostport, host)
		}
		switch after := hostport[end+1:]; {
		case after == "":
		case strings.HasPrefix(after, ":"):
			port = after[1:]
			if port == "" {
				return fmt.Errorf("registry host %q: empty port", hostport)
			}
		default:
			return fmt.Errorf("registry host %q: unexpected %q after the IPv6 address", hostport, after)
		}
	} else {
		var hasPort bool
		host, port, hasPort = strings.Cut(hostport, ":")
		if hasPort && port == "" {
			return fmt.Errorf("registry host %q: empty port", hostport)
		}
		if host == "" {
			return fmt.Errorf("registry host %q: empty host name", hostport)
		}
		if !hostnameRegexp.MatchString(host) {
			return fmt.Errorf("registry host %q: %q is not a valid host name (letters, digits, '-' and '.')", hostport, host)
		}
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return fmt.Errorf("registry host %q: port %q is not a number from 1 to 65535", hostport, port)
		}
	}
	return nil
}

// checkComponent validates a namespace or name as an OCI path component.
func checkComponent(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty %s", what)
	case strings.ToLower(s) != s:
		return fmt.Errorf("%s %q must be lower case", what, s)
	case !componentRegexp.MatchString(s):
		return fmt.Errorf("%s %q is not a valid OCI path component: use a-z, 0-9 and single '.', '_', '__' or '-' separators between them", what, s)
	}
	return nil
}

// versionTag validates a version given in a reference and returns its tag.
func versionTag(version string) (string, error) {
	if version == "" {
		return "", errors.New("empty version after ':'")
	}
	if err := pkgformat.ValidVersion(version); err != nil {
		return "", err
	}
	return pkgformat.Tag(version), nil
}

// parseDigest validates a digest given after '@'.
func parseDigest(s string) (digest.Digest, error) {
	if s == "" {
		return "", errors.New("empty digest after '@'")
	}
	d := digest.Digest(s)
	if err := d.Validate(); err != nil {
		return "", fmt.Errorf("bad digest %q: %v", s, err)
	}
	return d, nil
}
