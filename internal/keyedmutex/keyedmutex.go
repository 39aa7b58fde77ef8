// Package keyedmutex is a set of mutexes by key, created on demand and
// dropped when nobody holds or waits for them.
package keyedmutex

import "sync"

// Mutex is a set of mutexes by key, created on demand and dropped when
// nobody holds or waits for them. The zero value is ready to use.
type Mutex struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	sync.Mutex
	refs int
}

// Lock locks key and returns the function that unlocks it.
func (k *Mutex) Lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyedLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyedLock{}
		k.locks[key] = l
	}
	l.refs++
	k.mu.Unlock()

	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}
