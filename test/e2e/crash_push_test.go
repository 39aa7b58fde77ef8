//go:build linux

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sys/unix"
	"oras.land/oras-go/v2/content"

	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/internal/testenv"
)

// TestAcknowledgedPushesAreOnDisk checks berth's promise for pushes: what it
// acknowledges, the 201 of each blob upload and of the manifest PUT, is on
// disk before the client hears it, and no acknowledged push is lost when the
// process is killed.
//
// Eight goroutines push packages step by step: config, content, manifest by
// tag. After each 201, before that goroutine sends anything else, cachestat(2)
// must find no dirty page and none under writeback in any file the step
// stored: a blob's data and its repository link; the manifest's data, its
// revision link and its tag's links. After a random 300-1200 ms the server is
// killed with SIGKILL and restarted on the same data, and every acknowledged
// blob and manifest must be served with its digest, every acknowledged tag
// must resolve to its manifest, and a new push must be accepted. Twice.
//
// What it cannot show: power loss is not simulated, and a SIGKILL loses no
// page the kernel holds, so the restart proves that what was acknowledged is
// complete and consistent, not that it reached the disk. That is cachestat's
// part: the pages of the files were written back before the 201. It does not
// see directory entries, which the same syncfs(2) flushes; and a page another
// push's syncfs wrote back before the check is clean too, so a request that
// skipped its flush could pass in some pushes, though not in all.
func TestAcknowledgedPushesAreOnDisk(t *testing.T) {
	data := t.TempDir()
	requireCachestat(t, data)
	rng := rand.New(rand.NewSource(testenv.Seed(t, "BERTH_CRASH_SEED")))
	c, err := client.New(client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var seq atomic.Int64
	var acked []*stepPush
	for round := range 2 {
		s := startServer(t, data)
		stopLoad := pushLoad(t, c, s, &seq)
		time.Sleep(time.Duration(300+rng.Intn(900)) * time.Millisecond)
		if err := s.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-s.done
		pushes := stopLoad()
		complete := 0
		for _, p := range pushes {
			if p.acked == len(p.steps) {
				complete++
			}
		}
		t.Logf("round %d: killed after %d complete pushes, %d partly acknowledged", round, complete, len(pushes)-complete)
		if complete == 0 {
			t.Fatalf("round %d: no push was acknowledged before the kill\n%s", round, s.logs())
		}
		acked = append(acked, pushes...)

		s = startServer(t, data)
		for _, p := range acked {
			checkServed(ctx, t, c, s, p)
		}
		p, err := newStepPush(s, seq.Add(1))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.push(ctx, t, c, s); err != nil {
			t.Fatalf("round %d: push %s after the restart: %v\n%s", round, p, err, s.logs())
		}
		checkServed(ctx, t, c, s, p)
		if err := s.stop(t); err != nil {
			t.Fatalf("stop: %v\n%s", err, s.logs())
		}
		if t.Failed() {
			t.FailNow()
		}
	}
}

// stepPush is a package version pushed one step at a time, and how many of
// its steps the registry acknowledged.
type stepPush struct {
	repo, tag string
	steps     [3]pushStep // config, content, manifest
	acked     int
}

// pushStep is one blob or manifest of a push.
type pushStep struct {
	name string
	desc ocispec.Descriptor
	data []byte
}

const manifestStep = 2

// newStepPush builds the n-th push: the plain package ackpush/pkg<n%37>,
// version 1.0.<n>, so that no two pushes share a tag or a blob.
func newStepPush(s *server, n int64) (*stepPush, error) {
	ref, art, err := plainPackage(s, "ackpush", fmt.Sprintf("pkg%d", n%37), fmt.Sprintf("1.0.%d", n), n)
	if err != nil {
		return nil, err
	}
	return &stepPush{repo: ref.Repository(), tag: ref.Tag, steps: [3]pushStep{
		{"config", art.ConfigDesc, art.Config},
		{"content", art.ContentDesc, art.Content},
		{"manifest", art.ManifestDesc, art.Manifest},
	}}, nil
}

func (p *stepPush) String() string { return p.repo + ":" + p.tag }

// push sends p's config and content blobs, then its manifest by tag, and
// after each 201 checks that the files the step stored are written back.
func (p *stepPush) push(ctx context.Context, t *testing.T, c *client.Client, s *server) error {
	repo := c.Repository(s.addr, p.repo)
	for i, st := range p.steps {
		var err error
		if i == manifestStep {
			err = repo.PushReference(ctx, st.desc, bytes.NewReader(st.data), p.tag)
		} else {
			err = repo.Push(ctx, st.desc, bytes.NewReader(st.data))
		}
		if err != nil {
			return err
		}
		p.acked = i + 1
		checkWrittenBack(t, s.data, p, i)
	}
	return nil
}

// pushLoad runs pushes from 8 goroutines until the returned function is
// called; that returns the pushes of which at least one step was
// acknowledged. Errors are expected once the server is killed.
func pushLoad(t *testing.T, c *client.Client, s *server, seq *atomic.Int64) func() []*stepPush {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	acked := make([][]*stepPush, 8)
	for w := range acked {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				p, err := newStepPush(s, seq.Add(1))
				if err != nil {
					t.Error(err)
					return
				}
				_ = p.push(ctx, t, c, s) // what failed was not acknowledged
				if p.acked > 0 {
					acked[w] = append(acked[w], p)
				}
			}
		}()
	}
	return func() []*stepPush {
		cancel()
		wg.Wait()
		var all []*stepPush
		for _, a := range acked {
			all = append(all, a...)
		}
		return all
	}
}

// storedFiles are the files under the data directory that step i of p
// stores, in the filesystem driver's layout under <data>/registry.
func storedFiles(data string, p *stepPush, i int) []string {
	v2 := filepath.Join(data, "registry", "docker", "registry", "v2")
	d := p.steps[i].desc.Digest
	alg, hex := d.Algorithm().String(), d.Encoded()
	repo := filepath.Join(v2, "repositories", filepath.FromSlash(p.repo))
	files := []string{filepath.Join(v2, "blobs", alg, hex[:2], hex, "data")}
	if i != manifestStep {
		return append(files, filepath.Join(repo, "_layers", alg, hex, "link"))
	}
	tag := filepath.Join(repo, "_manifests", "tags", p.tag)
	return append(files,
		filepath.Join(repo, "_manifests", "revisions", alg, hex, "link"),
		filepath.Join(tag, "current", "link"),
		filepath.Join(tag, "index", alg, hex, "link"))
}

// checkWrittenBack fails the test for each file step i of p stored that has
// pages not yet written back, or cannot be examined.
func checkWrittenBack(t *testing.T, data string, p *stepPush, i int) {
	for _, f := range storedFiles(data, p, i) {
		rel, _ := filepath.Rel(data, f)
		st, err := cachestat(f)
		switch {
		case err != nil:
			t.Errorf("%s: %s acknowledged, but %s: %v", p, p.steps[i].name, rel, err)
		case st.Dirty != 0 || st.Writeback != 0:
			t.Errorf("%s: %s acknowledged before %s was on disk: %d dirty and %d writeback pages of %d cached",
				p, p.steps[i].name, rel, st.Dirty, st.Writeback, st.Cache)
		}
	}
}

// checkServed fails the test unless the restarted server s serves every
// acknowledged step of p with its digest, and p's tag resolves to its
// manifest when the manifest was acknowledged.
func checkServed(ctx context.Context, t *testing.T, c *client.Client, s *server, p *stepPush) {
	t.Helper()
	repo := c.Repository(s.addr, p.repo)
	for _, st := range p.steps[:p.acked] {
		if _, err := content.FetchAll(ctx, repo, st.desc); err != nil {
			t.Errorf("%s: acknowledged %s %s lost: %v", p, st.name, st.desc.Digest, err)
		}
	}
	if p.acked != len(p.steps) {
		return
	}
	want := p.steps[manifestStep].desc.Digest
	switch desc, err := repo.Resolve(ctx, p.tag); {
	case err != nil:
		t.Errorf("%s: acknowledged tag lost: %v", p, err)
	case desc.Digest != want:
		t.Errorf("%s: tag resolves to %s, the acknowledged manifest is %s", p, desc.Digest, want)
	}
}

// cachestat returns the page cache state of the whole file at path.
func cachestat(path string) (unix.Cachestat_t, error) {
	var st unix.Cachestat_t
	f, err := os.Open(path)
	if err != nil {
		return st, err
	}
	defer f.Close()
	// Len 0 is from Off to the end of the file.
	err = unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{Off: 0, Len: 0}, &st, 0)
	return st, err
}

// requireCachestat skips the test, or fails it in CI, unless cachestat(2)
// works in dir and sees the dirty pages of a file just written there:
// without both, a push's files could never be found dirty.
func requireCachestat(t *testing.T, dir string) {
	t.Helper()
	probe := filepath.Join(dir, "cachestat-probe")
	if err := os.WriteFile(probe, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := cachestat(probe)
	if rmErr := os.Remove(probe); rmErr != nil {
		t.Fatal(rmErr)
	}
	var reason string
	switch {
	case errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM):
		reason = fmt.Sprintf("cachestat(2) is not available (%v): it needs Linux 6.5 or later, not blocked by seccomp", err)
	case err != nil:
		t.Fatalf("cachestat(2) of a file in %s: %v", dir, err)
	case st.Dirty == 0 && st.Writeback == 0:
		reason = fmt.Sprintf("cachestat(2) sees no dirty page in a file just written in %s (a tmpfs?); set TMPDIR to a directory on disk", dir)
	}
	if reason == "" {
		return
	}
	if testenv.CI() {
		t.Fatal(reason)
	}
	t.Skip(reason)
}
