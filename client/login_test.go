package client

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/client/registrytest"
)

// tokenService puts the Docker token flow in front of a registry: /v2/
// answers 401 with a Bearer challenge unless the request carries a token
// that /auth/token issued, which takes Basic alice:secret (GET) or the
// OAuth2 form (POST, grant_type password or refresh_token with the
// identity token "idtoken"). After three failed logins it answers 429 with
// Retry-After: 30. /api/v1/ answers an empty search and records the
// Authorization it got.
type tokenService struct {
	mu       sync.Mutex
	failures int
	tokens   []string // "GET alice", "POST refresh_token", "POST password alice" per token request
	apiAuth  []string // the Authorization header of each /api/v1 request
	// revoked are the tokens posted to /auth/revoke, which answers
	// revokeStatus (default 200).
	revoked      []string
	revokeStatus int
}

const (
	testService   = "berth-test"
	identityToken = "idtoken"
	accessToken   = "access-token-1"
)

func (s *tokenService) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/auth/token":
			s.token(w, r)
		case r.URL.Path == "/auth/revoke" && r.Method == http.MethodPost:
			r.ParseForm()
			s.mu.Lock()
			s.revoked = append(s.revoked, r.PostForm.Get("token"))
			status := cmp.Or(s.revokeStatus, http.StatusOK)
			s.mu.Unlock()
			w.WriteHeader(status)
		case strings.HasPrefix(r.URL.Path, "/api/v1/"):
			s.mu.Lock()
			s.apiAuth = append(s.apiAuth, r.Header.Get("Authorization"))
			s.mu.Unlock()
			writeDoc(w, http.StatusOK, apiv1.SearchResponse{})
		case r.Header.Get("Authorization") == "Bearer "+accessToken:
			next.ServeHTTP(w, r)
		default:
			w.Header().Set("WWW-Authenticate", `Bearer realm="http://`+r.Host+`/auth/token",service="`+testService+`"`)
			writeDoc(w, http.StatusUnauthorized, apiv1.Errors{Errors: []apiv1.Error{{Code: "UNAUTHORIZED", Message: "authentication required"}}})
		}
	})
}

func (s *tokenService) token(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ok bool
	switch r.Method {
	case http.MethodGet:
		user, pass, _ := r.BasicAuth()
		s.tokens = append(s.tokens, "GET "+user)
		ok = user == "alice" && pass == "secret" && r.URL.Query().Get("service") == testService
	case http.MethodPost:
		r.ParseForm()
		grant := r.PostForm.Get("grant_type")
		s.tokens = append(s.tokens, strings.TrimSpace("POST "+grant+" "+r.PostForm.Get("username")))
		ok = r.PostForm.Get("service") == testService && r.PostForm.Get("client_id") != "" &&
			(grant == "refresh_token" && r.PostForm.Get("refresh_token") == identityToken ||
				grant == "password" && r.PostForm.Get("username") == "alice" && r.PostForm.Get("password") == "secret")
	}
	switch {
	case s.failures >= 3:
		w.Header().Set("Retry-After", "30")
		writeDoc(w, http.StatusTooManyRequests, apiv1.Errors{Errors: []apiv1.Error{{Code: "TOO_MANY_REQUESTS", Message: "too many failed logins"}}})
	case !ok:
		s.failures++
		writeDoc(w, http.StatusUnauthorized, apiv1.Errors{Errors: []apiv1.Error{{Code: "UNAUTHORIZED", Message: "bad credentials"}}})
	default:
		writeDoc(w, http.StatusOK, map[string]any{"token": accessToken, "access_token": accessToken, "expires_in": 300})
	}
}

func (s *tokenService) tokenRequests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.tokens)
}

func (s *tokenService) apiAuthorization() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.apiAuth)
}

// memoryStore returns a credential store holding cred for host.
func memoryStore(t *testing.T, host string, cred auth.Credential) credentials.Store {
	t.Helper()
	store := credentials.NewMemoryStore()
	if err := store.Put(context.Background(), host, cred); err != nil {
		t.Fatal(err)
	}
	return store
}

func TestTokenFlow(t *testing.T) {
	ctx := context.Background()
	svc := &tokenService{}
	host := registrytest.New(t, svc.wrap)
	ref := mustParse(t, host+"/charts/demo")
	art := testArtifact(t, "demo", "1.0.0")

	_, err := newTestClient(t, Options{}).Push(ctx, ref, art)
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("Push without credentials: %v, want ErrUnauthorized", err)
	}
	c := newTestClient(t, Options{Credentials: memoryStore(t, host, auth.Credential{Username: "alice", Password: "secret"})})
	if _, err := c.Push(ctx, ref, art); err != nil {
		t.Fatalf("Push through the token flow: %v", err)
	}
	if _, err := c.Pull(ctx, mustParse(t, host+"/charts/demo:1.0.0")); err != nil {
		t.Fatalf("Pull through the token flow: %v", err)
	}
	if _, err := c.Inspect(ctx, mustParse(t, host+"/charts/demo:1.0.0")); err != nil {
		t.Fatalf("Inspect through the token flow: %v", err)
	}
	if got := svc.tokenRequests(); !slices.Contains(got, "GET alice") {
		t.Errorf("token requests %q, want GET with Basic alice", got)
	}

	// An identity token is exchanged with the OAuth2 refresh_token grant.
	c = newTestClient(t, Options{Credentials: memoryStore(t, host, auth.Credential{RefreshToken: identityToken})})
	if _, err := c.Pull(ctx, mustParse(t, host+"/charts/demo:1.0.0")); err != nil {
		t.Fatalf("Pull with an identity token: %v", err)
	}
	if got := svc.tokenRequests(); !slices.Contains(got, "POST refresh_token") {
		t.Errorf("token requests %q, want POST refresh_token", got)
	}
}

func TestCatalogSendsCredentials(t *testing.T) {
	ctx := context.Background()
	svc := &tokenService{}
	host := registrytest.New(t, svc.wrap)
	for _, tt := range []struct {
		name string
		cred auth.Credential
		want string
	}{
		{"anonymous", auth.EmptyCredential, ""},
		{"password", auth.Credential{Username: "alice", Password: "secret"}, "Basic YWxpY2U6c2VjcmV0"},
		{"identity token", auth.Credential{RefreshToken: identityToken}, "Bearer " + accessToken},
		{"registry token", auth.Credential{AccessToken: "stored-token"}, "Bearer stored-token"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestCatalog(t, host, Options{Credentials: memoryStore(t, host, tt.cred)})
			before := len(svc.apiAuthorization())
			if _, err := c.Search(ctx, SearchOptions{}); err != nil {
				t.Fatal(err)
			}
			if got := svc.apiAuthorization()[before:]; !slices.Equal(got, []string{tt.want}) {
				t.Errorf("Authorization %q, want %q", got, tt.want)
			}
		})
	}
	if got := svc.tokenRequests(); !slices.Equal(got, []string{"POST refresh_token"}) {
		t.Errorf("token requests %q, want one POST refresh_token", got)
	}
}

// dockerConfig isolates a test from the machine's Docker config and
// credential helpers, and returns the path of an empty config file.
func dockerConfig(t *testing.T) string {
	t.Helper()
	t.Setenv("PATH", t.TempDir()) // no docker-credential-* helper
	return filepath.Join(t.TempDir(), "config.json")
}

func TestLoginLogout(t *testing.T) {
	ctx := context.Background()
	svc := &tokenService{}
	host := registrytest.New(t, svc.wrap)
	configPath := dockerConfig(t)
	store, err := NewCredentialStore(configPath)
	if err != nil {
		t.Fatal(err)
	}
	c := newTestClient(t, Options{Credentials: store})

	err = c.Login(ctx, host, auth.Credential{Username: "alice", Password: "guess"})
	if want := "login to " + host + " failed: unauthorized: bad credentials (UNAUTHORIZED, HTTP 401)"; !errors.Is(err, ErrUnauthorized) || err.Error() != want {
		t.Fatalf("Login with a wrong password: %v, want %s", err, want)
	}
	if _, err := os.Stat(configPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused login wrote %s: %v", configPath, err)
	}

	if err := c.Login(ctx, host, auth.Credential{Username: "alice", Password: "secret"}); err != nil {
		t.Fatalf("Login: %v", err)
	}
	if got := svc.tokenRequests(); !slices.Equal(got, []string{"GET alice", "GET alice"}) {
		t.Errorf("token requests %q, want two GET with Basic alice", got)
	}
	var cfg struct {
		Auths map[string]struct{ Auth string } `json:"auths"`
	}
	data, err := os.ReadFile(configPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &cfg); err != nil || cfg.Auths[host].Auth != "YWxpY2U6c2VjcmV0" {
		t.Fatalf("config after login: %s (%v), want alice:secret for %s", data, err, host)
	}
	// Another client reads them from the file.
	other, err := NewCredentialStore(configPath)
	if err != nil {
		t.Fatal(err)
	}
	if cred, err := other.Get(ctx, host); err != nil || cred.Username != "alice" || cred.Password != "secret" {
		t.Fatalf("stored credential %+v, %v", cred, err)
	}

	if was, err := c.Logout(ctx, host); err != nil || !was {
		t.Fatalf("Logout: %v, %v; want true, nil", was, err)
	}
	if other, err = NewCredentialStore(configPath); err != nil {
		t.Fatal(err)
	}
	if cred, err := other.Get(ctx, host); err != nil || cred != auth.EmptyCredential {
		t.Fatalf("credential after logout %+v, %v", cred, err)
	}
	if was, err := c.Logout(ctx, host); err != nil || was {
		t.Fatalf("second Logout: %v, %v; want false, nil", was, err)
	}

	// Refused logins end in a rate limit, which says when to retry.
	c.Login(ctx, host, auth.Credential{Username: "alice", Password: "guess"})
	c.Login(ctx, host, auth.Credential{Username: "alice", Password: "guess"})
	err = c.Login(ctx, host, auth.Credential{Username: "alice", Password: "secret"})
	if want := "login to " + host + " failed: too many failed logins, retry in 30s"; !errors.Is(err, ErrRateLimited) || err.Error() != want {
		t.Fatalf("Login after failures: %v, want %s", err, want)
	}
}

// TestLogoutRevokesIdentityToken: an identity token is revoked at the
// registry before it is removed; when the registry fails to revoke it, it
// stays stored; a registry without a revocation endpoint only loses it
// from the store.
func TestLogoutRevokesIdentityToken(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name         string
		status       int
		removed      bool
		wantErr      string
		wantRevoked  bool
		storeKeepsIt bool
	}{
		{"revoked", http.StatusOK, true, "", true, false},
		{"no revocation endpoint", http.StatusNotFound, true, "", true, false},
		{"revocation refused", http.StatusBadRequest, false, "could not be revoked, so the credentials are still stored", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &tokenService{revokeStatus: tc.status}
			host := registrytest.New(t, svc.wrap)
			store := memoryStore(t, host, auth.Credential{RefreshToken: identityToken})
			c := newTestClient(t, Options{Credentials: store})
			removed, err := c.Logout(ctx, host)
			if removed != tc.removed || (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Logout: %v, %v; want %v and an error saying %q", removed, err, tc.removed, tc.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), identityToken) {
				t.Errorf("the error quotes the token: %v", err)
			}
			svc.mu.Lock()
			revoked := slices.Equal(svc.revoked, []string{identityToken})
			svc.mu.Unlock()
			if revoked != tc.wantRevoked {
				t.Errorf("revocations posted: %v, want the identity token revoked: %v", svc.revoked, tc.wantRevoked)
			}
			cred, _ := store.Get(ctx, host)
			if kept := cred.RefreshToken != ""; kept != tc.storeKeepsIt {
				t.Errorf("the store keeps the token: %v, want %v", kept, tc.storeKeepsIt)
			}
		})
	}
}

func TestLoginInvalid(t *testing.T) {
	c := newTestClient(t, Options{})
	for _, tt := range []struct {
		host string
		cred auth.Credential
	}{
		{"localhost:5000", auth.EmptyCredential},
		{"localhost:5000", auth.Credential{Username: "alice"}},
		{"http://localhost:5000", auth.Credential{Username: "alice", Password: "secret"}},
		{"", auth.Credential{Username: "alice", Password: "secret"}},
	} {
		if err := c.Login(context.Background(), tt.host, tt.cred); !errors.Is(err, ErrInvalid) {
			t.Errorf("Login(%q, %+v): %v, want ErrInvalid", tt.host, tt.cred, err)
		}
	}
}

func TestLoginCredentialHelper(t *testing.T) {
	ctx := context.Background()
	host := registrytest.New(t, (&tokenService{}).wrap)
	configPath := dockerConfig(t)
	// A credential helper that keeps one credential in a file.
	bin := os.Getenv("PATH")
	kept := filepath.Join(t.TempDir(), "kept.json")
	helper := `#!/bin/sh
PATH=/usr/bin:/bin
case "$1" in
store) cat > ` + kept + ` ;;
get) if [ -f ` + kept + ` ]; then cat ` + kept + `; else echo "credentials not found in native keychain"; exit 1; fi ;;
erase) rm -f ` + kept + ` ;;
esac
`
	if err := os.WriteFile(filepath.Join(bin, "docker-credential-berthtest"), []byte(helper), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(configPath, []byte(`{"credsStore":"berthtest"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := NewCredentialStore(configPath)
	if err != nil {
		t.Fatal(err)
	}
	c := newTestClient(t, Options{Credentials: store})
	if err := c.Login(ctx, host, auth.Credential{Username: "alice", Password: "secret"}); err != nil {
		t.Fatalf("Login: %v", err)
	}
	data, err := os.ReadFile(kept)
	if err != nil || !strings.Contains(string(data), `"Secret":"secret"`) {
		t.Fatalf("the helper keeps %s (%v), want alice's secret", data, err)
	}
	if config, _ := os.ReadFile(configPath); strings.Contains(string(config), "auths") {
		t.Errorf("the config file holds credentials: %s", config)
	}
	if was, err := c.Logout(ctx, host); err != nil || !was {
		t.Fatalf("Logout: %v, %v", was, err)
	}
	if _, err := os.Stat(kept); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the helper still keeps the credential after logout: %v", err)
	}
}
