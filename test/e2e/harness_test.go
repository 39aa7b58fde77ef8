// Package e2e drives a real `berth serve` process with the real oras, helm,
// cosign and crane CLIs and the berth binary, the way users do.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-registry/berth/internal/browsertest"
	"github.com/berth-registry/berth/internal/pgtest"
	"github.com/berth-registry/berth/internal/testenv"
)

// Paths of the binaries under test, set by TestMain.
var berthBin, orasBin, registryBin, helmBin, cosignBin, craneBin, versitygwBin string

// fixtures is the shared folder of real operator packages (absolute, since
// commands run in other directories).
var fixtures string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "berth-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if fixtures, err = filepath.Abs(filepath.Join("..", "..", "..", "shared", "fixtures")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	berthBin = filepath.Join(dir, "berth")
	if out, err := exec.Command("go", "build", "-o", berthBin, "github.com/berth-registry/berth/cmd/berth").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building berth: %v\n%s", err, out)
		return 1
	}
	// The tools are pinned in go.mod; `go tool -n` builds one and prints its path.
	for _, tool := range []struct {
		name string
		path *string
	}{{"oras", &orasBin}, {"registry", &registryBin}, {"helm", &helmBin}, {"cosign", &cosignBin}, {"crane", &craneBin}} {
		out, err := exec.Command("go", "tool", "-n", tool.name).Output()
		if err != nil {
			if testenv.CI() {
				fmt.Fprintf(os.Stderr, "%s is required in CI (go tool -n %s): %v\n", tool.name, tool.name, err)
				return 1
			}
			fmt.Fprintf(os.Stderr, "%s not available, its tests will be skipped: %v\n", tool.name, err)
			continue
		}
		*tool.path = strings.TrimSpace(string(out))
	}
	// versitygw is pinned in tools/versitygw/go.mod, out of berth's module, and
	// `make tools` builds it into bin/versitygw; its tests call requireTool.
	if p, err := filepath.Abs(filepath.Join("..", "..", "bin", "versitygw")); err == nil {
		if _, err := os.Stat(p); err == nil {
			versitygwBin = p
		}
	}
	// The browser tests share one Chromium, stopped here.
	defer browsertest.Stop()
	// The TLS tests' certificates are issued by one authority, which the
	// tests' own HTTP client trusts.
	if err := makeTestCA(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	trusting := http.DefaultTransport.(*http.Transport).Clone()
	trusting.TLSClientConfig = &tls.Config{RootCAs: testCA.pool}
	// Every answer the tests read is looked through for their secrets.
	http.DefaultTransport = scanningTransport{next: trusting}
	// The tests that need PostgreSQL share one throwaway cluster, stopped here.
	code := pgtest.Run(m)
	if secrets.pending() && code == 0 {
		code = 1
	}
	return code
}

// requireOras skips (or, in CI, fails) a test that needs the oras CLI.
func requireOras(t *testing.T) { requireTool(t, "the oras CLI", orasBin) }

// requireTool skips (or, in CI, fails) a test that needs a tool that could not be built.
func requireTool(t *testing.T, name, path string) {
	t.Helper()
	if path == "" {
		if testenv.CI() {
			t.Fatal(name + " missing")
		}
		t.Skip(name + " missing")
	}
}

// server is a running `berth serve` process.
type server struct {
	addr string // 127.0.0.1:port
	// tls is whether it serves HTTPS (http.tls), as its log says.
	tls  bool
	data string
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	log  bytes.Buffer
	err  error // the process's exit error, once done is closed
}

var servingRE = regexp.MustCompile(`msg="berth serving" addr=(\S+)`)

// servingTLS starts the log line of a server that serves HTTPS.
const servingTLS = `msg="serving TLS`

// startServer starts berth serve on a free loopback port with data in a new
// temp dir (or the given one) and stops it when the test ends.
func startServer(t *testing.T, data string, args ...string) *server {
	t.Helper()
	if data == "" {
		data = t.TempDir()
	}
	s := startProcess(t, "", append([]string{"serve", "--addr", "127.0.0.1:0", "--data", data}, args...)...)
	s.data = data
	return s
}

// startProcess runs berth with args in dir and waits until it serves.
func startProcess(t *testing.T, dir string, args ...string) *server {
	t.Helper()
	s := &server{done: make(chan struct{})}
	s.cmd = exec.Command(berthBin, args...)
	s.cmd.Dir = dir
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.log.WriteString(line + "\n")
			s.mu.Unlock()
			if strings.Contains(line, servingTLS) {
				s.tls = true
			}
			if m := servingRE.FindStringSubmatch(line); m != nil {
				addr <- m[1]
			}
		}
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		s.stop(t)
		secrets.scanLines("the log of berth "+args[0], s.logs())
		secrets.report(t)
	})
	select {
	case s.addr = <-addr:
	case <-s.done:
		t.Fatalf("berth %s exited before serving: %v\n%s", strings.Join(args, " "), s.err, s.logs())
	case <-time.After(30 * time.Second):
		t.Fatalf("berth serve did not start in 30s\n%s", s.logs())
	}
	return s
}

func (s *server) logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// stop sends SIGTERM and waits for the process; it returns the exit error.
func (s *server) stop(t *testing.T) error {
	t.Helper()
	select {
	case <-s.done:
		return s.err
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		t.Errorf("berth serve did not stop within 30s of SIGTERM")
	}
	return s.err
}

// url returns the server's base URL.
func (s *server) url() string {
	if s.tls {
		return "https://" + s.addr
	}
	return "http://" + s.addr
}

// get fetches path from the server and returns the status and body.
func (s *server) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(s.url() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// result is what a command printed and how it exited.
type result struct {
	stdout, stderr string
	code           int
}

func run(t *testing.T, dir, bin string, args ...string) result {
	t.Helper()
	return runWith(t, command{dir: dir}, bin, args...)
}

// command is how a command runs: in dir, with env added to the test's
// environment, and stdin as its standard input.
type command struct {
	dir   string
	env   []string
	stdin string
}

func runWith(t *testing.T, c command, bin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = c.dir
	if c.env != nil {
		cmd.Env = append(os.Environ(), c.env...)
	}
	cmd.Stdin = strings.NewReader(c.stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	secrets.scanLines("the output of "+strings.Join(append([]string{filepath.Base(bin)}, args[:min(1, len(args))]...), " "), r.stdout+r.stderr)
	secrets.report(t)
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("%s %s: %v", filepath.Base(bin), strings.Join(args, " "), err)
	}
	return r
}

// mustRun runs bin in dir and fails the test unless it succeeds.
func mustRun(t *testing.T, dir, bin string, args ...string) result {
	t.Helper()
	r := run(t, dir, bin, args...)
	if r.code != 0 {
		t.Fatalf("%s %s: exit %d\nstdout: %s\nstderr: %s", filepath.Base(bin), strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// berth runs the berth CLI in dir and fails the test unless it succeeds.
func berth(t *testing.T, dir string, args ...string) result {
	t.Helper()
	return mustRun(t, dir, berthBin, args...)
}

// oras runs the oras CLI in dir and fails the test unless it succeeds.
func oras(t *testing.T, dir string, args ...string) result {
	t.Helper()
	requireOras(t)
	return mustRun(t, dir, orasBin, args...)
}
