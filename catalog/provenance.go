package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/signing"
)

// The catalog's provenance: every indexed version's digest is checked with
// signing.Check against the trust policy, and the verdict is recorded with
// what was found (Store.PutSignatures). A version is checked by the worker
// that indexes it, in the same task; other checks are tasks of the workers,
// queued by repository and subject digest. The checks of one digest hold a
// lock while they read the registry and record their verdict, so the last
// verdict written is never older than the last change that asked for one.
//
// Checks are asked for when a version is (re)indexed; when a tag of cosign's
// scheme (sha256-<hex>.sig, .att, or the referrers tag schema's sha256-<hex>)
// is written, re-pointed or removed, by an event or by a reconciliation;
// when a manifest with a subject is pushed or deleted (the embedded
// registry's events say which subject; a push by digest that a webhook
// reports is read to find it; a deleted manifest's subjects are those the
// store recorded it signing); at start for the versions never checked or
// checked under another trust policy; and for every version by each periodic
// reconciliation, which is how the catalog learns of referrers whose events
// were lost.

// SignatureFetcher reads the registry src reads for signing.Check: errors
// wrapping ErrNotFound or ErrUnavailable wrap signing's sentinel of the same
// meaning too, and an unknown repository or digest has no referrers.
func SignatureFetcher(src Source) signing.Fetcher { return fetcher{src} }

// fetcher is SignatureFetcher's.
type fetcher struct{ src Source }

var _ signing.Fetcher = fetcher{}

func (f fetcher) Resolve(ctx context.Context, repo, tag string) (string, error) {
	d, err := f.src.Resolve(ctx, repo, tag)
	return d, signingError(err)
}

func (f fetcher) Manifest(ctx context.Context, repo, dgst string) (string, []byte, error) {
	mt, payload, err := f.src.Manifest(ctx, repo, dgst)
	return mt, payload, signingError(err)
}

func (f fetcher) Blob(ctx context.Context, repo, dgst string) (io.ReadCloser, error) {
	rc, err := f.src.Blob(ctx, repo, dgst)
	return rc, signingError(err)
}

func (f fetcher) Referrers(ctx context.Context, repo, dgst string) ([]ocispec.Descriptor, error) {
	refs, err := f.src.Referrers(ctx, repo, dgst)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return refs, err
}

// signingError makes an error wrapping ErrNotFound or ErrUnavailable wrap
// signing.ErrNotFound or signing.ErrUnavailable too.
func signingError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotFound):
		return alsoError{err, signing.ErrNotFound}
	case errors.Is(err, ErrUnavailable):
		return alsoError{err, signing.ErrUnavailable}
	}
	return err
}

// alsoError is err, wrapping also too.
type alsoError struct{ err, also error }

func (e alsoError) Error() string   { return e.err.Error() }
func (e alsoError) Unwrap() []error { return []error{e.err, e.also} }

// signatureSubject returns the digest that a tag of cosign's scheme is about:
// sha256-<hex>.sig (signatures), sha256-<hex>.att (attestations) and
// sha256-<hex> (the referrers tag schema's index, which a registry without
// the referrers API holds). Any other tag is not one.
func signatureSubject(tag string) (string, bool) {
	base := tag
	for _, suffix := range []string{".sig", ".att"} {
		if b, ok := strings.CutSuffix(tag, suffix); ok {
			base = b
			break
		}
	}
	alg, encoded, ok := strings.Cut(base, "-")
	if !ok {
		return "", false
	}
	d := digest.NewDigestFromEncoded(digest.Algorithm(alg), encoded)
	if d.Validate() != nil {
		return "", false
	}
	return d.String(), true
}

// transient reports whether a failed check is worth trying again rather than
// recording: the registry did not answer, or the catalog is stopping.
func transient(ctx context.Context, err error) bool {
	return errors.Is(err, ErrUnavailable) || ctx.Err() != nil
}

// checkSignatures checks the signatures of subject in repo and records the
// verdict for every version of the package with that digest. A digest no
// indexed version holds is not checked.
func (c *Catalog) checkSignatures(ctx context.Context, repo, subject string) result {
	ns, name, _ := strings.Cut(repo, "/")
	if repositoryProblem(repo) != "" {
		return resultUnchanged
	}
	defer c.checkLocks.Lock(repo + "@" + subject)()
	held, err := c.store.SignatureChecks(ctx, ns, name, subject)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("catalog: check signatures", "repo", repo, "digest", subject, "err", err)
		}
		return resultFailed
	}
	if len(held) == 0 {
		return resultUnchanged
	}
	return c.verify(ctx, repo, subject)
}

// checkIndexed checks the signatures of subject in repo, the digest of a
// version its caller has just indexed: no store read asks whether a version
// holds it (PutSignatures records nothing if none does any more).
func (c *Catalog) checkIndexed(ctx context.Context, repo, subject string) result {
	defer c.checkLocks.Lock(repo + "@" + subject)()
	return c.verify(ctx, repo, subject)
}

// verify checks the signatures of subject in repo and records the verdict;
// the caller holds the digest's lock.
func (c *Catalog) verify(ctx context.Context, repo, subject string) result {
	ns, name, _ := strings.Cut(repo, "/")
	sc := &SignatureCheck{Namespace: ns, Name: name, Digest: subject, Checked: time.Now().UTC(), Policy: c.policyID}
	c.applyPolicy(sc)
	rep, err := signing.Check(ctx, fetcher{c.source}, c.policy, repo, subject)
	switch {
	case err == nil:
		sc.Signatures = signatureRecords(rep)
	case transient(ctx, err):
		if ctx.Err() == nil {
			c.log.Warn("catalog: check signatures", "repo", repo, "digest", subject, "err", err)
		}
		return resultFailed
	default:
		// What the registry holds cannot be read as signatures, and will
		// not be better next time: the digest is not verified, and says why.
		sc.Error = err.Error()
	}
	changed, err := c.store.PutSignatures(ctx, sc)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("catalog: record signatures", "repo", repo, "digest", subject, "err", err)
		}
		return resultFailed
	}
	verified := sc.Verified()
	c.metrics.checked.WithLabelValues(map[bool]string{true: "verified", false: "unverified"}[verified]).Inc()
	if !changed {
		return resultUnchanged
	}
	c.log.Info("catalog: verification changed", "repo", repo, "digest", subject, "verified", verified, "reason", verifiedReason(sc))
	return resultIndexed
}

// applyPolicy gives sc the requireSource of the rule of the catalog's
// trust policy for its package, which its verdict depends on.
func (c *Catalog) applyPolicy(sc *SignatureCheck) {
	if rule, ok := c.policy.For(sc.Namespace + "/" + sc.Name); ok {
		sc.RequireSource, sc.PolicyName = rule.RequireSource, rule.Describe()
	}
}

// signatureRecords are the signatures and attestations of a report, as the store keeps them.
func signatureRecords(rep *signing.Report) []SignatureRecord {
	out := make([]SignatureRecord, 0, len(rep.Signatures)+len(rep.Attestations))
	for _, s := range rep.Signatures {
		out = append(out, signatureRecord(s))
	}
	for _, s := range rep.Attestations {
		r := signatureRecord(s)
		if r.PredicateType == "" {
			r.PredicateType = "unknown" // still an attestation
		}
		out = append(out, r)
	}
	return out
}

func signatureRecord(s signing.Signature) SignatureRecord {
	return SignatureRecord{
		Digest: s.Digest, Layer: s.Layer, Kind: string(s.Kind), PredicateType: s.PredicateType,
		KeyID: s.KeyID, Verified: s.Verified, Reason: s.Reason, Sources: s.Sources,
	}
}

// verifiedReason says why the versions of a check's digest are not
// verified, as signing.Report.Reason does, or "" when they are; sc is nil
// when the digest was never checked.
func verifiedReason(sc *SignatureCheck) string {
	switch {
	case sc == nil:
		return "signatures not checked yet"
	case sc.Error != "":
		return "signatures could not be read: " + sc.Error
	}
	return sc.Report().Reason()
}

// subjectOf reads the manifest repo@dgst, pushed by digest, and asks for a
// check of its subject, if it has one: a referrer a registry's webhook
// reported without saying what it refers to.
func (c *Catalog) subjectOf(ctx context.Context, repo, dgst string) result {
	_, payload, err := c.source.Manifest(ctx, repo, dgst)
	if err != nil {
		if !errors.Is(err, ErrNotFound) && ctx.Err() == nil {
			c.log.Warn("catalog: read a pushed manifest", "repo", repo, "digest", dgst, "err", err)
		}
		return resultUnchanged
	}
	var m struct {
		Subject *ocispec.Descriptor `json:"subject"`
	}
	if json.Unmarshal(payload, &m) != nil || m.Subject == nil || m.Subject.Digest.Validate() != nil {
		return resultUnchanged
	}
	c.enqueueCheck(repo, m.Subject.Digest.String())
	return resultUnchanged
}

// repoDigest is a digest of a repository.
type repoDigest struct{ repo, digest string }

// maxDeferred bounds the checks kept for the next pass when queues are full.
const maxDeferred = 100000

// enqueueCheck asks for a check of the signatures of subject in repo without
// blocking. When the queue is full the check is kept for the pass of
// CheckSignatures that follows the reconciliation this schedules.
func (c *Catalog) enqueueCheck(repo, subject string) {
	t := task{repo: repo, subject: subject}
	select {
	case c.queue(t) <- t:
		return
	default:
	}
	c.deferMu.Lock()
	if len(c.deferred) < maxDeferred {
		c.deferred[repoDigest{repo, subject}] = true
	} else {
		c.deferredAll = true
	}
	c.deferMu.Unlock()
	c.wantReconcile()
}

// takeDeferred returns the checks kept for this pass, and whether to check
// everything instead, and forgets them.
func (c *Catalog) takeDeferred() (map[repoDigest]bool, bool) {
	c.deferMu.Lock()
	defer c.deferMu.Unlock()
	d, all := c.deferred, c.deferredAll
	c.deferred, c.deferredAll = make(map[repoDigest]bool), false
	return d, all
}

// checkPageSize is how many digests a pass of CheckSignatures reads from the
// store at a time.
const checkPageSize = 1000

// SignatureCheckReport says what a pass of CheckSignatures did.
type SignatureCheckReport struct {
	// Checked counts the digests checked, Changed those whose versions'
	// verdict changed, Failed those the registry could not be read for.
	Checked, Changed, Failed int
	Took                     time.Duration
}

// CheckSignatures checks again the signatures of every digest that indexed
// versions hold (all), or only of those never checked, checked under another
// trust policy, or whose check a full queue could not take. The checks are
// tasks of the workers, at most one per worker in flight, so that events are
// not kept waiting behind them. It returns when every check is done, or with
// ctx's error when ctx ends first; run it while the catalog runs.
func (c *Catalog) CheckSignatures(ctx context.Context, all bool) (SignatureCheckReport, error) {
	start := time.Now()
	var rep SignatureCheckReport
	deferred, deferredAll := c.takeDeferred()
	all = all || deferredAll
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		inFlight = make(chan struct{}, len(c.queues))
	)
	send := func(t task) bool {
		select {
		case inFlight <- struct{}{}:
		case <-ctx.Done():
			return false
		}
		wg.Add(1)
		t.done = func(r result) {
			mu.Lock()
			rep.Checked++
			switch r {
			case resultIndexed:
				rep.Changed++
			case resultFailed:
				rep.Failed++
			}
			mu.Unlock()
			<-inFlight
			wg.Done()
		}
		select {
		case c.queue(t) <- t:
			return true
		case <-ctx.Done():
			<-inFlight
			wg.Done()
			return false
		}
	}
	stale := c.policyID
	if all {
		stale = ""
	}
	var after SignatureCheck
	for sent := true; sent; {
		page, err := c.store.SignatureCheckPage(ctx, after, checkPageSize, stale)
		if err != nil {
			c.deferMu.Lock()
			maps.Copy(c.deferred, deferred) // for the next pass
			c.deferredAll = c.deferredAll || deferredAll
			c.deferMu.Unlock()
			waitOrDone(ctx, &wg)
			return rep, err
		}
		for _, sc := range page {
			k := repoDigest{sc.Namespace + "/" + sc.Name, sc.Digest}
			delete(deferred, k)
			if sent = send(task{repo: k.repo, subject: k.digest}); !sent {
				break
			}
		}
		if len(page) < checkPageSize {
			break
		}
		after = page[len(page)-1]
	}
	// The deferred checks the pages did not list (checked, under this
	// policy, before the change that deferred them); a digest no version
	// holds any more is skipped by the check itself.
	for k := range deferred {
		if !send(task{repo: k.repo, subject: k.digest}) {
			break
		}
	}
	if !waitOrDone(ctx, &wg) {
		mu.Lock()
		defer mu.Unlock()
		return rep, ctx.Err()
	}
	rep.Took = time.Since(start)
	return rep, ctx.Err()
}

// checkInBackground starts a pass of CheckSignatures unless one is running.
// Checks a full queue deferred while it ran get a pass of their own.
func (c *Catalog) checkInBackground(ctx context.Context, all bool) {
	if !c.checking.CompareAndSwap(false, true) {
		return
	}
	c.background.Add(1)
	go func() {
		defer c.background.Done()
		var err error
		for {
			var rep SignatureCheckReport
			rep, err = c.CheckSignatures(ctx, all)
			if err != nil {
				if ctx.Err() == nil {
					c.log.Error("catalog: check signatures", "err", err)
				}
				break
			}
			if rep.Checked > 0 {
				c.log.Info("catalog: signatures checked", "all", all, "checked", rep.Checked, "changed", rep.Changed,
					"failed", rep.Failed, "took", rep.Took.Round(time.Millisecond))
			}
			if !c.hasDeferred() {
				break
			}
			all = false
		}
		c.checking.Store(false)
		// A check deferred since the last look asked for a pass that found
		// this one running: ask again (after a failed pass, the next
		// reconciliation will).
		if err == nil && c.hasDeferred() {
			select {
			case c.kick <- struct{}{}:
			default:
			}
		}
	}()
}

// hasDeferred reports whether checks wait for a pass.
func (c *Catalog) hasDeferred() bool {
	c.deferMu.Lock()
	defer c.deferMu.Unlock()
	return len(c.deferred) > 0 || c.deferredAll
}
