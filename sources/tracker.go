// Package sources follows the package sources the namespaces list
// (config namespaces[].sources, docs/sources.md): the leader's Tracker
// checks each source cheaply every interval, or at once when asked
// (Check, from any replica, as a webhook does), builds a version only when
// what the source resolves to changed, and publishes it through the
// embedded registry in process, signed with berth's key and attested with
// its SLSA provenance, so that every rule of the registry applies to it
// (immutability, trust admission, quotas). The status of every source is
// in a Store the replicas share.
package sources

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"oras.land/oras-go/v2/registry/remote/credentials"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/pkgsource"
	"github.com/berth-registry/berth/signing"
)

// KeyPasswordEnv holds the password of berth's provenance key.
const KeyPasswordEnv = "BERTH_SOURCES_KEY_PASSWORD"

// The defaults of Options' zero fields.
const (
	DefaultConcurrency = 4
	DefaultPoll        = 500 * time.Millisecond
)

// Options configure a Tracker.
type Options struct {
	// Config lists the sources (namespaces[].sources) and their shared
	// settings (sources); it was validated.
	Config *config.Config
	// Store keeps the sources' states and the checks asked for.
	Store Store
	// Signer is berth's provenance key (signing.LoadOrCreateSigner).
	Signer *signing.Signer
	// Registry is the embedded registry's handler (registry.Registry, not
	// wrapped in auth), which the versions are pushed through in process.
	Registry http.Handler
	// RegistryHost is the host[:port] the versions are named on in their
	// provenance. Default: localhost.
	RegistryHost string
	// BuilderID is the builder the provenance names: berth's public URL.
	BuilderID string
	// Concurrency bounds the checks run at once (default 4).
	Concurrency int
	// Poll is how often the leader reads the checks other replicas asked
	// for (default 500ms); those asked in this process start at once.
	Poll time.Duration
	// Logger is the tracker's log; nil means slog.Default().
	Logger *slog.Logger
	// Metrics, when set, receives the berth_sources_* metrics.
	Metrics prometheus.Registerer
	// OnEvent, when set, is told of each version published and each new
	// failure (not of a failure repeated unchanged), for the change feed.
	OnEvent func(context.Context, apiv1.Change)
}

// Tracker checks and builds the tracked sources. Status, Check and
// PublicKey serve any replica; Run is the leader's work.
type Tracker struct {
	opts    Options
	log     *slog.Logger
	sources []*tracked
	byKey   map[config.SourceKey]*tracked
	client  *client.Client
	pubPEM  []byte
	metrics *metrics
	// wake starts the loop at once on a Check in this process.
	wake chan struct{}

	// mu guards states, the leader's copy of the states, and dirty, those
	// not saved yet: Run saves them in one transaction at each Poll.
	mu     sync.Mutex
	states map[config.SourceKey]State
	dirty  map[config.SourceKey]State
}

// tracked is one source of the configuration.
type tracked struct {
	key      config.SourceKey
	src      config.Source
	interval time.Duration
	// fingerprint is State.Spec.
	fingerprint string
}

// New returns the Tracker of the sources opts.Config lists.
func New(opts Options) (*Tracker, error) {
	if opts.Config == nil || opts.Store == nil || opts.Signer == nil || opts.Registry == nil {
		return nil, errors.New("sources: a tracker needs the configuration, a store, a signer and the registry")
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.RegistryHost == "" {
		opts.RegistryHost = "localhost"
	}
	t := &Tracker{opts: opts, log: opts.Logger, byKey: map[config.SourceKey]*tracked{}, wake: make(chan struct{}, 1),
		states: map[config.SourceKey]State{}, dirty: map[config.SourceKey]State{}}
	if t.log == nil {
		t.log = slog.Default()
	}
	for _, ts := range opts.Config.TrackedSources() {
		s := &tracked{
			key:         config.SourceKey{Namespace: ts.Namespace, Package: ts.Package},
			src:         ts.Source,
			interval:    opts.Config.Sources.IntervalOf(ts.Source),
			fingerprint: strings.Join([]string{ts.Kind, ts.URL, ts.Ref, ts.Dir, ts.Format}, "\x00"),
		}
		t.sources = append(t.sources, s)
		t.byKey[s.key] = s
	}
	pub, err := opts.Signer.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("sources: the provenance key: %w", err)
	}
	if t.pubPEM, err = cryptoutils.MarshalPublicKeyToPEM(pub); err != nil {
		return nil, fmt.Errorf("sources: the provenance key: %w", err)
	}
	plain := true
	t.client, err = client.New(client.Options{
		PlainHTTP:   &plain,
		Credentials: credentials.NewMemoryStore(),
		UserAgent:   "berth-sources",
		HTTPClient:  &http.Client{Transport: inProcess{opts.Registry}},
	})
	if err != nil {
		return nil, err
	}
	if t.metrics, err = newMetrics(opts.Metrics); err != nil {
		return nil, err
	}
	return t, nil
}

// PublicKey is the PEM public key of berth's provenance key, which
// verifies the signatures and attestations of the versions it builds.
func (t *Tracker) PublicKey() []byte { return t.pubPEM }

// Check asks for a check of the source of namespace/pkg now: it is
// recorded in the store, where the leader finds it within Options.Poll,
// at once when it runs in this process. An unknown source is an error
// wrapping fs.ErrNotExist.
func (t *Tracker) Check(ctx context.Context, namespace, pkg string) error {
	key := config.SourceKey{Namespace: namespace, Package: pkg}
	if t.byKey[key] == nil {
		return fmt.Errorf("no source publishes %s/%s: %w", namespace, pkg, fs.ErrNotExist)
	}
	if err := t.opts.Store.Request(ctx, key, time.Now().UnixNano()); err != nil {
		return err
	}
	select {
	case t.wake <- struct{}{}:
	default:
	}
	return nil
}

// Status is the status of every source, ordered by namespace and
// package, as the store has it.
func (t *Tracker) Status(ctx context.Context) ([]apiv1.Source, error) {
	states, err := t.opts.Store.States(ctx)
	if err != nil {
		return nil, err
	}
	byKey := make(map[config.SourceKey]State, len(states))
	for _, st := range states {
		byKey[st.Key] = st
	}
	out := make([]apiv1.Source, 0, len(t.sources))
	for _, s := range t.sources {
		st := byKey[s.key]
		if st.Spec != s.fingerprint {
			st = State{}
		}
		out = append(out, s.status(st))
	}
	sortSources(out)
	return out, nil
}

// status is the API's view of s in state st.
func (s *tracked) status(st State) apiv1.Source {
	a := apiv1.Source{
		Namespace: s.key.Namespace, Package: s.key.Package, Kind: s.src.Kind, URL: s.src.URL,
		Ref: s.src.Ref, Dir: s.src.Dir, Interval: s.interval.String(),
		Revision: st.Resolved.Revision, Refs: st.Refs, LastPublished: st.LastPublished, LastError: st.LastError,
	}
	if pkgsource.IsPattern(s.src.Ref) {
		a.Revision = ""
	}
	if !st.LastCheck.IsZero() {
		last, next := st.LastCheck, st.NextCheck
		a.LastCheck, a.NextCheck = &last, &next
	}
	return a
}

// Run checks each source when it is due (its interval, with a jitter of
// up to a tenth of it) and when a check is asked for, at most
// Options.Concurrency at once, until ctx ends; it then waits for the
// checks in progress. Only the leader runs it.
func (t *Tracker) Run(ctx context.Context) {
	if len(t.sources) == 0 {
		return
	}
	next := map[config.SourceKey]time.Time{}
	states, err := t.opts.Store.States(ctx)
	if err != nil && ctx.Err() == nil {
		t.log.Error("sources: read the states; checking every source now", "err", err)
	}
	t.mu.Lock()
	t.states = map[config.SourceKey]State{}
	for _, st := range states {
		if s := t.byKey[st.Key]; s != nil && st.Spec == s.fingerprint {
			t.states[st.Key] = st
			next[st.Key] = st.NextCheck
		}
	}
	t.mu.Unlock()

	type finished struct {
		key  config.SourceKey
		next time.Time
	}
	done := make(chan finished)
	inflight := map[config.SourceKey]bool{}
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		t.flush(context.WithoutCancel(ctx))
	}()
	ticker := time.NewTicker(t.opts.Poll)
	defer ticker.Stop()
	for {
		requests, err := t.opts.Store.Requests(ctx)
		if err != nil && ctx.Err() == nil {
			t.log.Error("sources: read the checks asked for", "err", err)
		}
		now := time.Now()
		pending := 0
		for _, s := range t.sources {
			at, asked := requests[s.key]
			if inflight[s.key] || !asked && now.Before(next[s.key]) {
				continue
			}
			if len(inflight) >= t.opts.Concurrency {
				pending++
				continue
			}
			inflight[s.key] = true
			wg.Add(1)
			go func() {
				defer wg.Done()
				n := t.check(ctx, s)
				if asked {
					if err := t.opts.Store.Done(context.WithoutCancel(ctx), s.key, at); err != nil {
						t.log.Error("sources: forget a check asked for", "source", s.key.Namespace+"/"+s.key.Package, "err", err)
					}
				}
				select {
				case done <- finished{s.key, n}:
				case <-ctx.Done():
				}
			}()
		}
		for key := range requests {
			if t.byKey[key] == nil {
				_ = t.opts.Store.Done(ctx, key, requests[key])
			}
		}
		t.metrics.pending.Set(float64(pending))
	wait:
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			t.flush(ctx)
		case <-t.wake:
		case f := <-done:
			delete(inflight, f.key)
			next[f.key] = f.next
			// Drain the others that finished meanwhile before looking again.
			for {
				select {
				case f := <-done:
					delete(inflight, f.key)
					next[f.key] = f.next
				default:
					break wait
				}
			}
		}
	}
}

// flush saves the states checked since the last flush, in one
// transaction; those it could not save wait for the next.
func (t *Tracker) flush(ctx context.Context) {
	t.mu.Lock()
	if len(t.dirty) == 0 {
		t.mu.Unlock()
		return
	}
	states := make([]State, 0, len(t.dirty))
	for _, st := range t.dirty {
		states = append(states, st)
	}
	clear(t.dirty)
	t.mu.Unlock()
	if err := t.opts.Store.Save(ctx, states...); err != nil {
		if ctx.Err() == nil {
			t.log.Error("sources: save the states", "sources", len(states), "err", err)
		}
		t.mu.Lock()
		for _, st := range states {
			if _, newer := t.dirty[st.Key]; !newer {
				t.dirty[st.Key] = st
			}
		}
		t.mu.Unlock()
	}
}

// jitter is a random duration of up to a tenth of d.
func jitter(d time.Duration) time.Duration {
	if d < 10 {
		return 0
	}
	return rand.N(d / 10)
}

// credentials reads the source's credential files, at each fetch.
func (s *tracked) credentials() (pkgsource.Credentials, error) {
	c := s.src.Credentials
	if c.UsernameFile == "" {
		return pkgsource.Credentials{}, nil
	}
	user, err := os.ReadFile(c.UsernameFile)
	if err != nil {
		return pkgsource.Credentials{}, fmt.Errorf("credentials.usernameFile: %w", err)
	}
	pass, err := os.ReadFile(c.PasswordFile)
	if err != nil {
		return pkgsource.Credentials{}, fmt.Errorf("credentials.passwordFile: %w", err)
	}
	return pkgsource.Credentials{Username: strings.TrimSpace(string(user)), Password: strings.TrimRight(string(pass), "\r\n")}, nil
}

// reason is the apiv1 reason of a failed check or build.
func reason(err error) string {
	var refused *refusedError
	switch {
	case errors.Is(err, pkgsource.ErrLimit), errors.Is(err, pkgformat.ErrLimit):
		return apiv1.SourceReasonLimit
	case errors.Is(err, pkgsource.ErrDenied):
		return apiv1.SourceReasonDenied
	case errors.Is(err, pkgsource.ErrInvalid), errors.Is(err, pkgformat.ErrInvalid):
		return apiv1.SourceReasonInvalid
	case errors.As(err, &refused), errors.Is(err, client.ErrDenied), errors.Is(err, client.ErrUnauthorized),
		errors.Is(err, client.ErrUnverified), errors.Is(err, client.ErrTooLarge):
		return apiv1.SourceReasonRefused
	}
	return apiv1.SourceReasonFetch
}

// refusedError is a version berth refuses to build: its version is
// published already with other content.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }
