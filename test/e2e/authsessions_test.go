package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAuthCredentialsAcrossReplicas runs two replicas on one PostgreSQL
// database and one bucket, sharing the token key, as a scaled-out berth runs
// behind a load balancer:
//   - a refresh token bought with an OIDC token of 3 seconds works at the
//     other replica while that token lives, and is refused there once it
//     expired;
//   - a copy of a UI session cookie kept from before the sign-out at one
//     replica is refused at the other;
//   - a refresh token revoked at one replica is refused at the other;
//   - berth login, logout and auth check --format json print one JSON
//     document each.
func TestAuthCredentialsAcrossReplicas(t *testing.T) {
	dir := t.TempDir()
	_, shared := sharedState(t, "credentials", dir)
	issuer := startOIDCIssuer(t)
	const sub = "system:serviceaccount:ci:builder"
	a := startAuthServer(t, authOptions{
		oidc:  issuer.config(sub),
		auth:  fmt.Sprintf("  keyFile: %q\n", filepath.Join(dir, "token-key.pem")),
		extra: shared,
	})
	secrets.addPEM(t, "the token key", filepath.Join(dir, "token-key.pem"))
	b := a.replica(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replica a's log:\n%s\nreplica b's log:\n%s", a.logs(), b.logs())
		}
	})

	// An OIDC token of 3 seconds buys a refresh token that ends with it.
	oidcExp := time.Now().Add(3 * time.Second)
	got := postForm(t, a.server, "/auth/token", url.Values{"grant_type": {"password"}, "username": {"oidc"},
		"password": {issuer.mint(t, issuer.key, "berth", sub, time.Until(oidcExp))}, "access_type": {"offline"},
		"service": {"berth"}, "scope": {"repository:a/x:pull"}})
	var bought struct {
		ExpiresIn    int    `json:"expires_in"`
		RefreshToken string `json:"refresh_token"`
	}
	if got.status != http.StatusOK || json.Unmarshal(got.body, &bought) != nil || bought.RefreshToken == "" {
		t.Fatalf("password grant with an OIDC token: %d", got.status)
	}
	if bought.ExpiresIn > 3 {
		t.Errorf("the access token lives %ds, longer than the OIDC token's 3s", bought.ExpiresIn)
	}
	oidcRefresh := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {bought.RefreshToken}, "service": {"berth"}}
	if got := postForm(t, b, "/auth/token", oidcRefresh); got.status != http.StatusOK {
		t.Fatalf("the OIDC-derived refresh token at the other replica, while the OIDC token lives: %d", got.status)
	}

	// A UI session signed out at a: a copy of its cookie is refused at b.
	login := postForm(t, a.server, "/ui/login", url.Values{"username": {"alice"}, "password": {passwordOf("alice")}})
	cookie := sessionCookie(login)
	if login.status != http.StatusSeeOther || cookie == "" {
		t.Fatalf("UI login: %d, cookie set: %t", login.status, cookie != "")
	}
	if home := getWithCookie(t, b, cookie); !strings.Contains(string(home.body), "Signed in as") {
		t.Fatalf("the session at the other replica is not signed in: %d", home.status)
	}
	if out := postForm(t, a.server, "/ui/logout", nil, "Cookie", "berth_session="+cookie); out.status != http.StatusSeeOther || sessionCookie(out) != "" {
		t.Fatalf("sign-out: %d", out.status)
	}
	for name, s := range map[string]*server{"a": a.server, "b": b} {
		home := getWithCookie(t, s, cookie)
		if strings.Contains(string(home.body), "Signed in as") || !strings.Contains(home.header.Get("Set-Cookie"), "Max-Age=0") {
			t.Errorf("replica %s: the cookie kept from before the sign-out still signs in (%d, Set-Cookie %q)", name, home.status, home.header.Get("Set-Cookie"))
		}
	}

	// A refresh token revoked at b is refused at a.
	got = postForm(t, b, "/auth/token", url.Values{"grant_type": {"password"}, "username": {"alice"},
		"password": {passwordOf("alice")}, "access_type": {"offline"}, "service": {"berth"}})
	var alice struct {
		RefreshToken string `json:"refresh_token"`
	}
	if got.status != http.StatusOK || json.Unmarshal(got.body, &alice) != nil || alice.RefreshToken == "" {
		t.Fatalf("password grant: %d", got.status)
	}
	if got := postForm(t, b, "/auth/revoke", url.Values{"token": {alice.RefreshToken}}); got.status != http.StatusOK {
		t.Fatalf("revoke: %s", got)
	}
	got = postForm(t, a.server, "/auth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {alice.RefreshToken}})
	if got.status != http.StatusUnauthorized || !strings.Contains(string(got.body), "revoked") {
		t.Errorf("the refresh token revoked at the other replica: %s, want 401 saying it was revoked", got)
	}

	// The CLI's auth commands print one JSON document each.
	alicePC := a.users["alice"]
	for _, args := range [][]string{
		{"auth", "check", "--config", a.config, "--format", "json", "user:alice", "a/x", "push"},
		{"logout", a.addr, "--format", "json"},
	} {
		r := alicePC.must(t, berthBin, args...)
		if !oneJSONDocument(r.stdout) {
			t.Errorf("berth %s: %q, want one JSON document", strings.Join(args, " "), r.stdout)
		}
	}
	r := runWith(t, command{dir: alicePC.home, env: alicePC.env(), stdin: alicePC.password}, berthBin,
		"login", "--format", "json", "-u", "alice", "--password-stdin", a.addr)
	if r.code != 0 || !oneJSONDocument(r.stdout) || strings.Contains(r.stdout, alicePC.password) {
		t.Errorf("berth login --format json: exit %d, %q, want one JSON document without the password", r.code, r.stdout)
	}

	// Once the OIDC token expired (and the leeway passed), its refresh token
	// is refused at the other replica too.
	time.Sleep(time.Until(oidcExp.Add(31 * time.Second)))
	got = postForm(t, b, "/auth/token", oidcRefresh)
	if got.status != http.StatusUnauthorized || !strings.Contains(string(got.body), "expired") {
		t.Errorf("the OIDC-derived refresh token after the OIDC token expired: %s, want 401 saying it expired", got)
	}
}

// postForm posts form to s's path, with header pairs, and returns the
// answer (redirects not followed).
func postForm(t *testing.T, s *server, path string, form url.Values, header ...string) hop {
	t.Helper()
	h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	return roundTrip(t, http.MethodPost, s.url()+path, creds{}, "", h, []byte(form.Encode()))
}

// getWithCookie gets s's home page with the session cookie.
func getWithCookie(t *testing.T, s *server, cookie string) hop {
	t.Helper()
	return roundTrip(t, http.MethodGet, s.url()+"/", creds{}, "", http.Header{"Cookie": {"berth_session=" + cookie}}, nil)
}

// sessionCookie is the value of the session cookie an answer sets; "" when
// it sets none or clears it.
func sessionCookie(h hop) string {
	for _, c := range (&http.Response{Header: h.header}).Cookies() {
		if c.Name == "berth_session" && c.MaxAge >= 0 {
			return c.Value
		}
	}
	return ""
}

// oneJSONDocument reports whether s is exactly one JSON document.
func oneJSONDocument(s string) bool {
	dec := json.NewDecoder(strings.NewReader(s))
	var v json.RawMessage
	if dec.Decode(&v) != nil {
		return false
	}
	return !dec.More()
}
