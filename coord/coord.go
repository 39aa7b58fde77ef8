// Package coord is how berth's replicas coordinate: named locks that every
// replica honours, and a leadership that exactly one replica holds at a time.
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
	// them all.
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

// Local coordinates the goroutines of one process: its locks are mutexes,
// and it is always the leader. The zero value is ready to use.
type Local struct {
	mu     sync.Mutex
	locks  map[string]*localLock
	leader bool
}

var (
	_ Locks   = (*Local)(nil)
	_ Elector = (*Local)(nil)
)

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
