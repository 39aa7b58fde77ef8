package postgres

import (
	"context"
	"os"
	"testing"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/storetest"
	"github.com/berth-registry/berth/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func openAt(t testing.TB, dsn string, opts Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) (catalog.Store, func(*testing.T) catalog.Store) {
		dsn := pgtest.Database(t)
		return openAt(t, dsn, Options{}), func(t *testing.T) catalog.Store { return openAt(t, dsn, Options{}) }
	})
}
