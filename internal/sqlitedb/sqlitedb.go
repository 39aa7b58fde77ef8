// Package sqlitedb is the SQLite plumbing berth's embedded stores share (the
// catalog's, catalog/sqlite, and the robots', auth/robotdb): opening a file on
// the pure-Go driver modernc.org/sqlite in WAL mode as one writer connection
// and a pool of query-only readers, versioning its schema with PRAGMA
// user_version, and storing times as integers.
package sqlitedb

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// BusyTimeoutMillis is how long a connection waits for a lock another process
// holds (a backup tool, the sqlite3 shell) before failing with SQLITE_BUSY.
const BusyTimeoutMillis = 10000

// Options are what a store sets for its file.
type Options struct {
	// DirMode is the mode of the directories Open creates.
	DirMode os.FileMode
	// FileMode, when not 0, is set on the file once Open has created it.
	FileMode os.FileMode
	// Migrations are the schema's steps: step i takes the file from
	// user_version i to i+1. Steps are only ever appended.
	Migrations []string
	// Pragmas are added to every connection's, after busy_timeout and
	// synchronous; WriterPragmas to the writer's only, after journal_mode.
	Pragmas, WriterPragmas []string
}

// Open opens the SQLite file at path, creating it and its directory when
// absent and bringing an older schema up to date (see Options.Migrations). The
// writer has one connection, so that writes are serialised in this process
// instead of failing with SQLITE_BUSY, and begins its transactions IMMEDIATE;
// the reader is a pool of query-only connections that see the last committed
// state (WAL). The caller closes both. Errors do not name the file.
func Open(ctx context.Context, path string, opts Options) (writer, reader *sql.DB, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(filepath.Dir(abs), opts.DirMode); err != nil {
		return nil, nil, err
	}
	if writer, err = sql.Open("sqlite", DSN(abs, false, opts)); err != nil {
		return nil, nil, err
	}
	writer.SetMaxOpenConns(1)
	if err := migrate(ctx, writer, opts.Migrations); err != nil {
		writer.Close()
		return nil, nil, err
	}
	if opts.FileMode != 0 {
		if err := os.Chmod(abs, opts.FileMode); err != nil {
			writer.Close()
			return nil, nil, err
		}
	}
	if reader, err = sql.Open("sqlite", DSN(abs, true, opts)); err != nil {
		writer.Close()
		return nil, nil, err
	}
	return writer, reader, nil
}

// DSN is the modernc.org/sqlite data source name of the file at path, for the
// writer or, when readOnly, a reader. synchronous=NORMAL in WAL mode syncs the
// WAL at every checkpoint rather than at every commit: a committed
// transaction survives the process being killed (it is in the WAL, in the OS
// page cache), and only a power loss or kernel crash can lose the last
// commits, never corrupt the file.
func DSN(path string, readOnly bool, opts Options) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeoutMillis))
	q.Add("_pragma", "synchronous(NORMAL)")
	for _, p := range opts.Pragmas {
		q.Add("_pragma", p)
	}
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		for _, p := range opts.WriterPragmas {
			q.Add("_pragma", p)
		}
		q.Set("_txlock", "immediate")
	}
	u := url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}
	return u.String()
}

// migrate applies the steps of migrations db lacks, in one transaction. A
// file written by a newer berth (a user_version beyond the known steps) is
// refused rather than guessed at.
func migrate(ctx context.Context, db *sql.DB, migrations []string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // sql.ErrTxDone after Commit
	var version int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return err
	}
	if version > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this berth knows (%d)", version, len(migrations))
	}
	for i := version; i < len(migrations); i++ {
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			return fmt.Errorf("schema step %d: %w", i+1, err)
		}
	}
	if version < len(migrations) {
		// PRAGMA takes no parameters; the value is a constant of this program.
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, len(migrations))); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// EncodeTime is t as stored: Unix nanoseconds, 0 for the zero time.
func EncodeTime(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// DecodeTime reverses EncodeTime, in UTC.
func DecodeTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
