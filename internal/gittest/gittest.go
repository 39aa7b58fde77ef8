// Package gittest runs Debian's git for tests: repositories made with the
// git command and served over smart HTTP by git http-backend on loopback,
// with or without basic auth, as package sources are fetched from.
package gittest

import (
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The binaries gittest runs.
const (
	Git     = "/usr/bin/git"
	Backend = "/usr/lib/git-core/git-http-backend"
)

// User is the only user a Server with a password lets in.
const User = "u"

// Require fails the test under CI (CI=true) and skips it elsewhere when git
// or git http-backend is missing (make test installs them).
func Require(t testing.TB) {
	t.Helper()
	for _, bin := range []string{Git, Backend} {
		if _, err := os.Stat(bin); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is needed: %v", bin, err)
			}
			t.Skipf("%s is needed: %v", bin, err)
		}
	}
}

// Run runs git in dir, isolated from the user's and the system's
// configuration, and returns its trimmed output.
func Run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(Git, append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com",
		"-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// CommitAll commits everything in dir and returns the commit.
func CommitAll(t testing.TB, dir, msg string) string {
	t.Helper()
	Run(t, dir, "add", "-A")
	Run(t, dir, "commit", "-q", "--allow-empty", "-m", msg)
	return Run(t, dir, "rev-parse", "HEAD")
}

// Server serves the repositories under root over smart HTTP with git
// http-backend on 127.0.0.1 until the test ends, and returns its base
// URL; with a password, only to User with it.
func Server(t testing.TB, root, password string) string {
	t.Helper()
	backend := &cgi.Handler{Path: Backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if password != "" {
			if u, p, ok := r.BasicAuth(); !ok || u != User || p != password {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
