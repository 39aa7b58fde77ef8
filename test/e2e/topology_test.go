package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/internal/pgtest"
	"github.com/berth-registry/berth/membership"
)

// heartbeat is the replicas' heartbeat in these tests: a record expires
// 600ms after its last renewal.
const heartbeat = "replicas:\n  heartbeatInterval: 200ms\n"

// writeConfig writes a berth configuration into a new file.
func writeConfig(t *testing.T, content string) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "berth.yaml")
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

// refusedToServe runs berth serve with config on a new data directory and checks
// that it refuses to start, naming the replica running on first's data
// directory and saying each of want.
func refusedToServe(t *testing.T, first *server, config string, want ...string) string {
	t.Helper()
	r := run(t, "", berthBin, "serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--config", config)
	id, err := os.ReadFile(filepath.Join(first.data, membership.IDFile))
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, "replica "+strings.TrimSpace(string(id))+" (host ", "docs/scale-out.md#what-berth-refuses")
	for _, w := range want {
		if r.code != 1 || !strings.Contains(r.stderr, w) {
			t.Fatalf("berth serve beside a replica that disagrees: exit %d, want 1 and a message saying %q\n%s", r.code, w, r.stderr)
		}
	}
	return r.stderr
}

// TestTopologyTwoSQLiteCatalogsOnOneBucket: a second berth serve with a
// SQLite catalog of its own on the bucket of a running one refuses to
// start and says to share a PostgreSQL catalog, so one version pushed twice
// at once has one winner; a PostgreSQL replica there is refused too.
func TestTopologyTwoSQLiteCatalogsOnOneBucket(t *testing.T) {
	gw := startVersitygw(t)
	storage := gw.storageConfig(gw.bucket(t, "sqlite"), false)
	config := writeConfig(t, storage+heartbeat)
	a := startServer(t, "", "--config", config)
	refusedToServe(t, a, config, "it uses this storage with a SQLite catalog of its own, as does this replica",
		"Several replicas on one storage must share a PostgreSQL catalog: set catalog.database: postgres://… on every replica")
	refusedToServe(t, a, writeConfig(t, storage+heartbeat+"catalog:\n  database: "+pgtest.Database(t)+"\n"),
		"it uses this storage with a SQLite catalog of its own, and this replica a PostgreSQL catalog")
	raceBoth(t, a, a, 3)
}

// TestTopologyOnePostgresTwoFilesystems: a replica on the PostgreSQL
// catalog of a running one, with a filesystem storage of its own, refuses
// to start: whichever led would reconcile the other's packages away.
func TestTopologyOnePostgresTwoFilesystems(t *testing.T) {
	dir := t.TempDir()
	config := writeConfig(t, "catalog:\n  database: "+pgtest.Database(t)+"\nregistry:\n  httpSecretFile: "+filepath.Join(dir, "http-secret")+"\n"+heartbeat)
	a := startServer(t, "", "--config", config)
	refusedToServe(t, a, config, "it shares this PostgreSQL catalog but stores its blobs in another storage",
		"Give every replica on one catalog the same storage section")
}

// TestTopologySecretsDiffer: a replica on the PostgreSQL catalog and the
// bucket of a running one, but with another HTTP secret or another token
// key, refuses to start naming the setting, and prints neither secret.
func TestTopologySecretsDiffer(t *testing.T) {
	dir := t.TempDir()
	_, shared := sharedState(t, "secrets", dir)
	auth := func(keyFile string) string { return fmt.Sprintf("auth:\n  keyFile: %s\n", keyFile) }
	a := startServer(t, "", "--config", writeConfig(t, shared+heartbeat+auth(filepath.Join(dir, "token-key.pem"))))
	otherSecret, otherKey := filepath.Join(t.TempDir(), "http-secret"), filepath.Join(t.TempDir(), "token-key.pem")
	for _, tc := range []struct {
		setting, config string
	}{
		{"registry.httpSecretFile", strings.Replace(shared, filepath.Join(dir, "http-secret"), otherSecret, 1) + auth(filepath.Join(dir, "token-key.pem"))},
		{"auth.keyFile", shared + auth(otherKey)},
	} {
		stderr := refusedToServe(t, a, writeConfig(t, tc.config+heartbeat),
			"it shares this PostgreSQL catalog with another "+tc.setting+" (fingerprint ",
			"every replica must read the same file there")
		for _, f := range []string{filepath.Join(dir, "http-secret"), otherSecret, filepath.Join(dir, "token-key.pem"), otherKey} {
			secret, err := os.ReadFile(f)
			if errors.Is(err, os.ErrNotExist) {
				continue // the other replica's, when it stopped before reading it
			}
			if err != nil {
				t.Fatal(err)
			}
			// A secret, or a line of a PEM key's body.
			for _, s := range strings.Split(strings.TrimSpace(string(secret)), "\n") {
				if s == "" || strings.HasPrefix(s, "-----") {
					continue
				}
				if strings.Contains(stderr, s) || strings.Contains(a.logs(), s) {
					t.Fatalf("the secret of %s is printed", f)
				}
			}
		}
	}
}

// TestTopologyReplacementAfterKill9: a replica killed with SIGKILL leaves
// its records. Restarted on its own data directory, it is the same replica
// and starts at once; a replacement on a new data directory, which would
// disagree with it (a SQLite catalog of its own on the same bucket), waits
// until the dead one's records expire, starts, and deletes them.
func TestTopologyReplacementAfterKill9(t *testing.T) {
	gw := startVersitygw(t)
	bucket := gw.bucket(t, "replace")
	config := writeConfig(t, gw.storageConfig(bucket, false)+heartbeat)
	kill := func(s *server) {
		if err := s.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-s.done
	}
	const waiting = "membership: waiting for the records of replicas that disagree"
	a := startServer(t, "", "--config", config)
	kill(a)
	again := startServer(t, a.data, "--config", config)
	if strings.Contains(again.logs(), waiting) {
		t.Errorf("the killed replica, restarted on its data directory, waited for its own record\n%s", again.logs())
	}
	kill(again)
	replicas := filepath.Join(gw.root, bucket, "berth", "replicas")
	id, err := os.ReadFile(filepath.Join(a.data, membership.IDFile))
	if err != nil {
		t.Fatal(err)
	}
	var last struct{ Renewed time.Time }
	if b, err := os.ReadFile(filepath.Join(replicas, strings.TrimSpace(string(id))+".json")); err != nil || json.Unmarshal(b, &last) != nil {
		t.Fatalf("the killed replica's record: %v %s", err, b)
	}
	b := startServer(t, "", "--config", config)
	if d := time.Since(last.Renewed); d < 600*time.Millisecond || !strings.Contains(b.logs(), waiting) {
		t.Errorf("the replacement served %s after the dead replica's last renewal, want after it waited for its lease (600ms)\n%s", d, b.logs())
	}
	records, err := os.ReadDir(replicas)
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != 1 {
		t.Errorf("the bucket holds %d replica records, want the replacement's alone", len(records))
	}
}

// TestTopologyStartTogether: two berth serve with SQLite catalogs of their
// own, started together on one bucket, may both pass the start check;
// within a few heartbeats exactly one serves, and the other has exited 1
// with the conflict.
func TestTopologyStartTogether(t *testing.T) {
	gw := startVersitygw(t)
	config := writeConfig(t, gw.storageConfig(gw.bucket(t, "together"), false)+heartbeat)
	type proc struct {
		cmd    *exec.Cmd
		stderr bytes.Buffer
		done   chan error
	}
	procs := make([]*proc, 2)
	for i := range procs {
		p := &proc{cmd: exec.Command(berthBin, "serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--config", config), done: make(chan error, 1)}
		p.cmd.Stderr = &p.stderr
		procs[i] = p
	}
	for _, p := range procs {
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { p.done <- p.cmd.Wait() }()
		t.Cleanup(func() {
			_ = p.cmd.Process.Kill()
		})
	}
	time.Sleep(5 * time.Second)
	var exited []*proc
	for _, p := range procs {
		select {
		case err := <-p.done:
			if code := p.cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(p.stderr.String(), "Error: "+membership.ErrConflict.Error()+": replica ") {
				t.Errorf("berth serve exited %d (%v), want 1 and the conflict\n%s", code, err, p.stderr.String())
			}
			exited = append(exited, p)
		default:
		}
	}
	if len(exited) != 1 {
		for _, p := range procs {
			if !slices.Contains(exited, p) {
				_ = p.cmd.Process.Kill()
				<-p.done
			}
			t.Logf("stderr:\n%s", p.stderr.String())
		}
		t.Fatalf("%d of two berth serve started together on one bucket with SQLite catalogs of their own exited, want one", len(exited))
	}
}
