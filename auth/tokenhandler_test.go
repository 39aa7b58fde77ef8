package auth

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
)

func TestParseScope(t *testing.T) {
	good := []struct {
		in   string
		want scope
	}{
		{"repository:a/b:pull", scope{"repository", "a/b", []Action{Pull}}},
		{"repository:a/b:pull,push", scope{"repository", "a/b", []Action{Pull, Push}}},
		{"repository:localhost:5000/a/b:pull", scope{"repository", "localhost:5000/a/b", []Action{Pull}}},
		{"repository:a/b/c:delete,sign", scope{"repository", "a/b/c", []Action{Delete, Sign}}},
		{"repository:a/b:*", scope{"repository", "a/b", Actions}},
		{"registry:catalog:*", scope{typ: "registry", name: "catalog"}},
	}
	for _, tc := range good {
		got, err := parseScope(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseScope(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	bad := []struct{ in, want string }{
		{"", "want type:name:actions"},
		{"repository", "want type:name:actions"},
		{"repository:a/b", "want type:name:actions"},
		{"repository::pull", "want a repository name"},
		{"repository:a/b:", "unknown action"},
		{"repository:a/b:pull,", "unknown action"},
		{"repository:a/b:fly", `unknown action "fly"`},
		{"repository:a/b:PULL", "unknown action"},
		{"registry:catalog:pull", "registry:catalog:*"},
		{"registry:other:*", "registry:catalog:*"},
		{"repository(plugin):a/b:pull", "unknown resource type"},
		{"image:a/b:pull", "unknown resource type"},
	}
	for _, tc := range bad {
		_, err := parseScope(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "scope \""+tc.in+"\"") {
			t.Errorf("parseScope(%q): got %v, want an error naming the scope and saying %q", tc.in, err, tc.want)
		}
	}
}

func TestGrant(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name   string
		id     Identity
		scopes []string
		want   []Grant
	}{
		{"owner", f.user(t, "alice"), []string{"repository:a/x:pull,push"},
			[]Grant{{"repository", "a/x", []string{"pull", "push"}}}},
		{"owner, every action", f.user(t, "alice"), []string{"repository:a/x:*"},
			[]Grant{{"repository", "a/x", []string{"pull", "push", "delete"}}}},
		{"push covers sign", f.user(t, "alice"), []string{"repository:a/x:sign,push"},
			[]Grant{{"repository", "a/x", []string{"push"}}}},
		{"another's namespace", f.user(t, "alice"), []string{"repository:b/x:pull,push"}, nil},
		{"signer asking push gets sign", f.user(t, "sam"), []string{"repository:a/x:pull,push"},
			[]Grant{{"repository", "a/x", []string{"pull", "sign"}}}},
		{"signer asking push and sign", f.user(t, "sam"), []string{"repository:a/x:push,sign"},
			[]Grant{{"repository", "a/x", []string{"sign"}}}},
		{"anonymous on a public namespace", AnonymousIdentity(), []string{"repository:pub/x:pull,push"},
			[]Grant{{"repository", "pub/x", []string{"pull"}}}},
		{"anonymous elsewhere", AnonymousIdentity(), []string{"repository:a/x:pull"}, nil},
		{"host:port names are not stripped", f.user(t, "alice"), []string{"repository:localhost:5000/a/x:pull"}, nil},
		{"OLM catalog: pull, never a write", f.user(t, "alice"), []string{"repository:a/olm/catalog:pull,push,delete"},
			[]Grant{{"repository", "a/olm/catalog", []string{"pull"}}}},
		{"OLM catalog: a signer gets no sign", f.user(t, "sam"), []string{"repository:a/olm/catalog:pull,push"},
			[]Grant{{"repository", "a/olm/catalog", []string{"pull"}}}},
		{"OLM catalog of another's namespace", f.user(t, "alice"), []string{"repository:b/olm/catalog:pull"}, nil},
		{"OLM catalog of a public namespace", AnonymousIdentity(), []string{"repository:pub/olm/catalog:pull,push"},
			[]Grant{{"repository", "pub/olm/catalog", []string{"pull"}}}},
		{"catalog", AnonymousIdentity(), []string{"registry:catalog:*"},
			[]Grant{{"registry", "catalog", []string{"*"}}}},
		{"deduplicated, in asked order", f.user(t, "alice"),
			[]string{"repository:a/y:pull repository:a/x:push", "repository:a/y:pull,delete", "registry:catalog:*", "registry:catalog:*"},
			[]Grant{{"repository", "a/y", []string{"pull", "delete"}}, {"repository", "a/x", []string{"push"}}, {"registry", "catalog", []string{"*"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scopes, err := parseScopes(tc.scopes)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.grant(tc.id, scopes); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// tokenReply is a token endpoint's answer.
type tokenReply struct {
	status  int
	header  http.Header
	body    tokenResponse
	errText string
}

func (f *fixture) serve(t testing.TB, r *http.Request) tokenReply {
	t.Helper()
	w := httptest.NewRecorder()
	f.Handler().ServeHTTP(w, r)
	rep := tokenReply{status: w.Code, header: w.Header()}
	if w.Code == http.StatusOK {
		if err := json.Unmarshal(w.Body.Bytes(), &rep.body); err != nil {
			t.Fatalf("%s: %v", w.Body, err)
		}
	} else {
		rep.errText = w.Body.String()
	}
	return rep
}

func getToken(query, user, password string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/auth/token?"+query, nil)
	if user != "" {
		r.SetBasicAuth(user, password)
	}
	return r
}

func postToken(form url.Values) *http.Request { return postTo("/auth/token", form) }

// postTo posts form to path.
func postTo(path string, form url.Values) *http.Request {
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return r
}

// grantsOf returns the access claim of an access token, checking the
// token's standard claims.
func (f *fixture) grantsOf(t testing.TB, token string) []Grant {
	t.Helper()
	c, err := f.key.verify(token, "berth", useAccess, f.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if c.ID == "" || c.IssuedAt == nil || c.NotBefore == nil || !c.Expiry.Time().Equal(f.clock.Now().Add(5*time.Minute)) || !slices.Equal(c.Audience, jwt.Audience{"berth"}) {
		t.Errorf("claims %+v: want jti, iat, nbf, aud berth and exp in 5m", c.Claims)
	}
	return c.Access
}

func TestTokenEndpointGET(t *testing.T) {
	f := newFixture(t)
	rep := f.serve(t, getToken("service=berth&scope=repository:a/x:pull,push&account=alice", "alice", "alice-pw"))
	if rep.status != http.StatusOK || rep.body.Token == "" || rep.body.Token != rep.body.AccessToken || rep.body.ExpiresIn != 300 || rep.body.RefreshToken != "" {
		t.Fatalf("got %+v", rep)
	}
	if rep.header.Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control %q", rep.header.Get("Cache-Control"))
	}
	if _, err := time.Parse(time.RFC3339, rep.body.IssuedAt); err != nil {
		t.Errorf("issued_at: %v", err)
	}
	if g := f.grantsOf(t, rep.body.Token); !reflect.DeepEqual(g, []Grant{{"repository", "a/x", []string{"pull", "push"}}}) {
		t.Errorf("grants %+v", g)
	}
	id, err := f.Authenticate(bearerRequest(rep.body.Token))
	if err != nil || !id.Limited || !f.policy.Allowed(id, "a/x", Push) || f.policy.Allowed(id, "a/x", Delete) {
		t.Errorf("the token as Bearer: %+v, %v", id, err)
	}

	rep = f.serve(t, getToken("service=berth&scope=repository:pub/x:pull&scope=repository:a/x:pull+registry:catalog:*", "", ""))
	if rep.status != http.StatusOK {
		t.Fatalf("anonymous: %+v", rep)
	}
	if g := f.grantsOf(t, rep.body.Token); !reflect.DeepEqual(g, []Grant{{"repository", "pub/x", []string{"pull"}}, {"registry", "catalog", []string{"*"}}}) {
		t.Errorf("anonymous grants %+v", g)
	}
	rep = f.serve(t, getToken("service=berth", "", ""))
	if rep.status != http.StatusOK || len(f.grantsOf(t, rep.body.Token)) != 0 || !strings.Contains(rep.body.Token, ".") {
		t.Errorf("anonymous without scope: %+v", rep)
	}

	rep = f.serve(t, getToken("service=berth&scope=repository:a/x:pull&offline_token=true", "alice", "alice-pw"))
	if rep.status != http.StatusOK || rep.body.RefreshToken == "" {
		t.Fatalf("offline_token: %+v", rep)
	}
	if _, err := f.Authenticate(bearerRequest(rep.body.RefreshToken)); err == nil {
		t.Errorf("a refresh token was accepted as an access token")
	}
	if rep := f.serve(t, getToken("service=berth&offline_token=true", "", "")); rep.body.RefreshToken != "" {
		t.Errorf("anonymous got a refresh token")
	}
}

func TestTokenEndpointPOST(t *testing.T) {
	f := newFixture(t)
	f.addRobot(t, "ci", "s3cret", true)
	rep := f.serve(t, postToken(url.Values{"grant_type": {"password"}, "username": {"alice"}, "password": {"alice-pw"},
		"service": {"berth"}, "scope": {"repository:a/x:pull,push repository:b/x:pull"}, "client_id": {"helm"}, "access_type": {"offline"}}))
	if rep.status != http.StatusOK || rep.body.AccessToken == "" || rep.body.RefreshToken == "" {
		t.Fatalf("password grant: %+v", rep)
	}
	if g := f.grantsOf(t, rep.body.AccessToken); !reflect.DeepEqual(g, []Grant{{"repository", "a/x", []string{"pull", "push"}}}) {
		t.Errorf("grants %+v", g)
	}
	refresh := rep.body.RefreshToken
	rep = f.serve(t, postToken(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "service": {"berth"}, "scope": {"repository:a/y:delete"}}))
	if rep.status != http.StatusOK || rep.body.RefreshToken != "" {
		t.Fatalf("refresh grant: %+v", rep)
	}
	if g := f.grantsOf(t, rep.body.AccessToken); !reflect.DeepEqual(g, []Grant{{"repository", "a/y", []string{"delete"}}}) {
		t.Errorf("refreshed grants %+v", g)
	}
	access := rep.body.AccessToken
	if rep := f.serve(t, postToken(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {access}})); rep.status != http.StatusUnauthorized {
		t.Errorf("an access token redeemed as a refresh token: %+v", rep)
	}

	rep = f.serve(t, postToken(url.Values{"grant_type": {"password"}, "username": {"robot+a+ci"}, "password": {"s3cret"}, "access_type": {"offline"}}))
	if rep.status != http.StatusOK {
		t.Fatalf("robot: %+v", rep)
	}
	robotRefresh := rep.body.RefreshToken
	writeHtpasswd(t, f.cfg.Htpasswd, map[string]string{"bob": "bob-pw"})
	f.users.statEvery = 0
	f.users.nextStat.Store(0)
	f.robots.Revoke(t.Context(), "a", "ci", f.clock.Now())
	f.clock.Advance(time.Second)
	for name, tok := range map[string]string{"a removed user": refresh, "a revoked robot": robotRefresh} {
		rep := f.serve(t, postToken(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok}}))
		if rep.status != http.StatusUnauthorized {
			t.Errorf("the refresh token of %s: %+v", name, rep)
		}
	}
}

func TestTokenEndpointErrors(t *testing.T) {
	f := newFixture(t)
	form := func(kv ...string) *http.Request {
		v := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return postToken(v)
	}
	jsonBody := postToken(url.Values{"grant_type": {"password"}})
	jsonBody.Header.Set("Content-Type", "application/json")
	for _, tc := range []struct {
		name   string
		r      *http.Request
		status int
		want   string
	}{
		{"wrong service", getToken("service=other&scope=repository:a/x:pull", "alice", "alice-pw"), 400, `unknown service \"other\"`},
		{"bad scope", getToken("service=berth&scope=repository:a/x:fly", "alice", "alice-pw"), 400, `scope \"repository:a/x:fly\"`},
		{"wrong password", getToken("service=berth", "alice", "nope"), 401, "wrong user name or password"},
		{"unknown user", getToken("service=berth", "mallory", "nope"), 401, "wrong user name or password"},
		{"bad Bearer", bearerToken("junk"), 401, "not a JWT"},
		{"POST wrong password", form("grant_type", "password", "username", "alice", "password", "nope"), 401, "wrong user name or password"},
		{"POST no password", form("grant_type", "password", "username", "alice"), 400, "needs username and password"},
		{"POST no grant_type", form("username", "alice", "password", "alice-pw"), 400, `unsupported grant_type \"\"`},
		{"POST client_credentials", form("grant_type", "client_credentials"), 400, "unsupported grant_type"},
		{"POST no refresh token", form("grant_type", "refresh_token"), 400, "needs refresh_token"},
		{"POST bad refresh token", form("grant_type", "refresh_token", "refresh_token", "junk"), 401, "malformed token"},
		{"POST wrong service", form("grant_type", "password", "username", "alice", "password", "alice-pw", "service", "x"), 400, "unknown service"},
		{"POST JSON", jsonBody, 400, "application/x-www-form-urlencoded"},
		{"PUT", httptest.NewRequest(http.MethodPut, "/auth/token", nil), 405, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := f.serve(t, tc.r)
			if rep.status != tc.status || !strings.Contains(rep.errText, tc.want) {
				t.Fatalf("got %d %s, want %d saying %q", rep.status, rep.errText, tc.status, tc.want)
			}
			if tc.status == 401 && (rep.header.Get("WWW-Authenticate") != `Basic realm="berth"` || !strings.Contains(rep.errText, `{"errors":[{"code":"UNAUTHORIZED"`)) {
				t.Errorf("401 without a Basic challenge or UNAUTHORIZED: %v %s", rep.header, rep.errText)
			}
		})
	}
}

func bearerToken(token string) *http.Request {
	r := getToken("service=berth", "", "")
	r.Header.Set("Authorization", "Bearer "+token)
	return r
}

func TestTokenEndpointRateLimit(t *testing.T) {
	f := newFixture(t)
	for range 5 {
		if rep := f.serve(t, getToken("service=berth", "alice", "nope")); rep.status != http.StatusUnauthorized {
			t.Fatalf("got %+v", rep)
		}
	}
	f.clock.Advance(10 * time.Second)
	for _, r := range []*http.Request{
		getToken("service=berth", "alice", "alice-pw"),
		postToken(url.Values{"grant_type": {"password"}, "username": {"alice"}, "password": {"alice-pw"}}),
	} {
		rep := f.serve(t, r)
		if rep.status != http.StatusTooManyRequests || rep.header.Get("Retry-After") != "50" || !strings.Contains(rep.errText, "TOOMANYREQUESTS") {
			t.Errorf("%s after 5 failures: got %d Retry-After %q %s", r.Method, rep.status, rep.header.Get("Retry-After"), rep.errText)
		}
	}
	if !strings.Contains(f.auditLog.String(), `"reason":"too many failed logins`) {
		t.Errorf("the audit log has no rate-limited login:\n%s", f.auditLog)
	}
}

func TestJWKSEndpoint(t *testing.T) {
	f := newFixture(t)
	w := httptest.NewRecorder()
	f.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/auth/jwks.json", nil))
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" || w.Body.String() != string(f.key.jwks) {
		t.Errorf("got %d %v %s", w.Code, w.Header(), w.Body)
	}
}

// BenchmarkTokenIssue measures GET /auth/token for a user whose password
// check is cached, reporting the 50th and 99th percentile latencies.
func BenchmarkTokenIssue(b *testing.B) {
	f := newFixture(b)
	f.now = time.Now
	h := f.Handler()
	r := getToken("service=berth&scope=repository:a/x:pull,push", "alice", "alice-pw")
	h.ServeHTTP(httptest.NewRecorder(), r)
	bcrypts := f.bcrypts.Load()
	var took []time.Duration
	for b.Loop() {
		w := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(w, r)
		took = append(took, time.Since(start))
		if w.Code != http.StatusOK {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
	}
	if f.bcrypts.Load() != bcrypts {
		b.Fatalf("bcrypt ran %d times", f.bcrypts.Load()-bcrypts)
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
}
