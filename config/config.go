// Package config is berth's configuration: one typed tree, loaded from YAML,
// overridden by BERTH_* environment variables and then by command-line flags,
// and validated before anything starts. The zero configuration is valid.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/berth-registry/berth/internal/forwarded"
	"github.com/berth-registry/berth/permissions"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/storage"
)

// Config is the whole configuration of berth serve.
type Config struct {
	// Addr is the listen address, host:port (default ":5000").
	Addr string `yaml:"addr"`
	// Data is the directory for embedded state (default "./data").
	Data string `yaml:"data"`
	// ShutdownTimeout bounds how long in-flight requests may run after a
	// shutdown signal (default 30s).
	ShutdownTimeout time.Duration `yaml:"shutdownTimeout"`
	// HTTP configures how Addr is served: TLS and client certificates.
	HTTP     HTTP           `yaml:"http"`
	Log      Log            `yaml:"log"`
	Storage  storage.Config `yaml:"storage"`
	Registry Registry       `yaml:"registry"`
	Catalog  Catalog        `yaml:"catalog"`
	// Namespaces hold per-namespace policy; the first entry whose name
	// matches a namespace applies to it.
	Namespaces []Namespace `yaml:"namespaces"`
	// Trust is the trust policy: whose signatures make a package version verified.
	Trust Trust `yaml:"trust"`
	// Sources are the settings the namespaces' package sources share.
	Sources Sources `yaml:"sources"`
	// Auth turns on authentication and access rules; nil leaves berth open.
	Auth *Auth `yaml:"auth"`
	// GC is online garbage collection, off unless its interval is set.
	GC GC `yaml:"gc"`
	// Replicas are the heartbeats by which replicas that share a storage
	// or a catalog find each other (docs/scale-out.md#what-berth-refuses).
	Replicas Replicas `yaml:"replicas"`
	// TrustedProxies are the proxies (CIDRs or addresses) whose
	// X-Forwarded-For, X-Forwarded-Proto, X-Forwarded-Host and Forwarded
	// headers berth believes: the client's address (login rate limiter,
	// audit and access logs) and the external URL (download links, the
	// UI's commands, the token realm) come from them only on a request
	// whose peer is one of these (docs/auth.md). Default: none, and those
	// headers are ignored.
	TrustedProxies []string `yaml:"trustedProxies"`
}

// Trust is the trust policy of the catalog, the registry and berth pull.
type Trust struct {
	// Policies map repositories to trusted keys; the first policy with a
	// glob that matches a repository applies to it.
	Policies []TrustPolicy `yaml:"policies"`
}

// TrustPolicy is the trust of the repositories its globs match.
type TrustPolicy struct {
	// Repositories are globs over namespace/name (path.Match syntax, so "*"
	// stays within one segment: "stable/*").
	Repositories []string `yaml:"repositories"`
	// Images are globs over the repositories of container images a package
	// runs, written in full with their registry host ("quay.io/org/*",
	// "docker.io/library/*"): the installable check and berth mirror check
	// verify an image's signatures with the keys of the first policy whose
	// Images match its source repository. A policy has Repositories,
	// Images or both.
	Images []string `yaml:"images"`
	// Keys are files holding the PEM public keys (cosign.pub) whose
	// signatures are trusted.
	Keys []string `yaml:"keys"`
	// Require refuses a version tag unless its digest has a signature
	// verified by one of Keys, and makes berth pull refuse unverified versions.
	Require bool `yaml:"require"`
	// TLogKeys are files holding the PEM public keys of transparency logs
	// (Rekor). When set, a signature is trusted only with an entry of one
	// of these logs (cosign's bundle), checked offline. Default: none, and
	// signatures need no log entry (the air-gapped case).
	TLogKeys []string `yaml:"tlogKeys"`
	// RequireSource are globs over source URLs (path.Match syntax,
	// "https://github.com/org/*"): when set, a version is verified only
	// when it also has an in-toto SLSA provenance attestation, signed by
	// one of Keys, every source of which matches one of them
	// (docs/sources.md#policy).
	RequireSource []string `yaml:"requireSource"`
}

// HTTP configures the listener at Addr.
type HTTP struct {
	// TLS, when its certificate and key are set, serves HTTPS (TLS 1.2 or
	// later, HTTP/2) instead of plain HTTP.
	TLS TLS `yaml:"tls"`
}

// TLS is the server's certificate and what it asks of clients
// (docs/configuration.md#tls). The files are read again when they change,
// so a certificate renewed in place (cert-manager, a mounted Secret) is
// served without a restart.
type TLS struct {
	// Certificate is a PEM file holding the server's certificate, followed
	// by the intermediates clients need to reach their roots.
	Certificate string `yaml:"certificate"`
	// Key is a PEM file holding the certificate's private key.
	Key string `yaml:"key"`
	// MinVersion is the oldest TLS version accepted: "1.2" (default) or "1.3".
	MinVersion string `yaml:"minVersion"`
	// ClientCA is a PEM file of the certificate authorities whose client
	// certificates berth accepts. Default: none, and no client certificate
	// is asked for.
	ClientCA string `yaml:"clientCA"`
	// ClientAuth is what berth asks of clients when ClientCA is set:
	// "verify-if-given" (default: a certificate, when sent, must verify)
	// or "require" (every connection must present one that verifies).
	ClientAuth string `yaml:"clientAuth"`
}

// Enabled reports whether TLS is configured: whether Certificate is set.
func (t TLS) Enabled() bool { return t.Certificate != "" }

// The values of TLS.MinVersion and TLS.ClientAuth.
const (
	TLS12              = "1.2"
	TLS13              = "1.3"
	ClientAuthIfGiven  = "verify-if-given"
	ClientAuthRequired = "require"
)

// Validate reports the first bad setting of http.tls, naming its key under
// prefix. The files are read at start (tlsreload.New), not here.
func (t TLS) Validate(prefix string) error {
	key := KeyPrefix(prefix)
	switch {
	case !t.Enabled() && t.Key != "":
		return fmt.Errorf("%scertificate: required with %skey", key, key)
	case !t.Enabled() && t.ClientCA != "":
		return fmt.Errorf("%scertificate: required with %sclientCA (client certificates are asked for over TLS only)", key, key)
	case t.Enabled() && t.Key == "":
		return fmt.Errorf("%skey: required with %scertificate", key, key)
	case t.MinVersion != "" && t.MinVersion != TLS12 && t.MinVersion != TLS13:
		return fmt.Errorf("%sminVersion: want %q or %q (got %q)", key, TLS12, TLS13, t.MinVersion)
	case t.ClientAuth != "" && t.ClientAuth != ClientAuthIfGiven && t.ClientAuth != ClientAuthRequired:
		return fmt.Errorf("%sclientAuth: want %s or %s (got %q)", key, ClientAuthIfGiven, ClientAuthRequired, t.ClientAuth)
	case t.ClientAuth != "" && t.ClientCA == "":
		return fmt.Errorf("%sclientCA: required with %sclientAuth (the authorities client certificates must chain to)", key, key)
	}
	return nil
}

// Log configures the server's structured log.
type Log struct {
	// Level is debug, info (default), warn or error.
	Level string `yaml:"level"`
	// Format is text (default) or json.
	Format string `yaml:"format"`
}

// Registry configures the embedded OCI registry.
type Registry struct {
	// HTTPSecretFile holds the secret that signs upload state. Replicas
	// behind one load balancer must share it. Default <data>/http-secret,
	// created on first start.
	HTTPSecretFile string `yaml:"httpSecretFile"`
	// Uploads bound blob uploads (docs/configuration.md#uploads).
	Uploads Uploads `yaml:"uploads"`
}

// Uploads bound what blob uploads may cost the storage before any quota
// counts them: the size of one upload, how many one subject may have open
// at once, and how long an abandoned one stays.
type Uploads struct {
	// MaxSize is the largest blob one upload may store; a request that
	// would go beyond it is refused before its bytes are stored. Default
	// 0: no limit beyond the namespace's quota.
	MaxSize ByteSize `yaml:"maxSize"`
	// MaxConcurrentPerSubject is how many uploads one subject (a user, a
	// robot, or without auth a client address) may have open at once,
	// across replicas (default 32; negative: no limit). An upload that has
	// not been written to for IdleTimeout no longer counts.
	MaxConcurrentPerSubject int `yaml:"maxConcurrentPerSubject"`
	// IdleTimeout is how long an open upload may go without a write and
	// still count as open (default 10m).
	IdleTimeout time.Duration `yaml:"idleTimeout"`
	// PurgeAfter is how long an upload may go without a write before it
	// is abandoned and its bytes deleted (default 24h).
	PurgeAfter time.Duration `yaml:"purgeAfter"`
}

// Catalog configures the search and metadata catalog.
type Catalog struct {
	// Database is where the catalog is kept: a SQLite file (default
	// <data>/catalog.db), or a PostgreSQL URL, postgres://user:password@host[:port]/database?sslmode=...,
	// which several replicas share (docs/scale-out.md). With PostgreSQL the
	// replicas also coordinate through it: one leads the reconciler, the
	// signature passes and the OLM publisher, and version tags are locked
	// across them.
	Database string `yaml:"database"`
	// ReconcileInterval is how often the catalog re-checks every tag of the
	// registry, after doing so at start (default 5m; a negative value: only
	// at start).
	ReconcileInterval time.Duration `yaml:"reconcileInterval"`
	// SignatureInterval is how often a reconciliation also checks the
	// signatures of every version again, to find referrers whose events
	// were lost (default 1h; negative: never; versions never checked, or
	// checked under another trust policy, are checked at every reconciliation).
	SignatureInterval time.Duration `yaml:"signatureInterval"`
	// IndexTimeout bounds the indexing of one package version; one that
	// takes longer is invalid (default 30s).
	IndexTimeout time.Duration `yaml:"indexTimeout"`
	// Registry is the base URL (http(s)://host[:port]) of the registry that
	// `berth serve catalog` indexes. berth serve indexes its own registry and
	// ignores it.
	Registry string `yaml:"registry"`
	// PublicURL is the base URL clients reach the registry at, used in the
	// download links of the repository indexes (KUDO's /index.yaml, and the
	// redirects of Helm's chart links). Default: the host the request came to
	// (berth serve) or Registry (berth serve catalog).
	PublicURL string `yaml:"publicURL"`
}

// Namespace is the policy of the namespaces whose name matches Name.
type Namespace struct {
	// Name is a namespace or a glob over namespaces (path.Match syntax).
	Name string `yaml:"name"`
	// AllowOverwrite lets a package version tag be re-pointed to another digest.
	AllowOverwrite bool `yaml:"allowOverwrite"`
	// KeepLast, when above 0, is a retention policy: each garbage
	// collection first deletes the versions of each package beyond its
	// KeepLast newest, never a version that heads a channel (docs/gc.md).
	KeepLast int `yaml:"keepLast"`
	// UntaggedOlderThan keeps untagged manifests this long before garbage
	// collection deletes them, when longer than gc.grace.
	UntaggedOlderThan time.Duration `yaml:"untaggedOlderThan"`
	// RefuseWideningPermissions refuses to tag a version whose RBAC
	// permissions go beyond those admitted for its package name before,
	// unless an administrator of the package approved exactly those
	// permissions (berth approve; docs/permissions.md).
	RefuseWideningPermissions bool `yaml:"refuseWideningPermissions"`
	// MaxUnapprovedRating is the highest permissions rating (none, low,
	// medium, high, critical) at which the first version of a package is
	// admitted without an approval when RefuseWideningPermissions is on.
	// Default: medium (permissions.DefaultMaxUnapproved).
	MaxUnapprovedRating string `yaml:"maxUnapprovedRating"`
	// Quota is the most storage the namespace may reference: the sizes of
	// the distinct blobs and manifests its repositories hold, each counted
	// once however many of its repositories hold it (docs/configuration.md#quotas).
	// A push beyond it is refused. Default 0: no quota.
	Quota ByteSize `yaml:"quota"`
	// Sources are the package sources the namespace follows
	// (docs/sources.md); only an entry whose name is a namespace, not a
	// glob, may have them.
	Sources []Source `yaml:"sources"`
}

// MaxUnapproved is MaxUnapprovedRating, or its default when unset. It
// returns an error when it names no rating.
func (n Namespace) MaxUnapproved() (permissions.Rating, error) {
	if n.MaxUnapprovedRating == "" {
		return permissions.DefaultMaxUnapproved, nil
	}
	var r permissions.Rating
	err := r.UnmarshalText([]byte(n.MaxUnapprovedRating))
	return r, err
}

// GC configures online garbage collection (docs/gc.md).
type GC struct {
	// Interval is how often the leader collects garbage; 0 (the default)
	// never.
	Interval time.Duration `yaml:"interval"`
	// Grace keeps blobs and untagged manifests younger than this (default
	// 1h): the longest a push may take from its first blob to its manifest.
	Grace time.Duration `yaml:"grace"`
	// DryRun logs and counts what collections would delete, and deletes
	// nothing.
	DryRun bool `yaml:"dryRun"`
}

// Replicas configures the heartbeats of berth serve: each replica renews a
// record of itself in the storage and, on PostgreSQL, in the database, and
// refuses to start beside a live replica that disagrees on what they share.
type Replicas struct {
	// HeartbeatInterval is how often a replica renews its records (default
	// 10s); a record not renewed for three intervals has expired, so a
	// replacement for a replica that died waits at most that long.
	HeartbeatInterval time.Duration `yaml:"heartbeatInterval"`
}

// EnvPrefix starts the name of every environment variable berth reads.
const EnvPrefix = "BERTH_"

// Default returns the configuration berth runs with when nothing is set.
func Default() *Config {
	c := &Config{}
	c.SetDefaults()
	return c
}

// SetDefaults fills every unset setting with its default.
func (c *Config) SetDefaults() {
	if c.Addr == "" {
		c.Addr = ":5000"
	}
	if c.Data == "" {
		c.Data = "./data"
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
	if c.HTTP.TLS.MinVersion == "" {
		c.HTTP.TLS.MinVersion = TLS12
	}
	if c.HTTP.TLS.ClientCA != "" && c.HTTP.TLS.ClientAuth == "" {
		c.HTTP.TLS.ClientAuth = ClientAuthIfGiven
	}
	c.Storage.SetDefaults(c.Data)
	if c.Registry.HTTPSecretFile == "" {
		c.Registry.HTTPSecretFile = path.Join(c.Data, "http-secret")
	}
	if c.Registry.Uploads.MaxConcurrentPerSubject == 0 {
		c.Registry.Uploads.MaxConcurrentPerSubject = 32
	}
	if c.Registry.Uploads.IdleTimeout == 0 {
		c.Registry.Uploads.IdleTimeout = 10 * time.Minute
	}
	if c.Registry.Uploads.PurgeAfter == 0 {
		c.Registry.Uploads.PurgeAfter = 24 * time.Hour
	}
	if c.Sources.Interval == 0 {
		c.Sources.Interval = DefaultSourcesInterval
	}
	if c.Catalog.Database == "" {
		c.Catalog.Database = path.Join(c.Data, "catalog.db")
	}
	if c.Catalog.ReconcileInterval == 0 {
		c.Catalog.ReconcileInterval = 5 * time.Minute
	}
	if c.Catalog.SignatureInterval == 0 {
		c.Catalog.SignatureInterval = time.Hour
	}
	if c.Catalog.IndexTimeout == 0 {
		c.Catalog.IndexTimeout = 30 * time.Second
	}
	if c.GC.Grace == 0 {
		c.GC.Grace = time.Hour
	}
	if c.Replicas.HeartbeatInterval == 0 {
		c.Replicas.HeartbeatInterval = 10 * time.Second
	}
	if c.Auth != nil {
		c.Auth.setDefaults(c.Data)
	}
}

// Load reads the YAML file at file (none when empty), then applies the
// BERTH_* variables of environ (as os.Environ returns them). It does not fill
// defaults or validate: callers apply flags, then SetDefaults and Validate.
// Errors name the file, line and key that is wrong.
func Load(file string, environ []string) (*Config, error) {
	c := &Config{}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		if err := decodeYAML(b, c); err != nil {
			return nil, fmt.Errorf("config %s: %w", file, err)
		}
	}
	if err := applyEnv(c, environ); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// decodeYAML decodes b into c, refusing keys that c does not have.
func decodeYAML(b []byte, c *Config) error {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return err
	}
	if len(root.Content) == 0 {
		return nil
	}
	if err := checkKeys(root.Content[0], c, ""); err != nil {
		return err
	}
	return root.Decode(c)
}

// Validate reports the first bad setting, naming its key.
func (c *Config) Validate() error {
	if _, port, err := net.SplitHostPort(c.Addr); err != nil || port == "" {
		return fmt.Errorf("addr: want host:port or :port (got %q)", c.Addr)
	}
	if c.Data == "" {
		return errors.New("data: required")
	}
	if c.ShutdownTimeout < 0 {
		return fmt.Errorf("shutdownTimeout: must not be negative (got %s)", c.ShutdownTimeout)
	}
	if _, err := ParseLevel(c.Log.Level); err != nil {
		return fmt.Errorf("log.level: %w", err)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		return fmt.Errorf("log.format: want text or json (got %q)", c.Log.Format)
	}
	if err := c.HTTP.TLS.Validate("http.tls"); err != nil {
		return err
	}
	if err := c.Storage.Validate("storage"); err != nil {
		return err
	}
	if u := c.Registry.Uploads; u.IdleTimeout < 0 {
		return fmt.Errorf("registry.uploads.idleTimeout: must not be negative (got %s)", u.IdleTimeout)
	} else if u.PurgeAfter < time.Minute {
		return fmt.Errorf("registry.uploads.purgeAfter: must be at least 1m, or uploads in progress would be deleted (got %s)", u.PurgeAfter)
	} else if u.PurgeAfter < u.IdleTimeout {
		return fmt.Errorf("registry.uploads.purgeAfter: must be at least registry.uploads.idleTimeout, %s (got %s)", u.IdleTimeout, u.PurgeAfter)
	}
	if c.Catalog.IndexTimeout <= 0 {
		return fmt.Errorf("catalog.indexTimeout: must be positive (got %s)", c.Catalog.IndexTimeout)
	}
	if err := checkDatabase(c.Catalog.Database); err != nil {
		return fmt.Errorf("catalog.database: %w", err)
	}
	if err := checkBaseURL(c.Catalog.Registry); err != nil {
		return fmt.Errorf("catalog.registry: %w", err)
	}
	if err := checkBaseURL(c.Catalog.PublicURL); err != nil {
		return fmt.Errorf("catalog.publicURL: %w", err)
	}
	for i, ns := range c.Namespaces {
		key := fmt.Sprintf("namespaces[%d].name", i)
		if ns.Name == "" {
			return fmt.Errorf("%s: required", key)
		}
		if _, err := path.Match(ns.Name, ""); err != nil {
			return fmt.Errorf("%s: bad glob %q: %w", key, ns.Name, err)
		}
		if strings.Contains(ns.Name, "/") {
			return fmt.Errorf("%s: a namespace has no '/' (got %q)", key, ns.Name)
		}
		if ns.KeepLast < 0 {
			return fmt.Errorf("namespaces[%d].keepLast: must not be negative (got %d)", i, ns.KeepLast)
		}
		if ns.UntaggedOlderThan < 0 {
			return fmt.Errorf("namespaces[%d].untaggedOlderThan: must not be negative (got %s)", i, ns.UntaggedOlderThan)
		}
		if _, err := ns.MaxUnapproved(); err != nil {
			return fmt.Errorf("namespaces[%d].maxUnapprovedRating: %w", i, err)
		}
	}
	if c.GC.Interval < 0 {
		return fmt.Errorf("gc.interval: must not be negative (got %s)", c.GC.Interval)
	}
	if c.Replicas.HeartbeatInterval < 100*time.Millisecond {
		return fmt.Errorf("replicas.heartbeatInterval: must be at least 100ms (got %s)", c.Replicas.HeartbeatInterval)
	}
	if c.GC.Grace < time.Minute {
		return fmt.Errorf("gc.grace: must be at least 1m, or a push in progress could lose its blobs (got %s)", c.GC.Grace)
	}
	for i, p := range c.TrustedProxies {
		if _, err := forwarded.ParseProxies([]string{p}); err != nil {
			return fmt.Errorf("trustedProxies[%d]: %w", i, err)
		}
	}
	if c.Auth != nil {
		if err := c.Auth.Validate("auth"); err != nil {
			return err
		}
	}
	if err := c.validateSources(); err != nil {
		return err
	}
	return c.Trust.Validate("trust")
}

// Validate reports the first bad policy, naming its key under prefix ("" for
// a document whose top level is policies).
func (t *Trust) Validate(prefix string) error {
	for i, p := range t.Policies {
		key := fmt.Sprintf("%spolicies[%d]", KeyPrefix(prefix), i)
		if len(p.Repositories)+len(p.Images) == 0 {
			return fmt.Errorf("%s.repositories: required (globs over namespace/name; or images: globs over image repositories)", key)
		}
		for j, glob := range p.Repositories {
			if _, err := path.Match(glob, ""); err != nil {
				return fmt.Errorf("%s.repositories[%d]: bad glob %q: %w", key, j, glob, err)
			}
			if strings.Count(glob, "/") != 1 {
				return fmt.Errorf("%s.repositories[%d]: want a glob over namespace/name, like \"stable/*\" (got %q)", key, j, glob)
			}
		}
		for j, glob := range p.Images {
			if err := CheckImageGlob(glob); err != nil {
				return fmt.Errorf("%s.images[%d]: %w", key, j, err)
			}
		}
		if len(p.Keys) == 0 {
			return fmt.Errorf("%s.keys: at least one public key file is required", key)
		}
		for j, k := range p.Keys {
			if k == "" {
				return fmt.Errorf("%s.keys[%d]: empty file name", key, j)
			}
		}
		for j, k := range p.TLogKeys {
			if k == "" {
				return fmt.Errorf("%s.tlogKeys[%d]: empty file name", key, j)
			}
		}
		for j, glob := range p.RequireSource {
			if err := CheckSourceGlob(glob); err != nil {
				return fmt.Errorf("%s.requireSource[%d]: %w", key, j, err)
			}
		}
	}
	return nil
}

// CheckSourceGlob checks a glob over source URLs: path.Match syntax, an
// absolute URL with a scheme and a host, as "https://github.com/org/*",
// without SLSA's "git+" scheme prefix, which provenance sources are
// matched without.
func CheckSourceGlob(glob string) error {
	if _, err := path.Match(glob, ""); err != nil {
		return fmt.Errorf("bad glob %q: %w", glob, err)
	}
	const want = "want a glob over source URLs with their scheme and host, like \"https://github.com/org/*\""
	scheme, rest, ok := strings.Cut(glob, "://")
	if !ok || !validScheme(scheme) {
		return fmt.Errorf("%s (got %q)", want, glob)
	}
	if strings.HasPrefix(scheme, "git+") {
		return fmt.Errorf("%s: sources are matched without the \"git+\" prefix (got %q)", want, glob)
	}
	if host, _, _ := strings.Cut(rest, "/"); host == "" {
		return fmt.Errorf("%s: no host (got %q)", want, glob)
	}
	return nil
}

// validScheme reports whether s is a URL scheme (RFC 3986: a letter, then
// letters, digits, "+", "-" or ".").
func validScheme(s string) bool {
	for i, r := range s {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
		case i > 0 && ('0' <= r && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// CheckImageGlob checks a glob over image repositories: path.Match syntax,
// starting with a registry host (with a dot or a port, or localhost) and a
// path under it, as "quay.io/org/*".
func CheckImageGlob(glob string) error {
	if _, err := path.Match(glob, ""); err != nil {
		return fmt.Errorf("bad glob %q: %w", glob, err)
	}
	host, rest, ok := strings.Cut(glob, "/")
	if !ok || rest == "" || !pkgformat.LooksLikeRegistryHost(host) || strings.ContainsAny(host, "*?[") {
		return fmt.Errorf("want a glob over image repositories starting with their registry host, like \"quay.io/org/*\" or \"docker.io/library/*\" (got %q)", glob)
	}
	return nil
}

// KeyPrefix is prefix followed by a dot, or "" when prefix is "": what goes
// before a key's dotted path under prefix.
func KeyPrefix(prefix string) string {
	if prefix == "" {
		return ""
	}
	return prefix + "."
}

// Postgres reports whether the catalog is kept in PostgreSQL: whether
// Database is a postgres:// or postgresql:// URL.
func (c *Catalog) Postgres() bool {
	return strings.HasPrefix(c.Database, "postgres://") || strings.HasPrefix(c.Database, "postgresql://")
}

// checkDatabase accepts a file name, and a PostgreSQL URL that names a host
// and a database. Errors never quote the URL, which may hold a password.
func checkDatabase(db string) error {
	if db == "" {
		return errors.New("required")
	}
	c := Catalog{Database: db}
	if !c.Postgres() {
		if strings.Contains(db, "://") {
			return errors.New("want a SQLite file name or a postgres:// URL")
		}
		return nil
	}
	u, err := url.Parse(db)
	switch {
	case err != nil:
		return errors.New("the PostgreSQL URL cannot be parsed; want postgres://user:password@host[:port]/database?sslmode=...")
	case u.Hostname() == "":
		return errors.New("the PostgreSQL URL names no host")
	case strings.Trim(u.Path, "/") == "":
		return errors.New("the PostgreSQL URL names no database")
	}
	if q := u.Query(); q.Get("sslmode") != "" && !slices.Contains(sslModes, q.Get("sslmode")) {
		return fmt.Errorf("the PostgreSQL URL's sslmode %q is none of %s", q.Get("sslmode"), strings.Join(sslModes, ", "))
	}
	return nil
}

// sslModes are the values of a PostgreSQL URL's sslmode that libpq and pgx
// take.
var sslModes = []string{"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}

// DatabaseForLog is Database as a log may show it: a PostgreSQL URL with its
// password, in the user part or the password parameter, masked.
func (c *Catalog) DatabaseForLog() string {
	if !c.Postgres() {
		return c.Database
	}
	u, err := url.Parse(c.Database)
	if err != nil {
		return "(a PostgreSQL URL that cannot be parsed)"
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// checkBaseURL accepts "" and http(s)://host[:port] with no path.
func checkBaseURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" {
		return fmt.Errorf("want http(s)://host[:port] (got %q)", s)
	}
	return nil
}

// AllowOverwrite reports whether version tags in namespace may be re-pointed.
func (c *Config) AllowOverwrite(namespace string) bool {
	return c.NamespacePolicy(namespace).AllowOverwrite
}

// IsGlob reports whether s has a character that path.Match reads as a
// pattern (*, ?, [ or \): whether a namespaces[].name, say, matches many
// namespaces rather than naming one.
func IsGlob(s string) bool { return strings.ContainsAny(s, `*?[\`) }

// NamespacePolicy is the first entry of namespaces whose name matches
// namespace, or the zero policy when none does.
func (c *Config) NamespacePolicy(namespace string) Namespace {
	for _, ns := range c.Namespaces {
		if ok, _ := path.Match(ns.Name, namespace); ok {
			return ns
		}
	}
	return Namespace{Name: namespace}
}
