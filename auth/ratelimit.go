package auth

import (
	"sync"
	"time"
)

// loginLimiterSize bounds how many (client address, user name) pairs the
// login limiter follows.
const loginLimiterSize = 10000

// loginLimiter counts failed logins per key (client address and user name)
// and refuses a key that failed max times within window, until the window
// that began with its first failure ends.
type loginLimiter struct {
	max    int
	window time.Duration
	size   int

	mu       sync.Mutex
	failures map[string]failures
}

type failures struct {
	since time.Time
	n     int
}

func newLoginLimiter(max int, window time.Duration) *loginLimiter {
	return &loginLimiter{max: max, window: window, size: loginLimiterSize, failures: map[string]failures{}}
}

// retryAfter is how long key must wait before it may try again; 0 when it
// may try now.
func (l *loginLimiter) retryAfter(key string, now time.Time) time.Duration {
	if l.max <= 0 {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	f, ok := l.failures[key]
	if !ok || f.n < l.max {
		return 0
	}
	if wait := f.since.Add(l.window).Sub(now); wait > 0 {
		return wait
	}
	delete(l.failures, key)
	return 0
}

// fail counts a failed login of key.
func (l *loginLimiter) fail(key string, now time.Time) {
	if l.max <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	f, ok := l.failures[key]
	if !ok || !now.Before(f.since.Add(l.window)) {
		if !ok && len(l.failures) >= l.size {
			l.makeRoom(now)
		}
		f = failures{since: now}
	}
	f.n++
	l.failures[key] = f
}

// succeed forgets key's failures.
func (l *loginLimiter) succeed(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.failures, key)
}

// makeRoom drops the expired entries, or, when none expired, the oldest.
func (l *loginLimiter) makeRoom(now time.Time) {
	var oldest string
	var oldestSince time.Time
	for k, f := range l.failures {
		if !now.Before(f.since.Add(l.window)) {
			delete(l.failures, k)
		} else if oldest == "" || f.since.Before(oldestSince) {
			oldest, oldestSince = k, f.since
		}
	}
	if len(l.failures) >= l.size {
		delete(l.failures, oldest)
	}
}
