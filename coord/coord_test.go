package coord_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-registry/berth/coord"
)

// testLocks checks the lock semantics every Locks implementation has.
func testLocks(t *testing.T, l coord.Locks) {
	ctx := context.Background()
	t.Run("ExclusiveExcludesShared", func(t *testing.T) {
		unlock, err := l.Lock(ctx, "blob:a")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan struct{})
		go func() {
			runlock, err := l.RLock(ctx, "blob:b", "blob:a")
			if err != nil {
				t.Error(err)
				return
			}
			close(got)
			runlock()
		}()
		select {
		case <-got:
			t.Fatal("a shared lock was granted while the key was held exclusively")
		case <-time.After(100 * time.Millisecond):
		}
		unlock()
		<-got
	})
	t.Run("SharedIsShared", func(t *testing.T) {
		u1, err := l.RLock(ctx, "blob:c", "blob:d")
		if err != nil {
			t.Fatal(err)
		}
		u2, err := l.RLock(ctx, "blob:d", "blob:c", "blob:c")
		if err != nil {
			t.Fatal(err)
		}
		u1()
		u2()
		unlock, err := l.Lock(ctx, "blob:c")
		if err != nil {
			t.Fatal("released shared locks still block a writer:", err)
		}
		unlock()
	})
	t.Run("OneWriterAtATime", func(t *testing.T) {
		var inside, most atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 10 {
					unlock, err := l.Lock(ctx, "tag:r:1")
					if err != nil {
						t.Error(err)
						return
					}
					n := inside.Add(1)
					if n > most.Load() {
						most.Store(n)
					}
					inside.Add(-1)
					unlock()
				}
			})
		}
		wg.Wait()
		if most.Load() != 1 {
			t.Fatalf("%d writers held one key at once", most.Load())
		}
	})
	t.Run("CanceledWait", func(t *testing.T) {
		unlock, err := l.Lock(ctx, "blob:e")
		if err != nil {
			t.Fatal(err)
		}
		defer unlock()
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := l.RLock(cctx, "blob:e"); err == nil {
			t.Fatal("a canceled wait took the lock")
		}
	})
}

func TestLocalLocks(t *testing.T) { testLocks(t, &coord.Local{}) }

func TestLocalLeads(t *testing.T) {
	var l coord.Local
	if l.Leader() {
		t.Fatal("leader before Lead")
	}
	ran := false
	l.Lead(context.Background(), func(context.Context) {
		ran = l.Leader()
	})
	if !ran || l.Leader() {
		t.Fatalf("Lead: fn saw Leader()=%v, after: %v", ran, l.Leader())
	}
}

// testSignals checks that a Notify through from reaches a subscriber of the
// topic on to, and not one of another topic.
func testSignals(t *testing.T, from, to coord.Signals) {
	t.Helper()
	wanted, other := to.Subscribe("catalog/reconcile"), to.Subscribe("other")
	if err := from.Notify(context.Background(), "catalog/reconcile"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wanted:
	case <-time.After(5 * time.Second):
		t.Fatal("the subscriber did not hear the signal")
	}
	select {
	case <-other:
		t.Fatal("a subscriber of another topic heard the signal")
	case <-time.After(100 * time.Millisecond):
	}
}

func TestLocalSignals(t *testing.T) {
	l := &coord.Local{}
	testSignals(t, l, l)
}
