package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serveTokenAuth starts a registry front that only checks logins: /v2/
// challenges with Bearer unless the request carries the token that
// /auth/token gives for Basic alice:secret. It returns its host:port.
func serveTokenAuth(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/auth/token":
			if user, pass, _ := r.BasicAuth(); user != "alice" || pass != "secret" {
				writeAPIError(w, http.StatusUnauthorized, "UNAUTHORIZED", "bad credentials")
				return
			}
			json.NewEncoder(w).Encode(map[string]string{"token": "t0k"})
		case r.Header.Get("Authorization") == "Bearer t0k":
			w.WriteHeader(http.StatusOK)
		default:
			w.Header().Set("WWW-Authenticate", `Bearer realm="http://`+r.Host+`/auth/token",service="berth"`)
			writeAPIError(w, http.StatusUnauthorized, "UNAUTHORIZED", "authentication required")
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// withStdin makes s the standard input of the commands the test runs.
func withStdin(t *testing.T, s string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stdin")
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdin
	os.Stdin = f
	t.Cleanup(func() { os.Stdin = old; f.Close() })
}

func TestLoginLogoutCmd(t *testing.T) {
	setup(t)
	t.Setenv("PATH", t.TempDir()) // no docker-credential-* helper
	host := serveTokenAuth(t)
	configPath := filepath.Join(os.Getenv("DOCKER_CONFIG"), "config.json")

	code, _, stderr := berth(t, "login", host, "-u", "alice", "-p", "guess")
	if want := "Error: login to " + host + " failed: unauthorized: bad credentials (UNAUTHORIZED, HTTP 401)\n"; code != 1 || stderr != want {
		t.Fatalf("login with a wrong password: exit %d, stderr %q, want %q", code, stderr, want)
	}
	if _, err := os.Stat(configPath); err == nil {
		t.Fatal("a refused login wrote the Docker config")
	}

	withStdin(t, "secret\n")
	if out := mustBerth(t, "login", host, "-u", "alice", "--password-stdin"); out != "Logged in to "+host+" as alice\n" {
		t.Errorf("login output %q", out)
	}
	data, err := os.ReadFile(configPath)
	if err != nil || !strings.Contains(string(data), `"`+host+`"`) || !strings.Contains(string(data), "YWxpY2U6c2VjcmV0") {
		t.Fatalf("Docker config after login: %s, %v", data, err)
	}

	if out := mustBerth(t, "logout", host); out != "Removed the credentials for "+host+"\n" {
		t.Errorf("logout output %q", out)
	}
	if data, _ := os.ReadFile(configPath); strings.Contains(string(data), host) {
		t.Errorf("Docker config after logout: %s", data)
	}
	if out := mustBerth(t, "logout", host); out != "Not logged in to "+host+"\n" {
		t.Errorf("second logout output %q", out)
	}

	// --registry-config names another file.
	other := filepath.Join(t.TempDir(), "other.json")
	mustBerth(t, "login", host, "-u", "alice", "-p", "secret", "--registry-config", other)
	if data, err := os.ReadFile(other); err != nil || !strings.Contains(string(data), host) {
		t.Errorf("--registry-config %s after login: %s, %v", other, data, err)
	}
}

func TestLoginCmdErrors(t *testing.T) {
	setup(t)
	tests := []struct {
		args  []string
		stdin string
		want  string
	}{
		{[]string{"login", "localhost:5000", "-u", "alice", "--password-stdin"}, "\n", "Error: empty password\n"},
		{[]string{"login", "localhost:5000", "--password-stdin"}, "secret", "Error: --password-stdin needs --username\n"},
		{[]string{"login", "localhost:5000", "-u", "alice"}, "", "Error: no password: give --password-stdin (or --password), or run berth login on a terminal\n"},
		{[]string{"login", "localhost:5000", "-u", "alice", "-p", "x", "--password-stdin"}, "", "Error: if any flags in the group [password password-stdin] are set none of the others can be; [password password-stdin] were all set\n"},
		{[]string{"login", "https://localhost:5000", "-u", "alice", "-p", "x"}, "", "Error: login to https://localhost:5000 failed: invalid: want host[:port], not a URL (got \"https://localhost:5000\")\n"},
		{[]string{"logout"}, "", "Error: accepts 1 arg(s), received 0\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			withStdin(t, tt.stdin)
			code, _, stderr := berth(t, tt.args...)
			if code != 1 || stderr != tt.want {
				t.Errorf("exit %d, stderr %q, want %q", code, stderr, tt.want)
			}
		})
	}
}

// TestLoginLogoutCmdJSON: with --format json, login and logout print one
// JSON document, never the password.
func TestLoginLogoutCmdJSON(t *testing.T) {
	setup(t)
	t.Setenv("PATH", t.TempDir()) // no docker-credential-* helper
	host := serveTokenAuth(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"login", host, "-u", "alice", "-p", "secret", "--format", "json"}, `{"host":"` + host + `","username":"alice"}`},
		{[]string{"logout", host, "--format", "json"}, `{"host":"` + host + `","removed":true}`},
		{[]string{"logout", host, "--format", "json"}, `{"host":"` + host + `","removed":false}`},
	} {
		out := mustBerth(t, tc.args...)
		if got := compactJSON(t, out); got != tc.want || strings.Contains(out, "secret") {
			t.Errorf("berth %s: %q, want one JSON document %s", strings.Join(tc.args, " "), out, tc.want)
		}
	}
}

// compactJSON is the one JSON document of out, compacted; it fails the test
// when out is not exactly one document.
func compactJSON(t *testing.T, out string) string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	var doc json.RawMessage
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("not JSON: %q: %v", out, err)
	}
	if dec.More() {
		t.Fatalf("more than one JSON document: %q", out)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, doc); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
