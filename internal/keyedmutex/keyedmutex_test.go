package keyedmutex

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestSerialisesOneKey(t *testing.T) {
	var k Mutex
	var inside, maxInside int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			defer k.Lock("a")()
			mu.Lock()
			inside++
			maxInside = max(maxInside, inside)
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			inside--
			mu.Unlock()
		})
	}
	wg.Wait()
	if maxInside != 1 {
		t.Fatalf("%d holders at once", maxInside)
	}
	if len(k.locks) != 0 {
		t.Fatalf("%d locks left behind", len(k.locks))
	}
}

// TestKeysAreIndependent holds one key and checks that another key can be
// locked meanwhile, and that the same key cannot until it is unlocked. The
// timeouts only bound how long a broken Mutex keeps the test waiting.
func TestKeysAreIndependent(t *testing.T) {
	const patience = 10 * time.Second
	var k Mutex
	unlockA := k.Lock("a")

	lockedB := make(chan struct{})
	go func() {
		k.Lock("b")()
		close(lockedB)
	}()
	select {
	case <-lockedB:
	case <-time.After(patience):
		t.Fatal("locking b waited for a")
	}

	lockedA := make(chan struct{})
	go func() {
		defer k.Lock("a")()
		close(lockedA)
	}()
	deadline := time.After(patience)
	for waiters(&k, "a") < 2 {
		select {
		case <-lockedA:
			t.Fatal("a locked twice at once")
		case <-deadline:
			t.Fatal("the second Lock of a never asked for it")
		default:
			runtime.Gosched()
		}
	}
	// The second Lock may still be on its way to blocking: give it time to
	// get there, or, were a not exclusive, through. Correct code passes
	// however short this is.
	select {
	case <-lockedA:
		t.Fatal("a locked twice at once")
	case <-time.After(100 * time.Millisecond):
	}
	unlockA()
	select {
	case <-lockedA:
	case <-time.After(patience):
		t.Fatal("a still locked after unlock")
	}
}

// waiters is how many callers hold or wait for key.
func waiters(k *Mutex, key string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if l := k.locks[key]; l != nil {
		return l.refs
	}
	return 0
}
