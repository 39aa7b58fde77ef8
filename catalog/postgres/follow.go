package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/searchindex"
	"github.com/berth-registry/berth/internal/pgpool"
)

// storedDoc is a package's search document as the packages row holds it.
type storedDoc struct {
	Summary     apiv1.PackageSummary    `json:"summary"`
	Maintainers string                  `json:"maintainers,omitempty"`
	APIs        string                  `json:"apis,omitempty"`
	Channels    []string                `json:"channels,omitempty"`
	Provides    [][2]string             `json:"provides,omitempty"`
	Kube        []searchindex.KubeRange `json:"kube,omitempty"`
	Images      [][3]string             `json:"images,omitempty"`
}

func encodeDoc(d *searchindex.Doc) *storedDoc {
	sd := &storedDoc{Summary: d.Summary, Maintainers: d.Maintainers, APIs: d.APIs, Channels: d.Channels, Kube: d.Kube}
	for _, p := range d.Provides {
		sd.Provides = append(sd.Provides, [2]string{p.Group, p.Kind})
	}
	for _, im := range d.Images {
		sd.Images = append(sd.Images, [3]string{im.Repository, im.Tag, im.Digest})
	}
	return sd
}

func decodeDoc(b []byte) (*searchindex.Doc, error) {
	var sd storedDoc
	if err := json.Unmarshal(b, &sd); err != nil {
		return nil, err
	}
	d := &searchindex.Doc{Summary: sd.Summary, Maintainers: sd.Maintainers, APIs: sd.APIs, Channels: sd.Channels, Kube: sd.Kube}
	for _, p := range sd.Provides {
		d.Provides = append(d.Provides, catalog.APIFilter{Group: p[0], Kind: p[1]})
	}
	for _, im := range sd.Images {
		d.Images = append(d.Images, catalog.ImageRef{Repository: im[0], Tag: im[1], Digest: im[2]})
	}
	return d, nil
}

// load builds the index from every package's document, in one snapshot.
func (s *Store) load(ctx context.Context) error {
	n, err := s.readRevs(ctx, 0, false)
	if err != nil {
		return err
	}
	s.log.Debug("catalog: search index loaded", "packages", n)
	return nil
}

// follow keeps the index current with the other replicas' writes until ctx
// ends: it reads the revisions above the last it read each time a
// notification comes, and every Poll without one, so that a lost
// notification or a broken listening connection delays a document by one
// Poll at most.
func (s *Store) follow(ctx context.Context) {
	wake := make(chan struct{}, 1)
	go s.listen(ctx, wake)
	tick := time.NewTicker(s.poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-tick.C:
		}
		s.mu.Lock()
		after := s.applied
		s.mu.Unlock()
		if _, err := s.readRevs(ctx, after, true); err != nil && ctx.Err() == nil {
			s.log.Warn("catalog: following the database", "err", err)
		}
	}
}

// listen sends on wake each time a write notifies, on a connection of its
// own, connecting again after a failure, until ctx ends.
func (s *Store) listen(ctx context.Context, wake chan<- struct{}) {
	pgpool.Listen(ctx, s.pool, notifyChannel, time.Second, func(err error) {
		s.log.Warn("catalog: listening for other replicas' writes; polling meanwhile", "err", err)
	}, func(string) {
		select {
		case wake <- struct{}{}:
		default:
		}
	})
}

// readBatch is how many packages the follower reads per query.
const readBatch = 1000

// readRevs applies the documents of the packages whose revision is above
// after, in revision order, and returns how many it read; tell says whether
// OnChange hears of them.
func (s *Store) readRevs(ctx context.Context, after int64, tell bool) (int, error) {
	total := 0
	for {
		type pkgRow struct {
			key pkgKey
			rev int64
			doc *searchindex.Doc
		}
		var batch []pkgRow
		rows, err := s.pool.Query(ctx, `SELECT namespace, name, rev, doc FROM packages WHERE rev > $1 ORDER BY rev LIMIT $2`, after, readBatch)
		if err != nil {
			return total, err
		}
		for rows.Next() {
			var r pkgRow
			var doc []byte
			if err := rows.Scan(&r.key.namespace, &r.key.name, &r.rev, &doc); err != nil {
				rows.Close()
				return total, err
			}
			if doc != nil {
				if r.doc, err = decodeDoc(doc); err != nil {
					rows.Close()
					return total, fmt.Errorf("document of %s/%s: %w", r.key.namespace, r.key.name, err)
				}
			}
			batch = append(batch, r)
		}
		if err := rows.Err(); err != nil {
			return total, err
		}
		for _, r := range batch {
			if s.apply(r.key.namespace, r.key.name, r.rev, r.doc) && tell && s.onChange != nil {
				s.onChange(r.key.namespace, r.key.name)
			}
			after = r.rev
		}
		s.mu.Lock()
		s.applied = max(s.applied, after)
		s.mu.Unlock()
		total += len(batch)
		if len(batch) < readBatch {
			return total, nil
		}
	}
}

// apply sets the document of a package at revision rev in the index (nil
// removes the package), unless the index already holds that revision or a
// later one. It reports whether it applied it.
func (s *Store) apply(namespace, name string, rev int64, doc *searchindex.Doc) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := pkgKey{namespace, name}
	if rev <= s.revs[k] {
		return false
	}
	s.revs[k] = rev
	if doc != nil {
		s.index.Set(doc)
	} else {
		s.index.Remove(namespace, name)
	}
	return true
}
