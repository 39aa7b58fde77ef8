package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/internal/pgtest"
	"github.com/berth-registry/berth/pkgformat"
)

func entry(namespace, name, version string) *catalog.Entry {
	return &catalog.Entry{
		Namespace: namespace, Name: name, Tag: version,
		Digest: fmt.Sprintf("sha256:%064x", len(namespace+name+version)*7919+int(version[0])),
		Status: apiv1.StatusIndexed, Indexed: time.Now(),
		Metadata: &pkgformat.Metadata{
			SchemaVersion: pkgformat.MetadataSchemaVersion, Name: name, Version: version, Format: pkgformat.Helm,
			Description: "package " + name,
		},
	}
}

var everything = catalog.Access{All: true}

// TestFeedHasNoGaps runs writers on two replicas of one database while a
// follower pages through the change feed as it grows, the way a mirror or
// the search API's clients do: it must read every sequence number, each
// once and in order, although transactions that took their numbers commit
// in whatever order the database lets them.
func TestFeedHasNoGaps(t *testing.T) {
	dsn := pgtest.Database(t)
	a, b := openAt(t, dsn, Options{}), openAt(t, dsn, Options{})
	defer a.Close()
	defer b.Close()
	ctx := context.Background()

	const writers, each = 8, 40
	var written atomic.Int64
	done := make(chan struct{})
	var read []int64
	followed := make(chan error, 1)
	go func() {
		var since int64
		for {
			finished := false
			select {
			case <-done:
				finished = true
			default:
			}
			cs, err := a.Changes(ctx, since, catalog.MaxLimit)
			if err != nil {
				followed <- err
				return
			}
			for _, c := range cs {
				read = append(read, c.Seq)
				since = c.Seq
			}
			if finished && len(cs) == 0 {
				followed <- nil
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range writers {
		store := []*Store{a, b}[w%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				// Several writers share packages, so that their transactions
				// wait on each other as well as run side by side.
				ns, name := fmt.Sprintf("ns%d", w%3), fmt.Sprintf("p%d", i%4)
				var changed bool
				var err error
				if i%5 == 4 {
					changed, err = store.Delete(ctx, ns, name, fmt.Sprintf("1.%d.%d", w, i-1))
				} else {
					changed, err = store.Put(ctx, entry(ns, name, fmt.Sprintf("1.%d.%d", w, i)))
				}
				if err != nil {
					t.Error(err)
					return
				}
				if changed {
					written.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	if err := <-followed; err != nil {
		t.Fatal(err)
	}
	n := written.Load()
	if int64(len(read)) != n {
		t.Fatalf("the follower read %d changes, the writers made %d", len(read), n)
	}
	for i, seq := range read {
		if seq != int64(i+1) {
			t.Fatalf("change %d read has seq %d: the follower skipped or repeated a number (read %v)", i+1, seq, read[max(0, i-3):min(len(read), i+3)])
		}
	}
	st, err := b.Stats(ctx)
	if err != nil || st.Seq != n {
		t.Errorf("Stats = %+v, %v; want Seq %d", st, err, n)
	}
}

// TestReplicasFollowEachOther checks that what one replica writes reaches
// the other's search index and OnChange: puts, repoints, signature verdicts
// and deletes, each within a second, and the 99th percentile of the time it
// takes.
func TestReplicasFollowEachOther(t *testing.T) {
	dsn := pgtest.Database(t)
	var mu sync.Mutex
	told := map[string]int{}
	a := openAt(t, dsn, Options{})
	defer a.Close()
	b := openAt(t, dsn, Options{OnChange: func(ns, name string) {
		mu.Lock()
		told[ns+"/"+name]++
		mu.Unlock()
	}})
	defer b.Close()
	ctx := context.Background()

	var lags []time.Duration
	for i := range 50 {
		e := entry("team", fmt.Sprintf("pkg%02d", i), "1.0.0")
		if _, err := a.Put(ctx, e); err != nil {
			t.Fatal(err)
		}
		lags = append(lags, waitFor(t, fmt.Sprintf("%s searchable on the other replica", e.Name), func() bool {
			return found(t, b, e.Name) == "1.0.0"
		}))
	}
	slices.Sort(lags)
	p99 := lags[len(lags)*99/100]
	t.Logf("time to searchable on the other replica: p50 %v, p99 %v", lags[len(lags)/2], p99)
	if p99 > time.Second {
		t.Errorf("p99 time to searchable across replicas %v, want at most 1s", p99)
	}

	// A newer version through b shows on a; a delete through a goes from b.
	if _, err := b.Put(ctx, entry("team", "pkg00", "2.0.0")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "2.0.0 as pkg00's latest on a", func() bool { return found(t, a, "pkg00") == "2.0.0" })
	for _, v := range []string{"1.0.0", "2.0.0"} {
		if _, err := a.Delete(ctx, "team", "pkg00", v); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "pkg00 gone from b", func() bool { return found(t, b, "pkg00") == "" })

	// A verdict recorded through a shows on b.
	e := entry("team", "pkg01", "1.0.0")
	check := &catalog.SignatureCheck{Namespace: "team", Name: "pkg01", Digest: e.Digest, Checked: time.Now(), Policy: "p",
		Signatures: []catalog.SignatureRecord{{Digest: "sha256:" + strings.Repeat("5", 64), Kind: catalog.KindTag, KeyID: "k", Verified: true}}}
	if changed, err := a.PutSignatures(ctx, check); err != nil || !changed {
		t.Fatalf("PutSignatures = %v, %v", changed, err)
	}
	waitFor(t, "pkg01 verified on b", func() bool {
		v := true
		res, err := b.Search(ctx, catalog.Query{Text: "pkg01", Verified: &v, Access: everything})
		return err == nil && res.Total == 1
	})

	mu.Lock()
	defer mu.Unlock()
	if told["team/pkg00"] < 3 || told["team/pkg01"] < 2 || told["team/pkg49"] < 1 {
		t.Errorf("b's OnChange heard pkg00 %d, pkg01 %d, pkg49 %d times; want at least 3 (put, put, deletes), 2 (put, verdict), 1",
			told["team/pkg00"], told["team/pkg01"], told["team/pkg49"])
	}
}

// TestFollowsWithoutNotifications checks the poll: a replica whose
// notifications are lost still follows.
func TestFollowsWithoutNotifications(t *testing.T) {
	dsn := pgtest.Database(t)
	a := openAt(t, dsn, Options{})
	defer a.Close()
	b := openAt(t, dsn, Options{Poll: 50 * time.Millisecond})
	defer b.Close()
	ctx := context.Background()
	// A write that notifies nobody, as if the notification were lost:
	// only the poll sees it.
	tx, err := a.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE counters SET rev = rev + 1`); err != nil {
		t.Fatal(err)
	}
	doc := `{"summary":{"namespace":"quiet","name":"silent","version":"1.0.0","format":"helm","digest":"sha256:00","updated":"2026-01-01T00:00:00Z","verified":false}}`
	if _, err := tx.Exec(ctx, `INSERT INTO packages (namespace, name, rev, doc) SELECT 'quiet', 'silent', rev, $1 FROM counters`, doc); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the poll to find the package", func() bool { return found(t, b, "silent") == "1.0.0" })
}

func TestOpenErrors(t *testing.T) {
	dsn := pgtest.Database(t)
	s := openAt(t, dsn, Options{})
	if _, err := s.pool.Exec(context.Background(), `UPDATE schema_version SET version = 99`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, tc := range []struct {
		name, dsn string
		want      []string
		never     string
	}{
		{"newer schema", dsn, []string{"newer", "127.0.0.1"}, ""},
		{"unparsable URL", "postgres://user:s3cret@[::1/db", []string{"cannot be parsed"}, "s3cret"},
		{"nothing listening", "postgres://user:s3cret@127.0.0.1:1/db?connect_timeout=2", []string{"127.0.0.1"}, "s3cret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(context.Background(), tc.dsn, Options{})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if tc.never != "" && strings.Contains(err.Error(), tc.never) {
				t.Errorf("error %q quotes the password", err)
			}
		})
	}
}

// found returns the version search on s lists for the package name of
// namespace team or quiet, or "" when it lists none.
func found(t *testing.T, s *Store, name string) string {
	t.Helper()
	res, err := s.Search(context.Background(), catalog.Query{Text: name, Access: everything})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Packages {
		if p.Name == name {
			return p.Version
		}
	}
	return ""
}

// waitFor polls cond every millisecond for up to 5 s and returns how long it
// took to hold.
func waitFor(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}

// TestSurvivesLostConnections cuts every connection of both replicas, as a
// database restart or a network cut would: the stores reconnect, and the
// other replica follows again, through its poll until it listens again.
func TestSurvivesLostConnections(t *testing.T) {
	dsn := pgtest.Database(t)
	a := openAt(t, dsn, Options{})
	defer a.Close()
	b := openAt(t, dsn, Options{Poll: 100 * time.Millisecond})
	defer b.Close()
	ctx := context.Background()
	if _, err := a.Put(ctx, entry("team", "before", "1.0.0")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first package on b", func() bool { return found(t, b, "before") == "1.0.0" })
	var cut int
	if err := a.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
	WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&cut); err != nil {
		t.Fatal(err)
	}
	if cut < 2 {
		t.Fatalf("cut %d connections, want both replicas' (at least their listeners)", cut)
	}
	// Connections the pool held are dead; pgx finds out on their next use.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := a.Put(ctx, entry("team", "after", "1.0.0"))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Put after the cut still fails: %v", err)
		}
	}
	waitFor(t, "the package written after the cut on b", func() bool { return found(t, b, "after") == "1.0.0" })
}
