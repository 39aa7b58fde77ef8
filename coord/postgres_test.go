package coord_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/berth-registry/berth/coord"
	"github.com/berth-registry/berth/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func openPostgres(t *testing.T, dsn string) *coord.Postgres {
	t.Helper()
	p, err := coord.OpenPostgres(context.Background(), dsn, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestPostgresLocks(t *testing.T) {
	dsn := pgtest.Database(t)
	a, b := openPostgres(t, dsn), openPostgres(t, dsn)
	testLocks(t, a)
	// Two replicas: a key held by one is held for the other.
	ctx := context.Background()
	unlock, err := a.Lock(ctx, "tag:r:1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := b.Lock(wait, "tag:r:1.0.0"); err == nil {
		t.Fatal("two replicas held one lock")
	}
	unlock()
	unlockB, err := b.Lock(ctx, "tag:r:1.0.0")
	if err != nil {
		t.Fatal("a released lock stays held:", err)
	}
	unlockB()
}

// TestPostgresLeadership: of two replicas exactly one leads, every caller
// of Lead on it gets the term, and when it closes (as when it dies: its
// session ends) the other leads.
func TestPostgresLeadership(t *testing.T) {
	dsn := pgtest.Database(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := openPostgres(t, dsn)
	waitUntil(t, "a replica alone to lead", a.Leader)
	b, err := coord.OpenPostgres(ctx, dsn, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	terms := make(chan string, 4)
	returned := make(chan string, 2)
	stopCaller := map[string]context.CancelFunc{}
	for _, name := range []string{"reconciler", "publisher"} {
		callerCtx, stop := context.WithCancel(ctx)
		stopCaller[name] = stop
		go func() {
			b.Lead(callerCtx, func(ctx context.Context) {
				terms <- name
				<-ctx.Done()
			})
			returned <- name
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	if b.Leader() || len(terms) != 0 {
		t.Fatal("two replicas lead at once")
	}
	a.Close()
	waitUntil(t, "the other replica to take over", b.Leader)
	got := map[string]bool{<-terms: true, <-terms: true}
	if !got["reconciler"] || !got["publisher"] {
		t.Fatalf("terms started: %v, want every Lead caller's", got)
	}
	// A caller whose context ends stops leading at once, while its term goes on.
	stopCaller["reconciler"]()
	select {
	case name := <-returned:
		if name != "reconciler" {
			t.Fatalf("Lead of %s returned", name)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Lead did not return when its caller's context ended during a term")
	}
	if !b.Leader() {
		t.Fatal("the replica stopped leading when one Lead caller left")
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
