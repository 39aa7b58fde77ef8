// Package coord is how berth's replicas coordinate: named locks that every
// replica honours, a leadership that exactly one replica holds at a time,
// and journals of what every replica wrote while a reader kept one open.
// One process alone uses Local; replicas that share a PostgreSQL database use
// Postgres, whose locks are the database's advisory locks, so that scaling out
// brings no component of its own (docs/scale-out.md).
package coord

import (
	"context"
	"slices"
	"sync"
)

// Locks are named reader/writer locks. Lock keys are free-form strings;
// writers that must exclude each other use the same key.
type Locks interface {
	// Lock takes key exclusively and returns the function that releases
	// it. It fails only when ctx ends or the lock cannot be asked for.
	Lock(ctx context.Context, key string) (unlock func(), err error)
	// RLock takes every key shared, in one order for every caller so that
	// two callers cannot deadlock, and returns the function that releases
	// them all. Its caller may hold exclusive locks, but must take no other
	// lock until it releases these.
	RLock(ctx context.Context, keys ...string) (unlock func(), err error)
}

// Elector hands out leadership: the right to run work that only one replica
// may run at a time (the catalog's reconciler, signature passes, garbage
// collection, the OLM catalog publisher).
type Elector interface {
	// Lead calls fn each time this process becomes the leader, with a
	// context that ends when it stops being the leader, and returns when
	// ctx ends. fn must return when its context ends.
	Lead(ctx context.Context, fn func(ctx context.Context))
	// Leader reports whether this process leads now.
	Leader() bool
}

// Signals wake the replicas: a Notify of a topic reaches every channel
// Subscribe returned for that topic, in every replica, this one included.
// Wake-ups coalesce, and one may be lost (a replica reconnecting to the
// database misses what was sent meanwhile): what they trigger must also
// happen on a timer.
type Signals interface {
	// Notify wakes the subscribers of topic.
	Notify(ctx context.Context, topic string) error
	// Subscribe returns a channel that receives after each Notify of topic
	// (several close together may come as one).
	Subscribe(topic string) <-chan struct{}
}

// subscribers are the channels of each topic.
type subscribers struct {
	mu   sync.Mutex
	subs map[string][]chan struct{}
}

func (s *subscribers) Subscribe(topic string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subs == nil {
		s.subs = map[string][]chan struct{}{}
	}
	ch := make(chan struct{}, 1)
	s.subs[topic] = append(s.subs[topic], ch)
	return ch
}

// wake wakes the subscribers of topic without blocking.
func (s *subscribers) wake(topic string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range s.subs[topic] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Local coordinates the goroutines of one process: its locks are mutexes,
// it is always the leader, and its signals and journals stay in the
// process. The zero
// value is ready to use.
type Local struct {
	subscribers
	mu     sync.Mutex
	locks  map[string]*localLock
	leader bool
	// journals are the open journals (journal.go).
	journals map[*localJournal]struct{}
}

var (
	_ Locks   = (*Local)(nil)
	_ Elector = (*Local)(nil)
	_ Signals = (*Local)(nil)
)

// Notify wakes the subscribers of topic in this process.
func (l *Local) Notify(_ context.Context, topic string) error {
	l.wake(topic)
	return nil
}

type localLock struct {
	sync.RWMutex
	refs int
}

// Lock takes key exclusively.
func (l *Local) Lock(ctx context.Context, key string) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k := l.ref(key)
	k.Lock()
	return func() {
		k.Unlock()
		l.unref(key, k)
	}, nil
}

// RLock takes every key shared, in sorted order.
func (l *Local) RLock(ctx context.Context, keys ...string) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	keys = sortedUnique(keys)
	held := make([]*localLock, len(keys))
	for i, key := range keys {
		held[i] = l.ref(key)
		held[i].RLock()
	}
	return func() {
		for i, k := range held {
			k.RUnlock()
			l.unref(keys[i], k)
		}
	}, nil
}

func (l *Local) ref(key string) *localLock {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.locks == nil {
		l.locks = map[string]*localLock{}
	}
	k := l.locks[key]
	if k == nil {
		k = &localLock{}
		l.locks[key] = k
	}
	k.refs++
	return k
}

func (l *Local) unref(key string, k *localLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k.refs--
	if k.refs == 0 {
		delete(l.locks, key)
	}
}

// Lead calls fn once: one process alone is always the leader.
func (l *Local) Lead(ctx context.Context, fn func(ctx context.Context)) {
	l.mu.Lock()
	l.leader = true
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.leader = false
		l.mu.Unlock()
	}()
	fn(ctx)
}

// Leader reports whether Lead is running fn.
func (l *Local) Leader() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leader
}

func sortedUnique(keys []string) []string {
	keys = slices.Clone(keys)
	slices.Sort(keys)
	return slices.Compact(keys)
}
