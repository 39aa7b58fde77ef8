package config

import "time"

// Sources are the settings every tracked source shares (docs/sources.md):
// the key berth signs what it builds with, and the bounds of every fetch.
// The sources themselves are listed per namespace (Namespace.Sources).
type Sources struct {
	// SigningKey is a file holding the PEM private key (an unencrypted
	// PKCS#8 or EC key, or a cosign key whose password is in
	// $BERTH_SOURCES_KEY_PASSWORD) berth signs the versions it builds and
	// their provenance with. Default: <data>/provenance.key, created on
	// first start with its public key beside it (provenance.pub). Several
	// replicas must share one: set it to a mounted Secret.
	SigningKey string `yaml:"signingKey"`
	// AllowHosts are the hosts a source may be fetched from, redirects
	// included (path.Match globs over host names, "*.github.com").
	// Default: any host.
	AllowHosts []string `yaml:"allowHosts"`
	// AllowPrivate lets sources reach loopback, link-local and private
	// addresses, refused by default.
	AllowPrivate bool `yaml:"allowPrivate"`
	// MaxBytes bounds what one fetch downloads and unpacks (default 256MiB).
	MaxBytes ByteSize `yaml:"maxBytes"`
	// MaxFiles bounds the files of one fetched source (default 10000).
	MaxFiles int `yaml:"maxFiles"`
	// Timeout bounds one fetch (default 2m).
	Timeout time.Duration `yaml:"timeout"`
	// Interval is how often a source without an interval of its own is
	// checked (default 5m).
	Interval time.Duration `yaml:"interval"`
}

// Source is one source a namespace follows: each change of what it
// resolves to (a commit, an ETag, a digest; a new tag matching a pattern)
// is built into a version of Package, signed, attested and tagged.
type Source struct {
	// Package is the name of the package, in the namespace, whose
	// versions the source publishes.
	Package string `yaml:"package"`
	// Kind is git, http or image.
	Kind string `yaml:"kind"`
	// URL is the repository (git), the tarball (http) or the image
	// reference (image, host/repository:tag).
	URL string `yaml:"url"`
	// Ref is, for git, a branch, a commit, a tag, or a tag pattern with
	// path.Match wildcards ("v*") of which every matching tag becomes a
	// version. Default: the remote's default branch.
	Ref string `yaml:"ref"`
	// Dir is the directory of the fetched content holding the package
	// (git and http). Default: its root.
	Dir string `yaml:"dir"`
	// Format, when set, refuses content of another format (helm, kudo,
	// olm, plain: pkgformat's format names).
	Format string `yaml:"format"`
	// Interval is how often the source is checked (default sources.interval).
	Interval time.Duration `yaml:"interval"`
	// Credentials authenticate to the source. Default: anonymous.
	Credentials SourceCredentials `yaml:"credentials"`
	// WebhookSecretFile is a file holding the secret GitHub signs its
	// webhook deliveries with (X-Hub-Signature-256), or GitLab sends
	// (X-Gitlab-Token). Default: none, and webhooks do not reach the source.
	WebhookSecretFile string `yaml:"webhookSecretFile"`
}

// SourceCredentials are files (a mounted Kubernetes Secret) holding a
// user name and a password or token; they are read at each fetch and
// never printed.
type SourceCredentials struct {
	UsernameFile string `yaml:"usernameFile"`
	PasswordFile string `yaml:"passwordFile"`
}
