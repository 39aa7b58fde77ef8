// Package sqlite is the catalog's embedded store: one SQLite file that berth
// serve keeps under its data directory (DESIGN.md, "The catalog"), and an
// in-memory search index (catalog/searchindex) built from it at open and kept
// up to date by every write. It implements catalog.Store on the pure-Go driver
// modernc.org/sqlite, so berth still builds with CGO_ENABLED=0.
// docs/catalog-store.md describes the schema, the search, the change feed and
// the durability settings, and why this driver.
//
// One process owns a file: writes go through a single connection, reads through
// a pool of read-only connections that see the last committed state (WAL).
// Searches read only the index.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/searchindex"
	"github.com/berth-registry/berth/internal/sqlitedb"
)

// Store is a catalog.Store in one SQLite file. It is safe for concurrent use.
type Store struct {
	path string
	// writer has a single connection, so that writes are serialised in this
	// process instead of failing with SQLITE_BUSY.
	writer *sql.DB
	// reader is a pool of query-only connections; reads holds the
	// statements of the queries a write or a rebuild makes for each version.
	reader *sql.DB
	reads  *readStmts
	// index answers searches. writeMu makes each write's commit and index
	// update one step, so that the index applies commits in their order.
	index   *searchindex.Index
	writeMu sync.Mutex
	// stmts are the writer's prepared statements, used under writeMu.
	stmts *stmtCache
}

var _ catalog.Store = (*Store)(nil)

// options are the catalog file's settings. mmap_size=0 reads the file
// through SQLite's page cache rather than mapping it: mapped pages count in
// the process's resident memory, and a scan of the entries (the reconciler's
// Tags, index.yaml's Walk) would map the whole file.
var options = sqlitedb.Options{
	DirMode:       0o750,
	Migrations:    migrations,
	Pragmas:       []string{"mmap_size(0)"},
	WriterPragmas: []string{"foreign_keys(1)"},
}

// Open opens the catalog in the SQLite file at path, creating the file and its
// directory when absent and bringing an older schema up to date, and builds
// the search index from it. It fails, naming the file, when the file is not a
// SQLite database, is damaged, or was written by a newer berth.
func Open(ctx context.Context, path string) (*Store, error) {
	writer, reader, err := sqlitedb.Open(ctx, path, options)
	if err != nil {
		return nil, fmt.Errorf("catalog: open %s: %w", path, err)
	}
	s := &Store{path: path, writer: writer, reader: reader, stmts: newStmtCache(), reads: newReadStmts(reader)}
	readers := max(4, 2*runtime.GOMAXPROCS(0))
	s.reader.SetMaxOpenConns(readers)
	s.reader.SetMaxIdleConns(readers)
	if s.index, err = loadIndex(ctx, s.reader); err != nil {
		s.Close()
		return nil, fmt.Errorf("catalog: open %s: search index: %w", path, err)
	}
	return s, nil
}

// Close closes the store's connections. Calls in flight may fail.
func (s *Store) Close() error {
	s.writeMu.Lock()
	errs := []error{s.stmts.close()}
	s.writeMu.Unlock()
	if s.reader != nil {
		errs = append(errs, s.reads.close(), s.reader.Close())
	}
	errs = append(errs, s.writer.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("catalog: close %s: %w", s.path, err)
	}
	return nil
}

// write runs fn in a write transaction, commits it when fn succeeds, and then
// applies to the search index the update fn returned, if any. A transaction
// that fails leaves the index as it was. Concurrent writes wait their turn.
// The queries fn runs are prepared once and kept (writeTx).
func (s *Store) write(ctx context.Context, fn func(*writeTx) (*indexUpdate, error)) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	defer s.stmts.prepare(ctx, s.writer)
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // sql.ErrTxDone after Commit
	upd, err := fn(&writeTx{Tx: tx, stmts: s.stmts})
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if upd != nil {
		upd.apply(s.index)
	}
	return nil
}
