package coord_test

import (
	"context"
	"slices"
	"testing"

	"github.com/berth-registry/berth/coord"
	"github.com/berth-registry/berth/internal/pgtest"
)

// testJournals records through writer and reads through reader, two
// replicas (or one process twice): a journal has, each once, what was
// recorded while it was open, and nothing from before it opened or after
// it closed.
func testJournals(t *testing.T, writer, reader coord.Journals) {
	t.Helper()
	ctx := context.Background()
	if err := writer.Record(ctx, "before"); err != nil {
		t.Fatal(err)
	}
	j, err := reader.OpenJournal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other, err := reader.OpenJournal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range [][]string{{"a", "b"}, {"a"}, {"c"}} {
		if err := writer.Record(ctx, e...); err != nil {
			t.Fatal(err)
		}
	}
	for _, j := range []coord.Journal{j, other} {
		got, err := j.Entries(ctx)
		slices.Sort(got)
		if err != nil || !slices.Equal(got, []string{"a", "b", "c"}) {
			t.Errorf("entries = %q, %v; want a, b, c", got, err)
		}
	}
	if err := j.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := j.Entries(ctx); err == nil {
		t.Errorf("a closed journal read %q", got)
	}
	if err := writer.Record(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if got, err := other.Entries(ctx); err != nil || len(got) != 4 {
		t.Errorf("the journal left open: %q, %v; want a, b, c, d", got, err)
	}
	if err := other.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := writer.Record(ctx, "after"); err != nil {
		t.Errorf("record with no journal open: %v", err)
	}
}

func TestLocalJournals(t *testing.T) {
	l := &coord.Local{}
	testJournals(t, l, l)
}

func TestPostgresJournals(t *testing.T) {
	dsn := pgtest.Database(t)
	testJournals(t, openPostgres(t, dsn), openPostgres(t, dsn))
}
