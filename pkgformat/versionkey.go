package pkgformat

import (
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// VersionKey returns a string whose byte order is the version order of
// package versions: semantic-version precedence (a release after its
// pre-releases, numeric pre-release identifiers numerically), ties broken by
// build metadata read as a version, then by the version string; versions
// that are not semver sort before all that are.
// Tags write semver's '+' as '_', which VersionKey reads back. Stores sort by
// it; "latest" is the greatest key.
func VersionKey(version string) string {
	v, err := semver.NewVersion(strings.ReplaceAll(version, "_", "+"))
	if err != nil {
		return "0" + version
	}
	var b strings.Builder
	fmt.Fprintf(&b, "1%010d.%010d.%010d", v.Major(), v.Minor(), v.Patch())
	if pre := v.Prerelease(); pre != "" {
		b.WriteByte('-')
		for i, id := range strings.Split(pre, ".") {
			if i > 0 {
				b.WriteByte('!') // below every identifier character
			}
			if isNumeric(id) {
				fmt.Fprintf(&b, "0%020s", id)
			} else {
				b.WriteString("1" + id)
			}
		}
	} else {
		b.WriteByte('~') // a release sorts after its pre-releases
	}
	b.WriteByte(' ') // ends the precedence part: shorter pre-releases sort first
	// Build metadata does not count in semver precedence; among versions of
	// equal precedence it orders by version when it is one (KUDO's
	// <appVersion>_<operatorVersion>: 5.3.2_0.9.0 before 5.3.2_0.10.0).
	if build := v.Metadata(); build != "" {
		b.WriteString(VersionKey(build))
	}
	b.WriteByte(' ') // no build metadata sorts first
	b.WriteString(version)
	return b.String()
}

// KubeVersionKey normalises a Kubernetes version ("1.20", "v1.20.3",
// "1.21.0-gke.1") to a string that compares in version order; ok is false
// when it is not a version.
func KubeVersionKey(version string) (key string, ok bool) {
	v, err := semver.NewVersion(strings.TrimSpace(version))
	if err != nil {
		return "", false
	}
	return fmt.Sprintf("%010d.%010d.%010d", v.Major(), v.Minor(), v.Patch()), true
}

func isNumeric(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
