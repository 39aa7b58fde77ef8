package config

import (
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/pkgsource"
)

// Sources are the settings every tracked source shares (docs/sources.md):
// the key berth signs what it builds with, and the bounds of every fetch.
// The sources themselves are listed per namespace (Namespace.Sources).
type Sources struct {
	// SigningKey is a file holding the cosign private key (as cosign
	// generate-key-pair writes it, encrypted with the password in
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

// DefaultSourcesInterval is how often a source is checked when neither it
// nor sources.interval says.
const DefaultSourcesInterval = 5 * time.Minute

// MinSourceInterval is the shortest interval a source may be checked at.
const MinSourceInterval = 10 * time.Second

// SourceKey identifies a tracked source: the namespace and package it
// publishes. A package has at most one source entry.
type SourceKey struct {
	Namespace, Package string
}

// TrackedSource is a source entry with the namespace it is listed under.
type TrackedSource struct {
	Namespace string
	Source
}

// TrackedSources are the sources of every namespace, in the order of the
// configuration.
func (c *Config) TrackedSources() []TrackedSource {
	var out []TrackedSource
	for _, ns := range c.Namespaces {
		for _, s := range ns.Sources {
			out = append(out, TrackedSource{Namespace: ns.Name, Source: s})
		}
	}
	return out
}

// Spec is the pkgsource.Spec of s, without its credentials, which are read
// from their files at each fetch.
func (s Source) Spec() pkgsource.Spec {
	return pkgsource.Spec{Kind: pkgsource.Kind(s.Kind), URL: s.URL, Ref: s.Ref, Dir: s.Dir}
}

// Limits are the bounds of every fetch of a source.
func (s Sources) Limits() pkgsource.Limits {
	return pkgsource.Limits{MaxBytes: int64(s.MaxBytes), MaxFiles: s.MaxFiles, Timeout: s.Timeout, AllowHosts: s.AllowHosts, AllowPrivate: s.AllowPrivate}
}

// IntervalOf is how often s is checked: its interval, else sources.interval.
func (s Sources) IntervalOf(src Source) time.Duration {
	if src.Interval > 0 {
		return src.Interval
	}
	if s.Interval > 0 {
		return s.Interval
	}
	return DefaultSourcesInterval
}

// validateSources checks the sources section and every namespace's
// sources, naming the key of the first bad setting.
func (c *Config) validateSources() error {
	s := c.Sources
	if s.MaxFiles < 0 {
		return fmt.Errorf("sources.maxFiles: must not be negative (got %d)", s.MaxFiles)
	}
	if s.Timeout < 0 {
		return fmt.Errorf("sources.timeout: must not be negative (got %s)", s.Timeout)
	}
	if s.Interval != 0 && s.Interval < MinSourceInterval {
		return fmt.Errorf("sources.interval: must be at least %s (got %s)", MinSourceInterval, s.Interval)
	}
	for i, h := range s.AllowHosts {
		if _, err := path.Match(h, ""); err != nil || h == "" {
			return fmt.Errorf("sources.allowHosts[%d]: want a host name or a glob such as *.github.com (got %q)", i, h)
		}
	}
	seen := map[SourceKey]string{}
	tracked := false
	for i, ns := range c.Namespaces {
		for j, src := range ns.Sources {
			key := fmt.Sprintf("namespaces[%d].sources[%d]", i, j)
			if IsGlob(ns.Name) {
				return fmt.Errorf("%s: sources belong to one namespace: namespaces[%d].name %q is a glob; list them under a namespace of their own", key, i, ns.Name)
			}
			if err := src.validate(); err != nil {
				return fmt.Errorf("%s.%w", key, err)
			}
			k := SourceKey{ns.Name, src.Package}
			if prev, ok := seen[k]; ok {
				return fmt.Errorf("%s.package: %s/%s already has a source (%s): a package has one source entry", key, ns.Name, src.Package, prev)
			}
			seen[k] = key
			tracked = true
		}
	}
	if tracked && c.Catalog.Postgres() && s.SigningKey == "" {
		return errors.New("sources.signingKey: required when replicas share the catalog's PostgreSQL and namespaces have sources: set it to a key file every replica mounts (a Secret), so that they sign with one key")
	}
	return nil
}

// validate checks one source entry; errors start with the key.
func (s Source) validate() error {
	if err := pkgformat.ValidName(s.Package); err != nil {
		return fmt.Errorf("package: %w", err)
	}
	if err := pkgformat.NotReserved(s.Package); err != nil {
		return fmt.Errorf("package: %w", err)
	}
	if err := pkgsource.CheckSpec(s.Spec()); err != nil {
		return err
	}
	switch pkgformat.Format(s.Format) {
	case "", pkgformat.Helm, pkgformat.KUDO, pkgformat.OLM, pkgformat.Plain:
	default:
		return fmt.Errorf("format: %q is not a package format: want helm, kudo, olm or plain", s.Format)
	}
	if s.Interval != 0 && s.Interval < MinSourceInterval {
		return fmt.Errorf("interval: must be at least %s (got %s)", MinSourceInterval, s.Interval)
	}
	c := s.Credentials
	if (c.UsernameFile == "") != (c.PasswordFile == "") {
		return errors.New("credentials: want both usernameFile and passwordFile (a token's user name can be any, such as x-access-token)")
	}
	return nil
}
