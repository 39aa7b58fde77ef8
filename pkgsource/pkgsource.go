// Package pkgsource fetches package content from where publishers keep it:
// a git repository at a ref, a tarball behind an http(s) URL, or an image
// in another registry (an OLM registry+v1 bundle, a Helm chart in OCI, a
// berth package). A source is as hostile as a pusher: every fetch is
// bounded in bytes, files, time and the hosts it may reach (Limits), and
// what it writes stays inside the directory it was given.
package pkgsource

import (
	"strings"
	"time"
)

// Kind is where a source's content comes from.
type Kind string

// The kinds of sources.
const (
	// Git is a git repository over https (or http when allowed), at a ref.
	Git Kind = "git"
	// HTTP is a gzipped tarball (.tgz, .tar.gz) behind an http(s) URL.
	HTTP Kind = "http"
	// Image is an image or artifact in an OCI registry.
	Image Kind = "image"
)

// Spec is one source: what to fetch, and where its files go in the package.
type Spec struct {
	Kind Kind `json:"kind" yaml:"kind"`
	// URL is the repository (git), the tarball (http) or the reference
	// (image, host/repository[:tag|@digest]).
	URL string `json:"url" yaml:"url"`
	// Ref is, for git, a branch, a tag or a commit; empty means the
	// remote's default branch.
	Ref string `json:"ref,omitempty" yaml:"ref,omitempty"`
	// Dir is the directory of the fetched content that holds the package
	// (git and http); empty means its root.
	Dir string `json:"dir,omitempty" yaml:"dir,omitempty"`
	// Destination is where in the composed package this source's files
	// go; empty means its root.
	Destination string `json:"destination,omitempty" yaml:"destination,omitempty"`
	// Credentials authenticate to the source; the zero value is anonymous.
	Credentials Credentials `json:"-" yaml:"-"`
}

// Credentials are a user name and a password or token. They are never
// printed.
type Credentials struct {
	Username string
	Password string
}

// Resolved is what a source named when it was fetched or checked.
type Resolved struct {
	Kind Kind   `json:"kind"`
	URL  string `json:"url"`
	// Ref is the ref as the source resolved it (refs/tags/v1.2.0,
	// refs/heads/main), for git.
	Ref string `json:"ref,omitempty"`
	// Revision identifies the content: the commit (git), the ETag, or
	// else the Last-Modified date (http), the manifest digest (image).
	Revision string `json:"revision"`
	// Dir is Spec.Dir.
	Dir string `json:"dir,omitempty"`
}

// Limits bound a fetch. The zero value of a field means its default.
type Limits struct {
	// MaxBytes bounds the bytes fetched and the bytes unpacked (default
	// 256 MiB).
	MaxBytes int64
	// MaxFiles bounds the files of the fetched content (default 10,000).
	MaxFiles int
	// Timeout bounds the whole fetch (default 2m).
	Timeout time.Duration
	// StallTimeout refuses a server that sends nothing for this long
	// (default 30s).
	StallTimeout time.Duration
	// AllowHosts are the hosts a fetch may reach, redirects included
	// (path.Match globs over host names, "*.github.com"); empty means any.
	AllowHosts []string
	// AllowPrivate lets a fetch reach loopback, link-local and private
	// addresses, which are refused by default.
	AllowPrivate bool
}

// ShortRevision shortens a Revision for display: a commit, an ETag or a
// Last-Modified date to 12 characters, a digest to its algorithm and 12
// hex digits.
func ShortRevision(rev string) string {
	const n = 12
	prefix := ""
	if algo, hex, ok := strings.Cut(rev, ":"); ok && !strings.ContainsAny(algo, `"/`) {
		prefix, rev = algo+":", hex
	}
	if len(rev) > n {
		rev = rev[:n]
	}
	return prefix + rev
}
