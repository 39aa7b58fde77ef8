// Package kudoindex holds the repository index as KUDO's client reads it,
// with the field names and tags of github.com/kudobuilder/kudo:
// pkg/kudoctl/util/repo/index.go (IndexFile, PackageVersions,
// PackageVersion), pkg/kudoctl/util/repo/repo.go (Metadata) and
// pkg/apis/kudo/v1beta1/operator_types.go (Maintainer). Tests and benchmarks
// parse berth's /index.yaml into it with sigs.k8s.io/yaml, as KUDO does.
package kudoindex

import "time"

// IndexFile is a repository's index.yaml.
type IndexFile struct {
	APIVersion string                     `json:"apiVersion"`
	Entries    map[string]PackageVersions `json:"entries"`
	Generated  *time.Time                 `json:"generated"`
}

// PackageVersions are the versions of one package, newest first.
type PackageVersions []*PackageVersion

// PackageVersion is one version and where to download it.
type PackageVersion struct {
	*Metadata
	URLs    []string `json:"urls"`
	Removed bool     `json:"removed,omitempty"`
	Digest  string   `json:"digest,omitempty"`
}

// Metadata describes a version.
type Metadata struct {
	Name            string        `json:"name,omitempty"`
	OperatorVersion string        `json:"operatorVersion"`
	AppVersion      string        `json:"appVersion,omitempty"`
	Description     string        `json:"description,omitempty"`
	Maintainers     []*Maintainer `json:"maintainers,omitempty"`
}

// Maintainer is a person responsible for a package.
type Maintainer struct {
	Name  string `json:"name,omitempty"`
	Email string `json:"email,omitempty"`
}
