package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/berth-registry/berth/config"
)

func TestSigningKeyIsCreatedPrivateAndReloaded(t *testing.T) {
	f := newFixture(t)
	for path, want := range map[string]os.FileMode{f.cfg.KeyFile: 0o600, filepath.Dir(f.cfg.KeyFile): 0o700 | os.ModeDir} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v (%v), want %v", path, fi.Mode(), err, want)
		}
	}
	again := newFixtureFrom(t, f.cfg)
	if again.key.kid != f.key.kid {
		t.Errorf("a restart made a new key: kid %s, was %s", again.key.kid, f.key.kid)
	}
	tok, _, err := f.Issue(f.user(t, "alice"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := again.Authenticate(bearerRequest(tok)); err != nil {
		t.Errorf("a token from before the restart: %v", err)
	}

	var set jose.JSONWebKeySet
	if err := json.Unmarshal(f.key.jwks, &set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("JWKS %s: %v", f.key.jwks, err)
	}
	k := set.Keys[0]
	thumb, _ := k.Thumbprint(crypto.SHA256)
	if !k.IsPublic() || k.Algorithm != "ES256" || k.KeyID != base64.RawURLEncoding.EncodeToString(thumb) {
		t.Errorf("JWKS key %+v: want the public ES256 key with its RFC 7638 thumbprint as kid", k)
	}
	header, _, _ := strings.Cut(tok, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(header)
	if !strings.Contains(string(raw), `"kid":"`+k.KeyID+`"`) {
		t.Errorf("token header %s does not name kid %s", raw, k.KeyID)
	}
}

func TestSigningKeyCreatedByRacingProcesses(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys", "token-key.pem")
	kids := make([]string, 8)
	var wg sync.WaitGroup
	for i := range kids {
		wg.Go(func() {
			k, err := loadSigningKey(file)
			if err != nil {
				t.Error(err)
				return
			}
			kids[i] = k.kid
		})
	}
	wg.Wait()
	for _, kid := range kids {
		if kid != kids[0] {
			t.Fatalf("racing starts made different keys: %v", kids)
		}
	}
	if entries, _ := os.ReadDir(filepath.Dir(file)); len(entries) != 1 {
		t.Errorf("want the key file alone, got %v", entries)
	}
}

func TestBadSigningKeys(t *testing.T) {
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p384der, _ := x509.MarshalECPrivateKey(p384)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	rsaDER, _ := x509.MarshalPKCS8PrivateKey(rsaKey)
	for _, tc := range []struct {
		name, content, want string
	}{
		{"not PEM", "hello", "no PEM block"},
		{"a certificate", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1}})), "want an EC PRIVATE KEY"},
		{"P-384", string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: p384der})), "want an ECDSA P-256 key"},
		{"RSA", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: rsaDER})), "want an ECDSA P-256 key"},
		{"corrupt", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2}})), "asn1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			os.MkdirAll(filepath.Dir(cfg.KeyFile), 0o700)
			os.WriteFile(cfg.KeyFile, []byte(tc.content), 0o600)
			_, err := NewAuthn(cfg, AuthnOptions{})
			if err == nil || !strings.HasPrefix(err.Error(), "auth.keyFile: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an auth.keyFile error saying %q", err, tc.want)
			}
		})
	}
}

func TestHtpasswdFiles(t *testing.T) {
	hash := `$2a$04$iQUmMnv.XmeSemqyNZo8ceKnDLHCSNcr2ju4AtNIIILW13JLpfpVG` // "pw" at cost 4
	good := []struct{ name, content string }{
		{"$2a$", "u:" + hash + "\n"},
		{"$2y$", "u:$2y$" + hash[4:] + "\n"},
		{"$2b$", "u:$2b$" + hash[4:]},
		{"CRLF, blanks and comments", "# users\r\n\r\nu:" + hash + "\r\n\n"},
	}
	for _, tc := range good {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *config.Auth) { os.WriteFile(c.Htpasswd, []byte(tc.content), 0o600) })
			if id, err := f.Authenticate(basicRequest("u", "pw")); err != nil || id.Subject != "user:u" {
				t.Fatalf("got %+v, %v", id, err)
			}
		})
	}
	bad := []struct{ name, content, want string }{
		{"no colon", "u " + hash, "line 1: want user:hash"},
		{"empty user", "\n:" + hash, "line 2: want a user name"},
		{"spaced user", " u:" + hash, "line 1: want a user name"},
		{"SHA-1", "u:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=", `line 1: user "u": the hash is not bcrypt`},
		{"MD5", "u:$apr1$salt$hash", "the hash is not bcrypt"},
		{"crypt", "u:rl0uE7Kf2DqdE", "the hash is not bcrypt"},
		{"plain text", "u:password", "the hash is not bcrypt"},
		{"truncated bcrypt", "u:$2y$10$abc", "malformed bcrypt hash"},
		{"duplicate", "u:" + hash + "\nu:" + hash, `line 2: user "u" is listed twice`},
		{"robot name", "robot+a+ci:" + hash, "robot accounts"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			os.WriteFile(cfg.Htpasswd, []byte(tc.content), 0o600)
			_, err := NewAuthn(cfg, AuthnOptions{})
			if err == nil || !strings.HasPrefix(err.Error(), "auth.htpasswd: "+cfg.Htpasswd+" line ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an auth.htpasswd error naming the file and saying %q", err, tc.want)
			}
		})
	}
	cfg := testConfig(t)
	cfg.Htpasswd = filepath.Join(t.TempDir(), "missing")
	if _, err := NewAuthn(cfg, AuthnOptions{}); err == nil || !strings.HasPrefix(err.Error(), "auth.htpasswd: ") {
		t.Errorf("a missing file: got %v", err)
	}
}

func TestHtpasswdIsReloadedWhenItChanges(t *testing.T) {
	f := newFixture(t)
	f.users.statEvery = 0
	if _, err := f.Authenticate(basicRequest("alice", "alice-pw")); err != nil {
		t.Fatal(err)
	}
	tok, _, _ := f.Issue(f.user(t, "alice"), nil)
	writeHtpasswd(t, f.cfg.Htpasswd, map[string]string{"carol": "carol-pw"})
	f.clock.Advance(1)
	if _, err := f.Authenticate(basicRequest("carol", "carol-pw")); err != nil {
		t.Errorf("a user added to the file: %v", err)
	}
	if _, err := f.Authenticate(basicRequest("alice", "alice-pw")); err == nil {
		t.Errorf("a user removed from the file (with a cached check) still logs in")
	}
	if _, err := f.Authenticate(bearerRequest(tok)); err == nil {
		t.Errorf("a token of a user removed from the file is still accepted")
	}
	os.WriteFile(f.cfg.Htpasswd, []byte("broken"), 0o600)
	f.clock.Advance(1)
	if _, err := f.Authenticate(basicRequest("carol", "carol-pw")); err != nil {
		t.Errorf("a file that no longer parses should leave the users as they were: %v", err)
	}
}

// A token checked once is not checked again, but its claims still are: the
// cache never lets an expired token through, nor one of another kind.
func TestVerifiedTokensAreCachedNotTrustedForever(t *testing.T) {
	k, err := loadSigningKey(filepath.Join(t.TempDir(), "key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	raw, err := k.sign("berth", Identity{Subject: "user:alice"}, useAccess, nil, now, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if k.verifiedBefore(raw) {
		t.Fatal("a token never checked counts as verified")
	}
	for range 2 {
		if _, err := k.verify(raw, "berth", useAccess, now); err != nil {
			t.Fatal(err)
		}
	}
	if !k.verifiedBefore(raw) {
		t.Fatal("a checked token does not count as verified")
	}
	if len(k.verified) != 1 {
		t.Fatalf("%d tokens cached, want 1", len(k.verified))
	}
	if _, err := k.verify(raw, "berth", useAccess, now.Add(time.Minute+tokenLeeway+time.Second)); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("a cached token past its expiry: %v, want expired", err)
	}
	if _, err := k.verify(raw, "berth", useRefresh, now); err == nil {
		t.Fatal("a cached access token was accepted as a refresh token")
	}
	// One character inside the signature changed: the last two carry padding
	// bits, so overwriting them could leave the decoded signature as it was.
	i := len(raw) - 10
	c := byte('A')
	if raw[i] == c {
		c = 'B'
	}
	if _, err := k.verify(raw[:i]+string(c)+raw[i+1:], "berth", useAccess, now); err == nil {
		t.Fatal("a tampered token was accepted")
	}
}

// TestTokensAcrossReplicas: a token minted by one Authn verifies on another
// with the same key file, whose KeyID is the same, and fails on one with
// another key, whose KeyID differs.
func TestTokensAcrossReplicas(t *testing.T) {
	a := newFixture(t)
	b := newReplica(t, a.cfg, a.revoked)
	other := newFixture(t)
	if a.KeyID() == "" || a.KeyID() != b.KeyID() {
		t.Errorf("KeyID of A %q, of B %q with the same key file: want one, not empty", a.KeyID(), b.KeyID())
	}
	if a.KeyID() == other.KeyID() {
		t.Errorf("two keys have one KeyID %q", a.KeyID())
	}
	if !strings.Contains(string(a.key.jwks), `"kid":"`+a.KeyID()+`"`) {
		t.Errorf("KeyID %q is not the kid of the JWKS %s", a.KeyID(), a.key.jwks)
	}
	tok, _, err := a.Issue(a.user(t, "alice"), []Grant{{Type: "repository", Name: "a/x", Actions: []string{"pull"}}})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := b.Authenticate(bearerRequest(tok)); err != nil || id.Subject != "user:alice" {
		t.Errorf("A's token on B = %+v, %v; want alice", id, err)
	}
	if _, err := other.Authenticate(bearerRequest(tok)); !errors.Is(err, ErrBadCredentials) || !strings.Contains(err.Error(), "not signed by this registry") {
		t.Errorf("A's token on a replica with another key: %v, want not signed by this registry", err)
	}
}
