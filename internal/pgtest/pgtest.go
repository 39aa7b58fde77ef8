// Package pgtest gives tests a real PostgreSQL: a throwaway cluster made by
// the OS package's initdb and started by its pg_ctl in a temporary
// directory, listening on a free loopback port, and one fresh database per
// test, whose URL carries the cluster's random password. A package's tests
// share one cluster, started by the first test that asks for a database and
// stopped when the package's tests end:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }
//
// Without PostgreSQL installed, a test that asks for a database is skipped,
// and fails when CI=true (`make test` installs the OS package).
package pgtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-registry/berth/internal/testenv"
)

// errMissing says PostgreSQL's server programs are not installed.
var errMissing = errors.New("PostgreSQL's initdb and pg_ctl not found on PATH or under /usr/lib/postgresql/*/bin (Debian: apt-get install postgresql)")

var (
	once     sync.Once
	cluster  *Cluster
	startErr error
	dbs      atomic.Int64
)

// Run runs the package's tests and stops the cluster they started, if any;
// it returns m.Run's exit code.
func Run(m *testing.M) int {
	code := m.Run()
	if cluster != nil {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
		}
	}
	return code
}

// Database creates an empty database in the package's cluster, starting
// the cluster on first use, and returns its connection URL. The database
// is dropped when the test ends.
func Database(t testing.TB) string {
	t.Helper()
	c := shared(t)
	ctx := context.Background()
	url, drop, err := c.CreateDatabase(ctx)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return url
}

// CreateDatabase creates an empty database in the cluster and returns its
// connection URL and the function that drops it.
func (c *Cluster) CreateDatabase(ctx context.Context) (url string, drop func() error, err error) {
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbs.Add(1))
	if err := c.exec(ctx, `CREATE DATABASE `+name); err != nil {
		return "", nil, err
	}
	return c.URL(name), func() error { return c.exec(context.Background(), `DROP DATABASE `+name+` WITH (FORCE)`) }, nil
}

// shared returns the package's cluster, starting it on first use. It skips
// the test when PostgreSQL is not installed, and fails it when CI=true.
func shared(t testing.TB) *Cluster {
	t.Helper()
	once.Do(func() { cluster, startErr = Start() })
	switch {
	case errors.Is(startErr, errMissing) && !testenv.CI():
		t.Skip("pgtest:", startErr)
	case startErr != nil:
		t.Fatal("pgtest:", startErr)
	}
	return cluster
}

// Cluster is a running PostgreSQL cluster of one test process.
type Cluster struct {
	dir, bin string
	// Port is its loopback port.
	Port int
	// password is the superuser's, random per cluster: connections
	// authenticate with it (scram-sha-256), as in production, so that a test
	// can tell whether a program prints the password of its database URL.
	password string
	cred     *syscall.Credential
}

// Start makes a cluster in a new temporary directory and starts it on a
// free port of 127.0.0.1. It is tuned for tests: no fsync, so that a
// crash of the machine loses it, which does not matter for a throwaway.
// Run as root, it runs PostgreSQL as the user postgres, since the server
// refuses to run as root.
func Start() (*Cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "berth-pgtest-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, bin: bin, password: rand.Text()}
	if os.Geteuid() == 0 {
		if c.cred, err = postgresUser(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		if err := os.Chown(dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	pwfile := filepath.Join(dir, "pwfile")
	if err := c.writeFile(pwfile, c.password); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	err = c.run("initdb", "-D", c.data(), "-U", "postgres", "--auth=scram-sha-256", "--pwfile", pwfile, "--no-sync", "-E", "UTF8", "--locale=C")
	if err := errors.Join(err, os.Remove(pwfile)); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// A port picked free may be taken before the server binds it; try again then.
	for attempt := 0; ; attempt++ {
		if c.Port, err = freePort(); err != nil {
			break
		}
		opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -c port=%d -c unix_socket_directories='' -c fsync=off "+
			"-c synchronous_commit=off -c full_page_writes=off -c max_connections=400", c.Port)
		if err = c.run("pg_ctl", "-D", c.data(), "-l", filepath.Join(dir, "server.log"), "-o", opts, "-w", "-t", "60", "start"); err == nil || attempt == 2 {
			break
		}
	}
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%w\n%s", err, log)
	}
	return c, nil
}

// URL is the connection URL of database name in the cluster.
func (c *Cluster) URL(name string) string {
	return fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/%s?sslmode=disable", c.password, c.Port, name)
}

// writeFile writes a file of the cluster's user, readable by it alone.
func (c *Cluster) writeFile(name, content string) error {
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		return err
	}
	if c.cred != nil {
		return os.Chown(name, int(c.cred.Uid), int(c.cred.Gid))
	}
	return nil
}

// Stop stops the server at once and removes the cluster's directory.
func (c *Cluster) Stop() error {
	err := c.run("pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "stop")
	return errors.Join(err, os.RemoveAll(c.dir))
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

// exec runs one statement in the cluster's postgres database.
func (c *Cluster) exec(ctx context.Context, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// run runs one of PostgreSQL's programs as the cluster's user.
func (c *Cluster) run(name string, args ...string) error {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", name, err, out)
	}
	return nil
}

// binDir finds the directory of initdb and pg_ctl: Debian's newest
// /usr/lib/postgresql/<version>/bin, which is not on PATH, else PATH's.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if usable(d) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if d := filepath.Dir(p); usable(d) {
			return d, nil
		}
	}
	return "", errMissing
}

func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

func usable(dir string) bool {
	for _, name := range []string{"initdb", "pg_ctl"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() {
			return false
		}
	}
	return true
}

// postgresUser is the credential of the user postgres, whom the OS
// package creates.
func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, PostgreSQL needs the user postgres: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// freePort returns a loopback port nothing listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
