// Package gittest runs Debian's git for tests and benchmarks: repositories
// made with the git command and served over smart HTTP by git http-backend
// on loopback, with or without basic auth, as package sources are fetched
// from and pushed to.
package gittest

import (
	"fmt"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
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
	if err := Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// Available returns an error naming git or git http-backend when either is
// missing.
func Available() error {
	for _, bin := range []string{Git, Backend} {
		if _, err := os.Stat(bin); err != nil {
			return fmt.Errorf("%s is needed: %w", bin, err)
		}
	}
	return nil
}

// Command is git with args in dir, isolated from the user's and the
// system's configuration (HOME is dir), committing as a fixed author.
func Command(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command(Git, append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com",
		"-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "GIT_TERMINAL_PROMPT=0")
	return cmd
}

// Output runs Command and returns its trimmed output, or an error holding
// what git printed.
func Output(dir string, args ...string) (string, error) {
	out, err := Command(dir, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// Run runs git in dir, as Command does, and returns its trimmed output.
func Run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := Output(dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// CommitAll commits everything in dir and returns the commit.
func CommitAll(t testing.TB, dir, msg string) string {
	t.Helper()
	Run(t, dir, "add", "-A")
	Run(t, dir, "commit", "-q", "--allow-empty", "-m", msg)
	return Run(t, dir, "rev-parse", "HEAD")
}

// InitBare creates the bare repository root/name that a Server under root
// serves as /name, and that accepts pushes over smart HTTP
// (http.receivepack), and returns its directory.
func InitBare(root, name string) (string, error) {
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, args := range [][]string{{"init", "-q", "--bare"}, {"config", "http.receivepack", "true"}} {
		if _, err := Output(dir, args...); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// Bare is InitBare for a test.
func Bare(t testing.TB, root, name string) string {
	t.Helper()
	dir, err := InitBare(root, name)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// Options are how a Server serves.
type Options struct {
	// Password, when set, lets in only User with it (basic auth).
	Password string
	// OnRequest, when set, sees every request before it is served, while
	// its connection is open.
	OnRequest func(*http.Request)
}

// Handler serves the repositories under root over smart HTTP with git
// http-backend, fetches and pushes alike (a repository takes pushes when
// its http.receivepack is true, as InitBare sets).
func Handler(root string, o Options) http.Handler {
	backend := &cgi.Handler{Path: Backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o.OnRequest != nil {
			o.OnRequest(r)
		}
		if o.Password != "" {
			if u, p, ok := r.BasicAuth(); !ok || u != User || p != o.Password {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		backend.ServeHTTP(w, r)
	})
}

// Serve serves Handler(root, o) on 127.0.0.1 until the test ends and
// returns its base URL.
func Serve(t testing.TB, root string, o Options) string {
	t.Helper()
	srv := httptest.NewServer(Handler(root, o))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Server serves the repositories under root over smart HTTP with git
// http-backend on 127.0.0.1 until the test ends, and returns its base
// URL; with a password, only to User with it.
func Server(t testing.TB, root, password string) string {
	t.Helper()
	return Serve(t, root, Options{Password: password})
}
