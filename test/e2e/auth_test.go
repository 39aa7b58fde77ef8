package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/berth-registry/berth/pkgformat"
)

// TestAuthOrasLoginPushPull: after oras login, alice pushes and pulls in her
// namespace; bob cannot pull it, and oras tells him exactly what it tells him
// for a name never pushed; anyone pulls from the public namespace, and nobody
// anonymous pushes there.
func TestAuthOrasLoginPushPull(t *testing.T) {
	requireOras(t)
	s := startAuthServer(t, authOptions{})
	alice, bob, admin := s.users["alice"], s.users["bob"], s.users["admin"]
	anonymous := s.account(t, "", "")

	alice.login(t, orasBin, "login", "--plain-http")
	file := packageTarball(t, alice.home, "cowsay", "0.2.0")
	ref := s.addr + "/a/cowsay:0.2.0"
	alice.must(t, orasBin, orasPush(ref, file)...)
	alice.must(t, orasBin, "pull", "--plain-http", ref, "-o", "pulled")
	if !bytes.Equal(readFile(t, filepath.Join(alice.home, "pulled", file)), readFile(t, filepath.Join(alice.home, file))) {
		t.Fatal("oras pull as alice: the tarball differs from the one pushed")
	}

	bob.login(t, orasBin, "login", "--plain-http")
	sameAsNeverPushed(t, bob, "cowsay", "zowsay", orasBin, "pull", "--plain-http", ref, "-o", "pulled")
	bob.refused(t, orasBin, orasPush(s.addr+"/a/cowsay:0.2.1", packageTarball(t, bob.home, "cowsay", "0.2.0"))...)
	sameAsNeverPushed(t, anonymous, "cowsay", "zowsay", orasBin, "pull", "--plain-http", ref, "-o", "pulled")

	admin.login(t, berthBin, "login")
	admin.pushFixture(t, "redis", "5.0.1-0.2.0", "pub/redis")
	anonymous.must(t, orasBin, "pull", "--plain-http", s.addr+"/pub/redis:5.0.1_0.2.0", "-o", "public")
	readFile(t, filepath.Join(anonymous.home, "public", "redis-5.0.1_0.2.0.tgz"))
	anonymous.refused(t, orasBin, orasPush(s.addr+"/pub/cowsay:0.2.0", packageTarball(t, anonymous.home, "cowsay", "0.2.0"))...)
	bob.refused(t, orasBin, orasPush(s.addr+"/pub/cowsay:0.2.0", packageTarball(t, bob.home, "cowsay", "0.2.0"))...)
}

// sameAsNeverPushed runs a command that a must be refused, and the same
// command with name replaced by never (a name of the same length never
// pushed), and fails the test unless both say the same, but for the name.
func sameAsNeverPushed(t *testing.T, a *account, name, never, bin string, args ...string) {
	t.Helper()
	denied := a.refused(t, bin, args...)
	neverArgs := make([]string, len(args))
	for i, arg := range args {
		neverArgs[i] = strings.ReplaceAll(arg, name, never)
	}
	if absent := strings.ReplaceAll(a.refused(t, bin, neverArgs...), never, name); absent != denied {
		t.Errorf("%s: %s %s tells a package the caller may not see from one never pushed:\n%s\nversus, for %s:\n%s",
			a.name(), filepath.Base(bin), strings.Join(args, " "), denied, never, absent)
	}
}

// TestAuthHelmRegistryLoginPushPull: after helm registry login, alice pushes
// and pulls a chart in her namespace; bob can neither pull nor push there,
// but pushes to his own; the catalog's Helm repository lists each one only
// his own chart.
func TestAuthHelmRegistryLoginPushPull(t *testing.T) {
	requireTool(t, "the helm CLI", helmBin)
	s := startAuthServer(t, authOptions{})
	alice, bob := s.users["alice"], s.users["bob"]

	alice.must(t, helmBin, "create", "webapp")
	alice.must(t, helmBin, "package", "webapp")
	tgz := filepath.Join(alice.home, "webapp-0.1.0.tgz")
	alice.login(t, helmBin, "registry", "login", "--plain-http")
	for _, a := range []*account{alice, bob} {
		if err := os.MkdirAll(filepath.Join(a.home, "pulled"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	alice.must(t, helmBin, "push", tgz, "oci://"+s.addr+"/a", "--plain-http")
	alice.must(t, helmBin, "pull", "oci://"+s.addr+"/a/webapp", "--version", "0.1.0", "--plain-http", "-d", "pulled")
	if !bytes.Equal(readFile(t, filepath.Join(alice.home, "pulled", "webapp-0.1.0.tgz")), readFile(t, tgz)) {
		t.Fatal("helm pull as alice: the chart differs from the one pushed")
	}

	bob.login(t, helmBin, "registry", "login", "--plain-http")
	sameAsNeverPushed(t, bob, "webapp", "zebapp", helmBin, "pull", "oci://"+s.addr+"/a/webapp", "--version", "0.1.0", "--plain-http", "-d", "pulled")
	bob.refused(t, helmBin, "push", tgz, "oci://"+s.addr+"/a", "--plain-http")
	bob.must(t, helmBin, "push", tgz, "oci://"+s.addr+"/b", "--plain-http")

	s.waitIndexed(t, "a/webapp", "0.1.0")
	s.waitIndexed(t, "b/webapp", "0.1.0")
	for _, c := range []struct {
		who       creds
		see, hide []string
	}{
		{alice.creds(), []string{"a/webapp"}, []string{"b/webapp"}},
		{bob.creds(), []string{"b/webapp"}, []string{"a/webapp"}},
		{creds{}, nil, []string{"a/webapp", "b/webapp"}},
	} {
		e := s.api(t, c.who, "GET", "/api/helm/index.yaml")
		if e.status != http.StatusOK {
			t.Errorf("%s as %q", e, c.who.user)
			continue
		}
		for _, name := range c.see {
			if !strings.Contains(string(e.body), name) {
				t.Errorf("the Helm index for %q does not list %s:\n%s", c.who.user, name, e.body)
			}
		}
		for _, name := range c.hide {
			if strings.Contains(string(e.body), name) {
				t.Errorf("the Helm index for %q lists %s:\n%s", c.who.user, name, e.body)
			}
		}
	}
}

// TestAuthCosignSignVerify: cosign signs and verifies with the credentials
// of the Docker config file: as alice, the owner, and as signer, who may
// sign in a/ but not push a version there. Bob may not sign what he cannot
// see, and anonymous may not verify it. The signer's refused push is audited.
func TestAuthCosignSignVerify(t *testing.T) {
	requireOras(t)
	kp := cosignKeyPair(t)
	s := startAuthServer(t, authOptions{})
	alice, bob, signer := s.users["alice"], s.users["bob"], s.users["signer"]
	anonymous := s.account(t, "", "")

	alice.login(t, berthBin, "login")
	first := alice.pushFixture(t, "kafka", "2.5.0-1.3.1", "a/kafka")
	second := alice.pushFixture(t, "kafka", "2.5.1-1.3.2", "a/kafka")
	sign := func(digest string) []string {
		return []string{"sign", "--key", kp.key, "--tlog-upload=false", "--yes", s.addr + "/a/kafka@" + digest}
	}
	verify := func(digest string) []string {
		return []string{"verify", "--key", kp.pub, "--insecure-ignore-tlog", s.addr + "/a/kafka@" + digest}
	}
	alice.must(t, cosignBin, sign(first)...)
	alice.must(t, cosignBin, verify(first)...)

	signer.must(t, cosignBin, "login", s.addr, "-u", signer.user, "-p", signer.password)
	signer.must(t, cosignBin, sign(second)...)
	signer.must(t, cosignBin, verify(second)...)
	signer.refused(t, berthBin, "push", kudoFixture(t, "kafka", "2.5.0-1.3.2"), s.addr+"/a/kafka")
	if err := os.WriteFile(filepath.Join(signer.home, "notes.txt"), []byte("not a signature"), 0o644); err != nil {
		t.Fatal(err)
	}
	signer.refused(t, orasBin, "push", "--plain-http", s.addr+"/a/kafka:9.9.9", "notes.txt")
	s.auditHas(t, map[string]string{"subject": "user:signer", "result": "denied"})

	bob.login(t, berthBin, "login")
	bob.refused(t, cosignBin, sign(first)...)
	anonymous.refused(t, cosignBin, verify(first)...)
}

// TestAuthCrane: crane auth login, then crane copy from the public namespace
// into alice's, which bob may not do; crane catalog lists to each caller only
// the repositories it may pull (admin's credentials are those berth login
// wrote to the Docker config file).
func TestAuthCrane(t *testing.T) {
	requireTool(t, "the crane CLI", craneBin)
	s := startAuthServer(t, authOptions{})
	alice, bob, admin := s.users["alice"], s.users["bob"], s.users["admin"]
	anonymous := s.account(t, "", "")

	admin.login(t, berthBin, "login")
	admin.pushFixture(t, "redis", "5.0.1-0.2.0", "pub/redis")
	admin.pushFixture(t, "elastic", "7.0.0-0.2.0", "b/elastic")
	src, dst := s.addr+"/pub/redis:5.0.1_0.2.0", s.addr+"/a/redis:5.0.1_0.2.0"

	bob.login(t, craneBin, "auth", "login")
	bob.refused(t, craneBin, "copy", "--insecure", src, dst)
	alice.login(t, craneBin, "auth", "login")
	alice.must(t, craneBin, "copy", "--insecure", src, dst)
	if m := alice.must(t, craneBin, "manifest", "--insecure", dst).stdout; !strings.Contains(m, pkgformat.ArtifactType) {
		t.Errorf("crane manifest %s as alice:\n%s", dst, m)
	}
	if tags := strings.Fields(alice.must(t, craneBin, "ls", "--insecure", s.addr+"/a/redis").stdout); !slices.Equal(tags, []string{"5.0.1_0.2.0"}) {
		t.Errorf("crane ls a/redis as alice: %q", tags)
	}
	sameAsNeverPushed(t, bob, "redis", "zedis", craneBin, "ls", "--insecure", s.addr+"/a/redis")
	bob.refused(t, craneBin, "copy", "--insecure", dst, s.addr+"/b/redis:5.0.1_0.2.0")

	for _, c := range []struct {
		who  *account
		want []string
	}{
		{alice, []string{"a/redis", "pub/redis"}},
		{bob, []string{"b/elastic", "pub/redis"}},
		{admin, []string{"a/redis", "b/elastic", "pub/redis"}},
		{anonymous, []string{"pub/redis"}},
	} {
		got := strings.Fields(c.who.must(t, craneBin, "catalog", "--insecure", s.addr).stdout)
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("crane catalog as %s: %q, want %q", c.who.name(), got, c.want)
		}
	}
}

// robotSecret finds the secret berth robot create prints.
var robotSecret = regexp.MustCompile(`berth_[A-Za-z0-9_-]+`)

// TestAuthRobots: alice creates a pull robot with berth robot create; with
// its secret oras pulls but cannot push; revoked, the robot fails at its next
// request, even with a token it got before; expiry is bounded.
func TestAuthRobots(t *testing.T) {
	requireOras(t)
	s := startAuthServer(t, authOptions{})
	alice, bob := s.users["alice"], s.users["bob"]
	alice.login(t, berthBin, "login")
	alice.pushFixture(t, "cowsay", "0.2.0", "a/cowsay")

	created := alice.must(t, berthBin, "robot", "create", "a/ci", "--scope", "a/*:pull", "--expires", "24h")
	secret := robotSecret.FindString(created.stdout)
	if secret == "" || !strings.Contains(created.stdout, "robot+a+ci") {
		t.Fatalf("berth robot create printed no user name robot+a+ci and secret berth_...:\n%s", created.stdout)
	}
	secrets.add(t, "the secret of robot a/ci", secret)
	robot := s.account(t, "robot+a+ci", secret)
	listed := alice.must(t, berthBin, "robot", "list", "a").stdout
	if !strings.Contains(listed, "ci") || strings.Contains(listed, secret) {
		t.Errorf("berth robot list a: want ci listed and its secret not shown again:\n%s", listed)
	}
	if e := s.api(t, alice.creds(), "GET", "/api/v1/robots?namespace=a"); e.status != http.StatusOK || strings.Contains(string(e.body), secret) {
		t.Errorf("robots API as alice: %s", e)
	}
	// A namespace bob does not administer looks like one without robots.
	if e := s.api(t, bob.creds(), "GET", "/api/v1/robots?namespace=a"); e.status != http.StatusOK || strings.Contains(string(e.body), `"ci"`) {
		t.Errorf("robots API of namespace a as bob: %s", e)
	}
	if r := alice.run(t, berthBin, "robot", "create", "a/forever", "--scope", "a/*:pull", "--expires", "1000h"); r.code == 0 {
		t.Errorf("berth robot create --expires 1000h beyond auth.robots.maxExpiry 48h succeeded:\n%s", r.stdout)
	}

	robot.login(t, orasBin, "login", "--plain-http")
	robot.must(t, orasBin, "pull", "--plain-http", s.addr+"/a/cowsay:0.2.0", "-o", "pulled")
	if err := os.WriteFile(filepath.Join(robot.home, "notes.txt"), []byte("notes"), 0o644); err != nil {
		t.Fatal(err)
	}
	robot.refused(t, orasBin, "push", "--plain-http", s.addr+"/a/notes:1", "notes.txt")

	_, token := s.token(t, robot.creds(), "", "", "repository:a/cowsay:pull")
	if token == "" {
		t.Fatal("no token for the robot")
	}
	manifest := s.url() + "/v2/a/cowsay/manifests/0.2.0"
	if e := roundTrip(t, "GET", manifest, creds{}, token, manifestAccept, nil); e.status != http.StatusOK {
		t.Fatalf("the robot's token before revocation: %s", e)
	}
	alice.must(t, berthBin, "robot", "revoke", "a/ci")
	if e := roundTrip(t, "GET", manifest, creds{}, token, manifestAccept, nil); e.status != http.StatusUnauthorized {
		t.Errorf("the robot's token, still unexpired, after revocation: %s, want 401", e)
	}
	robot.refused(t, orasBin, "pull", "--plain-http", s.addr+"/a/cowsay:0.2.0", "-o", "again")
	if e := s.api(t, robot.creds(), "GET", "/api/v1/packages/a/cowsay"); e.status != http.StatusUnauthorized {
		t.Errorf("the revoked robot's Basic credentials on /api/v1: %s, want 401", e)
	}
	s.auditHas(t, map[string]string{"subject": "user:alice", "action": "robot.create", "result": "ok"})
	s.auditHas(t, map[string]string{"subject": "user:alice", "action": "robot.revoke", "result": "ok"})
}

// TestAuthOIDCFederation: a CI job logs in with a JWT from an issuer berth
// trusts (a local one the test starts), mapped by its claims to oidc:ci, and
// pushes with no stored secret; tokens with another audience, an unmapped
// subject, past their expiry or signed by another key are refused.
func TestAuthOIDCFederation(t *testing.T) {
	requireOras(t)
	issuer := startOIDCIssuer(t)
	key, mint := issuer.key, issuer.mint
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	const sub = "system:serviceaccount:ci:builder"
	s := startAuthServer(t, authOptions{oidc: issuer.config(sub)})

	ci := s.account(t, "oidc", mint(t, key, "berth", sub, 10*time.Minute))
	ci.login(t, orasBin, "login", "--plain-http")
	file := packageTarball(t, ci.home, "cowsay", "0.2.0")
	ci.must(t, orasBin, orasPush(s.addr+"/a/cowsay:0.2.0", file)...)
	ci.must(t, orasBin, "pull", "--plain-http", s.addr+"/a/cowsay:0.2.0", "-o", "pulled")
	ci.refused(t, orasBin, orasPush(s.addr+"/b/cowsay:0.2.0", file)...)

	for what, jwt := range map[string]string{
		"another audience":   mint(t, key, "someone-else", sub, 10*time.Minute),
		"an unmapped sub":    mint(t, key, "berth", "system:serviceaccount:ci:intruder", 10*time.Minute),
		"an expired token":   mint(t, key, "berth", sub, -time.Minute),
		"another key's sign": mint(t, other, "berth", sub, 10*time.Minute),
	} {
		if e, tok := s.token(t, creds{"oidc", jwt}, "", "", "repository:a/cowsay:pull"); e.status != http.StatusUnauthorized || tok != "" {
			t.Errorf("token endpoint with %s: %s, want 401", what, e)
		}
	}
	wrong := s.account(t, "oidc", mint(t, key, "someone-else", sub, 10*time.Minute))
	if r := runWith(t, command{dir: wrong.home, env: wrong.env(), stdin: wrong.password}, orasBin,
		"login", "--plain-http", "-u", "oidc", "--password-stdin", s.addr); r.code == 0 {
		t.Errorf("oras login with a token for another audience succeeded:\n%s", r.stdout)
	}
}

// oidcIssuer is an OIDC issuer on loopback serving its key set at
// /jwks.json.
type oidcIssuer struct {
	url string
	key *rsa.PrivateKey
}

func startOIDCIssuer(t *testing.T) *oidcIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keys := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "e2e", Algorithm: string(jose.RS256), Use: "sig"}}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/jwks.json" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(keys)
	}))
	t.Cleanup(srv.Close)
	return &oidcIssuer{url: srv.URL, key: key}
}

// config is the YAML of auth.oidc's list trusting the issuer and mapping
// the tokens of sub to oidc:ci.
func (o *oidcIssuer) config(sub string) string {
	return fmt.Sprintf(`    - issuer: %q
      jwksURL: %q
      audience: berth
      subjects:
        - claims: {sub: %q}
          name: ci
`, o.url, o.url+"/jwks.json", sub)
}

// mint signs with k a JWT of the issuer for aud and sub, expiring in ttl.
func (o *oidcIssuer) mint(t *testing.T, k *rsa.PrivateKey, aud, sub string, ttl time.Duration) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: k, KeyID: "e2e"}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := jwt.Signed(signer).Claims(jwt.Claims{
		Issuer: o.url, Subject: sub, Audience: jwt.Audience{aud},
		IssuedAt: jwt.NewNumericDate(now.Add(-time.Minute)), NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)),
		Expiry: jwt.NewNumericDate(now.Add(ttl)),
	}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	secrets.add(t, "an OIDC token for "+sub, tok)
	return tok
}

// TestAuthFailedLoginsAreRateLimited: after auth.login.maxFailures wrong
// passwords for one user from one address, the token endpoint and /api/v1
// answer 429 with Retry-After; an unknown user is limited alike, and another
// user from the same address is not.
func TestAuthFailedLoginsAreRateLimited(t *testing.T) {
	s := startAuthServer(t, authOptions{maxFailures: 3})
	for _, user := range []string{"alice", "nobody"} {
		wrong := creds{user, "not-the-password"}
		for i := range 3 {
			if e, _ := s.token(t, wrong, "", ""); e.status != http.StatusUnauthorized {
				t.Errorf("wrong password %d for %s: %s, want 401", i+1, user, e)
			}
		}
		e, _ := s.token(t, wrong, "", "")
		if secs, err := strconv.Atoi(e.header.Get("Retry-After")); e.status != http.StatusTooManyRequests || err != nil || secs <= 0 {
			t.Errorf("wrong password 4 for %s: %s, Retry-After %q; want 429 and a number of seconds", user, e, e.header.Get("Retry-After"))
		}
		if e := s.api(t, wrong, "GET", "/api/v1/packages"); e.status != http.StatusTooManyRequests || e.header.Get("Retry-After") == "" {
			t.Errorf("/api/v1 with a wrong password for %s, once limited: %s, want 429 with Retry-After", user, e)
		}
	}
	if e, tok := s.token(t, s.users["bob"].creds(), "", ""); e.status != http.StatusOK || tok == "" {
		t.Errorf("bob, from the address alice is limited at: %s, want a token", e)
	}
}
