package quota_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/berth-registry/berth/internal/pgtest"
	"github.com/berth-registry/berth/quota"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// stores opens a ledger of each kind with opts.
func stores(t *testing.T, opts quota.Options) map[string]func() quota.Ledger {
	ctx := context.Background()
	return map[string]func() quota.Ledger{
		"sqlite": func() quota.Ledger {
			l, err := quota.OpenSQLite(ctx, filepath.Join(t.TempDir(), "quota.db"), opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return l
		},
		"postgres": func() quota.Ledger {
			l, err := quota.OpenPostgres(ctx, pgtest.Database(t), opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			return l
		},
	}
}

func limits(ns string) int64 {
	if ns == "team-a" {
		return 100
	}
	return 0
}

func TestCharges(t *testing.T) {
	ctx := context.Background()
	for name, open := range stores(t, quota.Options{Limit: limits, Named: []string{"team-a", "team-c"}}) {
		t.Run(name, func(t *testing.T) {
			l := open()
			if ok, err := l.Charge(ctx, quota.Push{Namespace: "team-a", Item: quota.Item{Digest: "sha256:a", Size: 60}, Limit: 100}); err != nil || !ok {
				t.Fatalf("first charge: %v %v", ok, err)
			}
			// The same digest again, in the same namespace, is free.
			if ok, err := l.Charge(ctx, quota.Push{Namespace: "team-a", Item: quota.Item{Digest: "sha256:a", Size: 60}, Limit: 100}); err != nil || ok {
				t.Fatalf("charge again: %v %v, want no change", ok, err)
			}
			_, err := l.Charge(ctx, quota.Push{Namespace: "team-a", Item: quota.Item{Digest: "sha256:b", Size: 41}, Limit: 100})
			var over *quota.OverQuotaError
			if !errors.As(err, &over) || over.Used != 60 || over.Limit != 100 || over.Needed != 41 {
				t.Fatalf("over the limit: %v", err)
			}
			want := "namespace team-a is over its quota: 60B used of 100B, this upload needs 41B more"
			if got := err.Error(); got[:len(want)] != want {
				t.Errorf("error = %q, want it to start %q", got, want)
			}
			if err := l.Check(ctx, "team-a", "sha256:a", 60, 100); err != nil {
				t.Errorf("check of a charged digest: %v", err)
			}
			if err := l.Check(ctx, "team-a", "", 41, 100); !errors.As(err, &over) {
				t.Errorf("check beyond the limit: %v", err)
			}
			if ok, err := l.Charge(ctx, quota.Push{Namespace: "team-a", Item: quota.Item{Digest: "sha256:b", Size: 40}, Limit: 100}); err != nil || !ok {
				t.Fatalf("charge up to the limit: %v %v", ok, err)
			}
			// Another namespace stores the same blob and is charged too.
			if _, err := l.Charge(ctx, quota.Push{Namespace: "team-b", Item: quota.Item{Digest: "sha256:a", Size: 60}, Limit: 0}); err != nil {
				t.Fatal(err)
			}
			if err := l.Uncharge(ctx, "team-a", "sha256:b"); err != nil {
				t.Fatal(err)
			}
			u, err := l.Usage(ctx, "team-a")
			if err != nil || u != (quota.Usage{Namespace: "team-a", UsedBytes: 60, LimitBytes: 100, Blobs: 1}) {
				t.Fatalf("usage = %+v, %v", u, err)
			}
			if err := l.MarkDirty(ctx, "idle"); err != nil {
				t.Fatal(err)
			}
			us, err := l.Usages(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := fmt.Sprint(us)
			if want := "[{team-a 60 100 1 0} {team-b 60 0 1 0}]"; got != want {
				t.Errorf("usages = %s, want %s (team-c and idle have no quota and store nothing)", got, want)
			}
		})
	}
}

func TestRecompute(t *testing.T) {
	ctx := context.Background()
	for name, open := range stores(t, quota.Options{}) {
		t.Run(name, func(t *testing.T) {
			l := open()
			for _, d := range []string{"sha256:old", "sha256:kept"} {
				if _, err := l.Charge(ctx, quota.Push{Namespace: "ns", Item: quota.Item{Digest: d, Size: 10}, Limit: 0}); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.MarkDirty(ctx, "ns", "other"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Millisecond)
			keepSince := time.Now()
			if _, err := l.Charge(ctx, quota.Push{Namespace: "ns", Item: quota.Item{Digest: "sha256:in-flight", Size: 7}, Limit: 0}); err != nil {
				t.Fatal(err)
			}
			// old is no longer referenced; in-flight was charged after
			// keepSince; backfilled is found in the storage.
			live := map[string]int64{"sha256:kept": 10, "sha256:backfilled": 5}
			if err := l.Recompute(ctx, "ns", live, keepSince, time.Now()); err != nil {
				t.Fatal(err)
			}
			u, err := l.Usage(ctx, "ns")
			if err != nil || u.UsedBytes != 22 || u.Blobs != 3 {
				t.Fatalf("usage after recompute = %+v, %v; want 22 bytes in 3", u, err)
			}
			dirty, err := l.Dirty(ctx)
			if err != nil || fmt.Sprint(dirty) != "[other]" {
				t.Errorf("dirty = %v, %v; want [other]", dirty, err)
			}
			if err := l.MarkAllDirty(ctx); err != nil {
				t.Fatal(err)
			}
			if dirty, _ := l.Dirty(ctx); fmt.Sprint(dirty) != "[ns other]" {
				t.Errorf("dirty after MarkAllDirty = %v", dirty)
			}
		})
	}
}

// TestChargeRefsAndUpload: a manifest's charge refreshes the blobs it
// references, charging those a recompute dropped, so that a recompute
// that read the storage before the manifest came keeps them; a blob's
// charge closes the upload that stored it.
func TestChargeRefsAndUpload(t *testing.T) {
	ctx := context.Background()
	for name, open := range stores(t, quota.Options{}) {
		t.Run(name, func(t *testing.T) {
			l := open()
			if err := l.OpenUpload(ctx, quota.Upload{UUID: "u", Repository: "ns/app", Subject: "alice", Started: time.Now()}, -1, time.Time{}); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Charge(ctx, quota.Push{Namespace: "ns", Item: quota.Item{Digest: "sha256:old", Size: 10}, Upload: "u"}); err != nil {
				t.Fatal(err)
			}
			if _, ok, err := l.Upload(ctx, "u"); err != nil || ok {
				t.Fatalf("the upload is still open after its charge: %v %v", ok, err)
			}
			time.Sleep(2 * time.Millisecond)
			start := time.Now()
			manifest := quota.Push{Namespace: "ns", Item: quota.Item{Digest: "sha256:manifest", Size: 1}, Limit: 11,
				Refs: []quota.Item{{Digest: "sha256:old", Size: 10}, {Digest: "sha256:dropped", Size: 5}}}
			if _, err := l.Charge(ctx, manifest); err != nil {
				t.Fatalf("a manifest whose refs go beyond the limit: %v", err)
			}
			// The recompute read the storage before the manifest came: it
			// finds none of them referenced.
			if err := l.Recompute(ctx, "ns", map[string]int64{}, start, start); err != nil {
				t.Fatal(err)
			}
			if u, err := l.Usage(ctx, "ns"); err != nil || u.UsedBytes != 16 || u.Blobs != 3 {
				t.Fatalf("usage = %+v, %v; want all three, 16 bytes", u, err)
			}
		})
	}
}

func TestUploads(t *testing.T) {
	ctx := context.Background()
	for name, open := range stores(t, quota.Options{}) {
		t.Run(name, func(t *testing.T) {
			l := open()
			t0 := time.Now()
			for i := range 2 {
				u := quota.Upload{UUID: fmt.Sprint("u", i), Repository: "ns/app", Subject: "alice", Started: t0}
				if err := l.OpenUpload(ctx, u, 2, t0.Add(-time.Minute)); err != nil {
					t.Fatal(err)
				}
			}
			err := l.OpenUpload(ctx, quota.Upload{UUID: "u2", Repository: "ns/app", Subject: "alice", Started: t0}, 2, t0.Add(-time.Minute))
			var many *quota.TooManyUploadsError
			if !errors.As(err, &many) || many.Open != 2 || many.Limit != 2 {
				t.Fatalf("third upload: %v", err)
			}
			// Another subject has its own count; idle uploads do not count.
			if err := l.OpenUpload(ctx, quota.Upload{UUID: "b0", Repository: "ns/app", Subject: "bob", Started: t0}, 2, t0.Add(-time.Minute)); err != nil {
				t.Fatal(err)
			}
			if err := l.OpenUpload(ctx, quota.Upload{UUID: "u2", Repository: "ns/app", Subject: "alice", Started: t0.Add(time.Hour)}, 2, t0.Add(time.Second)); err != nil {
				t.Fatalf("with the others idle: %v", err)
			}
			if err := l.TouchUpload(ctx, "u0", 1234, t0.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			u, ok, err := l.Upload(ctx, "u0")
			if err != nil || !ok || u.Bytes != 1234 || u.Subject != "alice" || u.Repository != "ns/app" {
				t.Fatalf("upload u0 = %+v %v %v", u, ok, err)
			}
			old, err := l.Abandoned(ctx, t0.Add(time.Minute))
			if err != nil || len(old) != 2 || old[0].UUID == "u0" || old[1].UUID == "u0" {
				t.Fatalf("abandoned = %+v, %v; want u1 and b0", old, err)
			}
			if err := l.CloseUpload(ctx, "u1"); err != nil {
				t.Fatal(err)
			}
			if us, _ := l.Usage(ctx, "ns"); us.OpenUploads != 3 {
				t.Errorf("open uploads = %d, want 3", us.OpenUploads)
			}
		})
	}
}

// TestRacingCharges charges 8 distinct blobs at once into a namespace with
// room for 3: exactly 3 are charged, whichever.
func TestRacingCharges(t *testing.T) {
	ctx := context.Background()
	for name, open := range stores(t, quota.Options{}) {
		t.Run(name, func(t *testing.T) {
			l := open()
			var wg sync.WaitGroup
			var mu sync.Mutex
			charged, refused := 0, 0
			for i := range 8 {
				wg.Go(func() {
					ok, err := l.Charge(ctx, quota.Push{Namespace: "ns", Item: quota.Item{Digest: fmt.Sprint("sha256:", i), Size: 10}, Limit: 35})
					var over *quota.OverQuotaError
					mu.Lock()
					defer mu.Unlock()
					switch {
					case ok:
						charged++
					case errors.As(err, &over):
						refused++
					default:
						t.Errorf("charge %d: %v", i, err)
					}
				})
			}
			wg.Wait()
			u, err := l.Usage(ctx, "ns")
			if err != nil || charged != 3 || refused != 5 || u.UsedBytes != 30 {
				t.Fatalf("charged %d, refused %d, usage %+v %v; want 3, 5, 30 bytes", charged, refused, u, err)
			}
		})
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1023: "1023B", 1024: "1KiB", 1536: "1.5KiB", 10 << 30: "10GiB", 10630044057: "9.9GiB", 200 << 20: "200MiB"} {
		if got := quota.FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
