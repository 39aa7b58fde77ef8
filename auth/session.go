package auth

import (
	"errors"
	"net/http"
	"time"

	"github.com/berth-registry/berth/internal/forwarded"
)

// SessionCookie is the name of the cookie that carries a web UI session.
const SessionCookie = "berth_session"

// DefaultSessionTTL is how long a web UI session lasts when
// SessionOptions.TTL is zero.
const DefaultSessionTTL = 12 * time.Hour

// SessionOptions configure Sessions.
type SessionOptions struct {
	// TTL is how long a session lasts after login; zero means
	// DefaultSessionTTL.
	TTL time.Duration
}

// Sessions are the web UI's logins: a user name and password checked as
// Basic credentials are (rate limiter, audit and failed-login metrics
// included) buy a cookie holding a token of its own kind, signed with the
// token key. Access and refresh tokens are never accepted as a session, nor
// a session as either. Signing out (Logout) revokes the session on every
// replica. Only the UI's routes honour the cookie (Middleware):
// the APIs read the Authorization header alone, so that another site cannot
// make a browser call them with the user's rights.
type Sessions struct {
	authn *Authn
	ttl   time.Duration
}

// NewSessions returns the sessions of a.
func NewSessions(a *Authn, opts SessionOptions) *Sessions {
	if opts.TTL <= 0 {
		opts.TTL = DefaultSessionTTL
	}
	return &Sessions{authn: a, ttl: opts.TTL}
}

// Login checks user and password from r as Basic credentials are checked
// and, when they hold, sets the session cookie on w. Its errors are those of
// Authenticate: one wrapping ErrBadCredentials, or a *RateLimitedError.
func (s *Sessions) Login(w http.ResponseWriter, r *http.Request, user, password string) (Identity, error) {
	id, err := s.authn.login(r, user, password)
	if err != nil {
		return Identity{}, err
	}
	tok, exp, err := s.authn.mint(id, useSession, nil, s.authn.now(), s.ttl)
	if err != nil {
		return Identity{}, err
	}
	http.SetCookie(w, s.cookie(r, tok, exp))
	return id, nil
}

// Logout ends the session of r's cookie: it revokes the session's token in
// the store every replica reads, so that a copy of the cookie is refused
// everywhere, and clears the cookie. A missing, invalid or expired cookie
// has nothing to revoke. Its error is the store's: the cookie is cleared
// but the session may still be valid elsewhere.
func (s *Sessions) Logout(w http.ResponseWriter, r *http.Request) error {
	s.clear(w, r)
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return nil
	}
	claims, err := s.authn.key.verify(c.Value, s.authn.cfg.Service, useSession, s.authn.now())
	if err != nil {
		return nil
	}
	return s.authn.revoke(r.Context(), claims)
}

// clear clears the session cookie.
func (s *Sessions) clear(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, s.cookie(r, "", time.Unix(0, 0)))
}

// Middleware puts the identity of a valid session cookie in the request's
// context (WithIdentity): its subject as it stands now, so a removed user or
// a revoked robot loses access at once. Without a cookie the request goes on
// as anonymous; an invalid or expired cookie is cleared and the request goes
// on as anonymous too.
func (s *Sessions) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := AnonymousIdentity()
		if c, err := r.Cookie(SessionCookie); err == nil {
			switch got, err := s.identity(r, c.Value); {
			case err == nil:
				id = got
			case errors.Is(err, ErrBadCredentials):
				s.clear(w, r)
			default:
				http.Error(w, "internal error: authentication failed", http.StatusInternalServerError)
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(withRequest(WithIdentity(r.Context(), id), r)))
	})
}

// identity is the identity of a session token not revoked. Its errors wrap
// ErrBadCredentials, but for a robot or revocation store that cannot be
// read.
func (s *Sessions) identity(r *http.Request, raw string) (Identity, error) {
	now := s.authn.now()
	c, err := s.authn.key.verify(raw, s.authn.cfg.Service, useSession, now)
	if err != nil {
		return Identity{}, err
	}
	if err := s.authn.checkRevoked(r.Context(), c); err != nil {
		return Identity{}, err
	}
	return s.authn.resolve(r.Context(), c, now)
}

// cookie is the session cookie holding value until exp: HttpOnly,
// SameSite=Lax, for the whole site, Secure when the request came over TLS
// (directly or through a proxy that says so).
func (s *Sessions) cookie(r *http.Request, value string, exp time.Time) *http.Cookie {
	c := &http.Cookie{
		Name: SessionCookie, Value: value, Path: "/", Expires: exp,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secureRequest(r),
	}
	if value == "" {
		c.MaxAge = -1
	} else {
		c.MaxAge = int(exp.Sub(s.authn.now()).Seconds())
	}
	return c
}

// secureRequest reports whether r came over TLS, to berth or to a trusted
// proxy in front of it (forwarded.Of).
func secureRequest(r *http.Request) bool {
	return forwarded.Of(r).Scheme == "https"
}
