package coord_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/berth-registry/berth/coord"
	"github.com/berth-registry/berth/internal/pgtest"
)

// BenchmarkRLock measures what every write that makes content live pays
// for the garbage collection's lock (docs/gc.md): one shared lock taken
// and released, in the process (Local) and as a PostgreSQL advisory lock
// (Postgres: a pooled connection held, two round trips), one writer at a
// time and GOMAXPROCS at once.
func BenchmarkRLock(b *testing.B) {
	p, err := coord.OpenPostgres(context.Background(), pgtest.Database(b), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Close)
	ctx := context.Background()
	rlock := func(b *testing.B, l coord.Locks) {
		unlock, err := l.RLock(ctx, "gc")
		if err != nil {
			b.Fatal(err)
		}
		unlock()
	}
	for name, l := range map[string]coord.Locks{"local": &coord.Local{}, "postgres": p} {
		b.Run(name+"/serial", func(b *testing.B) {
			for b.Loop() {
				rlock(b, l)
			}
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					rlock(b, l)
				}
			})
		})
	}
}

// BenchmarkRecord measures what every write that makes content live pays
// for the garbage collection's journal (docs/gc.md): one entry recorded,
// with no journal open (no collection runs) and with one open, in the
// process (Local) and in PostgreSQL (Postgres: one INSERT … SELECT).
func BenchmarkRecord(b *testing.B) {
	p, err := coord.OpenPostgres(context.Background(), pgtest.Database(b), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Close)
	ctx := context.Background()
	for name, j := range map[string]coord.Journals{"local": &coord.Local{}, "postgres": p} {
		for _, open := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/open=%t", name, open), func(b *testing.B) {
				if open {
					journal, err := j.OpenJournal(ctx)
					if err != nil {
						b.Fatal(err)
					}
					defer journal.Close(ctx)
				}
				for b.Loop() {
					if err := j.Record(ctx, "manifest bench/app@sha256:0123"); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
