package e2e

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/berth-registry/berth/quota"
)

// TestQuotaHoldsUnderRacingPushesAcrossReplicas: two berth serve on one
// PostgreSQL database and one bucket, with auth, behind a round-robin
// proxy; namespace a has room for three of the 1 MiB pushes that 8 oras
// clients race to make through the proxy, each of its requests reaching
// either replica. The namespace never goes beyond its quota by more than
// one upload, and every push refused says it is over quota, naming the
// namespace, its usage and its limit.
func TestQuotaHoldsUnderRacingPushesAcrossReplicas(t *testing.T) {
	requireOras(t)
	const limit = 3584 << 10 // 3.5MiB
	_, _, s := authReplicas(t, "quota", authOptions{extra: "namespaces:\n  - name: a\n    quota: 3.5MiB\n"})

	const pushers, size = 8, 1 << 20
	var wg sync.WaitGroup
	var mu sync.Mutex
	var pushed, refused int
	for i := range pushers {
		alice := s.account(t, "alice", passwordOf("alice"))
		alice.login(t, orasBin, "login", "--plain-http")
		file := fmt.Sprintf("blob-%d.bin", i)
		blob := make([]byte, size)
		if _, err := rand.Read(blob); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(alice.home, file), blob, 0o644); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			r := alice.run(t, orasBin, "push", "--plain-http", s.addr+fmt.Sprintf("/a/race-%d:1.0", i), file+":application/octet-stream")
			mu.Lock()
			defer mu.Unlock()
			switch msg := r.stdout + r.stderr; {
			case r.code == 0:
				pushed++
			case strings.Contains(msg, "namespace a is over its quota: ") && strings.Contains(msg, " of 3.5MiB, this upload needs "):
				refused++
			default:
				t.Errorf("push %d failed without saying it is over quota: exit %d\n%s", i, r.code, msg)
			}
		})
	}
	wg.Wait()
	t.Logf("%d pushes went through, %d were refused", pushed, refused)
	if pushed == 0 || refused == 0 || pushed+refused != pushers {
		t.Errorf("%d pushed and %d refused of %d, want some of each", pushed, refused, pushers)
	}
	used := usedBytes(t, s, "a")
	if used > limit+size+4096 {
		t.Errorf("namespace a uses %s, beyond its quota of %s by more than one upload", quota.FormatBytes(used), quota.FormatBytes(limit))
	}
	if used < int64(pushed)*size {
		t.Errorf("namespace a uses %d bytes, less than the %d pushes that went through", used, pushed)
	}
}

var usedRE = regexp.MustCompile(`(?m)^berth_quota_used_bytes\{namespace="([^"]+)"\} (\S+)$`)

// usedBytes reads namespace's berth_quota_used_bytes from s's /metrics.
func usedBytes(t *testing.T, s *authServer, namespace string) int64 {
	t.Helper()
	h := s.api(t, s.users["admin"].creds(), http.MethodGet, "/metrics")
	if h.status != http.StatusOK {
		t.Fatalf("GET /metrics: %s", h)
	}
	for _, m := range usedRE.FindAllStringSubmatch(string(h.body), -1) {
		if m[1] == namespace {
			f, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				t.Fatal(err)
			}
			return int64(f)
		}
	}
	t.Fatalf("no berth_quota_used_bytes of %s in /metrics", namespace)
	return 0
}
