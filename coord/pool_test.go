package coord_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-registry/berth/internal/pgtest"
)

// TestPostgresExclusiveThenSharedDoesNotExhaustThePool takes, from more
// goroutines than the pool has connections, an exclusive lock and then,
// holding it, a shared one, as a push by tag does (its tag's lock, then the
// garbage collection's): each holds a connection and asks for another, and
// none may wait for good.
func TestPostgresExclusiveThenSharedDoesNotExhaustThePool(t *testing.T) {
	const conns = 4
	dsn := pgtest.Database(t)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	p := openPostgres(t, fmt.Sprintf("%s%spool_max_conns=%d", dsn, sep, conns))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2*conns)
	for i := range 2 * conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock, err := p.Lock(ctx, fmt.Sprintf("tag:%d", i))
			if err != nil {
				errs <- err
				return
			}
			defer unlock()
			time.Sleep(50 * time.Millisecond) // the others take theirs meanwhile
			runlock, err := p.RLock(ctx, "gc")
			if err != nil {
				errs <- err
				return
			}
			runlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("exclusive, then shared, %d at once on a pool of %d: %v", 2*conns, conns, err)
	}
}
