package keyedmutex

import (
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
