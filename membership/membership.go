// Package membership keeps berth serve out of the topologies where replicas
// silently break berth's promises (docs/scale-out.md#what-berth-refuses):
// several replicas on one storage that do not share one PostgreSQL catalog,
// replicas on one PostgreSQL catalog that store blobs in different places,
// and replicas on one PostgreSQL catalog whose shared secrets differ.
//
// It holds three things. The storage's identity: a marker object,
// /berth/storage.json, written at the first start on a storage, outside
// distribution's tree (which garbage collection and the repository
// namespace never reach). This replica's identity: a random id kept in the
// data directory, so that a restart is the same replica. And heartbeat
// records, renewed every interval and live for three: one per replica in
// the storage (/berth/replicas/<id>.json) and, with a PostgreSQL catalog,
// one per replica in the table berth_replicas, each saying which catalog,
// storage and settings (as fingerprints) the replica uses.
package membership

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	storagedriver "github.com/distribution/distribution/v3/registry/storage/driver"

	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/internal/atomicfile"
)

// DefaultInterval is how often a replica renews its records unless
// Options.Interval says otherwise.
const DefaultInterval = 10 * time.Second

// leases is how many intervals a record stays live without a renewal.
const leases = 3

// IDFile is the name of the file in the data directory that holds the
// replica's id.
const IDFile = "replica-id"

// ErrConflict says that this replica and another disagree on what they
// share: the error names the other replica, what differs and what to change.
var ErrConflict = errors.New("a live replica disagrees with this one on what they share")

// Options say what this replica is and what it shares.
type Options struct {
	// Data is the data directory, which keeps the replica's id.
	Data string
	// Storage is the registry's storage (registry.Registry.StorageDriver).
	Storage storagedriver.StorageDriver
	// Postgres is the URL of the PostgreSQL catalog (catalog.database),
	// empty when the catalog is a SQLite file of this replica's.
	Postgres string
	// Settings are what every replica on one PostgreSQL catalog must share,
	// by setting name (registry.httpSecretFile, auth.keyFile), as values
	// that tell nothing of a secret: a Fingerprint, a public key's id.
	Settings map[string]string
	// Interval is how often the records are renewed (default
	// DefaultInterval); a record not renewed for three intervals has expired.
	Interval time.Duration
	// Addr is the address this replica listens on, named in other
	// replicas' messages.
	Addr   string
	Logger *slog.Logger
}

// ServeOptions are the Options of a berth serve with configuration cfg on
// storage, listening on addr, whose registry.httpSecretFile holds
// httpSecret and whose token key has the key id tokenKeyID
// ((*auth.Authn).KeyID, a public thumbprint; empty without auth).
func ServeOptions(cfg *config.Config, storage storagedriver.StorageDriver, addr, httpSecret, tokenKeyID string, log *slog.Logger) Options {
	opts := Options{Data: cfg.Data, Storage: storage, Interval: cfg.Replicas.HeartbeatInterval, Addr: addr, Logger: log,
		Settings: map[string]string{"registry.httpSecretFile": Fingerprint("registry.httpSecretFile", []byte(httpSecret))}}
	if tokenKeyID != "" {
		opts.Settings["auth.keyFile"] = tokenKeyID
	}
	if cfg.Catalog.Postgres() {
		opts.Postgres = cfg.Catalog.Database
	}
	return opts
}

// record is what a replica tells the others about itself.
type record struct {
	Replica string `json:"replica"`
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Addr    string `json:"addr,omitempty"`
	// Catalog is "sqlite" for a SQLite catalog of the replica's own, or
	// "postgres:" and the id kept in the PostgreSQL catalog.
	Catalog string `json:"catalog"`
	// Storage is the id of the storage's marker.
	Storage  string            `json:"storage"`
	Settings map[string]string `json:"settings,omitempty"`
	Started  time.Time         `json:"started"`
	Renewed  time.Time         `json:"renewed"`
	// age is how long ago Renewed was, by the clock of the place the
	// record is kept in when it has one (PostgreSQL's), else this replica's.
	age time.Duration
}

// place is where replicas keep their records: the storage, or the
// PostgreSQL catalog.
type place interface {
	// renew writes r, the record of this replica, with Renewed now.
	renew(ctx context.Context, r *record) error
	// records lists every replica's record.
	records(ctx context.Context) ([]record, error)
	// remove deletes the record of replica.
	remove(ctx context.Context, replica string) error
	// String names the place in messages.
	String() string
}

// Member is this replica's membership, renewed until Leave.
type Member struct {
	self     record
	storage  storagedriver.StorageDriver
	places   []place
	interval time.Duration
	log      *slog.Logger
	// stop ends the heartbeats; done is closed when they have ended.
	stop context.CancelFunc
	done chan struct{}
	// conflict is closed when this replica must stop for a conflict,
	// which err then holds.
	conflict chan struct{}
	err      error
	closeDB  func()
	// sightings are what each place showed of the other replicas, by id.
	sightings map[place]map[string]*sighting
	// joined is set once this replica wrote its records.
	joined bool
	// warned are the replicas this one has logged a conflict with.
	warned map[string]bool
	leave  sync.Once
}

// Join checks that this replica may serve beside the live replicas that
// share its storage or its PostgreSQL catalog, and starts renewing its
// records until Leave; ctx bounds the check. When a live replica
// disagrees, Join returns an error wrapping ErrConflict that names it, the
// setting that differs and what to change. A record that no replica has
// renewed for a while may be a dead one's: Join waits until it is renewed
// (and refuses) or until it expires (and goes on), at most three intervals.
//
// A later renewal may find a conflict that this replica must yield, and
// then closes Conflict: when two replicas that disagree start at the same
// moment, the one that started later stops and the other logs an error; so
// do two processes that renew the records of one replica id, from copies
// of one data directory.
func Join(ctx context.Context, opts Options) (*Member, error) {
	self, err := identify(opts)
	if err != nil {
		return nil, err
	}
	m := &Member{
		self:      self,
		storage:   opts.Storage,
		places:    []place{&storagePlace{driver: opts.Storage}},
		interval:  cmp.Or(opts.Interval, DefaultInterval),
		log:       cmp.Or(opts.Logger, slog.Default()),
		done:      make(chan struct{}),
		conflict:  make(chan struct{}),
		closeDB:   func() {},
		sightings: map[place]map[string]*sighting{},
		warned:    map[string]bool{},
	}
	if m.self.Storage, err = storageID(ctx, opts.Storage); err != nil {
		return nil, err
	}
	m.self.Catalog = "sqlite"
	if opts.Postgres != "" {
		db, id, err := openDB(ctx, opts.Postgres)
		if err != nil {
			return nil, err
		}
		m.self.Catalog, m.closeDB = "postgres:"+id, db.close
		m.places = append(m.places, db)
	}
	if err := m.admit(ctx); err != nil {
		m.closeDB()
		return nil, err
	}
	for _, p := range m.places {
		if err := p.renew(ctx, &m.self); err != nil {
			m.closeDB()
			return nil, fmt.Errorf("membership: %s: write this replica's record: %w", p, err)
		}
	}
	m.joined = true
	m.log.Info("membership: joined", "replica", m.self.Replica, "storage", m.self.Storage, "catalog", m.self.Catalog, "heartbeat", m.interval.String())
	run, stop := context.WithCancel(context.WithoutCancel(ctx))
	m.stop = stop
	go m.heartbeat(run)
	return m, nil
}

// Conflict is closed when this replica must stop for a conflict found
// after it joined; Err then says which.
func (m *Member) Conflict() <-chan struct{} { return m.conflict }

// Err is the conflict that closed Conflict, an error wrapping ErrConflict;
// nil before.
func (m *Member) Err() error {
	select {
	case <-m.conflict:
		return m.err
	default:
		return nil
	}
}

// Bound returns ctx, ended as well, with Err as its cause, when Conflict
// closes; release stops watching.
func (m *Member) Bound(ctx context.Context) (bound context.Context, release func()) {
	bound, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-m.conflict:
			cancel(m.err)
		case <-bound.Done():
		}
	}()
	return bound, func() { cancel(nil) }
}

// Stopped returns why ctx, a context of Bound, ended when it was a
// conflict (an error wrapping ErrConflict), else nil.
func Stopped(ctx context.Context) error {
	if err := context.Cause(ctx); errors.Is(err, ErrConflict) {
		return err
	}
	return nil
}

// Leave stops renewing this replica's records and deletes them.
func (m *Member) Leave() {
	m.leave.Do(func() {
		m.stop()
		<-m.done
		ctx, cancel := context.WithTimeout(context.Background(), max(m.interval, time.Second))
		defer cancel()
		for _, p := range m.places {
			if err := p.remove(ctx, m.self.Replica); err != nil {
				m.log.Warn("membership: delete this replica's record", "place", p.String(), "err", err)
			}
		}
		m.closeDB()
	})
}

// identify is this replica's record before it knows its storage and catalog.
func identify(opts Options) (record, error) {
	id, err := replicaID(opts.Data)
	if err != nil {
		return record{}, err
	}
	host, _ := os.Hostname()
	return record{Replica: id, Host: host, PID: os.Getpid(), Addr: opts.Addr, Settings: opts.Settings,
		Started: time.Now().UTC().Truncate(time.Microsecond)}, nil // PostgreSQL keeps microseconds
}

// replicaID reads the id kept in dir, making one on the first start.
func replicaID(dir string) (string, error) {
	name := filepath.Join(dir, IDFile)
	b, err := os.ReadFile(name)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if _, hexErr := hex.DecodeString(id); hexErr != nil || len(id) != 16 {
			return "", fmt.Errorf("membership: %s holds no replica id (16 hexadecimal digits); delete it, and berth makes a new one", name)
		}
		return id, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("membership: %w", err)
	}
	id := randomID()
	if err := atomicfile.Write(name, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("membership: keep this replica's id: %w", err)
	}
	return id, nil
}

func randomID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// Fingerprint is a keyed hash of the secret that setting names: replicas
// compare fingerprints to find a secret that differs, and a fingerprint
// tells nothing of its secret but whether two secrets are equal.
func Fingerprint(setting string, secret []byte) string {
	h := hmac.New(sha256.New, []byte("berth membership fingerprint of "+setting))
	h.Write(secret)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// lease is how long a record stays live without a renewal.
func (m *Member) lease() time.Duration { return leases * m.interval }

// admit waits until no live replica disagrees with this one, or returns
// the conflict of one that does.
func (m *Member) admit(ctx context.Context) error {
	poll := max(m.interval/4, 10*time.Millisecond)
	for first := true; ; first = false {
		var pending []string
		for _, p := range m.places {
			conflicts, err := m.look(ctx, p, first)
			if err != nil {
				return err
			}
			for _, c := range conflicts {
				if c.live {
					return c.err
				}
				pending = append(pending, c.err.Error())
			}
		}
		if len(pending) == 0 {
			return nil
		}
		if first {
			m.log.Warn("membership: waiting for the records of replicas that disagree with this one to be renewed (this one refuses to start) or to expire (they are dead; it starts)",
				"lease", m.lease().String(), "records", strings.Join(pending, "; "))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("membership: stopped while waiting for the records of replicas that disagree with this one: %w", ctx.Err())
		case <-time.After(poll):
		}
	}
}

// heartbeat renews this replica's records every interval until ctx ends,
// and checks the others'.
func (m *Member) heartbeat(ctx context.Context) {
	defer close(m.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(m.jittered()):
		}
		// Looking before renewing shows the last write of another process
		// that renews this replica's record, a copy of this data directory.
		for _, p := range m.places {
			conflicts, err := m.look(ctx, p, false)
			if err != nil && ctx.Err() == nil {
				m.log.Warn("membership: read the other replicas' records", "place", p.String(), "err", err)
			}
			for _, c := range conflicts {
				if c.live && m.yield(c) {
					m.log.Error("membership: stopping: this replica started after another that disagrees with it", "err", c.err)
					m.err = c.err
					close(m.conflict)
					return
				}
			}
			if err := p.renew(ctx, &m.self); err != nil && ctx.Err() == nil {
				m.log.Warn("membership: renew this replica's record", "place", p.String(), "err", err)
			}
		}
	}
}

// jittered is the interval give or take a fifth, drawn anew for each
// renewal: the renewals of replicas that started together drift apart, so
// that each sees the other's writes between its own.
func (m *Member) jittered() time.Duration {
	return m.interval*4/5 + mrand.N(m.interval*2/5)
}

// yield reports whether this replica must stop for conflict c: when it
// started after the other (the other, seeing the same two records, carries
// on). Otherwise it logs the conflict, once per replica.
func (m *Member) yield(c conflict) bool {
	if later(m.self, c.peer) {
		return true
	}
	if !m.warned[c.peer.Replica] {
		m.warned[c.peer.Replica] = true
		m.log.Error("membership: a replica that disagrees with this one started after it; it is to stop", "err", c.err)
	}
	return false
}

// later reports whether a started after b, by their start times, then ids.
func later(a, b record) bool {
	if !a.Started.Equal(b.Started) {
		return a.Started.After(b.Started)
	}
	return a.Replica > b.Replica
}

// conflict is a replica that disagrees with this one.
type conflict struct {
	peer record
	// live says the record was renewed while this replica watched it (or
	// appeared after it first looked); otherwise it may be a dead one's.
	live bool
	err  error
}

// sighting is what this replica saw of another's record in a place: the
// time the record was renewed, when this replica first saw that renewal,
// and whether it has seen the record renewed or appear.
type sighting struct {
	renewed time.Time
	since   time.Time
	live    bool
}

// look reads p's records, deletes the expired ones and returns the
// replicas that disagree with this one; first is the first look at p.
func (m *Member) look(ctx context.Context, p place, first bool) ([]conflict, error) {
	recs, err := p.records(ctx)
	if err != nil {
		return nil, fmt.Errorf("membership: %s: read the replicas' records: %w", p, err)
	}
	s := m.sightings[p]
	if s == nil {
		s = map[string]*sighting{}
		m.sightings[p] = s
	}
	now := time.Now()
	var out []conflict
	present := map[string]bool{}
	for _, r := range recs {
		if r.Replica == m.self.Replica {
			// Before this replica wrote, its record is its last run's.
			if m.joined && !r.Started.Equal(m.self.Started) {
				out = append(out, conflict{peer: r, live: true, err: fmt.Errorf(
					"%w: another berth serve (host %s, %s, pid %d) renews the record of this replica's id %s in %s: its data directory is a copy of this one's. Delete the file %s in the data directory of one of them, which then gets an id of its own",
					ErrConflict, r.Host, r.Addr, r.PID, r.Replica, p, IDFile)})
			}
			continue
		}
		present[r.Replica] = true
		seen, ok := s[r.Replica]
		switch {
		case !ok:
			seen = &sighting{renewed: r.Renewed, since: now, live: !first}
			s[r.Replica] = seen
		case !seen.renewed.Equal(r.Renewed):
			seen.renewed, seen.since, seen.live = r.Renewed, now, true
		}
		if r.age > m.lease() || now.Sub(seen.since) > m.lease() {
			m.log.Info("membership: deleting the expired record of a replica", "place", p.String(), "replica", r.Replica, "host", r.Host, "renewed", r.Renewed.Format(time.RFC3339))
			if err := p.remove(ctx, r.Replica); err != nil {
				m.log.Warn("membership: delete an expired record", "place", p.String(), "replica", r.Replica, "err", err)
			}
			delete(s, r.Replica)
			continue
		}
		if r.Storage != m.self.Storage {
			m.rereadMarker(ctx)
		}
		if problem := disagree(m.self, r); problem != "" {
			out = append(out, conflict{peer: r, live: seen.live,
				err: fmt.Errorf("%w: %s, whose record is in %s: %s", ErrConflict, describe(r), p, problem)})
		}
	}
	for id := range s {
		if !present[id] {
			delete(s, id)
		}
	}
	return out, nil
}

// rereadMarker adopts the storage's marker when it changed since this
// replica read it: replicas that start together on a new storage may each
// write one, and the last written is the storage's.
func (m *Member) rereadMarker(ctx context.Context) {
	if id, err := storageID(ctx, m.storage); err == nil && id != m.self.Storage {
		m.log.Info("membership: the storage's marker changed; adopting it", "marker", markerPath, "id", id)
		m.self.Storage = id
	}
}

// describe names a replica in messages.
func describe(r record) string {
	where := r.Host
	if r.Addr != "" {
		where += ", " + r.Addr
	}
	return fmt.Sprintf("replica %s (host %s, pid %d, renewed %s ago)", r.Replica, where, r.PID, r.age.Round(time.Millisecond))
}

// disagree says how replica o breaks a promise beside self, and what to
// change; "" when they may serve together.
func disagree(self, o record) string {
	const doc = " (docs/scale-out.md#what-berth-refuses)"
	switch {
	case self.Catalog == "sqlite" && o.Catalog == "sqlite":
		return "it uses this storage with a SQLite catalog of its own, as does this replica: neither would see the other's pushes, and both could take one version. Several replicas on one storage must share a PostgreSQL catalog: set catalog.database: postgres://… on every replica, or give this replica a storage of its own" + doc
	case self.Catalog == "sqlite":
		return "it uses this storage with a PostgreSQL catalog, and this replica a SQLite catalog of its own: set catalog.database to the PostgreSQL URL of the other replicas, or give this replica a storage of its own" + doc
	case o.Catalog == "sqlite":
		return "it uses this storage with a SQLite catalog of its own, and this replica a PostgreSQL catalog: stop that replica, or set its catalog.database to the PostgreSQL URL of this one" + doc
	case self.Catalog != o.Catalog:
		return fmt.Sprintf("it uses this storage with another PostgreSQL catalog (catalog id %s, this replica's %s): every replica on one storage must set the same catalog.database", strings.TrimPrefix(o.Catalog, "postgres:"), strings.TrimPrefix(self.Catalog, "postgres:")) + doc
	case self.Storage != o.Storage:
		return fmt.Sprintf("it shares this PostgreSQL catalog but stores its blobs in another storage (storage id %s, this replica's %s, in %s): whichever leads would reconcile the other's packages out of the catalog. Give every replica on one catalog the same storage section (one bucket, not a filesystem directory each)", o.Storage, self.Storage, markerPath) + doc
	}
	for _, name := range slices.Sorted(maps.Keys(self.Settings)) {
		if theirs, ok := o.Settings[name]; ok && theirs != self.Settings[name] {
			return fmt.Sprintf("it shares this PostgreSQL catalog with another %s (fingerprint %s, this replica's %s): every replica must read the same file there (one Secret mounted on each)", name, theirs, self.Settings[name]) + doc
		}
	}
	return ""
}
