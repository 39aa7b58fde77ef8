package ui_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/ui"
)

// authUI is the UI of a catalog holding a/secret (with secretFiles), b/other
// and pub/open, under a policy that lets alice pull a/* and everyone pull
// pub/*.
func authUI(t *testing.T) http.Handler {
	t.Helper()
	dir := t.TempDir()
	hash, err := bcrypt.GenerateFromPassword([]byte("alice-pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	htpasswd := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(htpasswd, []byte("alice:"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &config.Auth{
		Service: "berth", TokenTTL: 5 * time.Minute, KeyFile: filepath.Join(dir, "key.pem"), Htpasswd: htpasswd,
		Public: []string{"pub"},
		Rules:  []config.AuthRule{{Subjects: []string{"user:alice"}, Repositories: []string{"a/*"}, Actions: []string{"pull"}}},
		Login:  config.Login{MaxFailures: 3, Window: time.Minute},
	}
	policy, err := auth.NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	authn, err := auth.NewAuthn(cfg, auth.AuthnOptions{Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	chart := func(name string, files map[string]string) map[string]string {
		files["Chart.yaml"] = "apiVersion: v2\nname: " + name + "\nversion: 1.0.0\n"
		return files
	}
	e.push("a", build(t, "", "", chart("secret", secretFiles)))
	e.push("b", build(t, "", "", chart("other", map[string]string{})))
	e.push("pub", build(t, "", "", chart("open", map[string]string{})))
	return newUI(e, ui.Options{Authorizer: auth.CatalogAuthorizer{Policy: policy}, Sessions: auth.NewSessions(authn, auth.SessionOptions{})})
}

func postLogin(h http.Handler, user, password string, mod ...func(*http.Request)) *httptest.ResponseRecorder {
	form := url.Values{"username": {user}, "password": {password}}
	r := httptest.NewRequest(http.MethodPost, "/ui/login", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, m := range mod {
		m(r)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func TestLoginFlow(t *testing.T) {
	h := authUI(t)
	resp, body := get(t, h, "/ui/login")
	checkPage(t, "/ui/login", resp, body)
	if !strings.Contains(body, `<label for="password">`) || !strings.Contains(body, `type="password"`) {
		t.Fatalf("no login form: %s", body)
	}
	if _, body := get(t, h, "/"); !strings.Contains(body, `href="/ui/login">Sign in</a>`) || strings.Contains(body, "secret") {
		t.Errorf("anonymous search page: no sign-in link, or shows a/secret")
	}
	if resp, _ := get(t, h, "/ui/packages/a/secret"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("anonymous a/secret: %d, want 404", resp.StatusCode)
	}

	rec := postLogin(h, "alice", "wrong-password-xyz")
	if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "Wrong user name or password") ||
		strings.Contains(rec.Body.String(), "wrong-password-xyz") || !strings.Contains(rec.Body.String(), `value="alice"`) {
		t.Errorf("bad login: %d %s", rec.Code, rec.Body.String())
	}
	if len(rec.Result().Cookies()) != 0 {
		t.Errorf("bad login set %v", rec.Result().Cookies())
	}
	checkPage(t, "POST /ui/login", rec.Result(), rec.Body.String())

	rec = postLogin(h, "alice", "alice-pw")
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || len(cookies) != 1 || cookies[0].Name != auth.SessionCookie {
		t.Fatalf("login: %d, cookies %v", rec.Code, cookies)
	}
	withCookie := func(r *http.Request) { r.AddCookie(cookies[0]) }
	resp, body = get(t, h, "/ui/packages/a/secret", withCookie)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Signed in as <strong>alice</strong>") || !strings.Contains(body, `action="/ui/logout"`) {
		t.Errorf("signed in a/secret: %d %s", resp.StatusCode, body)
	}
	// The pages name the viewer, never by the subject the policy matches.
	for _, path := range []string{"/", "/ui/packages/a/secret", "/ui/packages/a/secret/versions/1.0.0", "/ui/packages/a/secret/versions/1.0.0/files/Chart.yaml", "/ui/login", "/ui/nothing"} {
		if _, body := get(t, h, path, withCookie); strings.Contains(body, "user:") || !strings.Contains(body, "<strong>alice</strong>") {
			t.Errorf("%s: the page names the subject, or not alice", path)
		}
	}

	r := httptest.NewRequest(http.MethodPost, "/ui/logout", nil)
	r.AddCookie(cookies[0])
	out := httptest.NewRecorder()
	h.ServeHTTP(out, r)
	if c := out.Result().Cookies(); out.Code != http.StatusSeeOther || len(c) != 1 || c[0].MaxAge >= 0 {
		t.Errorf("logout: %d, cookies %v", out.Code, c)
	}
}

func TestLoginRateLimitedAndCrossSite(t *testing.T) {
	h := authUI(t)
	if rec := postLogin(h, "alice", "alice-pw", func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }); rec.Code != http.StatusBadRequest || len(rec.Result().Cookies()) != 0 {
		t.Errorf("cross-site login: %d, cookies %v", rec.Code, rec.Result().Cookies())
	}
	for range 3 {
		postLogin(h, "alice", "nope")
	}
	rec := postLogin(h, "alice", "alice-pw")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" || len(rec.Result().Cookies()) != 0 {
		t.Errorf("rate limited: %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
}

func TestInvalidSessionIsAnonymous(t *testing.T) {
	h := authUI(t)
	resp, body := get(t, h, "/", func(r *http.Request) { r.AddCookie(&http.Cookie{Name: auth.SessionCookie, Value: "forged"}) })
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Sign in") {
		t.Errorf("forged cookie: %d", resp.StatusCode)
	}
	if c := resp.Cookies(); len(c) != 1 || c[0].MaxAge >= 0 {
		t.Errorf("forged cookie not cleared: %v", c)
	}
}
