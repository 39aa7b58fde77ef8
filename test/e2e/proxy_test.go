package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// clientHeader names, in a request to the test's proxy, the client address
// the proxy forwards (X-Forwarded-For), so that one test plays several
// clients behind one proxy.
const clientHeader = "X-Test-Client"

// TestReplicasBehindProxyWithAuth runs two berth serve replicas (PostgreSQL,
// S3) with auth on behind a reverse proxy they trust (trustedProxies), which
// sends every request, /v2/ included, to both in turn, and checks through it
// that:
//   - the download links name the host the proxy forwards, not a replica;
//   - what alice and anonymous read of the change feed and the indexes
//     (body, next, ETag) is the same on both replicas, and the same before
//     and after bob pushes into b/*;
//   - failed logins lock alice out from the client that sent them only.
func TestReplicasBehindProxyWithAuth(t *testing.T) {
	dir := t.TempDir()
	_, shared := sharedState(t, "proxied", dir)
	const maxFailures = 3
	keyFile := filepath.Join(dir, "token-key.pem")
	cfg, audit := writeAuthConfig(t, authOptions{maxFailures: maxFailures, extra: fmt.Sprintf(`  keyFile: %s
%strustedProxies: [127.0.0.1/32]
`, keyFile, shared)})
	a := startServer(t, "", "--config", cfg)
	secrets.addPEM(t, "the token key", keyFile)
	b := startServer(t, "", "--config", cfg)
	front := roundRobinProxy(t, a, b)
	s := newAuthServer(t, front, audit)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replica a:\n%s\nreplica b:\n%s", a.logs(), b.logs())
		}
	})

	admin, alice, bob := s.users["admin"], s.users["alice"], s.users["bob"]
	admin.login(t, berthBin, "login")
	admin.pushFixture(t, "redis", "5.0.1-0.2.0", "pub/redis")
	admin.pushFixture(t, "zookeeper", "3.4.14-0.3.0", "a/zookeeper")
	s.waitIndexed(t, "pub/redis", "5.0.1_0.2.0")
	s.waitIndexed(t, "a/zookeeper", "3.4.14_0.3.0")

	// The links name the proxy's address, which it forwards as X-Forwarded-Host.
	if idx := s.api(t, alice.creds(), "GET", "/a/index.yaml"); idx.status != http.StatusOK ||
		!strings.Contains(string(idx.body), "- \"http://"+front.addr+"/v2/a/zookeeper/blobs/sha256:") {
		t.Errorf("alice's /a/index.yaml does not link through the proxy %s: %s", front.addr, idx)
	}

	targets := []string{"/api/v1/changes", "/api/v1/changes?since=1", "/index.yaml", "/a/index.yaml", "/pub/index.yaml", "/api/helm/index.yaml"}
	// read asks each target twice, once of each replica, and wants the same answer.
	read := func(c creds) map[string]string {
		out := map[string]string{}
		for _, target := range targets {
			var answers [2]string
			for i := range answers {
				h := s.api(t, c, "GET", target)
				answers[i] = fmt.Sprintf("%d ETag=%s %s", h.status, h.header.Get("ETag"), h.body)
			}
			if answers[0] != answers[1] {
				t.Errorf("%s: the replicas answer %q differently:\n%s\n%s", c.user, target, answers[0], answers[1])
			}
			out[target] = answers[0]
		}
		return out
	}
	callers := []creds{alice.creds(), {}}
	before := make([]map[string]string, len(callers))
	for i, c := range callers {
		before[i] = read(c)
	}
	bob.login(t, berthBin, "login")
	bob.pushFixture(t, "kafka", "2.5.1-1.3.2", "b/kafka")
	bob.pushFixture(t, "zookeeper", "3.4.14-0.3.0", "b/zookeeper")
	s.waitIndexed(t, "b/kafka", "2.5.1_1.3.2")
	s.waitIndexed(t, "b/zookeeper", "3.4.14_0.3.0")
	for i, c := range callers {
		after := read(c)
		for _, target := range targets {
			if after[target] != before[i][target] {
				t.Errorf("%q after bob's pushes, as %q:\n%s\nbefore:\n%s", target, c.user, after[target], before[i][target])
			}
		}
	}

	// Failed logins from one client behind the proxy lock alice out from
	// that client only, on every replica.
	token := func(client, password string) int {
		h := roundTrip(t, "GET", front.url()+"/auth/token?service=berth", creds{"alice", password}, "",
			http.Header{clientHeader: {client}}, nil)
		return h.status
	}
	for range 2 * maxFailures { // maxFailures on each replica
		if code := token("198.51.100.5", "wrong"); code != http.StatusUnauthorized {
			t.Fatalf("a wrong password: %d", code)
		}
	}
	for range 2 {
		if code := token("198.51.100.5", passwordOf("alice")); code != http.StatusTooManyRequests {
			t.Errorf("alice's password from the client that failed: %d, want 429", code)
		}
		if code := token("198.51.100.6", passwordOf("alice")); code != http.StatusOK {
			t.Errorf("alice's password from another client behind the proxy: %d, want 200", code)
		}
	}
}

// roundRobinProxy starts a reverse proxy that sends each request, whatever
// its path, to the next of the replicas in turn, as a load balancer without
// session affinity does, and stops it when the test ends. It sets the
// X-Forwarded headers, X-Forwarded-For from clientHeader when a request
// has it. It returns the proxy as a server, for its address and URL.
func roundRobinProxy(t *testing.T, replicas ...*server) *server {
	t.Helper()
	var next atomic.Int64
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		backend := replicas[next.Add(1)%int64(len(replicas))]
		r.SetURL(&url.URL{Scheme: "http", Host: backend.addr})
		r.SetXForwarded()
		if c := r.In.Header.Get(clientHeader); c != "" {
			r.Out.Header.Set("X-Forwarded-For", c)
		}
	}})
	t.Cleanup(proxy.Close)
	return &server{addr: strings.TrimPrefix(proxy.URL, "http://"), done: make(chan struct{})}
}
