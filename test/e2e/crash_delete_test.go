package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/internal/testenv"
)

// TestPackageDeleteSurvivesKill9 kills a real berth serve with SIGKILL at a
// random moment of DELETE /api/v1/packages/{ns}/{name}, restarts it on the
// same data, and requires every tag the registry lists to resolve and the
// catalog to equal the registry once it has reconciled. It does so at
// several moments, within a bounded time.
func TestPackageDeleteSurvivesKill9(t *testing.T) {
	rng := rand.New(rand.NewSource(testenv.Seed(t, "BERTH_DELETE_CRASH_SEED")))

	const versions = 169
	data := t.TempDir()
	s := startServer(t, data)
	waitReconciled(t, s, 1)
	// A kill can only land in the delete if it comes before the answer:
	// time one delete of as many versions, and kill within that time.
	pushVersions(t, s, "crashdel", "timing", versions)
	start := time.Now()
	if code := deletePackage(s, "crashdel/timing"); code != http.StatusOK {
		t.Fatalf("delete: %d\n%s", code, s.logs())
	}
	took := time.Since(start)
	t.Logf("a delete of %d versions took %v", versions, took)

	deadline := time.Now().Add(30 * time.Second)
	for round := 0; round < 6 && time.Now().Before(deadline); round++ {
		name := fmt.Sprintf("del%d", round)
		pushVersions(t, s, "crashdel", name, versions)
		at := rng.Float64() // the seed replays the kill points as fractions of the timed delete
		delay := time.Duration(at * float64(took))
		code := make(chan int, 1)
		go func() { code <- deletePackage(s, "crashdel/"+name) }()
		time.Sleep(delay)
		if err := s.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-s.done
		answered := <-code

		s = startServer(t, data)
		waitReconciled(t, s, 1)
		reg, dangling := registryTags(t, s)
		left := len(dangling)
		for k := range reg {
			if strings.HasPrefix(k, "crashdel/"+name+":") {
				left++
			}
		}
		t.Logf("round %d: killed %v (%.0f%%) into the delete (answered %d); %d of %d tags listed", round, delay, 100*at, answered, left, versions)
		if len(dangling) > 0 {
			t.Fatalf("round %d: %d listed tags do not resolve, e.g. %v", round, len(dangling), dangling[:min(len(dangling), 5)])
		}
		compareViews(t, reg, catalogView(t, s))
	}
	if err := s.stop(t); err != nil {
		t.Fatalf("stop: %v\n%s", err, s.logs())
	}
}

// deletePackage sends DELETE /api/v1/packages/{pkg} and returns the status,
// 0 when there was no answer.
func deletePackage(s *server, pkg string) int {
	req, _ := http.NewRequest(http.MethodDelete, s.url()+"/api/v1/packages/"+pkg, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// pushVersions pushes n versions of the plain package ns/name, from 4
// goroutines, and waits until the catalog lists them all.
func pushVersions(t *testing.T, s *server, ns, name string, n int) {
	t.Helper()
	c, err := client.New(client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				ref, art, err := plainPackage(s, ns, name, fmt.Sprintf("1.0.%d", i), int64(i))
				if err != nil {
					t.Error(err)
					continue
				}
				if _, err := c.Push(context.Background(), ref, art); err != nil {
					t.Errorf("push %s: %v", ref, err)
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// Wait for the catalog to index them, as it would have before a user deletes.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var p struct {
			Versions []json.RawMessage `json:"versions"`
		}
		if getJSON(t, s, "/api/v1/packages/"+ns+"/"+name, &p) == http.StatusOK && len(p.Versions) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s: %d versions indexed after 30s, want %d", ns, name, len(p.Versions), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
