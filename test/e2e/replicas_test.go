package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/internal/pgtest"
)

// TestTwoReplicasOnPostgresAndS3 runs two berth serve processes on one
// PostgreSQL database and one S3 bucket (versitygw), as a scaled-out berth
// runs behind a load balancer:
//   - one version pushed through both at once has exactly one winner;
//   - 8 clients push through both, and deletes go through both, while the
//     leading replica is killed with SIGKILL: the other carries on, takes
//     over the leadership and reconciles;
//   - afterwards each replica's catalog equals the registry: no missing,
//     stale or duplicate version.
func TestTwoReplicasOnPostgresAndS3(t *testing.T) {
	dsn := pgtest.Database(t)
	gw := startVersitygw(t)
	bucket := gw.bucket(t, "replicas")
	dir := t.TempDir()
	config := filepath.Join(dir, "berth.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, `storage:
  driver: s3
  disableRedirect: true
  s3:
    bucket: %s
    region: us-east-1
    regionEndpoint: http://%s
    accessKey: %s
    secretKeyFile: %s
    forcePathStyle: true
    insecure: true
registry:
  httpSecretFile: %s
catalog:
  database: %s
`, bucket, gw.addr, gw.accessKey, gw.secretKeyFile, filepath.Join(dir, "http-secret"), dsn), 0o600); err != nil {
		t.Fatal(err)
	}
	dataA, dataB := t.TempDir(), t.TempDir()
	a := startServer(t, dataA, "--config", config)
	b := startServer(t, dataB, "--config", config)
	for _, s := range []*server{a, b} {
		if code, body := s.get(t, "/readyz"); code != http.StatusOK || !strings.Contains(body, `"database":"ok"`) {
			t.Fatalf("GET /readyz = %d %s\n%s", code, body, s.logs())
		}
	}
	leader, follower := waitForOneLeader(t, a, b)
	t.Cleanup(func() {
		if t.Failed() {
			for name, s := range map[string]*server{"first leader": leader, "first follower": follower} {
				t.Logf("%s's log:\n%s", name, s.logs())
			}
		}
	})

	// One version through both replicas at once: exactly one push wins.
	c, err := client.New(client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 10 {
		var wins atomic.Int32
		var wg sync.WaitGroup
		for j, s := range []*server{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ref, art, err := plainPackage(s, "race", "pkg", fmt.Sprintf("1.0.%d", i), int64(1000*i+j))
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := c.Push(ctx, ref, art); err == nil {
					wins.Add(1)
				} else if !strings.Contains(err.Error(), "DENIED") {
					t.Errorf("the losing push of race/pkg:1.0.%d failed with %v, want DENIED", i, err)
				}
			}()
		}
		wg.Wait()
		if n := wins.Load(); n != 1 {
			t.Fatalf("race/pkg:1.0.%d pushed through both replicas at once: %d winners, want 1", i, n)
		}
	}

	// 8 clients through both replicas; the leader dies half way.
	var seq atomic.Int64
	stopA, stopB := loadClients(t, leader, &seq, 4), loadClients(t, follower, &seq, 4)
	time.Sleep(8 * time.Second)
	if err := leader.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-leader.done
	waitFor(t, "the surviving replica to lead", 30*time.Second, func() bool { return leads(t, follower) })
	time.Sleep(7 * time.Second)
	pushed := stopA() + stopB()
	t.Logf("%d pushes went through", pushed)
	if pushed == 0 {
		t.Fatal("nothing was pushed")
	}

	// The survivor reconciles as the leader; the killed replica comes back
	// as a follower. Both catalogs equal the registry.
	waitReconciled(t, follower, 1)
	restarted := startServer(t, leader.data, "--config", config)
	if leads(t, restarted) {
		t.Error("the restarted replica leads, though the other held the leadership")
	}
	reg := registryView(t, follower)
	if n := len(reg); n < int(pushed)/2 {
		t.Fatalf("the registry holds %d tags after %d pushes", n, pushed)
	}
	for _, s := range []*server{follower, restarted} {
		compareViews(t, reg, catalogView(t, s))
	}
}

// loadClients pushes distinct plain packages through s from n goroutines,
// deleting one in five again by digest, until the returned function is
// called; that returns how many pushes succeeded. Errors are expected once
// s is killed.
func loadClients(t *testing.T, s *server, seq *atomic.Int64, n int) func() int64 {
	t.Helper()
	c, err := client.New(client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var pushed atomic.Int64
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				k := seq.Add(1)
				name := fmt.Sprintf("pkg%d", k%23)
				ref, art, err := plainPackage(s, "load", name, fmt.Sprintf("1.0.%d", k), k)
				if err != nil {
					t.Error(err)
					return
				}
				desc, err := c.Push(ctx, ref, art)
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				pushed.Add(1)
				if k%5 == 0 {
					req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, s.url()+"/v2/load/"+name+"/manifests/"+desc.Digest.String(), nil)
					if resp, err := http.DefaultClient.Do(req); err == nil {
						resp.Body.Close()
					}
				}
			}
		}()
	}
	return func() int64 {
		cancel()
		wg.Wait()
		return pushed.Load()
	}
}

// waitForOneLeader waits until exactly one of a and b leads, and returns
// the leader first.
func waitForOneLeader(t *testing.T, a, b *server) (leader, follower *server) {
	t.Helper()
	waitFor(t, "one replica to lead", 30*time.Second, func() bool { return leads(t, a) != leads(t, b) })
	if leads(t, a) {
		return a, b
	}
	return b, a
}

// leads reports whether s's berth_leader metric is 1.
func leads(t *testing.T, s *server) bool {
	t.Helper()
	code, body := s.get(t, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "berth_leader "); ok {
			return v == "1"
		}
	}
	t.Fatalf("no berth_leader in /metrics\n%s", body)
	return false
}

// waitFor polls cond every 50 ms until it holds, failing the test after
// timeout.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}
