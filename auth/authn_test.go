package auth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/berth-registry/berth/config"
)

// testClock is a clock tests move by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fakeRobots is a RobotStore in memory.
type fakeRobots struct {
	mu      sync.Mutex
	robots  map[string]*Robot
	touches int
}

func (s *fakeRobots) Create(_ context.Context, r *Robot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.robots[r.Namespace+"+"+r.Name]; ok {
		return ErrRobotExists
	}
	s.robots[r.Namespace+"+"+r.Name] = r
	return nil
}

func (s *fakeRobots) Get(_ context.Context, ns, name string) (*Robot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.robots[ns+"+"+name]
	if !ok {
		return nil, ErrRobotNotFound
	}
	c := *r
	return &c, nil
}

func (s *fakeRobots) List(context.Context, string) ([]*Robot, error) { return nil, nil }

func (s *fakeRobots) Revoke(_ context.Context, ns, name string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.robots[ns+"+"+name]
	if !ok {
		return ErrRobotNotFound
	}
	r.RevokedAt = at
	return nil
}

func (s *fakeRobots) Touch(_ context.Context, ns, name string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touches++
	s.robots[ns+"+"+name].LastUsed = at
	return nil
}

func (s *fakeRobots) Close() error { return nil }

func (s *fakeRobots) touchCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.touches
}

// fixture is an Authn with users alice (owner of a/*), bob (owner of b/*)
// and sam (a signer of a/*), a public namespace pub, robots of a, a clock
// and a count of bcrypt comparisons.
type fixture struct {
	*Authn
	cfg      *config.Auth
	clock    *testClock
	robots   *fakeRobots
	revoked  *fakeRevocations
	bcrypts  atomic.Int64
	auditLog *bytes.Buffer
}

var testPasswords = map[string]string{"alice": "alice-pw", "bob": "bob-pw", "sam": "sam-pw"}

func writeHtpasswd(t testing.TB, file string, users map[string]string) {
	t.Helper()
	var b strings.Builder
	for u, pw := range users {
		h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(u + ":" + string(h) + "\n")
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

func testConfig(t testing.TB) *config.Auth {
	dir := t.TempDir()
	htpasswd := filepath.Join(dir, "htpasswd")
	writeHtpasswd(t, htpasswd, testPasswords)
	return &config.Auth{
		Service:  "berth",
		TokenTTL: 5 * time.Minute,
		KeyFile:  filepath.Join(dir, "auth", "token-key.pem"),
		Htpasswd: htpasswd,
		Groups:   map[string][]string{"signers": {"sam"}, "staff": {"alice", "bob"}},
		Public:   []string{"pub"},
		Rules: []config.AuthRule{
			{Subjects: []string{"user:alice"}, Repositories: []string{"a/*"}, Actions: []string{"pull", "push", "delete"}},
			{Subjects: []string{"user:bob"}, Repositories: []string{"b/*"}, Actions: []string{"pull", "push", "delete"}},
			{Subjects: []string{"group:signers"}, Repositories: []string{"a/*"}, Actions: []string{"pull", "sign"}},
			{Subjects: []string{"oidc:ci"}, Repositories: []string{"a/*"}, Actions: []string{"pull", "push"}},
		},
		Login: config.Login{MaxFailures: 5, Window: time.Minute},
	}
}

func newFixture(t testing.TB, edit ...func(*config.Auth)) *fixture {
	t.Helper()
	cfg := testConfig(t)
	for _, e := range edit {
		e(cfg)
	}
	return newFixtureFrom(t, cfg)
}

func newFixtureFrom(t testing.TB, cfg *config.Auth) *fixture {
	t.Helper()
	return newReplica(t, cfg, &fakeRevocations{})
}

// newReplica is a fixture of cfg whose revocations are revoked: fixtures of
// one cfg and one store are replicas of one registry.
func newReplica(t testing.TB, cfg *config.Auth, revoked *fakeRevocations) *fixture {
	t.Helper()
	policy, err := NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{
		cfg:      cfg,
		clock:    &testClock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)},
		robots:   &fakeRobots{robots: map[string]*Robot{}},
		revoked:  revoked,
		auditLog: &bytes.Buffer{},
	}
	f.Authn, err = NewAuthn(cfg, AuthnOptions{Policy: policy, Robots: f.robots, Revocations: revoked, Audit: NewAuditor(f.auditLog), Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	f.users.compare = func(hash, pw []byte) error {
		f.bcrypts.Add(1)
		return bcrypt.CompareHashAndPassword(hash, pw)
	}
	return f
}

// user is the identity of the htpasswd user name, as a login establishes it.
func (f *fixture) user(t testing.TB, name string) Identity {
	t.Helper()
	id, ok := f.userIdentity(name, f.clock.Now())
	if !ok {
		t.Fatalf("no user %s", name)
	}
	return id
}

// addRobot stores a robot of namespace a with secret secret, pulling (and
// pushing when push) a/*, expiring in a day.
func (f *fixture) addRobot(t testing.TB, name, secret string, push bool) *Robot {
	t.Helper()
	actions := []Action{Pull}
	if push {
		actions = append(actions, Push)
	}
	sum := sha256.Sum256([]byte(secret))
	r := &Robot{
		Namespace:  "a",
		Name:       name,
		Scopes:     []RobotScope{{Repositories: []string{"a/*"}, Actions: actions}},
		CreatedAt:  f.clock.Now(),
		ExpiresAt:  f.clock.Now().Add(24 * time.Hour),
		SecretHash: sum[:],
	}
	if err := f.robots.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

func basicRequest(user, password string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/v2/", nil)
	r.SetBasicAuth(user, password)
	return r
}

func bearerRequest(token string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/v2/", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	return r
}

func TestAuthenticateUsers(t *testing.T) {
	f := newFixture(t)
	id, err := f.Authenticate(httptest.NewRequest(http.MethodGet, "/v2/", nil))
	if err != nil || !id.IsAnonymous() {
		t.Fatalf("no Authorization: got %+v, %v; want anonymous", id, err)
	}
	id, err = f.Authenticate(basicRequest("alice", "alice-pw"))
	if err != nil || id.Subject != "user:alice" || strings.Join(id.Groups, ",") != "staff" || id.Limited {
		t.Fatalf("alice: got %+v, %v", id, err)
	}
	id, err = f.Authenticate(basicRequest("sam", "sam-pw"))
	if err != nil || !f.policy.Allowed(id, "a/x", Sign) || f.policy.Allowed(id, "a/x", Push) {
		t.Fatalf("sam: got %+v, %v; want a signer of a/*", id, err)
	}

	bad := []struct {
		name string
		auth string
		want string
	}{
		{"wrong password", "Basic " + b64("alice:nope"), "wrong user name or password"},
		{"unknown user", "Basic " + b64("mallory:alice-pw"), "wrong user name or password"},
		{"empty password", "Basic " + b64("alice:"), "wrong user name or password"},
		{"Basic not base64", "Basic !!!", "malformed Basic credentials"},
		{"Basic without colon", "Basic " + b64("alice"), "malformed Basic credentials"},
		{"unknown scheme", "Digest username=alice", "unsupported Authorization scheme"},
		{"Bearer garbage", "Bearer not-a-token", "not a JWT"},
		{"Bearer empty", "Bearer ", "not a JWT"},
		{"Bearer unknown robot", "Bearer robot+a+ghost:secret", "wrong user name or password"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/v2/", nil)
			r.Header.Set("Authorization", tc.auth)
			_, err := f.Authenticate(r)
			if !errors.Is(err, ErrBadCredentials) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v; want bad credentials saying %q", err, tc.want)
			}
		})
	}
	if !strings.Contains(f.auditLog.String(), `"subject":"mallory","action":"login","resource":"","result":"failed"`) {
		t.Errorf("no failed login of mallory in the audit log:\n%s", f.auditLog)
	}
}

func TestPasswordChecksRunBcryptOnceThenCache(t *testing.T) {
	f := newFixture(t)
	steps := []struct {
		name        string
		user, pw    string
		advance     time.Duration
		ok          bool
		wantBcrypts int64
	}{
		{"unknown user costs a bcrypt too", "mallory", "x", 0, false, 1},
		{"wrong password", "alice", "x", 0, false, 1},
		{"right password", "alice", "alice-pw", 0, true, 1},
		{"cached", "alice", "alice-pw", 0, true, 0},
		{"cached, still", "alice", "alice-pw", 30 * time.Second, true, 0},
		{"a wrong password is never cached", "alice", "x", 0, false, 1},
		{"the cache expires", "alice", "alice-pw", 31 * time.Second, true, 1},
		{"another user's password", "bob", "alice-pw", 0, false, 1},
	}
	for _, s := range steps {
		f.clock.Advance(s.advance)
		before := f.bcrypts.Load()
		_, err := f.Authenticate(basicRequest(s.user, s.pw))
		if (err == nil) != s.ok {
			t.Errorf("%s: got %v, want ok=%v", s.name, err, s.ok)
		}
		if got := f.bcrypts.Load() - before; got != s.wantBcrypts {
			t.Errorf("%s: %d bcrypt comparisons, want %d", s.name, got, s.wantBcrypts)
		}
	}
}

// Logins with the same credentials at the same time (a client's requests in
// flight when the cached check expires) share one bcrypt comparison; each
// gets its answer, a wrong password too.
func TestConcurrentPasswordChecksShareOneBcrypt(t *testing.T) {
	for _, tc := range []struct {
		name, pw string
		ok       bool
	}{{"right password", "alice-pw", true}, {"wrong password", "x", false}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			slow := f.users.compare
			f.users.compare = func(hash, pw []byte) error {
				time.Sleep(50 * time.Millisecond)
				return slow(hash, pw)
			}
			const n = 8
			errs := make(chan error, n)
			for range n {
				go func() {
					_, err := f.Authenticate(basicRequest("alice", tc.pw))
					errs <- err
				}()
			}
			for range n {
				if err := <-errs; (err == nil) != tc.ok {
					t.Errorf("got %v, want ok=%v", err, tc.ok)
				}
			}
			if got := f.bcrypts.Load(); got != 1 {
				t.Errorf("%d logins at once ran %d bcrypt comparisons, want 1", n, got)
			}
			if len(f.users.running) != 0 {
				t.Errorf("%d checks still marked running", len(f.users.running))
			}
		})
	}
}

func TestRobots(t *testing.T) {
	f := newFixture(t)
	f.addRobot(t, "ci", "s3cret", true)
	id, err := f.Authenticate(basicRequest("robot+a+ci", "s3cret"))
	if err != nil || id.Subject != "robot:a+ci" || id.Robot == nil || id.Robot.Name != "ci" {
		t.Fatalf("robot login: got %+v, %v", id, err)
	}
	if !f.policy.Allowed(id, "a/x", Push) || f.policy.Allowed(id, "b/x", Pull) {
		t.Errorf("robot of a: want push on a/x and nothing on b/x")
	}
	if id, err := f.Authenticate(bearerRequest("robot+a+ci:s3cret")); err != nil || id.Subject != "robot:a+ci" {
		t.Errorf("robot Bearer: got %+v, %v", id, err)
	}
	for _, tc := range []struct{ user, secret string }{
		{"robot+a+ci", "wrong"},
		{"robot+a+ci", ""},
		{"robot+a+ghost", "s3cret"},
		{"robot+b+ci", "s3cret"},
	} {
		if _, err := f.Authenticate(basicRequest(tc.user, tc.secret)); !errors.Is(err, errWrongPassword) {
			t.Errorf("%s with %q: got %v, want %v", tc.user, tc.secret, err, errWrongPassword)
		}
	}
	if n := f.robots.touchCount(); n != 1 {
		t.Errorf("%d touches within a minute, want 1", n)
	}
	f.clock.Advance(time.Minute)
	if _, err := f.Authenticate(basicRequest("robot+a+ci", "s3cret")); err != nil {
		t.Fatal(err)
	}
	if n := f.robots.touchCount(); n != 2 {
		t.Errorf("%d touches after a minute, want 2", n)
	}
}

func TestInactiveRobotsFailAtTheNextRequest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		retire func(f *fixture)
		want   string
	}{
		{"revoked", func(f *fixture) {
			f.robots.Revoke(context.Background(), "a", "ci", f.clock.Now())
		}, "was revoked"},
		{"expired", func(f *fixture) { f.clock.Advance(24 * time.Hour) }, "expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *config.Auth) { c.TokenTTL = 48 * time.Hour })
			f.addRobot(t, "ci", "s3cret", false)
			id, err := f.Authenticate(basicRequest("robot+a+ci", "s3cret"))
			if err != nil {
				t.Fatal(err)
			}
			tok, _, err := f.Issue(id, []Grant{{Type: "repository", Name: "a/x", Actions: []string{"pull"}}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Authenticate(bearerRequest(tok)); err != nil {
				t.Fatalf("token of an active robot: %v", err)
			}
			tc.retire(f)
			for _, r := range []*http.Request{basicRequest("robot+a+ci", "s3cret"), bearerRequest(tok), bearerRequest("robot+a+ci:s3cret")} {
				_, err := f.Authenticate(r)
				if !errors.Is(err, ErrBadCredentials) || !errors.Is(err, ErrRobotInactive) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: got %v, want bad credentials saying %q", r.Header.Get("Authorization")[:12], err, tc.want)
				}
			}
		})
	}
}

func TestBerthTokens(t *testing.T) {
	f := newFixture(t)
	grants := []Grant{{Type: "repository", Name: "a/x", Actions: []string{"pull"}}}
	tok, _, err := f.Issue(f.user(t, "alice"), grants)
	if err != nil {
		t.Fatal(err)
	}
	id, err := f.Authenticate(bearerRequest(tok))
	if err != nil || id.Subject != "user:alice" || !id.Limited || len(id.Grants) != 1 || strings.Join(id.Groups, ",") != "staff" {
		t.Fatalf("got %+v, %v", id, err)
	}
	if !f.policy.Allowed(id, "a/x", Pull) || f.policy.Allowed(id, "a/x", Push) || f.policy.Allowed(id, "a/y", Pull) {
		t.Errorf("a token granting pull on a/x: want exactly that")
	}

	other := newFixture(t)
	foreign, _, _ := other.Issue(other.user(t, "alice"), grants)
	refresh, _ := f.issueRefresh(f.user(t, "alice"), f.clock.Now())
	now := f.clock.Now()
	sign := func(service, sub string, from, to time.Duration) string {
		id := Identity{Subject: sub}
		if sub == "user:alice" {
			id = f.user(t, "alice")
		}
		tok, err := f.key.sign(service, id, useAccess, grants, now.Add(from), now.Add(to))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	for _, tc := range []struct{ name, token, want string }{
		{"signed by another key", foreign, "not signed by this registry"},
		{"a refresh token", refresh, `of kind "refresh", not "access"`},
		{"expired beyond the leeway", sign("berth", "user:alice", -10*time.Minute, -31*time.Second), "expired"},
		{"not valid yet beyond the leeway", sign("berth", "user:alice", 31*time.Second, time.Hour), "not valid yet"},
		{"for another service", sign("other", "user:alice", 0, time.Minute), "issuer"},
		{"of a user no longer in htpasswd", sign("berth", "user:ghost", 0, time.Minute), "no longer exists"},
		{"of an unknown subject kind", sign("berth", "admin:root", 0, time.Minute), "no longer exists"},
		{"tampered", tok[:len(tok)-4] + "AAAA", "not signed by this registry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.Authenticate(bearerRequest(tc.token))
			if !errors.Is(err, ErrBadCredentials) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want bad credentials saying %q", err, tc.want)
			}
		})
	}
	for _, tok := range []string{sign("berth", "user:alice", -10*time.Minute, -29*time.Second), sign("berth", "user:alice", 29*time.Second, time.Hour)} {
		if _, err := f.Authenticate(bearerRequest(tok)); err != nil {
			t.Errorf("a token within the leeway: %v", err)
		}
	}
}

func TestLoginRateLimit(t *testing.T) {
	f := newFixture(t)
	for range 5 {
		if _, err := f.Authenticate(basicRequest("alice", "nope")); !errors.Is(err, ErrBadCredentials) {
			t.Fatalf("got %v", err)
		}
	}
	before := f.bcrypts.Load()
	_, err := f.Authenticate(basicRequest("alice", "alice-pw"))
	var rl *RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != time.Minute {
		t.Fatalf("sixth attempt: got %v, want rate-limited for a minute", err)
	}
	if f.bcrypts.Load() != before {
		t.Errorf("a rate-limited attempt ran bcrypt")
	}
	other := basicRequest("alice", "alice-pw")
	other.RemoteAddr = "192.0.2.99:1234"
	if _, err := f.Authenticate(other); err != nil {
		t.Errorf("another client address: %v", err)
	}
	if _, err := f.Authenticate(basicRequest("bob", "bob-pw")); err != nil {
		t.Errorf("another user: %v", err)
	}
	f.clock.Advance(time.Minute)
	if _, err := f.Authenticate(basicRequest("alice", "alice-pw")); err != nil {
		t.Errorf("after the window: %v", err)
	}
}

// TestLoginRateLimitBehindProxy: behind a trusted proxy every request comes
// from the proxy's address, and the limiter keys on the client address the
// proxy forwards, so wrong passwords from one client lock out that client
// only; a client that forges X-Forwarded-For neither escapes its own
// lockout nor locks out the address it names.
func TestLoginRateLimitBehindProxy(t *testing.T) {
	f := newFixture(t)
	login := func(peer, forwardedFor, password string) error {
		r := basicRequest("alice", password)
		r.Header.Set("X-Forwarded-For", forwardedFor)
		_, err := f.Authenticate(throughProxy(t, "10.0.0.0/8", peer, r))
		return err
	}
	const proxy, attacker = "10.0.0.1:1234", "192.0.2.66:1234"
	for _, peer := range []string{proxy, attacker} {
		for range 5 {
			if err := login(peer, "198.51.100.5", "nope"); !errors.Is(err, ErrBadCredentials) {
				t.Fatalf("wrong password from %s: %v", peer, err)
			}
		}
	}
	var rl *RateLimitedError
	for _, tc := range []struct {
		what, peer, forwardedFor string
		limited                  bool
	}{
		{"the client that failed, through the proxy", proxy, "198.51.100.5", true},
		{"another client through the same proxy", proxy, "198.51.100.6", false},
		{"the attacker, forging another address", attacker, "198.51.100.7", true},
		{"the attacker, forging the proxy's", attacker, "10.0.0.1", true},
	} {
		err := login(tc.peer, tc.forwardedFor, "alice-pw")
		if limited := errors.As(err, &rl); limited != tc.limited || !limited && err != nil {
			t.Errorf("%s: %v, want rate-limited %v", tc.what, err, tc.limited)
		}
	}
}

func TestLoginLimiterIsBounded(t *testing.T) {
	l := newLoginLimiter(1, time.Minute)
	l.size = 3
	now := time.Now()
	for i, k := range []string{"a", "b", "c", "d"} {
		l.fail(k, now.Add(time.Duration(i)*time.Second))
	}
	if len(l.failures) != 3 || l.retryAfter("a", now) != 0 || l.retryAfter("d", now) == 0 {
		t.Errorf("want the oldest dropped: %v", l.failures)
	}
	l.fail("e", now.Add(2*time.Minute))
	if len(l.failures) != 1 {
		t.Errorf("want the expired dropped: %v", l.failures)
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
