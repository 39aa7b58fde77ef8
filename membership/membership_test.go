package membership

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	storagedriver "github.com/distribution/distribution/v3/registry/storage/driver"
	"github.com/distribution/distribution/v3/registry/storage/driver/filesystem"

	"github.com/berth-registry/berth/internal/pgtest"
	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/storage"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// interval is the heartbeat of the tests: a record expires 300ms after its
// last renewal.
const interval = 100 * time.Millisecond

func newStorage(t *testing.T) storagedriver.StorageDriver {
	t.Helper()
	return filesystem.New(filesystem.DriverParameters{RootDirectory: t.TempDir(), MaxThreads: 100})
}

// replica is one replica's options: its own data directory, on storage,
// with the catalog pg (empty: SQLite) and settings.
func replica(t *testing.T, storage storagedriver.StorageDriver, pg string, settings map[string]string) Options {
	return Options{Data: t.TempDir(), Storage: storage, Postgres: pg, Settings: settings, Interval: interval,
		Addr: "127.0.0.1:5000", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// join joins with opts and returns the replica and a context bound to it
// (Bound); the replica leaves when the test ends.
func join(t *testing.T, opts Options) (context.Context, *Member) {
	t.Helper()
	m, err := Join(t.Context(), opts)
	if err != nil {
		t.Fatalf("Join: %v", err)
	}
	t.Cleanup(m.Leave)
	ctx, release := m.Bound(t.Context())
	t.Cleanup(release)
	return ctx, m
}

// crash joins with opts and then stops renewing without deleting the
// records, as a replica killed with SIGKILL does.
func crash(t *testing.T, opts Options) *Member {
	t.Helper()
	m, err := Join(t.Context(), opts)
	if err != nil {
		t.Fatalf("Join: %v", err)
	}
	m.stop()
	<-m.done
	t.Cleanup(m.closeDB)
	return m
}

// TestJoinRefuses: a replica refuses to start beside a live one that
// disagrees on what they share, with a message that names the live one,
// what differs and what to change; a replica that agrees starts.
func TestJoinRefuses(t *testing.T) {
	shared, other := newStorage(t), newStorage(t)
	pg, pg2 := pgtest.Database(t), pgtest.Database(t)
	secret := map[string]string{"registry.httpSecretFile": Fingerprint("registry.httpSecretFile", []byte("one"))}
	for _, tc := range []struct {
		name          string
		first, second Options
		want          string // "" when the second starts
	}{
		{"two SQLite catalogs on one storage", replica(t, shared, "", nil), replica(t, shared, "", nil),
			"with a SQLite catalog of its own, as does this replica: neither would see the other's pushes, and both could take one version. Several replicas on one storage must share a PostgreSQL catalog: set catalog.database: postgres://… on every replica"},
		{"SQLite beside PostgreSQL on one storage", replica(t, shared, pg, nil), replica(t, shared, "", nil),
			"it uses this storage with a PostgreSQL catalog, and this replica a SQLite catalog of its own: set catalog.database to the PostgreSQL URL of the other replicas"},
		{"PostgreSQL beside SQLite on one storage", replica(t, shared, "", nil), replica(t, shared, pg, nil),
			"it uses this storage with a SQLite catalog of its own, and this replica a PostgreSQL catalog: stop that replica, or set its catalog.database"},
		{"two PostgreSQL catalogs on one storage", replica(t, shared, pg, nil), replica(t, shared, pg2, nil),
			"it uses this storage with another PostgreSQL catalog"},
		{"one PostgreSQL catalog on two storages", replica(t, shared, pg, nil), replica(t, other, pg, nil),
			"it shares this PostgreSQL catalog but stores its blobs in another storage"},
		{"another HTTP secret", replica(t, shared, pg, secret), replica(t, shared, pg, map[string]string{"registry.httpSecretFile": Fingerprint("registry.httpSecretFile", []byte("two"))}),
			"it shares this PostgreSQL catalog with another registry.httpSecretFile (fingerprint "},
		{"another token key", replica(t, shared, pg, map[string]string{"auth.keyFile": "k1"}), replica(t, shared, pg, map[string]string{"auth.keyFile": "k2"}),
			"it shares this PostgreSQL catalog with another auth.keyFile (fingerprint k1, this replica's k2)"},
		{"one PostgreSQL catalog, one storage, one secret", replica(t, shared, pg, secret), replica(t, shared, pg, secret), ""},
		{"SQLite catalogs on storages of their own", replica(t, shared, "", nil), replica(t, other, "", nil), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, first := join(t, tc.first)
			start := time.Now()
			second, err := Join(t.Context(), tc.second)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("the second replica: %v", err)
				}
				second.Leave()
				return
			}
			if err == nil {
				second.Leave()
				t.Fatalf("the second replica started, want %q", tc.want)
			}
			if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), "replica "+first.self.Replica+" (host ") || !strings.Contains(err.Error(), "docs/scale-out.md#what-berth-refuses") {
				t.Fatalf("the second replica: %v\nwant ErrConflict naming replica %s and saying %q", err, first.self.Replica, tc.want)
			}
			// It waited for the first one's renewal, not for its record
			// to expire (a lease, and some slack for a loaded machine).
			if d := time.Since(start); d > 2*leases*interval {
				t.Errorf("refused after %s, want within two leases (%s)", d, 2*leases*interval)
			}
		})
	}
}

// TestReplacementAfterCrash: a replica on a new data directory, beside the
// records of a dead one that disagrees, starts once those have expired (a
// lease after their last renewal, and within two of its own start), and
// deletes them; in PostgreSQL too.
func TestReplacementAfterCrash(t *testing.T) {
	for _, pg := range []string{"", pgtest.Database(t)} {
		storage := newStorage(t)
		settings := func(s string) map[string]string { return map[string]string{"auth.keyFile": s} }
		dead := crash(t, replica(t, storage, pg, settings("old")))
		start := time.Now()
		_, m := join(t, replica(t, storage, pg, settings("new")))
		if d := time.Since(start); d > 2*leases*interval {
			t.Errorf("catalog %q: the replacement started after %s, want within two leases (%s)", pg, d, 2*leases*interval)
		}
		if d := time.Since(dead.self.Renewed); d < leases*interval {
			t.Errorf("catalog %q: the replacement started %s after the dead replica's last renewal, want at least a lease (%s)", pg, d, leases*interval)
		}
		for _, p := range m.places {
			if has(t, p, dead.self.Replica) {
				t.Errorf("%s still holds the dead replica's record", p)
			}
		}
	}
}

// TestCleanRestart: the same replica (the same data directory) starts at
// once after it was killed or after it left; a replica that left deleted
// its records, so another one starts at once too.
func TestCleanRestart(t *testing.T) {
	storage, pg := newStorage(t), pgtest.Database(t)
	// A long lease: a start that waited for a record to expire shows.
	const interval = time.Second
	for _, catalog := range []string{"", pg} {
		opts := replica(t, storage, catalog, nil)
		opts.Interval = interval
		crash(t, opts)
		start := time.Now()
		m, err := Join(t.Context(), opts)
		if err != nil {
			t.Fatalf("catalog %q: restart after a kill: %v", catalog, err)
		}
		if d := time.Since(start); d > interval {
			t.Errorf("catalog %q: the restart took %s, want at once", catalog, d)
		}
		m.Leave()
		for _, p := range places(t, storage, catalog) {
			if has(t, p, m.self.Replica) {
				t.Errorf("%s holds the record of a replica that left", p)
			}
		}
		start = time.Now()
		otherOpts := replica(t, storage, "", nil)
		otherOpts.Interval = interval
		_, other := join(t, otherOpts)
		other.Leave()
		if d := time.Since(start); d > interval {
			t.Errorf("catalog %q: another replica after a clean stop took %s, want at once", catalog, d)
		}
	}
}

// TestRestartKeepsTheReplicaID: the replica's id is kept in its data
// directory.
func TestRestartKeepsTheReplicaID(t *testing.T) {
	dir := t.TempDir()
	a, err := replicaID(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := replicaID(dir)
	if err != nil || a != b || len(a) != 16 {
		t.Fatalf("ids %q then %q (%v), want one 16-digit id", a, b, err)
	}
	if c, _ := replicaID(t.TempDir()); c == a {
		t.Fatalf("two data directories have the id %s", a)
	}
	for _, bad := range []string{"", "../../docker", "0123456789abcdeg", "0123"} {
		if err := os.WriteFile(filepath.Join(dir, IDFile), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if id, err := replicaID(dir); err == nil || !strings.Contains(err.Error(), "holds no replica id (16 hexadecimal digits); delete it") {
			t.Errorf("replica-id %q: id %q, error %v; want an error saying to delete the file", bad, id, err)
		}
	}
}

// TestConflictAfterStart: two replicas that disagree and both passed the
// start check (they looked before either wrote) find each other at the
// next renewal: the one that started later stops, the other serves on.
func TestConflictAfterStart(t *testing.T) {
	storage := newStorage(t)
	ctxA, a := join(t, replica(t, storage, "", nil))
	if err := a.places[0].remove(t.Context(), a.self.Replica); err != nil {
		t.Fatal(err)
	}
	ctxB, b := join(t, replica(t, storage, "", nil))
	select {
	case <-ctxB.Done():
	case <-time.After(20 * interval):
		t.Fatal("the later replica still serves 20 intervals after the conflict began")
	}
	if err := Stopped(ctxB); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "replica "+a.self.Replica) || err != b.Err() {
		t.Fatalf("Stopped = %v, Err = %v, want ErrConflict naming replica %s", err, b.Err(), a.self.Replica)
	}
	b.Leave()
	time.Sleep(2 * interval)
	if ctxA.Err() != nil || Stopped(ctxA) != nil || a.Err() != nil {
		t.Fatalf("the earlier replica stopped: %v", context.Cause(ctxA))
	}
}

// TestCopiedDataDirectory: two processes on copies of one data directory
// share a replica id; the one that started later stops, naming the file to
// delete.
func TestCopiedDataDirectory(t *testing.T) {
	storage := newStorage(t)
	opts := replica(t, storage, "", nil)
	ctxA, _ := join(t, opts)
	ctxB, _ := join(t, opts)
	select {
	case <-ctxB.Done():
	case <-time.After(20 * interval):
		t.Fatal("the copy still serves 20 intervals after it started")
	}
	if err := Stopped(ctxB); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "its data directory is a copy of this one's. Delete the file replica-id") {
		t.Fatalf("Stopped = %v, want ErrConflict naming the copied data directory", err)
	}
	if ctxA.Err() != nil {
		t.Fatalf("the first stopped: %v", context.Cause(ctxA))
	}
}

// TestExpiredRecordsAreDeleted: a live replica deletes the records of one
// that died (one that agrees with it here).
func TestExpiredRecordsAreDeleted(t *testing.T) {
	storage, pg := newStorage(t), pgtest.Database(t)
	_, live := join(t, replica(t, storage, pg, nil))
	dead := crash(t, replica(t, storage, pg, nil))
	for _, p := range live.places {
		for deadline := time.Now().Add(20 * interval); has(t, p, dead.self.Replica); time.Sleep(interval / 10) {
			if time.Now().After(deadline) {
				t.Fatalf("%s still holds the record of a replica dead for 20 intervals", p)
			}
		}
		if !has(t, p, live.self.Replica) {
			t.Errorf("%s lost the live replica's record", p)
		}
	}
}

// TestStorageMarker: the first start writes the marker outside
// distribution's tree, later starts read it, and a damaged one is refused
// naming the file to delete.
func TestStorageMarker(t *testing.T) {
	root := t.TempDir()
	storage := filesystem.New(filesystem.DriverParameters{RootDirectory: root, MaxThreads: 100})
	a, err := storageID(t.Context(), storage)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := storageID(t.Context(), storage); err != nil || a != b {
		t.Fatalf("the marker's id changed from %s to %s (%v)", a, b, err)
	}
	if _, err := os.Stat(filepath.Join(root, "berth", "storage.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "berth", "storage.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := storageID(t.Context(), storage); err == nil || !strings.Contains(err.Error(), "/berth/storage.json is damaged") || !strings.Contains(err.Error(), "delete it") {
		t.Fatalf("a damaged marker: %v", err)
	}
}

// TestFingerprint: fingerprints tell secrets apart, and settings apart,
// and hold nothing of the secret.
func TestFingerprint(t *testing.T) {
	a := Fingerprint("registry.httpSecretFile", []byte("secret-one"))
	if a != Fingerprint("registry.httpSecretFile", []byte("secret-one")) {
		t.Fatal("a fingerprint changed")
	}
	if a == Fingerprint("registry.httpSecretFile", []byte("secret-two")) || a == Fingerprint("auth.keyFile", []byte("secret-one")) {
		t.Fatal("two secrets, or two settings, have one fingerprint")
	}
	if strings.Contains(a, "secret") || strings.Contains(a, "736563726574") {
		t.Fatalf("fingerprint %s shows its secret", a)
	}
}

// places opens the places of the records on storage and pg (empty: none).
func places(t *testing.T, storage storagedriver.StorageDriver, pg string) []place {
	t.Helper()
	out := []place{&storagePlace{driver: storage}}
	if pg != "" {
		db, _, err := openDB(t.Context(), pg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(db.close)
		out = append(out, db)
	}
	return out
}

// has reports whether p holds replica's record.
func has(t *testing.T, p place, replica string) bool {
	t.Helper()
	recs, err := p.records(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Replica == replica {
			return true
		}
	}
	return false
}

// BenchmarkHeartbeat measures one renewal and one look at the records of
// three other replicas, in the storage (filesystem) and in PostgreSQL.
func BenchmarkHeartbeat(b *testing.B) {
	storage := filesystem.New(filesystem.DriverParameters{RootDirectory: b.TempDir(), MaxThreads: 100})
	pg := pgtest.Database(b)
	opts := func() Options {
		return Options{Data: b.TempDir(), Storage: storage, Postgres: pg, Interval: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	}
	var m *Member
	for range 4 {
		joined, err := Join(b.Context(), opts())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(joined.Leave)
		m = joined
	}
	for i, name := range []string{"storage", "postgres"} {
		p := m.places[i]
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if err := p.renew(b.Context(), &m.self); err != nil {
					b.Fatal(err)
				}
				if _, err := m.look(b.Context(), p, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRecordsOutsideTheRegistry: the marker and the records live outside
// distribution's tree: a garbage collection of the registry on the same
// storage, with everything older than its grace, keeps them.
func TestRecordsOutsideTheRegistry(t *testing.T) {
	root := t.TempDir()
	reg, err := registry.New(t.Context(), registry.Options{Storage: &storage.Config{Driver: "filesystem", Filesystem: storage.Filesystem{RootDirectory: root}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	opts := replica(t, reg.StorageDriver(), "", nil)
	opts.Interval = time.Hour
	_, m := join(t, opts)
	then := time.Now().Add(-2 * time.Hour)
	if err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, then, then)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.CollectGarbage(t.Context(), registry.GCOptions{Grace: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{markerPath, recordPath(m.self.Replica)} {
		if _, err := os.Stat(filepath.Join(root, name)); err != nil {
			t.Errorf("after a garbage collection: %v", err)
		}
	}
}
