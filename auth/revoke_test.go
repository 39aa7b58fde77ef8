package auth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeRevocations are Revocations in memory, shared by the fixtures of one
// test as a database is by replicas.
type fakeRevocations struct {
	mu    sync.Mutex
	until map[string]time.Time
	err   error
}

func (s *fakeRevocations) RevokeToken(_ context.Context, id string, until time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if s.until == nil {
		s.until = map[string]time.Time{}
	}
	s.until[id] = until
	return nil
}

func (s *fakeRevocations) TokenRevoked(_ context.Context, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.until[id]
	return ok, s.err
}

// signOut posts the sign-out of cookie to s and returns the cookies set.
func signOut(t *testing.T, s *Sessions, cookie *http.Cookie) []*http.Cookie {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/ui/logout", nil)
	r.AddCookie(cookie)
	rec := httptest.NewRecorder()
	if err := s.Logout(rec, r); err != nil {
		t.Fatal(err)
	}
	return rec.Result().Cookies()
}

// TestSignOutEndsTheSessionOnEveryReplica: a copy of the cookie kept from
// before the sign-out is refused by the replica signed out of and by the
// other one; other sessions of the user go on.
func TestSignOutEndsTheSessionOnEveryReplica(t *testing.T) {
	a := newFixture(t)
	b := newReplica(t, a.cfg, a.revoked)
	sa, sb := NewSessions(a.Authn, SessionOptions{}), NewSessions(b.Authn, SessionOptions{})
	cookies, err := sessionLogin(sa, loginRequest(), "alice", "alice-pw")
	if err != nil {
		t.Fatal(err)
	}
	kept := cookies[0]
	other, err := sessionLogin(sa, loginRequest(), "alice", "alice-pw")
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := whoami(sb, kept); id.Subject != "user:alice" {
		t.Fatalf("the other replica sees the session as %+v", id)
	}
	if set := signOut(t, sa, kept); len(set) != 1 || set[0].MaxAge >= 0 {
		t.Errorf("sign-out sets cookies %v, want the session cookie cleared", set)
	}
	for name, s := range map[string]*Sessions{"the replica signed out of": sa, "the other replica": sb} {
		if id, set := whoami(s, kept); !id.IsAnonymous() || len(set) != 1 || set[0].MaxAge >= 0 {
			t.Errorf("%s: the cookie kept from before the sign-out is %+v (cookies %v), want anonymous and cleared", name, id, set)
		}
	}
	if id, _ := whoami(sb, other[0]); id.Subject != "user:alice" {
		t.Errorf("another session of the user ended with the one signed out: %+v", id)
	}

	// Signing out without a cookie, or with one that is not valid, only
	// clears the cookie.
	for name, c := range map[string]*http.Cookie{"garbage": {Name: SessionCookie, Value: "x"}, "other cookie": {Name: "other", Value: "x"}} {
		if set := signOut(t, sa, c); len(set) != 1 || set[0].MaxAge >= 0 {
			t.Errorf("%s: cookies %v", name, set)
		}
	}

	// A store that cannot be written: the sign-out says so.
	a.revoked.err = errors.New("database down")
	r := httptest.NewRequest(http.MethodPost, "/ui/logout", nil)
	r.AddCookie(other[0])
	if err := sa.Logout(httptest.NewRecorder(), r); err == nil || !strings.Contains(err.Error(), "database down") {
		t.Errorf("sign-out with the store down: %v, want the store's error", err)
	}
}

func revokeRequest(form url.Values) *http.Request { return postTo("/auth/revoke", form) }

// TestRefreshTokenRevocation: a refresh token revoked at one replica is
// refused at the other; /auth/revoke refuses bad requests by name.
func TestRefreshTokenRevocation(t *testing.T) {
	a := newFixture(t)
	b := newReplica(t, a.cfg, a.revoked)
	rep := a.serve(t, postToken(url.Values{"grant_type": {"password"}, "username": {"alice"}, "password": {"alice-pw"}, "access_type": {"offline"}}))
	if rep.status != http.StatusOK || rep.body.RefreshToken == "" {
		t.Fatalf("password grant: %d %s", rep.status, rep.errText)
	}
	refresh, access := rep.body.RefreshToken, rep.body.AccessToken
	redeem := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}}
	if rep := b.serve(t, postToken(redeem)); rep.status != http.StatusOK {
		t.Fatalf("the refresh token at the other replica: %d %s", rep.status, rep.errText)
	}
	if rep := a.serve(t, revokeRequest(url.Values{"token": {refresh}})); rep.status != http.StatusOK {
		t.Fatalf("revoke: %d %s", rep.status, rep.errText)
	}
	for name, f := range map[string]*fixture{"a": a, "b": b} {
		if rep := f.serve(t, postToken(redeem)); rep.status != http.StatusUnauthorized || !strings.Contains(rep.errText, "revoked") {
			t.Errorf("replica %s: the revoked refresh token gets %d %s, want 401 saying it was revoked", name, rep.status, rep.errText)
		}
	}

	for _, tc := range []struct {
		name   string
		r      *http.Request
		status int
		want   string
	}{
		{"no token", revokeRequest(url.Values{}), http.StatusBadRequest, "token is required"},
		{"an access token", revokeRequest(url.Values{"token": {access}}), http.StatusBadRequest, "access token cannot be revoked"},
		{"not a form", httptest.NewRequest(http.MethodPost, "/auth/revoke", strings.NewReader(`{"token":"x"}`)), http.StatusBadRequest, "x-www-form-urlencoded"},
		{"garbage: nothing to revoke", revokeRequest(url.Values{"token": {"not-a-token"}}), http.StatusOK, ""},
		{"revoked twice", revokeRequest(url.Values{"token": {refresh}}), http.StatusOK, ""},
	} {
		rep := a.serve(t, tc.r)
		if rep.status != tc.status || !strings.Contains(rep.errText, tc.want) {
			t.Errorf("%s: %d %s, want %d saying %q", tc.name, rep.status, rep.errText, tc.status, tc.want)
		}
		if strings.Contains(rep.errText, access) || strings.Contains(rep.errText, refresh) {
			t.Errorf("%s: the answer quotes the token", tc.name)
		}
	}
}
