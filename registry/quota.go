package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"regexp"
	"time"

	"github.com/distribution/distribution/v3/registry/api/errcode"
	"github.com/opencontainers/go-digest"

	"github.com/berth-registry/berth/quota"
)

// Quotas (docs/configuration.md#quotas): every blob an upload commits or a
// mount links, and every manifest pushed, is charged to the namespace of
// its repository in the ledger, once per namespace however many of its
// repositories hold it; a charge that would take the namespace beyond its
// quota is refused. What deletes and garbage collections free is given
// back by recomputing a namespace's charges from what its manifests
// reference (RecomputeQuota), which the leader does (KeepQuotas).

// QuotaOptions turn on quotas and the bounds on uploads.
type QuotaOptions struct {
	// Ledger keeps the charges and the open uploads.
	Ledger quota.Ledger
	// Limit is a namespace's quota in bytes, 0 for none.
	Limit func(namespace string) int64
	// MaxUploadSize is the largest blob an upload may store; 0 means no
	// limit (registry.uploads.maxSize).
	MaxUploadSize int64
	// MaxUploadsPerSubject is how many uploads one subject may have open,
	// 0 or negative for no limit; an upload idle for IdleTimeout no longer
	// counts (registry.uploads.maxConcurrentPerSubject, idleTimeout).
	MaxUploadsPerSubject int
	IdleTimeout          time.Duration
	// PurgeAfter is how long after its last write an upload is purged
	// (registry.uploads.purgeAfter); 0 means DefaultPurgeAfter.
	PurgeAfter time.Duration
	// Grace keeps, in a recompute, the charges made less than this ago:
	// pushes whose manifest has not come yet (gc.grace). 0 means
	// DefaultGCGrace.
	Grace time.Duration
	// RecomputeEvery is how often KeepQuotas recomputes the namespaces
	// deletes and collections marked; 0 means 5s.
	RecomputeEvery time.Duration
	// Metrics counts refusals and purges; nil counts nothing.
	Metrics *quota.Metrics
}

// DefaultPurgeAfter is QuotaOptions.PurgeAfter when 0.
const DefaultPurgeAfter = 24 * time.Hour

// quotas is the registry's side of the ledger.
type quotas struct {
	QuotaOptions
	driver interface {
		Delete(ctx context.Context, path string) error
	}
	log *slog.Logger
}

// limit is namespace's quota for a push of a client; berth's own writes
// (the OLM catalog image), which carry no subject, are charged but never
// refused.
func (q *quotas) limit(ctx context.Context, namespace string) int64 {
	if _, ok := uploadSubject(ctx); !ok || q.Limit == nil {
		return 0
	}
	return q.Limit(namespace)
}

// charge charges p to repo's namespace, against its quota; an
// over-quota refusal is an OCI DENIED error.
func (q *quotas) charge(ctx context.Context, repo string, p quota.Push) (charged bool, err error) {
	p.Namespace = quota.Namespace(repo)
	p.Limit = q.limit(ctx, p.Namespace)
	charged, err = q.Ledger.Charge(ctx, p)
	return charged, q.refusal(p.Namespace, err)
}

// item is the quota.Item of d, of size bytes.
func item(d digest.Digest, size int64) quota.Item { return quota.Item{Digest: d.String(), Size: size} }

// refsOf are the blobs manifest payload references that its repository
// stores (not the layers stored elsewhere, which name URLs), for its
// charge to refresh (quota.Push.Refs).
func refsOf(payload []byte) []quota.Item {
	var doc manifestDoc
	if json.Unmarshal(payload, &doc) != nil {
		return nil // distribution parsed it; it references nothing berth can tell
	}
	refs := append(doc.Layers, doc.Blobs...)
	if doc.Config != nil {
		refs = append(refs, *doc.Config)
	}
	items := make([]quota.Item, 0, len(refs))
	for _, r := range refs {
		if r.Digest.Validate() == nil && r.Size >= 0 && len(r.URLs) == 0 {
			items = append(items, item(r.Digest, r.Size))
		}
	}
	return items
}

// uncharge takes back what charge charged for something that was not
// stored after all; failing, it leaves the charge to the next recompute.
func (q *quotas) uncharge(ctx context.Context, repo string, d digest.Digest) {
	if err := q.Ledger.Uncharge(context.WithoutCancel(ctx), quota.Namespace(repo), d.String()); err != nil {
		q.log.WarnContext(ctx, "quota: a charge stays until the namespace's next recompute", "repo", repo, "digest", d.String(), "err", err)
	}
}

// admitSize refuses an upload into repo that would hold size bytes: beyond
// MaxUploadSize (SIZE_INVALID), or beyond the namespace's quota (DENIED),
// unless the namespace already stores digest d ("" when not known).
func (q *quotas) admitSize(ctx context.Context, repo, d string, size int64) error {
	ns := quota.Namespace(repo)
	if err := q.checkSize(ns, size); err != nil {
		return err
	}
	return q.refusal(ns, q.Ledger.Check(ctx, ns, d, size, q.limit(ctx, ns)))
}

// checkSize refuses an upload into namespace that would hold size bytes,
// beyond MaxUploadSize.
func (q *quotas) checkSize(namespace string, size int64) error {
	if q.MaxUploadSize > 0 && size > q.MaxUploadSize {
		return q.refusal(namespace, errTooLarge(size, q.MaxUploadSize))
	}
	return nil
}

// errTooLarge is the error of an upload of size bytes beyond max.
func errTooLarge(size, max int64) error {
	return errcode.ErrorCodeSizeInvalid.WithMessage(fmt.Sprintf(
		"this upload is at least %s (%d bytes), beyond registry.uploads.maxSize, %s (%d bytes)",
		quota.FormatBytes(size), size, quota.FormatBytes(max), max))
}

// refusal turns the ledger's refusals into OCI errors, counting them, and
// its failures into UNAVAILABLE.
func (q *quotas) refusal(namespace string, err error) error {
	var over *quota.OverQuotaError
	var many *quota.TooManyUploadsError
	var coded errcode.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &over):
		q.Metrics.Refused(namespace, quota.ReasonQuota)
		return errcode.ErrorCodeDenied.WithMessage(over.Error())
	case errors.As(err, &many):
		q.Metrics.Refused(namespace, quota.ReasonUploads)
		return errcode.ErrorCodeTooManyRequests.WithMessage(many.Error())
	case errors.As(err, &coded) && coded.Code == errcode.ErrorCodeSizeInvalid:
		q.Metrics.Refused(namespace, quota.ReasonSize)
		return err
	}
	return errcode.ErrorCodeUnavailable.WithMessage(fmt.Sprintf("the quota ledger cannot be read: %v", err))
}

// openUpload records upload uuid of repo, refusing it with
// TOOMANYREQUESTS when its subject has too many open.
func (q *quotas) openUpload(ctx context.Context, repo, uuid string) error {
	subject, client := uploadSubject(ctx)
	max := q.MaxUploadsPerSubject
	if !client || max <= 0 {
		max = -1
	}
	now := time.Now()
	err := q.Ledger.OpenUpload(ctx, quota.Upload{UUID: uuid, Repository: repo, Subject: subject, Started: now}, max, now.Add(-q.IdleTimeout))
	return q.refusal(quota.Namespace(repo), err)
}

// uploadIDRegexp is what distribution's upload ids look like (UUIDs): an
// id that is not one names no directory to delete.
var uploadIDRegexp = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)

// cancelUpload deletes what upload uuid of repo stored and forgets it.
func (q *quotas) cancelUpload(ctx context.Context, repo, uuid string) error {
	ctx = context.WithoutCancel(ctx)
	if uploadIDRegexp.MatchString(uuid) {
		if err := q.driver.Delete(ctx, path.Join(repositoriesRoot, repo, "_uploads", uuid)); err != nil && !isPathNotFound(err) {
			return fmt.Errorf("registry: delete upload %s of %s: %w", uuid, repo, err)
		}
	}
	return q.Ledger.CloseUpload(ctx, uuid)
}

// PurgeUploads deletes the uploads last written to before now minus the
// purge age (registry.uploads.purgeAfter), and returns how many it
// deleted. It does nothing without quotas.
func (r *Registry) PurgeUploads(ctx context.Context, now time.Time) (int, error) {
	q := r.guard.quota
	if q == nil {
		return 0, nil
	}
	abandoned, err := q.Ledger.Abandoned(ctx, now.Add(-q.PurgeAfter))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, u := range abandoned {
		if err := q.cancelUpload(ctx, u.Repository, u.UUID); err != nil {
			q.Metrics.Purged(n)
			return n, err
		}
		n++
		r.log.InfoContext(ctx, "registry: purged an abandoned upload", "repo", u.Repository, "upload", u.UUID, "subject", u.Subject, "bytes", u.Bytes, "lastWrite", u.LastWrite)
	}
	q.Metrics.Purged(n)
	return n, nil
}

// markDirty marks repo's namespace for a recompute, after a delete.
func (g *guard) markDirty(repo string) {
	if g.quota == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.quota.Ledger.MarkDirty(ctx, quota.Namespace(repo)); err != nil {
		g.log.Warn("quota: the bytes a delete frees are given back at the next garbage collection", "repo", repo, "err", err)
	}
}

// RecomputeQuota sets the charges of namespace to the manifests its
// repositories hold and the blobs those reference, as garbage collection
// marks them (every manifest revision counts until it is deleted), keeping
// the charges of the last gc.grace: blobs of pushes whose manifest has not
// come yet. It does nothing without quotas.
func (r *Registry) RecomputeQuota(ctx context.Context, namespace string) error {
	q := r.guard.quota
	if q == nil {
		return nil
	}
	start := time.Now()
	st, err := r.scanRepositoriesUnder(ctx, path.Join(repositoriesRoot, namespace))
	if err != nil {
		return fmt.Errorf("registry: quota of %s: %w", namespace, err)
	}
	live, err := r.gc.mark(ctx, r.driver, st, func(string) time.Time { return time.Time{} })
	if err != nil {
		return fmt.Errorf("registry: quota of %s: %w", namespace, err)
	}
	sizes := make(map[string]int64, len(live.blobs))
	for d := range live.blobs {
		fi, err := r.driver.Stat(ctx, blobDataPath(d))
		if isPathNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("registry: quota of %s: %w", namespace, err)
		}
		sizes[d.String()] = fi.Size()
	}
	return q.Ledger.Recompute(ctx, namespace, sizes, start.Add(-q.Grace), start)
}

// KeepQuotas is the leader's work on quotas, until ctx ends: it marks every
// namespace in the storage for a recompute (the backfill of what was pushed
// before quotas), then, every QuotaOptions.RecomputeEvery, recomputes the
// namespaces that deletes and garbage collections marked, and purges the
// abandoned uploads. It logs when the backfill is done. Without quotas it
// returns at once.
func (r *Registry) KeepQuotas(ctx context.Context) {
	q := r.guard.quota
	if q == nil {
		return
	}
	start := time.Now()
	backfilled := false
	if err := r.markStored(ctx); err != nil && ctx.Err() == nil {
		r.log.Error("quota: cannot list the namespaces to count; they are counted as pushes and deletes come", "err", err)
		backfilled = true
	}
	tick := time.NewTicker(q.RecomputeEvery)
	defer tick.Stop()
	lastPurge := time.Time{}
	for {
		dirty, err := q.Ledger.Dirty(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Error("quota: recompute", "err", err)
		}
		for _, ns := range dirty {
			if err := r.RecomputeQuota(ctx, ns); err != nil && ctx.Err() == nil {
				r.log.Error("quota: recompute", "namespace", ns, "err", err)
			}
		}
		if !backfilled && err == nil && ctx.Err() == nil {
			backfilled = true
			r.log.Info("quota: every namespace's usage counted from the storage", "namespaces", len(dirty), "took", time.Since(start).Round(time.Millisecond).String())
		}
		if now := time.Now(); now.Sub(lastPurge) >= purgeInterval(q.PurgeAfter) {
			lastPurge = now
			if _, err := r.PurgeUploads(ctx, now); err != nil && ctx.Err() == nil {
				r.log.Error("quota: purge abandoned uploads", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// purgeInterval is how often abandoned uploads are looked for: a tenth of
// their purge age, within [1m, 1h].
func purgeInterval(purgeAfter time.Duration) time.Duration {
	return min(max(purgeAfter/10, time.Minute), time.Hour)
}

// markStored marks every namespace the storage holds for a recompute.
func (r *Registry) markStored(ctx context.Context) error {
	entries, err := r.driver.List(ctx, repositoriesRoot)
	if isPathNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	namespaces := make([]string, 0, len(entries))
	for _, e := range entries {
		namespaces = append(namespaces, path.Base(e))
	}
	return r.guard.quota.Ledger.MarkDirty(ctx, namespaces...)
}

// uploadSubjectKey carries who pushes, for the uploads they may have open.
type uploadSubjectKey struct{}

// WithUploadSubject returns ctx naming subject, an authenticated identity,
// as the one whose uploads a request opens: auth's gate sets it, and
// without it the registry counts uploads by client address.
func WithUploadSubject(ctx context.Context, subject string) context.Context {
	return context.WithValue(ctx, uploadSubjectKey{}, subject)
}

// uploadSubject is the subject of ctx, and whether there is one: a request
// of a client has one, berth's own writes have none.
func uploadSubject(ctx context.Context) (string, bool) {
	s, ok := ctx.Value(uploadSubjectKey{}).(string)
	return s, ok
}
