package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"path"
	"strings"
	"sync"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/pkgformat"
)

// The background re-index reads again, a page at a time, the versions
// recorded with an IndexVersion below this berth's, reindexConcurrency at
// once: after an upgrade, so that what indexing derives now reaches the
// versions indexed before.
const (
	reindexPage        = 100
	reindexConcurrency = 2
)

// lead is what this process does while it leads (always, without an
// Elector): the re-index in the background, and the reconciliations.
func (c *Catalog) lead(ctx context.Context) {
	c.background.Add(1)
	go func() {
		defer c.background.Done()
		c.reindex(ctx)
	}()
	c.reconcileLoop(ctx)
}

// reindex reads again every version recorded with an older IndexVersion,
// in namespace, name and tag order, until none is left or ctx ends. It asks
// the store only for what is still old, so that a pass cut short (by a
// restart, or by the loss of the leadership) resumes where it stopped. A
// version that cannot be read stays old until the next pass, at the next
// start or leadership.
func (c *Catalog) reindex(ctx context.Context) {
	var after TagDigest
	for {
		page, err := c.store.Stale(ctx, IndexVersion, after, reindexPage)
		if err != nil {
			if ctx.Err() == nil {
				c.log.Error("catalog: list the versions to index again", "err", err)
			}
			return
		}
		if len(page) == 0 {
			c.reindexPending(ctx, after != TagDigest{})
			return
		}
		c.reindexPending(ctx, true)
		sem := make(chan struct{}, reindexConcurrency)
		var wg sync.WaitGroup
		for _, t := range page {
			if ctx.Err() != nil {
				break
			}
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				c.reindexVersion(ctx, t)
			}()
		}
		wg.Wait()
		if ctx.Err() != nil {
			return
		}
		after = page[len(page)-1]
	}
}

// reindexPending sets the pending gauge: from the store's count when
// count is set, else to 0 (the first page found none).
func (c *Catalog) reindexPending(ctx context.Context, count bool) {
	if !count {
		c.metrics.reindex.WithLabelValues("pending").Set(0)
		return
	}
	st, err := c.store.Stats(ctx)
	if err != nil {
		return
	}
	c.metrics.reindex.WithLabelValues("pending").Set(float64(st.Reindex.Pending))
}

// reindexVersion reads t again from the registry and records what it reads
// in place of t's entry, unless the tag was re-pointed or removed since.
func (c *Catalog) reindexVersion(ctx context.Context, t TagDigest) {
	repo := t.Namespace + "/" + t.Name
	if c.locks != nil {
		unlock, err := c.locks.Lock(ctx, "catalog:"+repo+":"+t.Tag)
		if err != nil {
			return
		}
		defer unlock()
	}
	e, err := c.ix.read(ctx, repo, t.Tag, t.Digest)
	if errors.Is(err, ErrNotFound) {
		// Gone from the registry: the reconciliation removes the tag.
		c.wantReconcile()
		return
	}
	if err == nil {
		err = c.storeBundle(ctx, repo, e)
	}
	changed := false
	if err == nil {
		changed, err = c.store.Reindex(ctx, e)
	}
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("catalog: index a version again", "repo", repo, "tag", t.Tag, "err", err)
		}
		return
	}
	if changed {
		c.metrics.reindexed.Add(1)
		c.metrics.reindex.WithLabelValues("done").Set(float64(c.metrics.reindexed.Load()))
		c.changed(t.Namespace, t.Name)
	}
}

// maxCSV bounds the OLM CSV whose alm-examples are read.
const maxCSV = 4 << 20

// IsCSV reports whether the file of a package at path, of size bytes, is
// the one whose alm-examples the catalog records: a ClusterServiceVersion
// (named *.clusterserviceversion.yaml or .yml) of at most 4 MiB. Of an OLM
// package's files, the first that is one holds its examples.
func IsCSV(file string, size int64) bool {
	base := path.Base(file)
	return size <= maxCSV && (strings.HasSuffix(base, ".clusterserviceversion.yaml") || strings.HasSuffix(base, ".clusterserviceversion.yml"))
}

// csvExamples are the alm-examples of an OLM version's CSV, parsed under
// limits (pkgformat.CSVExamples): read from the olm.csv.metadata property of
// its bundle record, which holds the CSV's annotations, or, without one,
// from the CSV among files; none for other formats, and none when the CSV
// has none or they do not parse, which does not make the version invalid.
// The property spares parsing the whole CSV again, which costs about as
// much as reading the package.
func csvExamples(ctx context.Context, e *Entry, files []pkgformat.File, limits pkgformat.Limits) map[string][]string {
	if e.Metadata == nil || e.Metadata.Format != pkgformat.OLM {
		return nil
	}
	file, data := "", []byte(nil)
	if e.OLM != nil {
		for _, p := range e.OLM.Properties {
			if p.Type != "olm.csv.metadata" {
				continue
			}
			var md struct {
				Annotations map[string]string `json:"annotations"`
			}
			if json.Unmarshal(p.Value, &md) != nil || md.Annotations[annotationExamples] == "" {
				return nil
			}
			// JSON is YAML: the CSV reduced to its examples.
			file = "olm.csv.metadata"
			data, _ = json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{annotationExamples: md.Annotations[annotationExamples]}}})
		}
	}
	for _, f := range files {
		if data == nil && IsCSV(f.Path, int64(len(f.Data))) {
			file, data = f.Path, f.Data
		}
	}
	if data == nil {
		return nil
	}
	examples, err := pkgformat.CSVExamples(ctx, file, data, limits)
	if err != nil || len(examples) == 0 {
		return nil
	}
	return examples
}

// annotationExamples is the CSV annotation of OLM's examples.
const annotationExamples = "alm-examples"

// Examples returns the alm-examples of a version's CSV (Entry.Examples),
// and whether the catalog recorded them: false for a version indexed before
// they were recorded that the re-index has not read again yet, whose
// examples only its CSV holds.
func (c *Catalog) Examples(ctx context.Context, access Access, ns, name, version string) (map[string][]string, bool, error) {
	if !access.Allows(ns, name) {
		return nil, false, errorf(ErrNotFound, "package %s/%s has no version %s", ns, name, version)
	}
	examples, v, err := c.store.Examples(ctx, ns, name, pkgformat.Tag(version))
	if errors.Is(err, ErrNotFound) {
		return nil, false, errorf(ErrNotFound, "package %s/%s has no version %s", ns, name, version)
	}
	if err != nil {
		return nil, false, err
	}
	return examples, v >= 2, nil
}

// reindexStatus is the re-index's part of Status, beside the store's count
// of pending versions.
func (c *Catalog) reindexStatus(st *apiv1.ReindexStatus) {
	st.IndexVersion, st.Done = IndexVersion, c.metrics.reindexed.Load()
}
