// Package helmindex holds a chart repository's index as Helm's client reads
// it, with the field names and tags of helm.sh/helm/v3: pkg/repo/index.go
// (IndexFile, ChartVersions, ChartVersion), pkg/chart/metadata.go (Metadata,
// Maintainer) and pkg/chart/dependency.go (Dependency). Helm decodes an index
// with sigs.k8s.io/yaml's UnmarshalStrict, which refuses any field these
// types do not have; tests parse berth's /api/helm indexes the same way.
package helmindex

import "time"

// IndexFile is a chart repository's index.yaml.
type IndexFile struct {
	ServerInfo  map[string]any           `json:"serverInfo,omitempty"`
	APIVersion  string                   `json:"apiVersion"`
	Generated   time.Time                `json:"generated"`
	Entries     map[string]ChartVersions `json:"entries"`
	PublicKeys  []string                 `json:"publicKeys,omitempty"`
	Annotations map[string]string        `json:"annotations,omitempty"`
}

// ChartVersions are the versions of one chart.
type ChartVersions []*ChartVersion

// ChartVersion is one version of a chart and where to download it.
type ChartVersion struct {
	*Metadata
	URLs    []string  `json:"urls"`
	Created time.Time `json:"created,omitempty"`
	Removed bool      `json:"removed,omitempty"`
	Digest  string    `json:"digest,omitempty"`

	// Fields of Helm 2 that Helm 3 still accepts and ignores.
	ChecksumDeprecated      string `json:"checksum,omitempty"`
	EngineDeprecated        string `json:"engine,omitempty"`
	TillerVersionDeprecated string `json:"tillerVersion,omitempty"`
	URLDeprecated           string `json:"url,omitempty"`
}

// Metadata is a chart's Chart.yaml.
type Metadata struct {
	Name         string            `json:"name,omitempty"`
	Home         string            `json:"home,omitempty"`
	Sources      []string          `json:"sources,omitempty"`
	Version      string            `json:"version,omitempty"`
	Description  string            `json:"description,omitempty"`
	Keywords     []string          `json:"keywords,omitempty"`
	Maintainers  []*Maintainer     `json:"maintainers,omitempty"`
	Icon         string            `json:"icon,omitempty"`
	APIVersion   string            `json:"apiVersion,omitempty"`
	Condition    string            `json:"condition,omitempty"`
	Tags         string            `json:"tags,omitempty"`
	AppVersion   string            `json:"appVersion,omitempty"`
	Deprecated   bool              `json:"deprecated,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	KubeVersion  string            `json:"kubeVersion,omitempty"`
	Dependencies []*Dependency     `json:"dependencies,omitempty"`
	Type         string            `json:"type,omitempty"`
}

// Maintainer is a person responsible for a chart.
type Maintainer struct {
	Name  string `json:"name,omitempty"`
	Email string `json:"email,omitempty"`
	URL   string `json:"url,omitempty"`
}

// Dependency is a chart a chart depends on.
type Dependency struct {
	Name         string   `json:"name"`
	Version      string   `json:"version,omitempty"`
	Repository   string   `json:"repository"`
	Condition    string   `json:"condition,omitempty"`
	Tags         []string `json:"tags,omitempty"`
	Enabled      bool     `json:"enabled,omitempty"`
	ImportValues []any    `json:"import-values,omitempty"`
	Alias        string   `json:"alias,omitempty"`
}
