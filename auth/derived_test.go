package auth

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/berth-registry/berth/config"
)

// oidcLogins log in with a short-lived OIDC token of iss, valid for life
// from now, at the token endpoint (offline, for a refresh token) and at the
// UI; they return the refresh token, the access token's expires_in and the
// session cookie.
func oidcLogins(t *testing.T, f *fixture, s *Sessions, iss *testIssuer, life time.Duration) (string, int, *http.Cookie) {
	t.Helper()
	now := f.clock.Now()
	tok := signJWT(t, jose.RS256, iss.rsa, "rsa-1", map[string]any{
		"iss": "https://ci.example", "aud": "berth", "sub": "repo:org/app:ref:refs/heads/main",
		"repository_owner": "org", "exp": now.Add(life).Unix(), "iat": now.Unix(),
	})
	rep := f.serve(t, postToken(url.Values{"grant_type": {"password"}, "username": {"ci"}, "password": {tok},
		"access_type": {"offline"}, "scope": {"repository:a/x:pull,push"}}))
	if rep.status != http.StatusOK || rep.body.RefreshToken == "" {
		t.Fatalf("password grant with an OIDC token: %d %s", rep.status, rep.errText)
	}
	cookies, err := sessionLogin(s, loginRequest(), "ci", tok)
	if err != nil || len(cookies) != 1 {
		t.Fatalf("UI login with an OIDC token: %v, %v", err, cookies)
	}
	return rep.body.RefreshToken, rep.body.ExpiresIn, cookies[0]
}

// TestOIDCDerivedCredentialsEndWithTheOIDCToken: a 20-second OIDC token
// buys access tokens, refresh tokens and UI sessions that expire when it
// does, not 5 minutes, 24 hours or 12 hours later.
func TestOIDCDerivedCredentialsEndWithTheOIDCToken(t *testing.T) {
	iss := startIssuer(t)
	f := newFixture(t, oidcConfig(iss))
	s := NewSessions(f.Authn, SessionOptions{})
	start := f.clock.Now()
	oidcExp := start.Add(20 * time.Second)
	refresh, expiresIn, cookie := oidcLogins(t, f, s, iss, 20*time.Second)

	c, err := f.key.verify(refresh, "berth", useRefresh, start)
	if err != nil || c.Expiry.Time().After(oidcExp) {
		t.Errorf("the refresh token expires at %v (%v), after the OIDC token's exp %v", c.Expiry.Time(), err, oidcExp)
	}
	if expiresIn > 20 {
		t.Errorf("the access token lives %ds, longer than the OIDC token's 20s", expiresIn)
	}
	if cookie.MaxAge > 20 || cookie.Expires.After(oidcExp) {
		t.Errorf("the session cookie lives %ds (until %v), longer than the OIDC token", cookie.MaxAge, cookie.Expires)
	}

	redeem := func() tokenReply {
		return f.serve(t, postToken(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "scope": {"repository:a/x:push"}}))
	}
	f.clock.Advance(10 * time.Second)
	rep := redeem()
	if rep.status != http.StatusOK || rep.body.ExpiresIn > 10 {
		t.Fatalf("the refresh token within the OIDC token's life: %d %s, expires_in %d (want an access token living at most 10s)", rep.status, rep.errText, rep.body.ExpiresIn)
	}
	access := rep.body.AccessToken
	if id, _ := whoami(s, cookie); id.Subject != "oidc:ci" {
		t.Fatalf("the session within the OIDC token's life is %+v", id)
	}

	f.clock.Advance(10*time.Second + tokenLeeway + time.Second)
	if rep := redeem(); rep.status != http.StatusUnauthorized || !strings.Contains(rep.errText, "expired") {
		t.Errorf("the refresh token after the OIDC token's exp: %d %s, want 401 saying it expired", rep.status, rep.errText)
	}
	if id, set := whoami(s, cookie); !id.IsAnonymous() || len(set) != 1 || set[0].MaxAge >= 0 {
		t.Errorf("the session after the OIDC token's exp: %+v, cookies %v; want anonymous and the cookie cleared", id, set)
	}
	if _, err := f.Authenticate(bearerRequest(access)); err == nil {
		t.Error("an access token minted from the refresh token works after the OIDC token's exp")
	}
}

// TestOIDCDerivedCredentialsEndWithTheIssuersTrust: once the config no
// longer trusts the issuer, what its tokens bought stops working, even when
// another issuer maps a subject of the same name.
func TestOIDCDerivedCredentialsEndWithTheIssuersTrust(t *testing.T) {
	iss := startIssuer(t)
	f := newFixture(t, oidcConfig(iss))
	refresh, _, cookie := oidcLogins(t, f, NewSessions(f.Authn, SessionOptions{}), iss, time.Hour)

	other := startIssuer(t)
	for _, tc := range []struct {
		name string
		oidc []config.OIDCIssuer
	}{
		{"no issuer", nil},
		{"another issuer mapping oidc:ci", []config.OIDCIssuer{{
			Issuer: "https://other.example", JWKSURL: other.url, Audience: "berth",
			Subjects: []config.OIDCSubject{{Name: "ci", Claims: map[string]string{"sub": "*"}}},
		}}},
		{"the issuer without the subject", []config.OIDCIssuer{{
			Issuer: "https://ci.example", JWKSURL: iss.url, Audience: "berth",
			Subjects: []config.OIDCSubject{{Name: "k8s-ci", Claims: map[string]string{"sub": "*"}}},
		}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := *f.cfg
			cfg.OIDC = tc.oidc
			g := newFixtureFrom(t, &cfg) // the same signing key
			rep := g.serve(t, postToken(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}}))
			if rep.status != http.StatusUnauthorized {
				t.Errorf("the refresh token: %d %s, want 401", rep.status, rep.errText)
			}
			if id, _ := whoami(NewSessions(g.Authn, SessionOptions{}), cookie); !id.IsAnonymous() {
				t.Errorf("the session is %+v, want anonymous", id)
			}
		})
	}
}

// TestUserCredentialsEndWithThePassword: the tokens and sessions a user's
// password bought stop working when the htpasswd file gives the user
// another password; the new password logs in.
func TestUserCredentialsEndWithThePassword(t *testing.T) {
	f := newFixture(t)
	s := NewSessions(f.Authn, SessionOptions{})
	rep := f.serve(t, postToken(url.Values{"grant_type": {"password"}, "username": {"alice"}, "password": {"alice-pw"},
		"access_type": {"offline"}, "scope": {"repository:a/x:pull"}}))
	if rep.status != http.StatusOK {
		t.Fatalf("password grant: %d %s", rep.status, rep.errText)
	}
	cookies, err := sessionLogin(s, loginRequest(), "alice", "alice-pw")
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := whoami(s, cookies[0]); id.Subject != "user:alice" {
		t.Fatalf("the session before the change is %+v", id)
	}

	writeHtpasswd(t, f.cfg.Htpasswd, map[string]string{"alice": "new-pw"})
	f.users.statEvery = 0
	f.users.nextStat.Store(0)
	f.clock.Advance(time.Second)

	if rep := f.serve(t, postToken(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rep.body.RefreshToken}})); rep.status != http.StatusUnauthorized || !strings.Contains(rep.errText, "password changed") {
		t.Errorf("the refresh token after the password changed: %d %s, want 401 saying the password changed", rep.status, rep.errText)
	}
	if _, err := f.Authenticate(bearerRequest(rep.body.AccessToken)); err == nil || !strings.Contains(err.Error(), "password changed") {
		t.Errorf("the access token after the password changed: %v, want refused", err)
	}
	if id, _ := whoami(s, cookies[0]); !id.IsAnonymous() {
		t.Errorf("the session after the password changed is %+v, want anonymous", id)
	}
	cookies, err = sessionLogin(s, loginRequest(), "alice", "new-pw")
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := whoami(s, cookies[0]); id.Subject != "user:alice" {
		t.Errorf("a session with the new password is %+v", id)
	}
}

// TestRobotDerivedCredentialsEndWithTheRobot: a robot expiring in a minute
// gets tokens and a session that expire with it, as the expiry claims show
// to anyone verifying them with /auth/jwks.json.
func TestRobotDerivedCredentialsEndWithTheRobot(t *testing.T) {
	f := newFixture(t)
	robot := f.addRobot(t, "ci", "s3cret", true)
	robot.ExpiresAt = f.clock.Now().Add(time.Minute)
	rep := f.serve(t, postToken(url.Values{"grant_type": {"password"}, "username": {"robot+a+ci"}, "password": {"s3cret"},
		"access_type": {"offline"}, "scope": {"repository:a/x:push"}}))
	if rep.status != http.StatusOK || rep.body.ExpiresIn > 60 {
		t.Fatalf("password grant: %d %s, expires_in %d; want at most 60s", rep.status, rep.errText, rep.body.ExpiresIn)
	}
	c, err := f.key.verify(rep.body.RefreshToken, "berth", useRefresh, f.clock.Now())
	if err != nil || c.Expiry.Time().After(robot.ExpiresAt) {
		t.Errorf("the refresh token expires at %v (%v), after the robot (%v)", c.Expiry.Time(), err, robot.ExpiresAt)
	}
	cookies, err := sessionLogin(NewSessions(f.Authn, SessionOptions{}), loginRequest(), "robot+a+ci", "s3cret")
	if err != nil || cookies[0].MaxAge > 60 {
		t.Errorf("the session: %v, lives %ds; want at most 60s", err, cookies[0].MaxAge)
	}
}
