package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/berth-registry/berth/config"
)

// robotTouchInterval is the least time between two records of a robot's
// last use.
const robotTouchInterval = time.Minute

// Reasons of failed logins, as metrics count them.
const (
	reasonBadCredentials = "bad_credentials"
	reasonRateLimited    = "rate_limited"
	reasonInactiveRobot  = "inactive_robot"
	reasonBadToken       = "bad_token"
)

// errWrongPassword is the one answer to an unknown user and a wrong
// password, so that neither tells whether the user exists.
var errWrongPassword = fmt.Errorf("%w: wrong user name or password", ErrBadCredentials)

// AuthnOptions are what an Authn works with besides its configuration.
type AuthnOptions struct {
	// Policy decides what tokens grant.
	Policy *Policy
	// Robots keeps robot accounts; nil refuses every robot login.
	Robots RobotStore
	// Revocations keep the revoked sessions and refresh tokens every
	// replica refuses; nil keeps none, so that signing out only clears the
	// browser's cookie (tests).
	Revocations Revocations
	// Audit records failed logins; nil records nothing.
	Audit *Auditor
	// Metrics counts decisions and failed logins; nil counts nothing.
	Metrics *Metrics
	// Now is the clock (default time.Now).
	Now func() time.Time
	// HTTPClient fetches the key sets of OIDC issuers (default a client
	// with a 10s timeout).
	HTTPClient *http.Client
}

// Authn authenticates requests (htpasswd users, robot accounts, OIDC
// issuers' JWTs and the tokens it issues) and serves the token endpoint.
type Authn struct {
	cfg         *config.Auth
	policy      *Policy
	robots      RobotStore
	revocations Revocations
	audit       *Auditor
	metrics     *Metrics
	now         func() time.Time

	key     *signingKey
	users   *htpasswd
	groups  map[string][]string
	issuers map[string]*oidcIssuer
	limiter *loginLimiter

	touchMu sync.Mutex
	touched map[string]time.Time
}

// NewAuthn loads what cfg names: the signing key (created on first start),
// the htpasswd file and the key sets of the OIDC issuers. Its errors name
// the config key at fault. cfg must have been validated and given its
// defaults.
func NewAuthn(cfg *config.Auth, opts AuthnOptions) (*Authn, error) {
	a := &Authn{
		cfg:         cfg,
		policy:      opts.Policy,
		robots:      opts.Robots,
		revocations: opts.Revocations,
		audit:       opts.Audit,
		metrics:     opts.Metrics,
		now:         opts.Now,
		groups:      map[string][]string{},
		issuers:     map[string]*oidcIssuer{},
		limiter:     newLoginLimiter(cfg.Login.MaxFailures, cfg.Login.Window),
		touched:     map[string]time.Time{},
	}
	if a.now == nil {
		a.now = time.Now
	}
	var err error
	if a.key, err = loadSigningKey(cfg.KeyFile); err != nil {
		return nil, fmt.Errorf("auth.keyFile: %w", err)
	}
	if a.users, err = newHtpasswd(cfg.Htpasswd); err != nil {
		return nil, fmt.Errorf("auth.htpasswd: %w", err)
	}
	for g, users := range cfg.Groups {
		for _, u := range users {
			if !slices.Contains(a.groups[u], g) {
				a.groups[u] = append(a.groups[u], g)
			}
		}
	}
	for _, gs := range a.groups {
		slices.Sort(gs)
	}
	client := opts.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: jwksFetchTimeout}
	}
	for i, o := range cfg.OIDC {
		if _, dup := a.issuers[o.Issuer]; dup {
			return nil, fmt.Errorf("auth.oidc[%d].issuer: %q is configured twice", i, o.Issuer)
		}
		iss, err := newOIDCIssuer(context.Background(), o, client, a.now())
		if err != nil {
			return nil, fmt.Errorf("auth.oidc[%d].%w", i, err)
		}
		a.issuers[o.Issuer] = iss
	}
	return a, nil
}

// KeyID is the key ID (kid) of the token signing key: the RFC 7638
// thumbprint of its public key, as the JWKS and every token's header name
// it. It is safe to store and print; replicas that must verify each other's
// tokens have the same.
func (a *Authn) KeyID() string { return a.key.kid }

// BindUpload binds the upload session uuid to subject (UploadOwnerParam),
// under a key derived from the token signing key, so that every replica
// with the same key file computes the same.
func (a *Authn) BindUpload(uuid, subject string) string {
	return a.key.uploads.BindUpload(uuid, subject)
}

var _ UploadBinder = (*Authn)(nil)

// Issue signs an access token for id granting grants, and returns it with
// its expiry.
func (a *Authn) Issue(id Identity, grants []Grant) (string, time.Time, error) {
	return a.issue(id, grants, a.now())
}

func (a *Authn) issue(id Identity, grants []Grant, now time.Time) (string, time.Time, error) {
	return a.mint(id, useAccess, grants, now, a.cfg.TokenTTL)
}

// issueRefresh signs a refresh token for id.
func (a *Authn) issueRefresh(id Identity, now time.Time) (string, error) {
	tok, _, err := a.mint(id, useRefresh, nil, now, refreshTTL)
	return tok, err
}

// mint signs a token of use for id that lives ttl from now, but never past
// id.Expires: a credential berth derives from another (an OIDC token, a
// robot) does not outlive it. It returns the token and its expiry; an id
// whose credential has expired gets an error wrapping ErrBadCredentials.
func (a *Authn) mint(id Identity, use string, grants []Grant, now time.Time, ttl time.Duration) (string, time.Time, error) {
	exp := now.Add(ttl)
	if !id.Expires.IsZero() && id.Expires.Before(exp) {
		exp = id.Expires
	}
	if !exp.After(now) {
		return "", time.Time{}, fmt.Errorf("%w: the credential logged in with has expired", ErrBadCredentials)
	}
	tok, err := a.key.sign(a.cfg.Service, id, use, grants, now, exp)
	return tok, exp, err
}

func tokenSubject(id Identity) string {
	if id.IsAnonymous() {
		return Anonymous
	}
	return id.Subject
}

// Authenticate returns the identity r's Authorization header proves:
// Basic with a user's password, a robot's secret or (under any user name)
// an OIDC issuer's JWT; Bearer with a token berth issued (a Limited
// identity), a robot's credentials as ROBOT-USER-NAME:SECRET, or an OIDC
// issuer's JWT. Without the header the caller is anonymous.
func (a *Authn) Authenticate(r *http.Request) (Identity, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return AnonymousIdentity(), nil
	}
	scheme, cred, _ := strings.Cut(h, " ")
	switch {
	case strings.EqualFold(scheme, "Basic"):
		user, password, ok := r.BasicAuth()
		if !ok {
			return Identity{}, a.failed(r, "", reasonBadCredentials, fmt.Errorf("%w: malformed Basic credentials", ErrBadCredentials))
		}
		return a.login(r, user, password)
	case strings.EqualFold(scheme, "Bearer"):
		return a.bearer(r, strings.TrimSpace(cred))
	}
	return Identity{}, a.failed(r, "", reasonBadCredentials, fmt.Errorf("%w: unsupported Authorization scheme; use Basic or Bearer", ErrBadCredentials))
}

// bearer authenticates a Bearer credential.
func (a *Authn) bearer(r *http.Request, cred string) (Identity, error) {
	if user, secret, ok := strings.Cut(cred, ":"); ok {
		if _, _, robot := ParseRobotUsername(user); robot {
			return a.login(r, user, secret)
		}
	}
	now := a.now()
	if a.key.verifiedBefore(cred) {
		return a.tokenIdentity(r, cred, now)
	}
	tok, iss, err := parseJWT(cred)
	if err != nil {
		return Identity{}, a.failed(r, "", reasonBadToken, err)
	}
	if iss == a.cfg.Service {
		return a.tokenIdentity(r, cred, now)
	}
	o, ok := a.issuers[iss]
	if !ok {
		return Identity{}, a.failed(r, "", reasonBadToken, fmt.Errorf("%w: the token is from an issuer this registry does not trust", ErrBadCredentials))
	}
	id, err := o.authenticate(r.Context(), tok, now)
	if err != nil {
		return Identity{}, a.failed(r, "", reasonBadToken, err)
	}
	return id, nil
}

// tokenIdentity is the identity of an access token berth issued: its
// subject as it stands now, limited to the token's grants.
func (a *Authn) tokenIdentity(r *http.Request, raw string, now time.Time) (Identity, error) {
	c, err := a.key.verify(raw, a.cfg.Service, useAccess, now)
	if err != nil {
		return Identity{}, a.failed(r, "", reasonBadToken, err)
	}
	id, err := a.resolve(r.Context(), c, now)
	if err != nil {
		return Identity{}, a.failed(r, c.Subject, reasonOf(err), err)
	}
	id.Limited, id.Grants = true, c.Access
	return id, nil
}

// parseJWT parses s as a signed JWT of an asymmetric algorithm and returns
// its unverified issuer.
func parseJWT(s string) (*jwt.JSONWebToken, string, error) {
	tok, err := jwt.ParseSigned(s, oidcAlgorithms)
	if err != nil {
		return nil, "", fmt.Errorf("%w: the Bearer credential is not a JWT signed with an asymmetric algorithm", ErrBadCredentials)
	}
	var c struct {
		Issuer string `json:"iss"`
	}
	if err := tok.UnsafeClaimsWithoutVerification(&c); err != nil {
		return nil, "", fmt.Errorf("%w: the token's claims are not a JSON object", ErrBadCredentials)
	}
	return tok, c.Issuer, nil
}

// login checks a user name and password (or secret, or OIDC JWT) from r,
// refusing clients that failed too often before any check.
func (a *Authn) login(r *http.Request, user, password string) (Identity, error) {
	now := a.now()
	key := ClientIP(r) + "\x00" + user
	if wait := a.limiter.retryAfter(key, now); wait > 0 {
		return Identity{}, a.failed(r, user, reasonRateLimited, &RateLimitedError{RetryAfter: wait})
	}
	id, err := a.checkPassword(r.Context(), user, password, now)
	switch {
	case err == nil:
		a.limiter.succeed(key)
		return id, nil
	case errors.Is(err, ErrBadCredentials):
		a.limiter.fail(key, now)
		return Identity{}, a.failed(r, user, reasonOf(err), err)
	}
	return Identity{}, err
}

// checkPassword answers login: a robot's secret, an OIDC JWT, or an
// htpasswd user's password.
func (a *Authn) checkPassword(ctx context.Context, user, password string, now time.Time) (Identity, error) {
	if ns, name, ok := ParseRobotUsername(user); ok {
		return a.robotLogin(ctx, ns, name, password, now)
	}
	if tok, iss, err := parseJWT(password); err == nil {
		if o, ok := a.issuers[iss]; ok {
			return o.authenticate(ctx, tok, now)
		}
	}
	if !a.users.check(user, password, now) {
		return Identity{}, errWrongPassword
	}
	id, _ := a.userIdentity(user, now)
	return id, nil
}

// userIdentity is the identity of an htpasswd user, with the groups the
// config gives it and the fingerprint of its password hash as the file
// holds it now; ok is false when the user is not in the file.
func (a *Authn) userIdentity(user string, now time.Time) (Identity, bool) {
	hash, ok := a.users.hashOf(user, now)
	if !ok {
		return Identity{}, false
	}
	return Identity{Subject: "user:" + user, Groups: a.groups[user], password: a.key.fingerprint(hash)}, true
}

// robotLogin checks a robot's secret, then that it is active.
func (a *Authn) robotLogin(ctx context.Context, ns, name, secret string, now time.Time) (Identity, error) {
	if a.robots == nil {
		return Identity{}, errWrongPassword
	}
	robot, err := a.robots.Get(ctx, ns, name)
	var want []byte
	switch {
	case err == nil:
		want = robot.SecretHash
	case errors.Is(err, ErrRobotNotFound):
		want = make([]byte, sha256.Size)
	default:
		return Identity{}, err
	}
	got := sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(got[:], want) != 1 || robot == nil {
		return Identity{}, errWrongPassword
	}
	return a.activeRobot(ctx, robot, now)
}

// activeRobot is the identity of robot if it is active, recording its use.
func (a *Authn) activeRobot(ctx context.Context, robot *Robot, now time.Time) (Identity, error) {
	if err := robot.Active(now); err != nil {
		return Identity{}, fmt.Errorf("%w: %w", ErrBadCredentials, err)
	}
	a.touch(ctx, robot, now)
	return Identity{Subject: robot.Subject(), Robot: robot, Expires: robot.ExpiresAt}, nil
}

// touch records the robot's use, at most once per robotTouchInterval.
func (a *Authn) touch(ctx context.Context, robot *Robot, now time.Time) {
	sub := robot.Subject()
	a.touchMu.Lock()
	last, ok := a.touched[sub]
	due := !ok || now.Sub(last) >= robotTouchInterval
	if due {
		if len(a.touched) >= loginLimiterSize {
			clear(a.touched)
		}
		a.touched[sub] = now
	}
	a.touchMu.Unlock()
	if !due {
		return
	}
	if err := a.robots.Touch(ctx, robot.Namespace, robot.Name, now); err != nil {
		slog.Warn("auth: cannot record a robot's last use", "robot", robot.Username(), "err", err)
	}
}

// resolve is the identity of the subject of a token berth issued, as it is
// now: a user still in the htpasswd file with the password it had when the
// token was issued and the groups the config gives now, a robot still
// active, an OIDC subject still mapped by the issuer
// that vouched for it, which the config must still trust. An OIDC
// subject's identity expires with the token (whose expiry is no later than
// the OIDC token's), so that nothing minted from it lasts longer.
func (a *Authn) resolve(ctx context.Context, c *tokenClaims, now time.Time) (Identity, error) {
	sub := c.Subject
	kind, name, _ := strings.Cut(sub, ":")
	switch kind {
	case Anonymous:
		return AnonymousIdentity(), nil
	case "user":
		id, ok := a.userIdentity(name, now)
		if !ok {
			break
		}
		if id.password != c.Password {
			return Identity{}, fmt.Errorf("%w: the user's password changed after the token was issued", ErrBadCredentials)
		}
		return id, nil
	case "robot":
		ns, n, ok := strings.Cut(name, "+")
		if !ok || a.robots == nil {
			break
		}
		robot, err := a.robots.Get(ctx, ns, n)
		if errors.Is(err, ErrRobotNotFound) {
			break
		} else if err != nil {
			return Identity{}, err
		}
		return a.activeRobot(ctx, robot, now)
	case "oidc":
		o, ok := a.issuers[c.OIDCIssuer]
		if !ok {
			return Identity{}, fmt.Errorf("%w: the token's OIDC issuer is no longer trusted", ErrBadCredentials)
		}
		for _, s := range o.cfg.Subjects {
			if s.Name == name {
				return Identity{Subject: sub, Groups: s.Groups, Issuer: o.cfg.Issuer, Expires: c.Expiry.Time()}, nil
			}
		}
	}
	return Identity{}, fmt.Errorf("%w: the token's subject no longer exists", ErrBadCredentials)
}

// failed counts and audits a failed login of user ("" when no user name
// was claimed) and returns err.
func (a *Authn) failed(r *http.Request, user, reason string, err error) error {
	if user == "" {
		user = Anonymous
	}
	a.metrics.FailedLogin(reason)
	a.audit.Record(r, Event{Subject: user, Action: "login", Result: ResultFailed, Reason: err.Error()})
	return err
}

func reasonOf(err error) string {
	if errors.Is(err, ErrRobotInactive) {
		return reasonInactiveRobot
	}
	return reasonBadCredentials
}
