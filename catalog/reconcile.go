package catalog

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/olm"
)

// Reconcile converges the catalog to exactly what the registry holds: tags
// the store lacks or has at another digest are indexed, tags the registry no
// longer has are removed. Change detection compares tag → digest only, so an
// intact store costs one tag listing per repository and no package reads.
// Versions it indexes, and tags of cosign's signature scheme it records or
// removes, have their signatures checked afterwards, as tasks of their own
// (referrers leave no tag: CheckSignatures finds those). A source that can
// (TagRepairer) removes the dangling tags it lists on the way. It returns
// what it did; a registry that cannot be listed is an error, and nothing is
// removed then.
func (c *Catalog) Reconcile(ctx context.Context) (apiv1.ReconcileStatus, error) {
	c.reconciling.Add(1)
	defer c.reconciling.Add(-1)
	start := time.Now().UTC()
	st := apiv1.ReconcileStatus{Started: &start}
	var mu sync.Mutex
	err := c.reconcile(ctx, &st, &mu)
	mu.Lock()
	defer mu.Unlock()
	end := time.Now().UTC()
	st.Finished = &end
	if err != nil {
		st.Error = err.Error()
	}
	c.mu.Lock()
	st.Runs = c.status.Runs + 1
	c.status = st
	c.mu.Unlock()
	c.metrics.reconcile.Observe(end.Sub(start).Seconds())
	if err == nil {
		c.log.Info("catalog: reconciled", "indexed", st.Indexed, "removed", st.Removed, "failed", st.Failed, "took", end.Sub(start).Round(time.Millisecond))
	}
	return st, err
}

func (c *Catalog) reconcile(ctx context.Context, st *apiv1.ReconcileStatus, mu *sync.Mutex) error {
	have, err := c.store.Tags(ctx)
	if err != nil {
		return fmt.Errorf("read the catalog: %w", err)
	}
	stored := make(map[[2]string]string, len(have))
	for _, t := range have {
		repo := t.Namespace
		if t.Name != "" {
			repo += "/" + t.Name
		}
		stored[[2]string{repo, t.Tag}] = t.Digest
	}
	repos, err := c.source.Repositories(ctx)
	if err != nil {
		return err
	}
	var (
		wg  sync.WaitGroup
		run = func(t task) {
			wg.Add(1)
			t.done = func(r result) {
				mu.Lock()
				switch r {
				case resultIndexed:
					st.Indexed++
				case resultRemoved:
					st.Removed++
				case resultFailed:
					st.Failed++
				}
				mu.Unlock()
				wg.Done()
			}
			select {
			case c.queue(t) <- t:
			case <-ctx.Done():
				wg.Done()
			}
		}
	)
	var listErr error
	for l := range c.listTags(ctx, repos) {
		if l.err != nil {
			listErr = l.err
			// Keep what the store has for this repository: it could not be checked.
			for k := range stored {
				if k[0] == l.repo {
					delete(stored, k)
				}
			}
			continue
		}
		for _, ref := range l.refs {
			k := [2]string{l.repo, ref.Tag}
			d, ok := stored[k]
			delete(stored, k)
			if !ok || d != ref.Digest {
				run(task{repo: l.repo, tag: ref.Tag})
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err // some repositories were not listed: what they hold is unknown
	}
	for k := range stored {
		run(task{repo: k[0], tag: k[1]}) // gone from the registry: the worker confirms and removes
	}
	if !waitOrDone(ctx, &wg) {
		return ctx.Err()
	}
	if listErr != nil {
		return listErr
	}
	return ctx.Err()
}

// listConcurrency bounds the repositories whose tags a reconciliation
// lists at once. Listing a repository costs a few storage reads per tag
// (DistributionSource checks that each tag's manifest is there): round trips
// on object storage, which one listing at a time pays one after the other.
const listConcurrency = 16

// tagListing is the tags of a repository, or the error listing them.
type tagListing struct {
	repo string
	refs []TagRef
	err  error
}

// listTags lists the tags of repos, but berth's OLM catalog images,
// listConcurrency repositories at a time, in no particular order. The
// channel is closed after the last listing: read it to the end. When ctx
// ends, the listings not started are left out.
func (c *Catalog) listTags(ctx context.Context, repos []string) <-chan tagListing {
	out := make(chan tagListing, listConcurrency)
	next := make(chan string)
	var wg sync.WaitGroup
	for range listConcurrency {
		wg.Go(func() {
			for repo := range next {
				refs, err := c.repoTags(ctx, repo)
				out <- tagListing{repo: repo, refs: refs, err: err}
			}
		})
	}
	go func() {
		defer close(next)
		for _, repo := range repos {
			if _, ok := olm.CatalogNamespace(repo); ok {
				continue // berth's own OLM catalog images: no packages there
			}
			select {
			case next <- repo:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		wg.Wait()
		close(out)
	}()
	return out
}

// repoTags lists the tags of repo for a reconciliation, removing the
// dangling ones when the source can (TagRepairer).
func (c *Catalog) repoTags(ctx context.Context, repo string) ([]TagRef, error) {
	if r, ok := c.source.(TagRepairer); ok {
		return r.RepairTags(ctx, repo)
	}
	return c.source.Tags(ctx, repo)
}

// waitOrDone waits for wg unless ctx ends first, and reports whether wg
// finished. When ctx ends first, wg's tasks may still be running.
func waitOrDone(ctx context.Context, wg *sync.WaitGroup) bool {
	waited := make(chan struct{})
	go func() {
		wg.Wait()
		close(waited)
	}()
	select {
	case <-waited:
		return true
	case <-ctx.Done():
		return false
	}
}

// reconcileStatus returns the last reconciliation's report.
func (c *Catalog) reconcileStatus() apiv1.ReconcileStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}
