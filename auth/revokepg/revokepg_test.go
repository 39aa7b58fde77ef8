package revokepg_test

import (
	"context"
	"os"
	"testing"

	"github.com/berth-registry/berth/auth/revokepg"
	"github.com/berth-registry/berth/auth/revoketest"
	"github.com/berth-registry/berth/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func open(t *testing.T, dsn string) *revokepg.Store {
	t.Helper()
	s, err := revokepg.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestRevocations: two replicas on one database see each other's
// revocations.
func TestRevocations(t *testing.T) {
	dsn := pgtest.Database(t)
	revoketest.Run(t, open(t, dsn), open(t, dsn))
}
