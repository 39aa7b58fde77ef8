package config

import (
	"fmt"
	"path"
	"strings"
	"time"
)

// Auth turns on authentication and authorization. Without an auth section
// berth is open: anyone who reaches it may pull, push and delete anything.
// With one, everything its rules do not allow is denied.
type Auth struct {
	// Service is the service name of the token spec: clients ask
	// /auth/token for service=<Service> (default "berth").
	Service string `yaml:"service"`
	// TokenTTL is how long a token from /auth/token lives (default 5m).
	TokenTTL time.Duration `yaml:"tokenTTL"`
	// KeyFile holds the PEM private key that signs tokens (default
	// <data>/auth/token-key.pem, created on first start with mode 0600).
	KeyFile string `yaml:"keyFile"`
	// Htpasswd is an htpasswd file of users with bcrypt passwords.
	Htpasswd string `yaml:"htpasswd"`
	// Groups map a group name to the users (htpasswd names) in it.
	Groups map[string][]string `yaml:"groups"`
	// Public are namespaces, or globs over namespaces, that anonymous
	// callers may pull (a shorthand for a rule for anonymous).
	Public []string `yaml:"public"`
	// Rules are the access rules. An explicit deny beats any allow;
	// otherwise the union of the allows applies.
	Rules []AuthRule `yaml:"rules"`
	// Robots configures robot accounts.
	Robots Robots `yaml:"robots"`
	// OIDC are the issuers whose JWTs berth trusts.
	OIDC []OIDCIssuer `yaml:"oidc"`
	// Metrics is who may read /metrics: "admin" (default) or "open".
	Metrics string `yaml:"metrics"`
	// Audit is where audit events go: a file (default <data>/audit.log),
	// "stderr" or "stdout".
	Audit string `yaml:"audit"`
	// AuditMaxSize is the size an audit file reaches before it is rotated
	// to FILE.1 (default 100MiB, at least 1MiB); not used for stderr and
	// stdout.
	AuditMaxSize ByteSize `yaml:"auditMaxSize"`
	// AuditMaxFiles is how many rotated files, FILE.1 (the newest) to
	// FILE.N, are kept beside FILE (default 5, also for 0); older ones are
	// deleted.
	// The audit log so takes at most AuditMaxSize * (AuditMaxFiles + 1).
	AuditMaxFiles int `yaml:"auditMaxFiles"`
	// Login bounds failed logins.
	Login Login `yaml:"login"`
}

// AuthRule allows (or denies) subjects actions on repositories.
type AuthRule struct {
	// Subjects are user:NAME, group:NAME, robot:NAMESPACE+NAME,
	// oidc:NAME, anonymous (every caller) or authenticated (every caller
	// who logged in).
	Subjects []string `yaml:"subjects"`
	// Repositories are globs over namespace/name (path.Match syntax, so
	// "team-a/*"; "*/*" is every repository).
	Repositories []string `yaml:"repositories"`
	// Actions are pull, push, delete, sign and admin.
	Actions []string `yaml:"actions"`
	// Effect is allow (default) or deny.
	Effect string `yaml:"effect"`
}

// Robots configures robot accounts.
type Robots struct {
	// MaxExpiry is the longest lifetime a robot may be given (default 90 days).
	MaxExpiry time.Duration `yaml:"maxExpiry"`
	// Database is the SQLite file robots are kept in (default <data>/auth.db)
	// while the catalog is in SQLite; with the catalog in PostgreSQL they
	// live there, and the robots of this file are imported at start.
	Database string `yaml:"database"`
}

// OIDCIssuer is an issuer of JWTs berth trusts (a CI system, a Kubernetes
// cluster's service account issuer).
type OIDCIssuer struct {
	// Issuer is the iss claim the issuer's tokens carry.
	Issuer string `yaml:"issuer"`
	// JWKSFile is a file holding the issuer's JSON Web Key Set.
	JWKSFile string `yaml:"jwksFile"`
	// JWKSURL is where the issuer's key set is fetched from; exactly one of
	// JWKSFile and JWKSURL is set.
	JWKSURL string `yaml:"jwksURL"`
	// Audience is the aud the tokens must carry.
	Audience string `yaml:"audience"`
	// Subjects map tokens to subjects: the first whose claims all match
	// names the subject. A token no entry matches is refused.
	Subjects []OIDCSubject `yaml:"subjects"`
}

// OIDCSubject maps the tokens whose claims match to a subject.
type OIDCSubject struct {
	// Claims are required claim values, as globs (path.Match syntax) over
	// the claim's string value: {sub: "system:serviceaccount:ci:*"}.
	Claims map[string]string `yaml:"claims"`
	// Name is the subject's name: rules name it oidc:NAME.
	Name string `yaml:"name"`
	// Groups the subject is in.
	Groups []string `yaml:"groups"`
}

// Login bounds failed logins per client address and user name.
type Login struct {
	// MaxFailures is how many failed logins a client address may make for
	// one user name within Window before it gets 429 (default 5).
	MaxFailures int `yaml:"maxFailures"`
	// Window is the period failures are counted over (default 1m).
	Window time.Duration `yaml:"window"`
}

// MinAuditSize is the smallest auth.auditMaxSize: room for many events, each
// of which a rotation keeps whole.
const MinAuditSize ByteSize = 1 << 20

// AuthActions are the actions rules grant.
var AuthActions = []string{"pull", "push", "delete", "sign", "admin"}

// setDefaults fills the unset settings of a, whose state lives under data.
func (a *Auth) setDefaults(data string) {
	if a.Service == "" {
		a.Service = "berth"
	}
	if a.TokenTTL == 0 {
		a.TokenTTL = 5 * time.Minute
	}
	if a.KeyFile == "" {
		a.KeyFile = path.Join(data, "auth", "token-key.pem")
	}
	if a.Robots.MaxExpiry == 0 {
		a.Robots.MaxExpiry = 90 * 24 * time.Hour
	}
	if a.Robots.Database == "" {
		a.Robots.Database = path.Join(data, "auth.db")
	}
	if a.Metrics == "" {
		a.Metrics = "admin"
	}
	if a.Audit == "" {
		a.Audit = path.Join(data, "audit.log")
	}
	if a.AuditMaxSize == 0 {
		a.AuditMaxSize = 100 << 20
	}
	if a.AuditMaxFiles == 0 {
		a.AuditMaxFiles = 5
	}
	if a.Login.MaxFailures == 0 {
		a.Login.MaxFailures = 5
	}
	if a.Login.Window == 0 {
		a.Login.Window = time.Minute
	}
}

// Validate reports the first bad auth setting, naming its key under prefix.
func (a *Auth) Validate(prefix string) error {
	p := KeyPrefix(prefix)
	if a.TokenTTL <= 0 {
		return fmt.Errorf("%stokenTTL: must be positive (got %s)", p, a.TokenTTL)
	}
	if a.Robots.MaxExpiry <= 0 {
		return fmt.Errorf("%srobots.maxExpiry: must be positive (got %s)", p, a.Robots.MaxExpiry)
	}
	if a.Metrics != "admin" && a.Metrics != "open" {
		return fmt.Errorf("%smetrics: want admin or open (got %q)", p, a.Metrics)
	}
	if a.AuditMaxSize != 0 && a.AuditMaxSize < MinAuditSize {
		return fmt.Errorf("%sauditMaxSize: want at least 1MiB (got %d bytes)", p, a.AuditMaxSize)
	}
	if a.AuditMaxFiles < 0 {
		return fmt.Errorf("%sauditMaxFiles: must not be negative (got %d)", p, a.AuditMaxFiles)
	}
	if a.Login.MaxFailures < 0 || a.Login.Window < 0 {
		return fmt.Errorf("%slogin: maxFailures and window must not be negative", p)
	}
	for g, users := range a.Groups {
		if g == "" || strings.ContainsAny(g, ": ") {
			return fmt.Errorf("%sgroups: bad group name %q", p, g)
		}
		for i, u := range users {
			if u == "" {
				return fmt.Errorf("%sgroups.%s[%d]: empty user name", p, g, i)
			}
		}
	}
	for i, ns := range a.Public {
		if err := checkNamespaceGlob(ns); err != nil {
			return fmt.Errorf("%spublic[%d]: %w", p, i, err)
		}
	}
	for i, r := range a.Rules {
		if err := r.validate(); err != nil {
			return fmt.Errorf("%srules[%d].%w", p, i, err)
		}
	}
	for i, o := range a.OIDC {
		if err := o.validate(); err != nil {
			return fmt.Errorf("%soidc[%d].%w", p, i, err)
		}
	}
	return nil
}

func (r *AuthRule) validate() error {
	if r.Effect != "" && r.Effect != "allow" && r.Effect != "deny" {
		return fmt.Errorf("effect: want allow or deny (got %q)", r.Effect)
	}
	if len(r.Subjects) == 0 {
		return fmt.Errorf("subjects: required")
	}
	for j, s := range r.Subjects {
		if err := CheckSubject(s); err != nil {
			return fmt.Errorf("subjects[%d]: %w", j, err)
		}
	}
	if len(r.Repositories) == 0 {
		return fmt.Errorf("repositories: required")
	}
	for j, g := range r.Repositories {
		if err := CheckRepositoryGlob(g); err != nil {
			return fmt.Errorf("repositories[%d]: %w", j, err)
		}
	}
	if len(r.Actions) == 0 {
		return fmt.Errorf("actions: required")
	}
	for j, a := range r.Actions {
		if !isAuthAction(a) {
			return fmt.Errorf("actions[%d]: want one of %s (got %q)", j, strings.Join(AuthActions, ", "), a)
		}
	}
	return nil
}

func (o *OIDCIssuer) validate() error {
	if o.Issuer == "" {
		return fmt.Errorf("issuer: required")
	}
	if (o.JWKSFile == "") == (o.JWKSURL == "") {
		return fmt.Errorf("jwksFile: set exactly one of jwksFile and jwksURL")
	}
	if o.JWKSURL != "" {
		if err := checkURL(o.JWKSURL); err != nil {
			return fmt.Errorf("jwksURL: %w", err)
		}
	}
	if o.Audience == "" {
		return fmt.Errorf("audience: required")
	}
	if len(o.Subjects) == 0 {
		return fmt.Errorf("subjects: required")
	}
	for i, s := range o.Subjects {
		if s.Name == "" || strings.ContainsAny(s.Name, ": ") {
			return fmt.Errorf("subjects[%d].name: want a name without ':' or spaces (got %q)", i, s.Name)
		}
		if len(s.Claims) == 0 {
			return fmt.Errorf("subjects[%d].claims: at least one claim rule is required", i)
		}
		for k, v := range s.Claims {
			if _, err := path.Match(v, ""); err != nil {
				return fmt.Errorf("subjects[%d].claims.%s: bad glob %q: %w", i, k, v, err)
			}
		}
	}
	return nil
}

// CheckSubject checks a rule subject: user:NAME, group:NAME,
// robot:NAMESPACE+NAME, oidc:NAME, anonymous or authenticated.
func CheckSubject(s string) error {
	if s == "anonymous" || s == "authenticated" {
		return nil
	}
	kind, name, ok := strings.Cut(s, ":")
	if !ok || name == "" || strings.ContainsAny(name, ": ") {
		return fmt.Errorf("want user:NAME, group:NAME, robot:NAMESPACE+NAME, oidc:NAME, anonymous or authenticated (got %q)", s)
	}
	switch kind {
	case "user", "group", "oidc":
		return nil
	case "robot":
		if ns, n, ok := strings.Cut(name, "+"); !ok || ns == "" || n == "" {
			return fmt.Errorf("a robot subject is robot:NAMESPACE+NAME (got %q)", s)
		}
		return nil
	}
	return fmt.Errorf("unknown subject kind %q in %q: want user, group, robot, oidc, anonymous or authenticated", kind, s)
}

// CheckRepositoryGlob checks a glob over namespace/name.
func CheckRepositoryGlob(g string) error {
	if _, err := path.Match(g, ""); err != nil {
		return fmt.Errorf("bad glob %q: %w", g, err)
	}
	if !strings.Contains(g, "/") || strings.HasPrefix(g, "/") || strings.HasSuffix(g, "/") {
		return fmt.Errorf("want a glob over namespace/name, like \"team-a/*\" (got %q)", g)
	}
	return nil
}

func checkNamespaceGlob(g string) error {
	if _, err := path.Match(g, ""); err != nil {
		return fmt.Errorf("bad glob %q: %w", g, err)
	}
	if g == "" || strings.Contains(g, "/") {
		return fmt.Errorf("want a namespace or a glob over namespaces, without '/' (got %q)", g)
	}
	return nil
}

func isAuthAction(a string) bool {
	for _, x := range AuthActions {
		if a == x {
			return true
		}
	}
	return false
}

// checkURL accepts http(s) URLs with a host.
func checkURL(s string) error {
	if !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") || len(strings.SplitN(s, "/", 4)) < 3 || strings.SplitN(s, "/", 4)[2] == "" {
		return fmt.Errorf("want an http(s) URL (got %q)", s)
	}
	return nil
}
