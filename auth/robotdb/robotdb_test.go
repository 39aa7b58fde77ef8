package robotdb_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-registry/berth/auth/robotdb"
	"github.com/berth-registry/berth/auth/storetest"
)

func open(t *testing.T, file string) *robotdb.Store {
	t.Helper()
	s, err := robotdb.Open(context.Background(), file)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// TestStore: one file, through two handles as two processes would hold
// them, created private in a private directory.
func TestStore(t *testing.T) {
	file := filepath.Join(t.TempDir(), "auth", "auth.db")
	storetest.Run(t, open(t, file), open(t, file))
	for name, want := range map[string]os.FileMode{file: 0o600, filepath.Dir(file): 0o700} {
		if fi, err := os.Stat(name); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, %v; want %v", name, fi.Mode().Perm(), err, want)
		}
	}
}

func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	notDB := filepath.Join(dir, "not.db")
	if err := os.WriteFile(notDB, []byte("this is not a database, not at all, no"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := robotdb.Open(context.Background(), notDB); err == nil {
		t.Error("opened a file that is not a database")
	}
}
