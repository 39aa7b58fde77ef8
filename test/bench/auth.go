package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/crypto/bcrypt"
	"oras.land/oras-go/v2/registry/remote/auth"
)

// benchUser is the user the clients of berth with auth on log in as.
const benchUser = "bench"

// startBerthAuth runs `berth serve` with auth on, as startBerth does
// otherwise: an htpasswd file with benchUser (bcrypt at the default cost,
// as htpasswd -B -C 10 writes it) and one rule granting it pull and push on
// every repository the workloads use. It returns the server and the user's
// password.
func startBerthAuth(ctx context.Context, bin, dir string) (*server, string, error) {
	htpasswd, password, err := writeBenchUser(dir)
	if err != nil {
		return nil, "", err
	}
	s, err := startBerthConfig(ctx, "berth+auth", bin, dir, authSection(htpasswd, ""))
	return s, password, err
}

// writeBenchUser writes dir/htpasswd with benchUser and a fresh password
// (bcrypt at the default cost, as htpasswd -B -C 10 writes it), and returns
// the file and the password.
func writeBenchUser(dir string) (file, password string, err error) {
	password = fmt.Sprintf("bench-%d", time.Now().UnixNano())
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return "", "", err
	}
	file = filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(file, []byte(benchUser+":"+string(hash)+"\n"), 0o600); err != nil {
		return "", "", err
	}
	return file, password, nil
}

// authSection is the auth section of the configuration of a berth with auth
// on: the users of htpasswd, one rule granting benchUser pull and push on
// every repository the workloads use, and the token key keyFile ("" for
// its default place under the data directory; replicas share one).
func authSection(htpasswd, keyFile string) string {
	key := ""
	if keyFile != "" {
		key = fmt.Sprintf("  keyFile: %q\n", keyFile)
	}
	return fmt.Sprintf(`auth:
  htpasswd: %q
%s  rules:
    - subjects: ["user:%s"]
      repositories: ["bench/*", "bench/*/*", "scale/*"]
      actions: [pull, push]
`, htpasswd, key, benchUser)
}

// newLoginTarget is a target whose registry client logs in as user through
// the token flow, as oras does: oras-go's auth client, which fetches a token
// for each scope with Basic credentials and caches it.
func newLoginTarget(name, addr, user, password string) *target {
	t := newTarget(name, addr)
	t.login = &auth.Client{
		Client:     t.client,
		Credential: auth.StaticCredential(addr, auth.Credential{Username: user, Password: password}),
		Cache:      auth.NewCache(),
	}
	return t
}

// tokenLatency asks berth's token endpoint n times, one at a time, for a
// token for one repository with user's Basic credentials (GET /auth/token),
// and returns the 50th and 99th percentiles of the time to the whole answer.
func tokenLatency(ctx context.Context, t *target, user, password string, n int) (p50, p99 time.Duration, err error) {
	q := url.Values{"service": {"berth"}, "scope": {"repository:bench/auth-1/pkg-0001:pull,push"}}
	target := "http://" + t.addr + "/auth/token?" + q.Encode()
	took := make([]time.Duration, 0, n)
	for range n {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if err != nil {
			return 0, 0, err
		}
		req.SetBasicAuth(user, password)
		start := time.Now()
		resp, err := t.client.Do(req)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: token: %w", t.name, err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return 0, 0, fmt.Errorf("%s: token: %w", t.name, err)
		}
		if resp.StatusCode != http.StatusOK {
			return 0, 0, fmt.Errorf("%s: GET /auth/token: %s", t.name, resp.Status)
		}
		took = append(took, time.Since(start))
	}
	return percentile(took, 0.50), percentile(took, 0.99), nil
}
