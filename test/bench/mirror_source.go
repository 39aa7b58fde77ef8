package main

// The source of the mirror benchmarks (mirror.go): filling a berth with
// signed packages, learning what a copy of it must hold, and checking that
// a destination holds it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/signing"
)

// sourceSet is the filled source: every tag of each repository (versions
// and cosign's sha256-<hex>.sig tags), the referrer counts of the versions
// that have referrers, the namespaces (sorted), totals, and the count and
// size of its blobs and manifests, each once.
type sourceSet struct {
	tags                            map[string][]string // by repository
	referrers                       map[string]map[digest.Digest]int
	repos, namespaces               []string
	versions, digestTags, nReferred int
	uniqueCount                     int
	uniqueBytes                     int64
}

func isDigestTag(tag string) bool { return strings.HasPrefix(tag, "sha256-") }

// mirrorCorpus is the first n packages of the catalog corpus.
func mirrorCorpus(n int) []pkgSpec {
	for versions := 6 * n; ; versions *= 2 {
		// More than n, so that the last one taken has all its versions.
		if c := newCorpus(mirrorSeed, versions); len(c.packages) > n {
			return c.packages[:n]
		}
	}
}

// fillSource pushes every version of n corpus packages to src with berth's
// client (client.PushSigned: by digest, signed, then tagged), waits until
// the catalog has indexed them all, and walks the source for what a copy
// must hold.
func fillSource(ctx context.Context, src *catServer, signer *signing.Signer, n int) (*sourceSet, error) {
	specs := mirrorCorpus(n)
	cl, err := pushClient(src.addr)
	if err != nil {
		return nil, err
	}
	first := make([]int, len(specs)+1) // the number of each package's first version
	for i, p := range specs {
		first[i+1] = first[i] + p.versions
	}
	total := first[len(specs)]
	logf("filling the source %s: %s packages, %s versions, each signed, %d packages at a time", src.addr, thousands(n), thousands(total), fillConcurrency)
	start := time.Now()
	// cosign's library reports every referrer it writes on os.Stderr.
	stderr := os.Stderr
	if null, err := os.Open(os.DevNull); err == nil {
		os.Stderr = null
		defer null.Close()
	}
	var done atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(fillConcurrency)
	for i := range specs {
		g.Go(func() error {
			p := &specs[i]
			pkgs, err := p.build()
			for j := 0; err == nil && j < len(pkgs); j++ {
				var art *pkgformat.Artifact
				if art, err = pkgs[j].Artifact(); err == nil {
					ref := client.Reference{Registry: src.addr, Namespace: p.namespace, Name: p.name, Tag: pkgformat.Tag(pkgs[j].Metadata.Version)}
					_, err = cl.PushSigned(gctx, ref, art, signer, client.SignOptions{Referrer: (first[i]+j)%referrerEvery == referrerEvery-1})
				}
			}
			if d := done.Add(1); d%100 == 0 {
				fmt.Fprintf(stderr, "bench: %d/%d packages pushed and signed\n", d, n)
			}
			return err
		})
	}
	err = g.Wait()
	os.Stderr = stderr
	if err != nil {
		return nil, err
	}
	logf("pushed and signed in %s; waiting for the catalog to index them", time.Since(start).Round(time.Millisecond))
	s := newSearcher(src.addr)
	if _, err := pollUntil(ctx, src.server, mirrorIndexTimeout, 100*time.Millisecond, func() (bool, error) {
		st, err := s.status(ctx)
		return err == nil && st.Versions >= total, nil
	}); err != nil {
		return nil, fmt.Errorf("the source's catalog indexing %d versions: %w", total, err)
	}
	set, err := walkSource(ctx, newTarget("source", src.addr), specs)
	if err == nil && set.versions != total {
		err = fmt.Errorf("the source lists %d version tags, %d were pushed", set.versions, total)
	}
	return set, err
}

// walkSource lists every tag of the repositories of specs on t and fetches
// every manifest the tags and the versions' referrers name, adding up the
// manifests and the blobs they name.
func walkSource(ctx context.Context, t *target, specs []pkgSpec) (*sourceSet, error) {
	s := &sourceSet{tags: map[string][]string{}, referrers: map[string]map[digest.Digest]int{}}
	seen := map[digest.Digest]bool{}
	for _, p := range specs {
		if !slices.Contains(s.namespaces, p.namespace) {
			s.namespaces = append(s.namespaces, p.namespace)
		}
		name := p.namespace + "/" + p.name
		s.repos = append(s.repos, name)
		s.referrers[name] = map[digest.Digest]int{}
		repo := t.repository(name)
		// walk fetches a manifest and adds it, its config and its layers.
		walk := func(reference string) (ocispec.Descriptor, error) {
			desc, rc, err := repo.FetchReference(ctx, reference)
			var m ocispec.Manifest
			if err == nil {
				var body []byte
				body, err = content.ReadAll(rc, desc)
				rc.Close()
				if err == nil {
					err = json.Unmarshal(body, &m)
				}
			}
			for _, d := range append([]ocispec.Descriptor{desc, m.Config}, m.Layers...) {
				if err == nil && !seen[d.Digest] {
					seen[d.Digest] = true
					s.uniqueCount++
					s.uniqueBytes += d.Size
				}
			}
			if err != nil {
				return desc, fmt.Errorf("source %s %s: %w", name, reference, err)
			}
			return desc, nil
		}
		if err := repo.Tags(ctx, "", func(tags []string) error { s.tags[name] = append(s.tags[name], tags...); return nil }); err != nil {
			return nil, fmt.Errorf("source %s: tags: %w", name, err)
		}
		for _, tag := range s.tags[name] {
			desc, err := walk(tag)
			if err != nil {
				return nil, err
			}
			if isDigestTag(tag) {
				s.digestTags++
				continue
			}
			s.versions++
			err = repo.Referrers(ctx, desc, "", func(refs []ocispec.Descriptor) error {
				for _, ref := range refs {
					if _, err := walk(ref.Digest.String()); err != nil {
						return err
					}
					s.referrers[name][desc.Digest]++
					s.nReferred++
				}
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("source %s@%s: referrers: %w", name, desc.Digest, err)
			}
		}
	}
	slices.Sort(s.namespaces)
	return s, nil
}

// Checking a copy.

// copied is what a destination holds of the source; missing names what it
// lacks but cosign's .sig tags, missingDigestTags those.
type copied struct {
	versions, digestTags, referrers int
	missing, missingDigestTags      []string
}

// checkCopy lists the tags of every source repository on t, and the
// referrers of every version that has some.
func checkCopy(ctx context.Context, t *target, src *sourceSet) (copied, error) {
	var c copied
	for _, name := range src.repos {
		repo := t.repository(name)
		have := map[string]bool{}
		err := repo.Tags(ctx, "", func(tags []string) error {
			for _, tag := range tags {
				have[tag] = true
			}
			return nil
		})
		if err != nil && !isNotFound(err) {
			return c, fmt.Errorf("destination %s: tags: %w", name, err)
		}
		for _, tag := range src.tags[name] {
			switch {
			case !have[tag] && isDigestTag(tag):
				c.missingDigestTags = append(c.missingDigestTags, name+":"+tag)
			case !have[tag]:
				c.missing = append(c.missing, name+":"+tag)
			case isDigestTag(tag):
				c.digestTags++
			default:
				c.versions++
			}
		}
		for d, want := range src.referrers[name] {
			n := 0
			err := repo.Referrers(ctx, ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: d}, "", func(refs []ocispec.Descriptor) error {
				n += len(refs)
				return nil
			})
			if err != nil && !isNotFound(err) {
				return c, fmt.Errorf("destination %s@%s: referrers: %w", name, d, err)
			}
			if c.referrers += min(n, want); n < want {
				c.missing = append(c.missing, fmt.Sprintf("%s@%s: %d of %d referrers", name, d, n, want))
			}
		}
	}
	return c, nil
}

// complete fails unless c holds every version and referrer of src and,
// with digestTags, every .sig tag.
func (c copied) complete(src *sourceSet, digestTags bool) error {
	missing := c.missing
	if digestTags {
		missing = append(missing, c.missingDigestTags...)
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("the destination lacks %d things: %s (it holds %d of %d versions, %d of %d .sig tags, %d of %d referrers)",
		len(missing), strings.Join(missing[:min(3, len(missing))], ", "),
		c.versions, src.versions, c.digestTags, src.digestTags, c.referrers, src.nReferred)
}

func isNotFound(err error) bool {
	var resp *errcode.ErrorResponse
	return errors.As(err, &resp) && resp.StatusCode == http.StatusNotFound
}
