package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/berth-registry/berth/config"
)

// testIssuer is an OIDC issuer on 127.0.0.1 serving its key set, which
// holds an RSA and an EC key.
type testIssuer struct {
	url     string
	rsa     *rsa.PrivateKey
	ec      *ecdsa.PrivateKey
	fetches atomic.Int64

	mu     sync.Mutex
	public []jose.JSONWebKey
}

func startIssuer(t testing.TB) *testIssuer {
	t.Helper()
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	iss := &testIssuer{rsa: rk, ec: ek, public: []jose.JSONWebKey{
		{Key: &rk.PublicKey, KeyID: "rsa-1", Algorithm: "RS256", Use: "sig"},
		{Key: &ek.PublicKey, KeyID: "ec-1", Use: "sig"},
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		iss.fetches.Add(1)
		iss.mu.Lock()
		defer iss.mu.Unlock()
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: iss.public})
	}))
	t.Cleanup(srv.Close)
	iss.url = srv.URL
	return iss
}

// addKey publishes a new EC key under kid and returns it.
func (iss *testIssuer) addKey(kid string) *ecdsa.PrivateKey {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.public = append(iss.public, jose.JSONWebKey{Key: &k.PublicKey, KeyID: kid, Use: "sig"})
	return k
}

// sign makes a JWT of claims with key under kid.
func signJWT(t testing.TB, alg jose.SignatureAlgorithm, key any, kid string, claims any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func oidcConfig(iss *testIssuer) func(*config.Auth) {
	return func(c *config.Auth) {
		c.OIDC = []config.OIDCIssuer{{
			Issuer:   "https://ci.example",
			JWKSURL:  iss.url,
			Audience: "berth",
			Subjects: []config.OIDCSubject{
				{Name: "ci", Groups: []string{"builders"}, Claims: map[string]string{"sub": "repo:org/app:ref:refs/heads/*", "repository_owner": "org"}},
				{Name: "k8s-ci", Claims: map[string]string{"sub": "system:serviceaccount:ci:*"}},
			},
		}}
	}
}

func TestOIDC(t *testing.T) {
	iss := startIssuer(t)
	f := newFixture(t, oidcConfig(iss))
	now := f.clock.Now()
	claims := func(edit func(m map[string]any)) map[string]any {
		m := map[string]any{
			"iss": "https://ci.example", "aud": "berth", "sub": "repo:org/app:ref:refs/heads/main",
			"repository_owner": "org", "exp": now.Add(10 * time.Minute).Unix(), "iat": now.Unix(), "nbf": now.Unix(),
		}
		if edit != nil {
			edit(m)
		}
		return m
	}
	good := signJWT(t, jose.RS256, iss.rsa, "rsa-1", claims(nil))

	id, err := f.Authenticate(bearerRequest(good))
	if err != nil || id.Subject != "oidc:ci" || strings.Join(id.Groups, ",") != "builders" || id.Limited {
		t.Fatalf("RS256 Bearer: got %+v, %v", id, err)
	}
	if !f.policy.Allowed(id, "a/x", Push) {
		t.Errorf("oidc:ci may push a/x by rule")
	}
	ok := []struct{ name, token string }{
		{"ES256", signJWT(t, jose.ES256, iss.ec, "ec-1", claims(nil))},
		{"aud array", signJWT(t, jose.RS256, iss.rsa, "rsa-1", claims(func(m map[string]any) { m["aud"] = []string{"other", "berth"} }))},
		{"second mapping", signJWT(t, jose.ES256, iss.ec, "ec-1", claims(func(m map[string]any) { m["sub"] = "system:serviceaccount:ci:builder" }))},
		{"no kid", signJWT(t, jose.ES256, iss.ec, "", claims(nil))},
		{"expired within the leeway", signJWT(t, jose.RS256, iss.rsa, "rsa-1", claims(func(m map[string]any) { m["exp"] = now.Add(-20 * time.Second).Unix() }))},
	}
	for _, tc := range ok {
		if _, err := f.Authenticate(bearerRequest(tc.token)); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if id, err := f.Authenticate(basicRequest("anyone", good)); err != nil || id.Subject != "oidc:ci" {
		t.Errorf("OIDC JWT as the Basic password: got %+v, %v", id, err)
	}

	otherRSA, _ := rsa.GenerateKey(rand.Reader, 2048)
	bad := []struct{ name, token, want string }{
		{"wrong issuer", signJWT(t, jose.RS256, iss.rsa, "rsa-1", claims(func(m map[string]any) { m["iss"] = "https://evil.example" })), "does not trust"},
		{"wrong audience", signJWT(t, jose.RS256, iss.rsa, "rsa-1", claims(func(m map[string]any) { m["aud"] = "other" })), "another audience"},
		{"wrong audiences", signJWT(t, jose.RS256, iss.rsa, "rsa-1", claims(func(m map[string]any) { m["aud"] = []string{"a", "b"} })), "another audience"},
		{"no audience", signJWT(t, jose.RS256, iss.rsa, "rsa-1", claims(func(m map[string]any) { delete(m, "aud") })), "another audience"},
		{"expired", signJWT(t, jose.RS256, iss.rsa, "rsa-1", claims(func(m map[string]any) { m["exp"] = now.Add(-time.Minute).Unix() })), "expired"},
		{"no expiry", signJWT(t, jose.RS256, iss.rsa, "rsa-1", claims(func(m map[string]any) { delete(m, "exp") })), "no expiry"},
		{"not yet valid", signJWT(t, jose.RS256, iss.rsa, "rsa-1", claims(func(m map[string]any) { m["nbf"] = now.Add(time.Minute).Unix() })), "not valid yet"},
		{"unknown kid", signJWT(t, jose.RS256, otherRSA, "rsa-9", claims(nil)), "does not verify"},
		{"another key under a known kid", signJWT(t, jose.RS256, otherRSA, "rsa-1", claims(nil)), "does not verify"},
		{"alg not the key's", signJWT(t, jose.PS256, iss.rsa, "rsa-1", claims(nil)), "does not verify"},
		{"alg none", unsignedJWT(claims(nil)), "not a JWT signed with an asymmetric algorithm"},
		{"alg HS256", signJWT(t, jose.HS256, []byte("0123456789abcdef0123456789abcdef"), "rsa-1", claims(nil)), "not a JWT signed with an asymmetric algorithm"},
		{"no mapping matches", signJWT(t, jose.RS256, iss.rsa, "rsa-1", claims(func(m map[string]any) { m["sub"] = "repo:evil/app:ref:refs/heads/main" })), "no subject mapping"},
		{"a claim of the mapping missing", signJWT(t, jose.RS256, iss.rsa, "rsa-1", claims(func(m map[string]any) { delete(m, "repository_owner") })), "no subject mapping"},
		{"a non-string claim", signJWT(t, jose.RS256, iss.rsa, "rsa-1", claims(func(m map[string]any) { m["repository_owner"] = []string{"org"} })), "no subject mapping"},
	}
	for i, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.Authenticate(bearerRequest(tc.token))
			if !errors.Is(err, ErrBadCredentials) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Bearer: got %v, want bad credentials saying %q", err, tc.want)
			}
			basic := basicRequest("ci", tc.token)
			basic.RemoteAddr = fmt.Sprintf("192.0.2.%d:1234", i)
			_, basicErr := f.Authenticate(basic)
			if !errors.Is(basicErr, ErrBadCredentials) {
				t.Errorf("as the Basic password: got %v, want bad credentials", basicErr)
			}
			for _, err := range []error{err, basicErr} {
				if err != nil && (strings.Contains(err.Error(), "evil") || strings.Contains(err.Error(), "refs/heads")) {
					t.Errorf("the error %q quotes the token's claims", err)
				}
			}
		})
	}
}

// unsignedJWT is a JWT with alg none.
func unsignedJWT(claims any) string {
	enc := base64.RawURLEncoding
	body, _ := json.Marshal(claims)
	return enc.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc.EncodeToString(body) + "."
}

func TestOIDCKeySetIsRefetchedOnUnknownKidAtMostEvery30s(t *testing.T) {
	iss := startIssuer(t)
	f := newFixture(t, oidcConfig(iss))
	if n := iss.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches at start, want 1", n)
	}
	now := f.clock.Now()
	claims := map[string]any{"iss": "https://ci.example", "aud": "berth", "sub": "system:serviceaccount:ci:x", "exp": now.Add(time.Hour).Unix()}

	f.clock.Advance(31 * time.Second)
	rotated := signJWT(t, jose.ES256, iss.addKey("ec-2"), "ec-2", claims)
	if _, err := f.Authenticate(bearerRequest(rotated)); err != nil || iss.fetches.Load() != 2 {
		t.Fatalf("a token of a new key: %v after %d fetches; want it accepted after a refetch", err, iss.fetches.Load())
	}
	again := signJWT(t, jose.ES256, iss.addKey("ec-3"), "ec-3", claims)
	for range 3 {
		if _, err := f.Authenticate(bearerRequest(again)); !errors.Is(err, ErrBadCredentials) {
			t.Fatalf("within 30s of a fetch: got %v, want refused", err)
		}
	}
	if n := iss.fetches.Load(); n != 2 {
		t.Errorf("%d fetches, want no refetch within 30s of the last", n)
	}
	f.clock.Advance(30 * time.Second)
	if _, err := f.Authenticate(bearerRequest(again)); err != nil || iss.fetches.Load() != 3 {
		t.Errorf("after 30s: %v after %d fetches", err, iss.fetches.Load())
	}
}

func TestOIDCKeySets(t *testing.T) {
	iss := startIssuer(t)
	dir := t.TempDir()
	keys, _ := json.Marshal(jose.JSONWebKeySet{Keys: iss.public})
	good := filepath.Join(dir, "jwks.json")
	os.WriteFile(good, keys, 0o600)
	fromFile := newFixture(t, oidcConfig(iss), func(c *config.Auth) { c.OIDC[0].JWKSURL, c.OIDC[0].JWKSFile = "", good })
	tok := signJWT(t, jose.RS256, iss.rsa, "rsa-1", map[string]any{"iss": "https://ci.example", "aud": "berth",
		"sub": "system:serviceaccount:ci:x", "exp": fromFile.clock.Now().Add(time.Hour).Unix()})
	if _, err := fromFile.Authenticate(bearerRequest(tok)); err != nil {
		t.Errorf("key set from a file: %v", err)
	}

	symmetric, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: []byte("secret"), KeyID: "k"}}})
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"keys":[` + strings.Repeat(" ", jwksMaxBytes) + `]}`))
	}))
	defer big.Close()
	missing := httptest.NewServer(http.NotFoundHandler())
	defer missing.Close()
	for _, tc := range []struct {
		name      string
		file, url string
		content   string
		want      string
	}{
		{name: "missing file", file: filepath.Join(dir, "none.json"), want: "auth.oidc[0].jwksFile: "},
		{name: "not JSON", file: filepath.Join(dir, "bad.json"), content: "{", want: "not a JSON Web Key Set"},
		{name: "symmetric keys only", file: filepath.Join(dir, "sym.json"), content: string(symmetric), want: "no public signing key"},
		{name: "URL answers 404", url: missing.URL, want: "auth.oidc[0].jwksURL: GET " + missing.URL + ": 404"},
		{name: "URL answers too much", url: big.URL, want: "larger than"},
		{name: "URL unreachable", url: "http://127.0.0.1:1/jwks", want: "auth.oidc[0].jwksURL: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			oidcConfig(iss)(cfg)
			cfg.OIDC[0].JWKSURL, cfg.OIDC[0].JWKSFile = tc.url, tc.file
			if tc.content != "" {
				os.WriteFile(tc.file, []byte(tc.content), 0o600)
			}
			_, err := NewAuthn(cfg, AuthnOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "auth.oidc[0].") {
				t.Fatalf("got %v, want an auth.oidc[0] error saying %q", err, tc.want)
			}
		})
	}
}
