package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/berth-registry/berth/pkgformat"
)

// The auth tests' server: users of an htpasswd file, a namespace per team
// and a public namespace.
//
//	alice   group team-a, which owns a/* (admin)
//	bob     owns b/* (admin)
//	admin   admin of */*
//	signer  pull and sign on a/*
//	pub     public: anonymous pull
//	oidc:ci (a federated CI job, when an issuer is configured) pull and push on a/*
var authUsers = []string{"alice", "bob", "admin", "signer"}

// passwordOf is the password of a user of the auth tests' htpasswd file.
func passwordOf(user string) string { return user + "-e2e-password" }

const authRules = `  groups:
    team-a: [alice]
  public: [pub]
  rules:
    - subjects: [group:team-a]
      repositories: ["a/*"]
      actions: [admin]
    - subjects: [user:bob]
      repositories: ["b/*"]
      actions: [admin]
    - subjects: [user:admin]
      repositories: ["*/*"]
      actions: [admin]
    - subjects: [user:signer]
      repositories: ["a/*"]
      actions: [pull, sign]
    - subjects: [oidc:ci]
      repositories: ["a/*"]
      actions: [pull, push]
  robots:
    maxExpiry: 48h
`

// authOptions vary the auth tests' configuration.
type authOptions struct {
	// maxFailures is auth.login.maxFailures (default 1000, so that tests
	// that fail logins on purpose are not rate-limited).
	maxFailures int
	// oidc is the YAML of auth.oidc's list, indented for it.
	oidc string
	// auth is more YAML for the auth section, indented for it.
	auth string
	// extra is more YAML for the top level of the configuration.
	extra string
}

// authServer is a berth serve with auth on, and its users.
type authServer struct {
	*server
	// config is the configuration file, for replicas (replica).
	config string
	users  map[string]*account
	// audit is the audit log file.
	audit string
}

// startAuthServer writes the htpasswd file and the configuration and starts
// berth serve with them. The token key it creates at its default place is a
// secret; a test that names another auth.keyFile registers that one.
func startAuthServer(t *testing.T, o authOptions) *authServer {
	t.Helper()
	cfg, audit := writeAuthConfig(t, o)
	a := newAuthServer(t, startServer(t, "", "--config", cfg), audit)
	a.config = cfg
	if !strings.Contains(o.auth+o.extra, "keyFile:") {
		secrets.addPEM(t, "the token key", filepath.Join(a.data, "auth", "token-key.pem"))
	}
	return a
}

// newAuthServer is the auth tests' server s, or a proxy in front of such
// servers, with its users.
func newAuthServer(t *testing.T, s *server, audit string) *authServer {
	a := &authServer{server: s, users: map[string]*account{}, audit: audit}
	for _, u := range authUsers {
		secrets.add(t, u+"'s password", passwordOf(u))
		a.users[u] = a.account(t, u, passwordOf(u))
	}
	return a
}

// writeAuthConfig writes the htpasswd file and the configuration, and
// returns the configuration file and the audit log it names.
func writeAuthConfig(t *testing.T, o authOptions) (cfg, audit string) {
	t.Helper()
	dir := t.TempDir()
	var htpasswd bytes.Buffer
	for _, u := range authUsers {
		// Cost 5, as `htpasswd -B` uses: the tests log in thousands of times.
		hash, err := bcrypt.GenerateFromPassword([]byte(passwordOf(u)), 5)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&htpasswd, "%s:%s\n", u, hash)
	}
	htpasswdFile := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(htpasswdFile, htpasswd.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if o.maxFailures == 0 {
		o.maxFailures = 1000
	}
	audit = filepath.Join(dir, "audit.log")
	doc := fmt.Sprintf("auth:\n  htpasswd: %q\n  audit: %q\n  login:\n    maxFailures: %d\n    window: 1m\n%s",
		htpasswdFile, audit, o.maxFailures, authRules)
	if o.oidc != "" {
		doc += "  oidc:\n" + o.oidc
	}
	doc += o.auth
	doc += o.extra
	cfg = filepath.Join(dir, "berth.yaml")
	if err := os.WriteFile(cfg, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, audit
}

// replica starts another berth serve with the server's configuration and a
// data directory of its own.
func (s *authServer) replica(t *testing.T) *server {
	t.Helper()
	return startServer(t, "", "--config", s.config)
}

// account is one caller of the CLIs: a user name and password (none for
// anonymous), with a home of its own, so a Docker config file
// (DOCKER_CONFIG) and Helm's files of its own.
type account struct {
	s              *authServer
	user, password string
	home           string
}

// account returns a caller that logs in as user; user "" is anonymous.
func (s *authServer) account(t *testing.T, user, password string) *account {
	return &account{s: s, user: user, password: password, home: t.TempDir()}
}

func (a *account) env() []string {
	return []string{
		"HOME=" + a.home,
		"DOCKER_CONFIG=" + filepath.Join(a.home, ".docker"),
		"HELM_CACHE_HOME=" + filepath.Join(a.home, "helm", "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(a.home, "helm", "config"),
		"HELM_DATA_HOME=" + filepath.Join(a.home, "helm", "data"),
		"BERTH_SERVER=" + a.s.addr,
	}
}

// run runs bin as this caller, in its home.
func (a *account) run(t *testing.T, bin string, args ...string) result {
	t.Helper()
	return runWith(t, command{dir: a.home, env: a.env()}, bin, args...)
}

// must runs bin as this caller and fails the test unless it succeeds.
func (a *account) must(t *testing.T, bin string, args ...string) result {
	t.Helper()
	r := a.run(t, bin, args...)
	if r.code != 0 {
		t.Fatalf("%s: %s %s: exit %d\nstdout: %s\nstderr: %s", a.name(), filepath.Base(bin), strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// refused runs bin as this caller and fails the test unless it fails with a
// message that says why: denied, unauthorized or not found, and no server
// error. It returns the message.
func (a *account) refused(t *testing.T, bin string, args ...string) string {
	t.Helper()
	r := a.run(t, bin, args...)
	msg := r.stdout + r.stderr
	if r.code == 0 || !clearDenial.MatchString(msg) || serverError.MatchString(msg) {
		t.Errorf("%s: %s %s: exit %d, want a refusal saying why\n%s", a.name(), filepath.Base(bin), strings.Join(args, " "), r.code, msg)
	}
	return msg
}

var (
	clearDenial = regexp.MustCompile(`(?i)denied|unauthori[sz]ed|forbidden|not found|unknown|insufficient|401|403|404`)
	serverError = regexp.MustCompile(`(?i)internal server error|\b50[0-9]\b|EOF|panic`)
)

// login runs a CLI's login command (args before the host) with the
// password on standard input.
func (a *account) login(t *testing.T, bin string, args ...string) {
	t.Helper()
	args = append(args, "-u", a.user, "--password-stdin", a.s.addr)
	r := runWith(t, command{dir: a.home, env: a.env(), stdin: a.password}, bin, args...)
	if r.code != 0 {
		t.Fatalf("%s: %s %s: exit %d\n%s%s", a.name(), filepath.Base(bin), strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
}

func (a *account) name() string {
	if a.user == "" {
		return "anonymous"
	}
	return a.user
}

// creds are the caller's Basic credentials.
func (a *account) creds() creds { return creds{a.user, a.password} }

// pushFixture pushes a KUDO fixture version with berth push as a (logged in
// with berth login) and returns its digest.
func (a *account) pushFixture(t *testing.T, name, folder, repo string) string {
	t.Helper()
	return digestOf(t, a.must(t, berthBin, "push", kudoFixture(t, name, folder), a.s.addr+"/"+repo, "--format", "json").stdout)
}

// waitIndexed waits until the catalog, asked as admin, has repo:version.
func (s *authServer) waitIndexed(t *testing.T, repo, version string) {
	t.Helper()
	admin := s.users["admin"].creds()
	waitUntil(t, s.server, repo+":"+version+" indexed", func() bool {
		return s.api(t, admin, "GET", "/api/v1/packages/"+repo+"/versions/"+version).status == http.StatusOK
	})
}

// creds are Basic credentials; the zero value is anonymous.
type creds struct{ user, password string }

// hop is one HTTP request and its answer.
type hop struct {
	method, url string
	status      int
	header      http.Header
	body        []byte
}

func (e hop) String() string {
	return fmt.Sprintf("%s %s: %d %s", e.method, e.url, e.status, bytes.TrimSpace(e.body))
}

// roundTrip sends one request with c's Basic credentials, or with bearer
// when set.
func roundTrip(t *testing.T, method, target string, c creds, bearer string, header http.Header, body []byte) hop {
	t.Helper()
	req, err := http.NewRequest(method, target, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	switch {
	case bearer != "":
		req.Header.Set("Authorization", "Bearer "+bearer)
	case c.user != "":
		req.SetBasicAuth(c.user, c.password)
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	secrets.report(t)
	return hop{method: method, url: target, status: resp.StatusCode, header: resp.Header, body: b}
}

var noRedirects = &http.Client{
	Timeout:       time.Minute,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// api sends one request to the server with c's Basic credentials, as curl
// and scripts call /api/v1/, the indexes and /metrics.
func (s *authServer) api(t *testing.T, c creds, method, path string) hop {
	t.Helper()
	return roundTrip(t, method, s.url()+path, c, "", nil, nil)
}

// registry sends a /v2/ request the way docker and oras do: without
// credentials first; on a 401 with a Bearer challenge it asks the
// challenge's realm for a token for its service and scope (with c's Basic
// credentials, if any), and then sends the request again with the token. It
// returns every hop, the answer to the request last; when the token
// endpoint refuses, its answer is last.
func (s *authServer) registry(t *testing.T, c creds, method, path string, header http.Header, body []byte) []hop {
	t.Helper()
	first := roundTrip(t, method, s.url()+path, creds{}, "", header, body)
	ch := parseChallenge(first.header.Get("Www-Authenticate"))
	if first.status != http.StatusUnauthorized || ch["realm"] == "" {
		return []hop{first}
	}
	tok, token := s.token(t, c, ch["realm"], ch["service"], strings.Fields(ch["scope"])...)
	if token == "" {
		return []hop{first, tok}
	}
	return []hop{first, tok, roundTrip(t, method, s.url()+path, creds{}, token, header, body)}
}

// token asks realm (default the server's /auth/token) for a token for
// service (default berth) and scopes, with c's Basic credentials, as GET
// /auth/token. It returns the hop and the token ("" when refused).
func (s *authServer) token(t *testing.T, c creds, realm, service string, scopes ...string) (hop, string) {
	t.Helper()
	if realm == "" {
		realm = s.url() + "/auth/token"
	}
	if service == "" {
		service = "berth"
	}
	q := url.Values{"service": {service}}
	for _, sc := range scopes {
		q.Add("scope", sc)
	}
	e := roundTrip(t, "GET", realm+"?"+q.Encode(), c, "", nil, nil)
	if e.status != http.StatusOK {
		return e, ""
	}
	token := tokenIn(e.body)
	if token == "" {
		t.Fatalf("token endpoint: no token in %s", e)
	}
	return e, token
}

// tokenIn is the token of a token endpoint's answer (token, else
// access_token); "" when body is no such answer.
func tokenIn(body []byte) string {
	var doc struct {
		Token       string `json:"token"`
		AccessToken string `json:"access_token"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return ""
	}
	if doc.Token == "" {
		return doc.AccessToken
	}
	return doc.Token
}

var challengeParam = regexp.MustCompile(`(\w+)="([^"]*)"`)

// parseChallenge reads the parameters of a Bearer challenge; nil for
// anything else.
func parseChallenge(h string) map[string]string {
	scheme, params, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return nil
	}
	m := map[string]string{}
	for _, p := range challengeParam.FindAllStringSubmatch(params, -1) {
		m[strings.ToLower(p[1])] = p[2]
	}
	return m
}

// jwtClaims is the decoded payload of a JWT, "" when tok is not one.
func jwtClaims(tok string) string {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	return string(b)
}

// last is the final hop of a flow.
func last(flow []hop) hop { return flow[len(flow)-1] }

// pushPlain pushes the plain package repo:version (its name is repo's last
// segment) through the token flow as c: both blobs (POST, then PUT to the
// upload's location), then the manifest by tag. It stops at the first
// request that fails and returns that request's flow, else the manifest's,
// and the manifest's digest.
func (s *authServer) pushPlain(t *testing.T, c creds, repo, version string) ([]hop, string) {
	t.Helper()
	ns, name, _ := strings.Cut(repo, "/")
	_, art, err := plainPackage(s.server, ns, name, version, time.Now().UnixNano())
	if err != nil {
		t.Fatal(err)
	}
	for _, blob := range []struct {
		data   []byte
		digest string
	}{{art.Config, art.ConfigDesc.Digest.String()}, {art.Content, art.ContentDesc.Digest.String()}} {
		flow := s.registry(t, c, "POST", "/v2/"+repo+"/blobs/uploads/", nil, nil)
		if last(flow).status != http.StatusAccepted {
			return flow, ""
		}
		loc, err := url.Parse(last(flow).header.Get("Location"))
		if err != nil {
			t.Fatalf("upload location: %v\n%s", err, last(flow))
		}
		q := loc.Query()
		q.Set("digest", blob.digest)
		loc.RawQuery = q.Encode()
		flow = s.registry(t, c, "PUT", loc.RequestURI(), http.Header{"Content-Type": {"application/octet-stream"}}, blob.data)
		if last(flow).status != http.StatusCreated {
			return flow, ""
		}
	}
	flow := s.registry(t, c, "PUT", "/v2/"+repo+"/manifests/"+version,
		http.Header{"Content-Type": {art.ManifestDesc.MediaType}}, art.Manifest)
	return flow, art.ManifestDesc.Digest.String()
}

// manifestAccept is the Accept header of a manifest request.
var manifestAccept = http.Header{"Accept": {"application/vnd.oci.image.manifest.v1+json"}}

// packageTarball writes the tarball of a KUDO fixture version with berth
// package into dir and returns its file name there.
func packageTarball(t *testing.T, dir, name, folder string) string {
	t.Helper()
	file := name + "-" + kudoVersion(folder) + ".tgz"
	berth(t, dir, "package", kudoFixture(t, name, folder), "-o", file)
	return file
}

// orasPush are the arguments of oras push of a package tarball, as berth's
// artifact type.
func orasPush(ref, file string) []string {
	return []string{"push", "--plain-http", "--artifact-type", pkgformat.ArtifactType, ref, file + ":" + pkgformat.ContentMediaType}
}

// auditHas fails the test unless the audit log has an event with every
// field of want.
func (s *authServer) auditHas(t *testing.T, want map[string]string) {
	t.Helper()
	waitUntil(t, s.server, fmt.Sprintf("an audit event %v", want), func() bool {
		b, _ := os.ReadFile(s.audit)
		for _, line := range bytes.Split(b, []byte("\n")) {
			var ev map[string]any
			if json.Unmarshal(line, &ev) != nil {
				continue
			}
			match := true
			for k, v := range want {
				match = match && ev[k] == v
			}
			if match {
				return true
			}
		}
		return false
	})
}
