package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/storetest"
)

func openAt(t *testing.T, path string) catalog.Store {
	t.Helper()
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) (catalog.Store, func(*testing.T) catalog.Store) {
		path := filepath.Join(t.TempDir(), "catalog.db")
		return openAt(t, path), func(t *testing.T) catalog.Store { return openAt(t, path) }
	})
}

func TestOpenCreatesDirectories(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "catalog", "catalog.db")
	openAt(t, path).Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("Open did not create the file: %v", err)
	}
}

func TestOpenRefusesOtherFiles(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		content []byte
	}{
		{"text", []byte("this is not a database, just some text that is long enough to have a header\n")},
		{"damaged header", append([]byte("SQLite format 3\x00"), make([]byte, 200)...)},
		{"binary", []byte{0x1f, 0x8b, 0x08, 0x00, 0xff, 0xfe, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09}},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".db")
		if err := os.WriteFile(path, tc.content, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(context.Background(), path)
		if err == nil {
			s.Close()
			t.Errorf("%s: Open succeeded", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %q does not name %s", tc.name, err, path)
		}
		if got, _ := os.ReadFile(path); string(got) != string(tc.content) {
			t.Errorf("%s: Open changed the file", tc.name)
		}
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	s := openAt(t, path).(*Store)
	if _, err := s.writer.Exec(`PRAGMA user_version = 99`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := Open(context.Background(), path)
	if err == nil || !strings.Contains(err.Error(), "newer") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open of a newer schema: %v, want an error naming the file and the version", err)
	}
}
