package auth

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// passwordCacheTTL is how long a successful password check is remembered,
// so that bcrypt does not run on every request.
const passwordCacheTTL = time.Minute

// passwordCacheSize bounds the remembered checks.
const passwordCacheSize = 4096

// htpasswdStatInterval is how often the htpasswd file is looked at for
// changes.
const htpasswdStatInterval = 5 * time.Second

// htpasswd is the users of an htpasswd file with bcrypt hashes. It checks
// passwords in constant time (an unknown user costs a bcrypt comparison
// too), remembers successful checks for a minute, and reloads the file
// when it changes.
type htpasswd struct {
	file string
	// compare is bcrypt.CompareHashAndPassword; tests count its calls.
	compare func(hash, password []byte) error
	// statEvery is htpasswdStatInterval; tests shorten it.
	statEvery time.Duration
	// cacheKey keys the cache of successful checks: an HMAC of user and
	// password under a key of this process, so the cache holds no password.
	cacheKey []byte

	mu    sync.RWMutex
	users map[string][]byte
	// dummy is a hash unknown users are checked against, of the highest
	// cost in the file.
	dummy []byte
	// gen counts loads; a remembered check is good for its load only.
	gen     uint64
	modTime time.Time
	size    int64

	nextStat atomic.Int64

	cacheMu sync.Mutex
	cache   map[[sha256.Size]byte]cachedCheck
	// running are the bcrypt comparisons under way, by cache key: a check
	// of the same user and password meanwhile waits for its answer instead
	// of running bcrypt again (when the cache expires, a client with eight
	// requests in flight logs in eight times at once). Under cacheMu.
	running map[[sha256.Size]byte]*runningCheck
}

type cachedCheck struct {
	gen     uint64
	expires time.Time
}

// runningCheck is a bcrypt comparison under way for a load of the file
// (gen); ok is its answer once done is closed.
type runningCheck struct {
	gen  uint64
	done chan struct{}
	ok   bool
}

// newHtpasswd loads file; file "" is no users at all.
func newHtpasswd(file string) (*htpasswd, error) {
	h := &htpasswd{
		file:      file,
		compare:   bcrypt.CompareHashAndPassword,
		statEvery: htpasswdStatInterval,
		cacheKey:  make([]byte, 32),
		cache:     map[[sha256.Size]byte]cachedCheck{},
		running:   map[[sha256.Size]byte]*runningCheck{},
	}
	if _, err := rand.Read(h.cacheKey); err != nil {
		return nil, err
	}
	if file == "" {
		return h, h.set(map[string][]byte{}, bcrypt.DefaultCost, time.Time{}, 0)
	}
	fi, err := os.Stat(file)
	if err != nil {
		return nil, err
	}
	users, cost, err := readHtpasswd(file)
	if err != nil {
		return nil, err
	}
	return h, h.set(users, cost, fi.ModTime(), fi.Size())
}

// set installs users, with a dummy hash of cost.
func (h *htpasswd) set(users map[string][]byte, cost int, modTime time.Time, size int64) error {
	dummy, err := bcrypt.GenerateFromPassword([]byte(rand.Text()), cost)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.users, h.dummy, h.modTime, h.size = users, dummy, modTime, size
	h.gen++
	return nil
}

// readHtpasswd parses file: lines of user:bcrypt-hash; blank lines and lines
// starting with # are skipped. It returns the users and the highest cost
// of their hashes.
func readHtpasswd(file string) (map[string][]byte, int, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, 0, err
	}
	users := map[string][]byte{}
	maxCost := bcrypt.MinCost
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		user, hash, err := parseHtpasswdLine(line)
		if err != nil {
			return nil, 0, fmt.Errorf("%s line %d: %w", file, n, err)
		}
		if _, dup := users[user]; dup {
			return nil, 0, fmt.Errorf("%s line %d: user %q is listed twice", file, n, user)
		}
		cost, _ := bcrypt.Cost(hash)
		maxCost = max(maxCost, cost)
		users[user] = hash
	}
	if err := sc.Err(); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", file, err)
	}
	return users, maxCost, nil
}

func parseHtpasswdLine(line string) (string, []byte, error) {
	user, hash, ok := strings.Cut(line, ":")
	switch {
	case !ok:
		return "", nil, fmt.Errorf("want user:hash")
	case user == "" || strings.TrimSpace(user) != user:
		return "", nil, fmt.Errorf("want a user name without surrounding spaces before the colon")
	case strings.HasPrefix(user, RobotUserPrefix):
		return "", nil, fmt.Errorf("user %q: names starting with %q are robot accounts", user, RobotUserPrefix)
	}
	if !strings.HasPrefix(hash, "$2y$") && !strings.HasPrefix(hash, "$2a$") && !strings.HasPrefix(hash, "$2b$") {
		return "", nil, fmt.Errorf("user %q: the hash is not bcrypt ($2y$, $2a$ or $2b$); create it with htpasswd -B", user)
	}
	if _, err := bcrypt.Cost([]byte(hash)); err != nil {
		return "", nil, fmt.Errorf("user %q: malformed bcrypt hash: %w", user, err)
	}
	return user, []byte(hash), nil
}

// check reports whether password is user's. Every check that the cache
// does not answer runs one bcrypt comparison, for unknown users too, or
// waits for the answer of the same check running at the same time.
func (h *htpasswd) check(user, password string, now time.Time) bool {
	h.reloadIfChanged(now)
	mac := hmac.New(sha256.New, h.cacheKey)
	mac.Write([]byte(user))
	mac.Write([]byte{0})
	mac.Write([]byte(password))
	var key [sha256.Size]byte
	mac.Sum(key[:0])

	h.mu.RLock()
	hash, known := h.users[user]
	if !known {
		hash = h.dummy
	}
	gen := h.gen
	h.mu.RUnlock()

	h.cacheMu.Lock()
	c, hit := h.cache[key]
	if hit && c.gen == gen && now.Before(c.expires) {
		h.cacheMu.Unlock()
		return true
	}
	if r, ok := h.running[key]; ok && r.gen == gen {
		h.cacheMu.Unlock()
		<-r.done
		return r.ok
	}
	r := &runningCheck{gen: gen, done: make(chan struct{})}
	h.running[key] = r
	h.cacheMu.Unlock()
	defer func() {
		h.cacheMu.Lock()
		if h.running[key] == r {
			delete(h.running, key)
		}
		h.cacheMu.Unlock()
		close(r.done)
	}()
	if h.compare(hash, []byte(password)) != nil || !known {
		return false
	}
	h.remember(key, cachedCheck{gen: gen, expires: now.Add(passwordCacheTTL)}, now)
	r.ok = true
	return true
}

// remember caches a successful check; a full cache first drops what
// expired, and everything when nothing did.
func (h *htpasswd) remember(key [sha256.Size]byte, c cachedCheck, now time.Time) {
	h.cacheMu.Lock()
	defer h.cacheMu.Unlock()
	if len(h.cache) >= passwordCacheSize {
		for k, old := range h.cache {
			if !now.Before(old.expires) {
				delete(h.cache, k)
			}
		}
		if len(h.cache) >= passwordCacheSize {
			clear(h.cache)
		}
	}
	h.cache[key] = c
}

// hashOf returns the user's password hash as the file holds it now; ok is
// false when the user is not in the file.
func (h *htpasswd) hashOf(user string, now time.Time) (hash []byte, ok bool) {
	h.reloadIfChanged(now)
	h.mu.RLock()
	defer h.mu.RUnlock()
	hash, ok = h.users[user]
	return hash, ok
}

// reloadIfChanged reads the file again when its modification time or size
// changed, looking at most once per statEvery. A file that no longer
// parses leaves the users as they were, with a warning.
func (h *htpasswd) reloadIfChanged(now time.Time) {
	next := h.nextStat.Load()
	if h.file == "" || now.UnixNano() < next || !h.nextStat.CompareAndSwap(next, now.Add(h.statEvery).UnixNano()) {
		return
	}
	fi, err := os.Stat(h.file)
	if err != nil {
		slog.Warn("auth: cannot look at the htpasswd file; keeping its users", "file", h.file, "err", err)
		return
	}
	h.mu.RLock()
	same := fi.ModTime().Equal(h.modTime) && fi.Size() == h.size
	h.mu.RUnlock()
	if same {
		return
	}
	users, cost, err := readHtpasswd(h.file)
	if err == nil {
		err = h.set(users, cost, fi.ModTime(), fi.Size())
	}
	if err != nil {
		slog.Warn("auth: cannot reload the htpasswd file; keeping its previous users", "file", h.file, "err", err)
		return
	}
	slog.Info("auth: reloaded the htpasswd file", "file", h.file, "users", len(users))
}
