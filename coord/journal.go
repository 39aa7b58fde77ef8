package coord

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Journals record what the replicas write while a reader keeps a journal
// open: a garbage collection's sweep reads the manifests and blobs that
// writes made live since its mark began, instead of reading the whole
// storage again. Local keeps them in the process, Postgres in tables that
// every replica writes.
type Journals interface {
	// OpenJournal starts a journal of what Record records, in any replica,
	// from the moment it returns.
	OpenJournal(ctx context.Context) (Journal, error)
	// Record adds entries to every open journal; with none open it keeps
	// nothing. A write records itself once it is stored: a journal opened
	// before Record returns has the entries, and a reader that opens one
	// after it finds the write in the storage.
	Record(ctx context.Context, entries ...string) error
}

// Journal is one open journal.
type Journal interface {
	// Entries returns, each once, what was recorded since it opened. It
	// fails when the journal is no longer kept (closed, or older than
	// JournalMaxAge on PostgreSQL), since entries may then be missing.
	Entries(ctx context.Context) ([]string, error)
	// Close stops the journal and forgets its entries.
	Close(ctx context.Context) error
}

// JournalMaxAge is how long a journal is kept on PostgreSQL: one left open
// by a replica that died is dropped by the next OpenJournal after this long,
// and a reader that keeps one open longer finds its Entries refused.
const JournalMaxAge = 24 * time.Hour

// errJournalGone is the error of a journal no longer kept.
var errJournalGone = errors.New("coord: the journal is no longer kept (closed, or open longer than JournalMaxAge)")

var (
	_ Journals = (*Local)(nil)
	_ Journals = (*Postgres)(nil)
)

// localJournal is a journal of Local.
type localJournal struct {
	l       *Local
	entries map[string]struct{}
}

// OpenJournal starts a journal of this process's records.
func (l *Local) OpenJournal(context.Context) (Journal, error) {
	j := &localJournal{l: l, entries: map[string]struct{}{}}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.journals == nil {
		l.journals = map[*localJournal]struct{}{}
	}
	l.journals[j] = struct{}{}
	return j, nil
}

// Record adds entries to the process's open journals.
func (l *Local) Record(_ context.Context, entries ...string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for j := range l.journals {
		for _, e := range entries {
			j.entries[e] = struct{}{}
		}
	}
	return nil
}

func (j *localJournal) Entries(context.Context) ([]string, error) {
	j.l.mu.Lock()
	defer j.l.mu.Unlock()
	if _, ok := j.l.journals[j]; !ok {
		return nil, errJournalGone
	}
	out := make([]string, 0, len(j.entries))
	for e := range j.entries {
		out = append(out, e)
	}
	return out, nil
}

func (j *localJournal) Close(context.Context) error {
	j.l.mu.Lock()
	defer j.l.mu.Unlock()
	delete(j.l.journals, j)
	return nil
}

// journalSchemaLock serialises the creation of the journal tables among
// replicas starting together.
const journalSchemaLock = int64(0x626572746a726e6c) // "berthjrnl"

// journalSchema is the open journals and their entries.
const journalSchema = `CREATE TABLE IF NOT EXISTS berth_journals (
	id     bigserial PRIMARY KEY,
	opened timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS berth_journal_entries (
	journal bigint NOT NULL REFERENCES berth_journals (id) ON DELETE CASCADE,
	entry   text NOT NULL
);
CREATE INDEX IF NOT EXISTS berth_journal_entries_journal ON berth_journal_entries (journal)`

// postgresJournal is a journal of Postgres: a row of berth_journals.
type postgresJournal struct {
	p  *Postgres
	id int64
}

// OpenJournal starts a journal every replica's Record writes to, and drops
// the journals older than JournalMaxAge.
func (p *Postgres) OpenJournal(ctx context.Context) (Journal, error) {
	if _, err := p.pool.Exec(ctx, `DELETE FROM berth_journals WHERE opened < now() - make_interval(secs => $1)`, JournalMaxAge.Seconds()); err != nil {
		return nil, fmt.Errorf("coord: open a journal: %w", err)
	}
	j := &postgresJournal{p: p}
	if err := p.pool.QueryRow(ctx, `INSERT INTO berth_journals DEFAULT VALUES RETURNING id`).Scan(&j.id); err != nil {
		return nil, fmt.Errorf("coord: open a journal: %w", err)
	}
	return j, nil
}

// Record adds entries to every open journal, in one statement.
func (p *Postgres) Record(ctx context.Context, entries ...string) error {
	if _, err := p.pool.Exec(ctx, `INSERT INTO berth_journal_entries (journal, entry)
SELECT j.id, e FROM berth_journals j, unnest($1::text[]) AS e`, entries); err != nil {
		return fmt.Errorf("coord: record %d journal entries: %w", len(entries), err)
	}
	return nil
}

func (j *postgresJournal) Entries(ctx context.Context) ([]string, error) {
	var kept bool
	if err := j.p.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM berth_journals WHERE id = $1)`, j.id).Scan(&kept); err != nil {
		return nil, fmt.Errorf("coord: read journal %d: %w", j.id, err)
	}
	if !kept {
		return nil, errJournalGone
	}
	rows, err := j.p.pool.Query(ctx, `SELECT DISTINCT entry FROM berth_journal_entries WHERE journal = $1`, j.id)
	if err != nil {
		return nil, fmt.Errorf("coord: read journal %d: %w", j.id, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("coord: read journal %d: %w", j.id, err)
	}
	return out, nil
}

func (j *postgresJournal) Close(ctx context.Context) error {
	if _, err := j.p.pool.Exec(ctx, `DELETE FROM berth_journals WHERE id = $1`, j.id); err != nil {
		return fmt.Errorf("coord: close journal %d: %w", j.id, err)
	}
	return nil
}
