package coord_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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

// TestPostgresLeadershipAfterLostConnections cuts every connection of two
// replicas: the leader's check finds its lock gone and it steps down, and
// then exactly one replica leads again.
func TestPostgresLeadershipAfterLostConnections(t *testing.T) {
	dsn := pgtest.Database(t)
	a, b := openPostgres(t, dsn), openPostgres(t, dsn)
	waitUntil(t, "one replica to lead", func() bool { return a.Leader() != b.Leader() })
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	// One replica leads as soon as it holds the lock, maybe before the
	// other has connected at all: cut once both have a connection (their
	// pools keep it), as a database restart finds them.
	waitUntil(t, "both replicas to have connected", func() bool {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n)
		return err == nil && n >= 2
	})
	var cut int
	err = conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
	WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&cut)
	conn.Close(ctx)
	if err != nil || cut < 2 {
		t.Fatalf("cut %d connections (%v), want at least the two replicas'", cut, err)
	}
	// Stable: exactly one of the two leads for two seconds running.
	stable := time.Time{}
	waitUntil(t, "exactly one replica to lead for 2s after the cut", func() bool {
		if a.Leader() == b.Leader() {
			stable = time.Time{}
			return false
		}
		if stable.IsZero() {
			stable = time.Now()
		}
		return time.Since(stable) > 2*time.Second
	})
	// And the one that says it leads holds the leadership's lock.
	conn, err = pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var held int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
	WHERE l.locktype = 'advisory' AND l.granted AND a.datname = current_database()`).Scan(&held); err != nil || held != 1 {
		t.Fatalf("%d advisory locks held (%v), want the leadership's alone", held, err)
	}
}

func TestPostgresSignals(t *testing.T) {
	dsn := pgtest.Database(t)
	a, b := openPostgres(t, dsn), openPostgres(t, dsn)
	// The listeners connect in the background; a signal sent before they
	// listen is lost, as Signals allows, so the first is sent until heard.
	heard := b.Subscribe("ready")
	waitUntil(t, "the other replica to listen", func() bool {
		if err := a.Notify(context.Background(), "ready"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-heard:
			return true
		case <-time.After(50 * time.Millisecond):
			return false
		}
	})
	testSignals(t, a, b)
	testSignals(t, a, a)
}
