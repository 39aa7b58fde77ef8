package auth

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/internal/forwarded"
)

// sessionLogin logs in through s as a browser posting the form would, and
// returns the response's cookies.
func sessionLogin(s *Sessions, r *http.Request, user, password string) ([]*http.Cookie, error) {
	rec := httptest.NewRecorder()
	_, err := s.Login(rec, r, user, password)
	return rec.Result().Cookies(), err
}

func loginRequest() *http.Request {
	return httptest.NewRequest(http.MethodPost, "/ui/login", nil)
}

// whoami runs a request with cookie through the middleware and returns the
// identity the handler saw and the response's cookies.
func whoami(s *Sessions, cookie *http.Cookie) (Identity, []*http.Cookie) {
	var id Identity
	h := s.Middleware(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { id = IdentityFrom(r.Context()) }))
	r := httptest.NewRequest(http.MethodGet, "/ui/packages/a/x", nil)
	if cookie != nil {
		r.AddCookie(cookie)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return id, rec.Result().Cookies()
}

func TestSessionLogin(t *testing.T) {
	f := newFixture(t)
	s := NewSessions(f.Authn, SessionOptions{})
	cookies, err := sessionLogin(s, loginRequest(), "alice", "alice-pw")
	if err != nil || len(cookies) != 1 {
		t.Fatalf("login: %v, cookies %v", err, cookies)
	}
	c := cookies[0]
	if c.Name != SessionCookie || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.Secure ||
		c.MaxAge != int(DefaultSessionTTL.Seconds()) || strings.Contains(c.Value, "alice-pw") {
		t.Errorf("cookie %+v", c)
	}
	if id, _ := whoami(s, c); id.Subject != "user:alice" || id.Limited {
		t.Errorf("the session is %+v, want user:alice", id)
	}
	if id, set := whoami(s, nil); !id.IsAnonymous() || len(set) != 0 {
		t.Errorf("no cookie: %+v, cookies %v", id, set)
	}

	tlsReq := loginRequest()
	tlsReq.TLS = &tls.ConnectionState{}
	proxied := loginRequest()
	proxied.Header.Set("X-Forwarded-Proto", "https")
	for _, tc := range []struct {
		what   string
		r      *http.Request
		secure bool
	}{
		{"over TLS", tlsReq, true},
		{"through a trusted proxy over TLS", throughProxy(t, "10.0.0.0/8", "10.1.2.3:5000", proxied), true},
		{"X-Forwarded-Proto from an untrusted peer", throughProxy(t, "10.0.0.0/8", "192.0.2.1:5000", proxied), false},
	} {
		if cookies, err := sessionLogin(s, tc.r, "bob", "bob-pw"); err != nil || cookies[0].Secure != tc.secure {
			t.Errorf("%s: %v, cookie %+v, want Secure %v", tc.what, err, cookies, tc.secure)
		}
	}
}

// throughProxy returns a copy of r from peer as forwarded.Handler passes it
// on when the proxies of cidr are trusted.
func throughProxy(t *testing.T, cidr, peer string, r *http.Request) *http.Request {
	t.Helper()
	proxies, err := forwarded.ParseProxies([]string{cidr})
	if err != nil {
		t.Fatal(err)
	}
	r = r.Clone(r.Context())
	r.RemoteAddr = peer
	var out *http.Request
	proxies.Handler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { out = r })).ServeHTTP(httptest.NewRecorder(), r)
	return out
}

func TestSessionBadLogins(t *testing.T) {
	f := newFixture(t)
	s := NewSessions(f.Authn, SessionOptions{})
	for _, tc := range []struct{ name, user, password string }{
		{"wrong password", "alice", "bob-pw"},
		{"unknown user", "mallory", "alice-pw"},
		{"empty", "", ""},
		{"empty password", "alice", ""},
		{"unknown robot", "robot+a+nobody", "secret"},
		{"a token as password", "alice", "eyJhbGciOiJFUzI1NiJ9.e30.sig"},
	} {
		cookies, err := sessionLogin(s, loginRequest(), tc.user, tc.password)
		if !errors.Is(err, ErrBadCredentials) || len(cookies) != 0 {
			t.Errorf("%s: %v, cookies %v; want bad credentials and no cookie", tc.name, err, cookies)
		}
	}
	if n := strings.Count(f.auditLog.String(), `"action":"login"`); n != 6 {
		t.Errorf("%d failed logins audited, want 6", n)
	}
}

func TestSessionLoginRateLimit(t *testing.T) {
	f := newFixture(t)
	s := NewSessions(f.Authn, SessionOptions{})
	for range 5 {
		if _, err := sessionLogin(s, loginRequest(), "alice", "nope"); !errors.Is(err, ErrBadCredentials) {
			t.Fatal(err)
		}
	}
	cookies, err := sessionLogin(s, loginRequest(), "alice", "alice-pw")
	var rl *RateLimitedError
	if !errors.As(err, &rl) || len(cookies) != 0 {
		t.Fatalf("sixth attempt: %v, cookies %v; want rate limited", err, cookies)
	}
	// Basic credentials and the login form share the limiter.
	if _, err := f.Authenticate(basicRequest("alice", "alice-pw")); !errors.As(err, &rl) {
		t.Errorf("Basic after failed form logins: %v, want rate limited", err)
	}
}

func TestSessionRefusesOtherTokens(t *testing.T) {
	f := newFixture(t)
	s := NewSessions(f.Authn, SessionOptions{})
	access, _, err := f.Issue(Identity{Subject: "user:alice"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	refresh, err := f.issueRefresh(Identity{Subject: "user:alice"}, f.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{"access": access, "refresh": refresh, "garbage": "not-a-token"} {
		id, set := whoami(s, &http.Cookie{Name: SessionCookie, Value: tok})
		if !id.IsAnonymous() {
			t.Errorf("%s token as session: %+v, want anonymous", name, id)
		}
		if len(set) != 1 || set[0].MaxAge >= 0 || set[0].Value != "" {
			t.Errorf("%s token as session: the cookie is not cleared: %v", name, set)
		}
	}
	cookies, err := sessionLogin(s, loginRequest(), "alice", "alice-pw")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Authenticate(bearerRequest(cookies[0].Value)); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("a session as Bearer token: %v, want bad credentials", err)
	}
}

func TestSessionExpiresAndFollowsTheSubject(t *testing.T) {
	f := newFixture(t)
	s := NewSessions(f.Authn, SessionOptions{TTL: time.Hour})
	cookies, err := sessionLogin(s, loginRequest(), "alice", "alice-pw")
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(59 * time.Minute)
	if id, _ := whoami(s, cookies[0]); id.Subject != "user:alice" {
		t.Errorf("before expiry: %+v", id)
	}
	f.clock.Advance(2 * time.Minute)
	if id, set := whoami(s, cookies[0]); !id.IsAnonymous() || len(set) != 1 || set[0].MaxAge >= 0 {
		t.Errorf("expired: %+v, cookies %v; want anonymous and the cookie cleared", id, set)
	}

	robot := f.addRobot(t, "ci", "robot-secret", false)
	cookies, err = sessionLogin(s, loginRequest(), robot.Username(), "robot-secret")
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := whoami(s, cookies[0]); id.Subject != robot.Subject() {
		t.Fatalf("robot session: %+v", id)
	}
	if err := f.robots.Revoke(context.Background(), "a", "ci", f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if id, _ := whoami(s, cookies[0]); !id.IsAnonymous() {
		t.Errorf("revoked robot: %+v, want anonymous", id)
	}
}

// TestSessionNotHonouredByAPI: the APIs read credentials from the
// Authorization header only; a session cookie there is anonymous.
func TestSessionNotHonouredByAPI(t *testing.T) {
	f := newFixture(t)
	s := NewSessions(f.Authn, SessionOptions{})
	cookies, err := sessionLogin(s, loginRequest(), "alice", "alice-pw")
	if err != nil {
		t.Fatal(err)
	}
	var access catalog.Access
	api := API(APIOptions{Authenticator: f.Authn, Policy: f.policy})(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		access, _ = CatalogAuthorizer{Policy: f.policy}.Pullable(r.Context())
	}))
	r := httptest.NewRequest(http.MethodGet, "/api/v1/packages", nil)
	r.AddCookie(cookies[0])
	api.ServeHTTP(httptest.NewRecorder(), r)
	if access.Allows("a", "x") || !access.Allows("pub", "x") {
		t.Errorf("with a session cookie, /api/v1 allows a/x: %v, pub/x: %v; want anonymous access", access.Allows("a", "x"), access.Allows("pub", "x"))
	}
}
