package catalog

import "github.com/berth-registry/berth/pkgformat"

// VersionKey is pkgformat.VersionKey.
func VersionKey(version string) string { return pkgformat.VersionKey(version) }

// KubeVersionKey is pkgformat.KubeVersionKey.
func KubeVersionKey(version string) (string, bool) { return pkgformat.KubeVersionKey(version) }
