// Package postgres is the catalog's store for several replicas:
// catalog.Store on one PostgreSQL database that every berth serve replica
// shares (docs/scale-out.md), through pgx. Each replica keeps its own
// in-memory search index (catalog/searchindex), built at open and kept
// current by following the packages' revisions that every write stamps,
// woken by LISTEN/NOTIFY and polled as a fallback (follow.go).
//
// The change feed's sequence numbers are global and gapless, and a follower
// never skips one: every write that changes anything takes its numbers from
// one counter row as its last step, and the row's lock keeps its holder's
// numbers invisible to every other writer until it commits, so numbers
// become visible in order (write.go, docs/catalog-store.md).
package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/searchindex"
	"github.com/berth-registry/berth/internal/pgpool"
)

// Options configure a Store.
type Options struct {
	// Logger receives the follower's errors; nil means slog.Default().
	Logger *slog.Logger
	// OnChange, when set, is called after the row of a package changed,
	// through this replica or another: once per revision this replica
	// applies, from the goroutine that applied it. It must not block.
	OnChange func(namespace, name string)
	// Poll is how often the follower reads the revisions when no
	// notification came; 0 means 500 ms.
	Poll time.Duration
	// MaxConns bounds the pool when the URL sets no pool_max_conns; 0
	// means 16.
	MaxConns int32
}

// Store is a catalog.Store in a PostgreSQL database. It is safe for
// concurrent use, by any number of processes.
type Store struct {
	pool     *pgxpool.Pool
	host     string
	log      *slog.Logger
	onChange func(namespace, name string)
	poll     time.Duration

	index *searchindex.Index
	// mu orders the application of documents to the index: revs holds
	// the revision of each package's document in the index, and applied
	// is the revision up to which the follower read every document.
	mu      sync.Mutex
	revs    map[pkgKey]int64
	applied int64

	stop context.CancelFunc
	done chan struct{}
}

type pkgKey struct{ namespace, name string }

var _ catalog.Store = (*Store)(nil)

// lockClass is the first key of the transaction advisory locks of the
// store (two 32-bit keys, a space of their own, apart from coord's 64-bit
// keys): 0 for the schema, a package's hash for its writes.
const lockClass = 0x62657274 // "bert"

// notifyChannel is the channel writes notify with their revision.
const notifyChannel = "berth_catalog"

// Open connects to the database at dsn (postgres://…), brings its schema up
// to date, builds the search index from it and starts following the other
// replicas' writes. Errors name the host, never the password.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	maxConns := opts.MaxConns
	if maxConns <= 0 {
		maxConns = 16
	}
	cfg, err := pgpool.Config(dsn, maxConns)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	s := &Store{
		host:     cfg.ConnConfig.Host,
		log:      opts.Logger,
		onChange: opts.OnChange,
		poll:     opts.Poll,
		index:    searchindex.New(),
		revs:     make(map[pkgKey]int64),
		done:     make(chan struct{}),
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.poll <= 0 {
		s.poll = 500 * time.Millisecond
	}
	if s.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, s.errorf("connect: %w", err)
	}
	if err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return migrate(ctx, tx) }); err != nil {
		s.pool.Close()
		return nil, s.errorf("schema: %w", err)
	}
	if err := s.load(ctx); err != nil {
		s.pool.Close()
		return nil, s.errorf("search index: %w", err)
	}
	followCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stop = stop
	go func() {
		defer close(s.done)
		s.follow(followCtx)
	}()
	return s, nil
}

// errorf names the database's host in an error of Open.
func (s *Store) errorf(format string, args ...any) error {
	return fmt.Errorf("catalog: PostgreSQL at %s: "+format, append([]any{s.host}, args...)...)
}

// Close stops following and closes the connections. Calls in flight may fail.
func (s *Store) Close() error {
	s.stop()
	<-s.done
	s.pool.Close()
	return nil
}

// packageLock is the key of a package's transaction advisory lock.
func packageLock(namespace, name string) int32 {
	h := fnv.New32a()
	h.Write([]byte(namespace))
	h.Write([]byte{0})
	h.Write([]byte(name))
	return int32(h.Sum32())
}
