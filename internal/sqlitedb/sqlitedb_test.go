package sqlitedb_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/internal/sqlitedb"
)

func TestOpenMigrates(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "d", "x.db")
	opts := sqlitedb.Options{DirMode: 0o700, FileMode: 0o600, Migrations: []string{`CREATE TABLE a (x)`}}
	w, r, err := sqlitedb.Open(ctx, file, opts)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file: %v, %v; want mode 0600", fi, err)
	}
	if fi, err := os.Stat(filepath.Dir(file)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("directory: %v, %v; want mode 0700", fi, err)
	}
	if _, err := r.ExecContext(ctx, `INSERT INTO a VALUES (1)`); err == nil {
		t.Error("the reader wrote")
	}
	w.Close()
	r.Close()

	opts.Migrations = append(opts.Migrations, `CREATE TABLE b (y)`)
	if w, r, err = sqlitedb.Open(ctx, file, opts); err != nil {
		t.Fatal(err)
	}
	var version, tables int
	if err := r.QueryRowContext(ctx, `SELECT (SELECT user_version FROM pragma_user_version),
	(SELECT count(*) FROM sqlite_schema WHERE name IN ('a', 'b'))`).Scan(&version, &tables); err != nil || version != 2 || tables != 2 {
		t.Errorf("after the second step: version %d, %d tables, %v; want 2, 2", version, tables, err)
	}
	w.Close()
	r.Close()

	if _, _, err := sqlitedb.Open(ctx, file, sqlitedb.Options{DirMode: 0o700, Migrations: opts.Migrations[:1]}); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("Open of a newer schema: %v", err)
	}
}

func TestTime(t *testing.T) {
	if n := sqlitedb.EncodeTime(time.Time{}); n != 0 || !sqlitedb.DecodeTime(n).IsZero() {
		t.Errorf("zero time: %d", n)
	}
	now := time.Now()
	if got := sqlitedb.DecodeTime(sqlitedb.EncodeTime(now)); !got.Equal(now) || got.Location() != time.UTC {
		t.Errorf("round trip of %v: %v", now, got)
	}
}
