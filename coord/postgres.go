package coord

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/berth-registry/berth/internal/pgpool"
)

// Postgres coordinates the replicas that share one PostgreSQL database
// through its session advisory locks: a lock is held by a connection of this
// process, so it goes when the process dies and the database closes its
// session. Its journals are rows of the tables berth_journals and
// berth_journal_entries, which it creates. It is safe for concurrent use.
type Postgres struct {
	subscribers
	pool *pgxpool.Pool
	// shared holds the shared locks (RLock), apart from pool: their holders
	// take no other lock while they hold one (the writes under the garbage
	// collection's lock), so they always give their connections back, and a
	// holder of an exclusive lock who asks for a shared one (a push by tag:
	// its tag's lock, then the collection's) never waits for a connection
	// that only another such caller could give back.
	shared *pgxpool.Pool
	log    *slog.Logger
	leader atomic.Bool
	stop   context.CancelFunc
	done   chan struct{}
	wg     sync.WaitGroup

	mu sync.Mutex
	// term is the context of the current term, nil when this process
	// does not lead; changed is closed when it changes.
	term    context.Context
	changed chan struct{}
	// retry is how often a replica that does not lead asks again, and how
	// often the leader checks that its connection still holds the lock.
	retry time.Duration
}

var (
	_ Locks   = (*Postgres)(nil)
	_ Elector = (*Postgres)(nil)
	_ Signals = (*Postgres)(nil)
)

// signalChannel is the PostgreSQL notification channel of Signals; the
// payload is the topic.
const signalChannel = "berth_coord"

// defaultMaxConns is the size of each pool (exclusive locks, leadership and
// signals; shared locks) when the URL sets no pool_max_conns: every lock
// held (a push by tag in flight holds one of each) holds a connection.
const defaultMaxConns = 32

// leaderKey is the advisory lock of the leadership.
var leaderKey = lockID("berth/leader")

// OpenPostgres connects to the database at dsn (postgres://…) and starts
// competing for the leadership. The URL may set pgx's pool parameters
// (pool_max_conns); errors name the host, never the password.
func OpenPostgres(ctx context.Context, dsn string, log *slog.Logger) (*Postgres, error) {
	var pools [2]*pgxpool.Pool
	for i := range pools {
		cfg, err := pgpool.Config(dsn, defaultMaxConns)
		if err != nil {
			return nil, fmt.Errorf("coord: %w", err)
		}
		if pools[i], err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
			if i > 0 {
				pools[0].Close()
			}
			return nil, fmt.Errorf("coord: connect to PostgreSQL at %s: %w", cfg.ConnConfig.Host, err)
		}
	}
	pool := pools[0]
	if err := pgpool.CreateSchema(ctx, pool, journalSchemaLock, journalSchema, nil); err != nil {
		pool.Close()
		pools[1].Close()
		return nil, fmt.Errorf("coord: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	campaignCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	p := &Postgres{pool: pool, shared: pools[1], log: log, retry: time.Second, stop: stop, done: make(chan struct{}), changed: make(chan struct{})}
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		p.campaign(campaignCtx)
	}()
	go func() {
		defer p.wg.Done()
		p.listen(campaignCtx)
	}()
	go func() {
		p.wg.Wait()
		close(p.done)
	}()
	return p, nil
}

// Notify wakes the subscribers of topic in every replica.
func (p *Postgres) Notify(ctx context.Context, topic string) error {
	if _, err := p.pool.Exec(ctx, "SELECT pg_notify($1, $2)", signalChannel, topic); err != nil {
		return fmt.Errorf("coord: notify %s: %w", topic, err)
	}
	return nil
}

// listen passes the notifications of every replica to this one's
// subscribers, on a connection of its own, connecting again after a
// failure, until ctx ends.
func (p *Postgres) listen(ctx context.Context) {
	pgpool.Listen(ctx, p.pool, signalChannel, p.retry, func(err error) {
		p.log.Warn("coord: listening for other replicas' signals", "err", err)
	}, p.wake)
}

// Close steps down and closes the connections, which releases every lock
// they hold.
func (p *Postgres) Close() {
	p.stop()
	<-p.done
	p.pool.Close()
	p.shared.Close()
}

// Ready reports whether the database answers within timeout.
func (p *Postgres) Ready(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := p.pool.Ping(ctx); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	return nil
}

// Lock takes key's advisory lock exclusively, waiting for its holders.
func (p *Postgres) Lock(ctx context.Context, key string) (func(), error) {
	return p.hold(ctx, p.pool, "SELECT pg_advisory_lock($1)", "SELECT pg_advisory_unlock($1)", lockID(key))
}

// RLock takes the advisory locks of keys shared, in ascending lock number, on
// a connection of the shared locks' own pool: its caller must take no other
// lock while it holds them.
func (p *Postgres) RLock(ctx context.Context, keys ...string) (func(), error) {
	ids := make([]int64, 0, len(keys))
	for _, k := range sortedUnique(keys) {
		ids = append(ids, lockID(k))
	}
	return p.hold(ctx, p.shared,
		"SELECT count(pg_advisory_lock_shared(id)) FROM (SELECT unnest($1::bigint[]) AS id ORDER BY 1) AS ids",
		"SELECT count(pg_advisory_unlock_shared(id)) FROM unnest($1::bigint[]) AS id", ids)
}

// hold runs lock on a connection of pool it keeps until the returned
// function runs unlock. A connection that cannot unlock is closed, which
// releases its locks.
func (p *Postgres) hold(ctx context.Context, pool *pgxpool.Pool, lock, unlock string, arg any) (func(), error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("coord: lock: %w", err)
	}
	if _, err := conn.Exec(ctx, lock, arg); err != nil {
		// A wait cancelled by ctx leaves the session's locks unknown.
		conn.Conn().Close(context.Background())
		conn.Release()
		return nil, fmt.Errorf("coord: lock: %w", err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx, unlock, arg); err != nil {
			p.log.Warn("coord: unlock failed; closing the connection, which releases it", "err", err)
			conn.Conn().Close(ctx)
		}
		conn.Release()
	}, nil
}

// Lead calls fn at the start of each term this process leads, with a
// context that ends with the term or with ctx, until ctx ends. Any number of callers
// share the process's one claim on the leadership (campaign).
func (p *Postgres) Lead(ctx context.Context, fn func(ctx context.Context)) {
	for {
		p.mu.Lock()
		term, changed := p.term, p.changed
		p.mu.Unlock()
		if term != nil && term.Err() == nil {
			// fn's context ends with the term, or with ctx.
			run, cancel := context.WithCancel(term)
			stop := context.AfterFunc(ctx, cancel)
			fn(run)
			stop()
			cancel()
			if ctx.Err() != nil {
				return
			}
			<-term.Done()
			continue
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// setTerm records the start (a context) or end (nil) of a term and wakes
// the callers of Lead.
func (p *Postgres) setTerm(term context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.term = term
	p.leader.Store(term != nil)
	close(p.changed)
	p.changed = make(chan struct{})
}

// campaign competes for the leadership every retry interval until ctx
// ends. The leader keeps one connection holding the leadership's advisory
// lock and checks it every interval; when the check fails (the database
// restarted, the network went) the term ends and the connection is closed,
// so that the lock is free for another replica. When the leader dies, the
// database ends its session and another replica leads within one retry
// interval.
func (p *Postgres) campaign(ctx context.Context) {
	for ctx.Err() == nil {
		if p.serveTerm(ctx) {
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(p.retry):
		}
	}
}

// serveTerm leads for as long as it holds the leadership's lock, if it can
// take it, and reports whether it did.
func (p *Postgres) serveTerm(ctx context.Context) bool {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("coord: cannot reach the database to compete for leadership", "err", err)
		}
		return false
	}
	var got bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", leaderKey).Scan(&got); err != nil || !got {
		if err != nil {
			conn.Conn().Close(context.Background())
		}
		conn.Release()
		return false
	}
	p.log.Info("coord: this replica leads")
	term, end := context.WithCancel(ctx)
	p.setTerm(term)
	t := time.NewTicker(p.retry)
	defer t.Stop()
	for term.Err() == nil {
		select {
		case <-term.Done():
		case <-t.C:
			check, cancel := context.WithTimeout(ctx, 2*p.retry)
			_, err := conn.Exec(check, "SELECT 1")
			cancel()
			if err != nil && ctx.Err() == nil {
				p.log.Error("coord: lost the database connection that holds the leadership; stepping down", "err", err)
				end()
			}
		}
	}
	end()
	p.setTerm(nil)
	// Closing the session releases the lock, whatever state it is in.
	conn.Conn().Close(context.Background())
	conn.Release()
	if ctx.Err() == nil {
		p.log.Info("coord: this replica no longer leads")
	}
	return true
}

// Leader reports whether this process leads now.
func (p *Postgres) Leader() bool { return p.leader.Load() }

// lockID is the advisory lock number of key.
func lockID(key string) int64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return int64(h.Sum64())
}
