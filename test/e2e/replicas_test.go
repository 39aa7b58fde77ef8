package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/internal/pgtest"
)

// sharedState starts what the replicas of a scaled-out berth share: a
// PostgreSQL database and a versitygw bucket named bucket. It returns the
// gateway and the configuration that puts a replica on them, with the HTTP
// secret they share (dir holds it).
func sharedState(t *testing.T, bucket, dir string) (*versitygw, string) {
	t.Helper()
	dsn := pgtest.Database(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if password, ok := u.User.Password(); ok {
		secrets.add(t, "the PostgreSQL password", password)
	}
	gw := startVersitygw(t)
	return gw, fmt.Sprintf("%sregistry:\n  httpSecretFile: %s\ncatalog:\n  database: %s\n",
		gw.storageConfig(gw.bucket(t, bucket), false), filepath.Join(dir, "http-secret"), dsn)
}

// TestTwoReplicasOnPostgresAndS3 runs two berth serve processes on one
// PostgreSQL database and one S3 bucket (versitygw), as a scaled-out berth
// runs behind a load balancer:
//   - one version pushed through both at once, during the load, has
//     exactly one winner;
//   - 8 clients push through both for 30 s, and deletes go through both,
//     while the leading replica is killed with SIGKILL half way: the other
//     carries on, takes over the leadership and reconciles;
//   - afterwards each replica's catalog equals the registry: no missing,
//     stale or duplicate version;
//   - garbage collection, every second on the leader, reclaims old garbage
//     during the pushes and deletes nothing a finished push references.
func TestTwoReplicasOnPostgresAndS3(t *testing.T) {
	dir := t.TempDir()
	gw, shared := sharedState(t, "replicas", dir)
	config := filepath.Join(dir, "berth.yaml")
	if err := os.WriteFile(config, []byte(shared+"gc:\n  interval: 1s\n  grace: 1m\n"), 0o600); err != nil {
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
	garbage := makeGarbage(t, a, filepath.Join(gw.root, "replicas"))
	t.Cleanup(func() {
		if t.Failed() {
			for name, s := range map[string]*server{"first leader": leader, "first follower": follower} {
				t.Logf("%s's log:\n%s", name, s.logs())
			}
		}
	})

	// 8 clients push through both replicas for 30 s; meanwhile one version
	// goes through both at once, again and again, and the leader dies half
	// way.
	var seq atomic.Int64
	start := time.Now()
	stopA, stopB := loadClients(t, leader, "load", 23, &seq, 4), loadClients(t, follower, "load", 23, &seq, 4)
	raceBoth(t, a, b, 10)
	time.Sleep(time.Until(start.Add(15 * time.Second)))
	if err := leader.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-leader.done
	waitFor(t, "the surviving replica to lead", 30*time.Second, func() bool { return leads(t, follower) })
	time.Sleep(time.Until(start.Add(30 * time.Second)))
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
	reg := settledRegistryView(t, follower)
	if n := len(reg); n < int(pushed)/2 {
		t.Fatalf("the registry holds %d tags after %d pushes", n, pushed)
	}
	for _, s := range []*server{follower, restarted} {
		compareViews(t, reg, catalogView(t, s))
	}
	// The garbage went, and everything the registry lists is whole.
	waitFor(t, "garbage collection to reclaim the old garbage", 30*time.Second, func() bool {
		return blobStatus(t, follower, garbage) == http.StatusNotFound
	})
	for ref, d := range reg {
		repo, _, _ := strings.Cut(ref, ":")
		checkWhole(t, follower, repo, d)
	}
}

// settledRegistryView is registryView once two walks in a row agree. A
// push whose client gave up when the load stopped still runs to its end in
// the server (a manifest PUT outlives its client), so a walk taken at once
// can miss a tag that the catalog, read after it, already holds.
func settledRegistryView(t *testing.T, s *server) map[string]string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	view := registryView(t, s)
	for {
		next := registryView(t, s)
		if maps.Equal(view, next) {
			return view
		}
		if time.Now().After(deadline) {
			t.Fatal("the registry's tags still changed 30 s after the load stopped")
		}
		view = next
	}
}

// makeGarbage pushes packages through s, deletes half of them, and ages
// every file of the bucket's directory by two hours, past gc.grace. It
// returns a repository and blob that only a deleted package referenced.
func makeGarbage(t *testing.T, s *server, bucketDir string) [2]string {
	t.Helper()
	c, err := client.New(client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var garbage [2]string
	for i := range 10 {
		ref, art, err := plainPackage(s, "old", "pkg", fmt.Sprintf("0.0.%d", i), int64(-1-i))
		if err != nil {
			t.Fatal(err)
		}
		desc, err := c.Push(context.Background(), ref, art)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			continue
		}
		var m ocispec.Manifest
		if code := getManifest(t, s, "old/pkg", desc.Digest.String(), &m); code != http.StatusOK {
			t.Fatalf("GET old/pkg@%s: %d", desc.Digest, code)
		}
		garbage = [2]string{"old/pkg", m.Layers[0].Digest.String()}
		req, _ := http.NewRequest(http.MethodDelete, s.url()+"/v2/old/pkg/manifests/"+desc.Digest.String(), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("DELETE old/pkg@%s: %d", desc.Digest, resp.StatusCode)
		}
	}
	if code := blobStatus(t, s, garbage); code != http.StatusOK {
		t.Fatalf("the garbage blob %v: GET = %d before any collection, want 200", garbage, code)
	}
	then := time.Now().Add(-2 * time.Hour)
	if err := filepath.WalkDir(bucketDir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, then, then)
	}); err != nil {
		t.Fatal(err)
	}
	return garbage
}

// getManifest decodes the manifest ref of repo.
func getManifest(t *testing.T, s *server, repo, ref string, v any) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.url()+"/v2/"+repo+"/manifests/"+ref, nil)
	req.Header.Set("Accept", ocispec.MediaTypeImageManifest)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

// blobStatus is the status of a GET of a blob ([repo, digest]).
func blobStatus(t *testing.T, s *server, blob [2]string) int {
	t.Helper()
	resp, err := http.Get(s.url() + "/v2/" + blob[0] + "/blobs/" + blob[1])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// checkWhole fails unless manifest d of repo, its config and its layers can
// all be read.
func checkWhole(t *testing.T, s *server, repo, d string) {
	t.Helper()
	var m ocispec.Manifest
	if code := getManifest(t, s, repo, d, &m); code != http.StatusOK {
		t.Errorf("%s@%s: GET = %d", repo, d, code)
		return
	}
	for _, b := range append([]ocispec.Descriptor{m.Config}, m.Layers...) {
		if code := blobStatus(t, s, [2]string{repo, b.Digest.String()}); code != http.StatusOK {
			t.Errorf("%s@%s: blob %s: GET = %d: garbage collection deleted what a finished push references", repo, d, b.Digest, code)
		}
	}
}

// raceBoth pushes n versions of race/pkg, each through a and b at once with
// different content: exactly one of each pair must win, the other be
// DENIED (versions are immutable).
func raceBoth(t *testing.T, a, b *server, n int) {
	t.Helper()
	c, err := client.New(client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
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
				if _, err := c.Push(context.Background(), ref, art); err == nil {
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
}

// loadClients pushes distinct plain packages, spread over names packages of
// namespace ns, through s from n goroutines, deleting one in five again by
// digest, until the returned function is called; that returns how many
// pushes succeeded. Errors are expected once s is killed.
func loadClients(t *testing.T, s *server, ns string, names int, seq *atomic.Int64, n int) func() int64 {
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
				name := fmt.Sprintf("pkg%d", k%int64(names))
				ref, art, err := plainPackage(s, ns, name, fmt.Sprintf("1.0.%d", k), k)
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
					req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, s.url()+"/v2/"+ns+"/"+name+"/manifests/"+desc.Digest.String(), nil)
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
