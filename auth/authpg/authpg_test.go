package authpg_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/berth-registry/berth/auth/authpg"
	"github.com/berth-registry/berth/auth/storetest"
	"github.com/berth-registry/berth/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func open(t *testing.T, dsn string) *authpg.Store {
	t.Helper()
	s, err := authpg.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestStore: two replicas on one database.
func TestStore(t *testing.T) {
	dsn := pgtest.Database(t)
	storetest.Run(t, open(t, dsn), open(t, dsn))
}

// TestOpenNamesTheHostNeverThePassword: a database that cannot be reached
// is named by its host; its password appears in no error.
func TestOpenNamesTheHostNeverThePassword(t *testing.T) {
	for _, dsn := range []string{
		"postgres://berth:s3cret-pw@127.0.0.1:1/berth?sslmode=disable&connect_timeout=2",
		"postgres://berth:s3cret-pw@[bad",
	} {
		_, err := authpg.Open(context.Background(), dsn)
		if err == nil || strings.Contains(err.Error(), "s3cret-pw") {
			t.Errorf("Open(%s) = %v, want an error without the password", strings.ReplaceAll(dsn, "s3cret-pw", "***"), err)
		}
	}
	_, err := authpg.Open(context.Background(), "postgres://berth:s3cret-pw@127.0.0.1:1/berth?sslmode=disable&connect_timeout=2")
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("the error %v does not name the host", err)
	}
}
