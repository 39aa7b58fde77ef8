package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/distribution/distribution/v3/registry/api/errcode"
	storagedriver "github.com/distribution/distribution/v3/registry/storage/driver"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"
)

// ErrInvalid is returned, wrapped, for a malformed repository name or digest.
var ErrInvalid = errors.New("invalid argument")

// Referrers lists the manifests of repository repo whose subject is subject,
// as the descriptors GET /v2/<repo>/referrers/<subject> answers with, ordered
// by digest; artifactType, when not empty, keeps only those of that artifact
// type. An unknown repository or subject has no referrers. It returns an error
// wrapping ErrInvalid when repo or subject is malformed, and the storage's
// error when the index cannot be read.
func (r *Registry) Referrers(ctx context.Context, repo string, subject digest.Digest, artifactType string) ([]v1.Descriptor, error) {
	if _, err := reference.WithName(repo); err != nil {
		return nil, fmt.Errorf("registry: referrers: repository %q: %w: %v", repo, ErrInvalid, err)
	}
	if err := subject.Validate(); err != nil {
		return nil, fmt.Errorf("registry: referrers: subject %q: %w: %v", subject, ErrInvalid, err)
	}
	entries, err := r.guard.referrers.list(ctx, repo, subject, artifactType)
	if err != nil {
		return nil, err
	}
	descs := make([]v1.Descriptor, len(entries))
	for i, e := range entries {
		if err := json.Unmarshal(e.json, &descs[i]); err != nil {
			return nil, fmt.Errorf("registry: referrers of %s in %s: %w", subject, repo, err)
		}
	}
	return descs, nil
}

// repositoriesRoot is where distribution keeps repositories in its storage
// driver (storage/paths.go). The referrers index lives in each repository's
// directory, next to _manifests, so that removing a repository removes it too;
// distribution skips directories whose name starts with "_" when it lists
// repositories.
const repositoriesRoot = "/docker/registry/v2/repositories"

// referrersDir is the directory of the referrers of subject in repo:
// <repo>/_referrers/<alg>/<hex>/, holding one file per referrer.
func referrersDir(repo string, subject digest.Digest) string {
	return path.Join(repositoriesRoot, repo, "_referrers", subject.Algorithm().String(), subject.Encoded())
}

// referrerFile is the file that lists referrer among the referrers of subject
// in repo; it holds the referrer's descriptor as JSON. Its name is
// <alg>.<hex> (storage drivers allow no ":"), so that listing a subject's
// referrers is one List of one directory.
func referrerFile(repo string, subject, referrer digest.Digest) string {
	return referrersDir(repo, subject) + "/" + referrer.Algorithm().String() + "." + referrer.Encoded()
}

// referrerOfFile returns the referrer digest a file of a referrers directory
// is named after; false for any other file, such as a driver's temporary file.
func referrerOfFile(p string) (digest.Digest, bool) {
	name := path.Base(p)
	i := strings.LastIndexByte(name, '.')
	if i <= 0 {
		return "", false
	}
	alg, enc := digest.Algorithm(name[:i]), name[i+1:]
	if !alg.Available() || len(enc) != 2*alg.Size() || strings.Trim(enc, "0123456789abcdef") != "" {
		return "", false // cheaper than Digest.Validate's regular expressions, and as strict for hex digests
	}
	return digest.NewDigestFromEncoded(alg, enc), true
}

// manifestLinkPath is the file by which distribution knows that manifest d
// is in repo (its revision link); deleting the manifest deletes it.
func manifestLinkPath(repo string, d digest.Digest) string {
	return path.Join(repositoriesRoot, repo, "_manifests", "revisions", d.Algorithm().String(), d.Encoded(), "link")
}

// referrerIndex records which manifests of a repository refer to a subject,
// in the registry's storage driver: one file per (repository, subject,
// referrer), so concurrent pushes never overwrite each other's entries and
// every backend holds it.
type referrerIndex struct {
	driver storagedriver.StorageDriver
	cache  *descriptorCache
	log    *slog.Logger
}

// loadConcurrency bounds the referrer files one listing reads at once.
const loadConcurrency = 16

// add records desc as a referrer of subject in repo. Recording it again is
// harmless: the file's content depends only on the referrer's digest.
func (x *referrerIndex) add(ctx context.Context, repo string, subject digest.Digest, desc v1.Descriptor) error {
	b, err := json.Marshal(desc)
	if err != nil {
		return err
	}
	if err := x.driver.PutContent(ctx, referrerFile(repo, subject, desc.Digest), b); err != nil {
		return fmt.Errorf("registry: record referrer %s of %s in %s: %w", desc.Digest, subject, repo, err)
	}
	x.cache.put(referrerKey{repo, subject, desc.Digest}, referrerEntry{artifactType: desc.ArtifactType, json: b})
	return nil
}

// remove forgets referrer as a referrer of subject in repo. The cache entry
// goes first: should the file stay behind, listings find it uncached and
// check the referrer manifest still exists.
func (x *referrerIndex) remove(ctx context.Context, repo string, subject, referrer digest.Digest) error {
	x.cache.drop(referrerKey{repo, subject, referrer})
	err := x.driver.Delete(ctx, referrerFile(repo, subject, referrer))
	if err != nil && !isPathNotFound(err) {
		return fmt.Errorf("registry: remove referrer %s of %s in %s: %w", referrer, subject, repo, err)
	}
	return nil
}

// list returns the referrers of subject in repo, of the given artifact type
// when it is not empty, ordered by digest. It lists the subject's directory
// once; entries come from the cache, the others from their files, read with
// bounded concurrency, each kept only when the manifest it names still exists
// (a file left behind by a delete interrupted between its two steps).
func (x *referrerIndex) list(ctx context.Context, repo string, subject digest.Digest, artifactType string) ([]referrerEntry, error) {
	files, err := x.driver.List(ctx, referrersDir(repo, subject))
	if isPathNotFound(err) {
		return []referrerEntry{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("registry: list referrers of %s in %s: %w", subject, repo, err)
	}
	referrers := make([]digest.Digest, 0, len(files))
	for _, f := range files {
		if d, ok := referrerOfFile(f); ok {
			referrers = append(referrers, d)
		}
	}
	slices.Sort(referrers)
	entries := make([]referrerEntry, len(referrers))
	found := make([]bool, len(referrers))
	missing := x.cache.getAll(repo, subject, referrers, entries, found)
	if len(missing) > 0 {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(loadConcurrency)
		for _, i := range missing {
			g.Go(func() error {
				var err error
				entries[i], found[i], err = x.load(gctx, repo, subject, referrers[i])
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
	}
	out := entries[:0]
	for i, e := range entries {
		if found[i] && (artifactType == "" || e.artifactType == artifactType) {
			out = append(out, e)
		}
	}
	return out, nil
}

// load reads one referrer's entry from its file and caches it. It reports
// false, with no error, when the file is gone, is not a descriptor of the
// referrer, or names a manifest that no longer exists.
func (x *referrerIndex) load(ctx context.Context, repo string, subject, referrer digest.Digest) (referrerEntry, bool, error) {
	file := referrerFile(repo, subject, referrer)
	b, err := x.driver.GetContent(ctx, file)
	if isPathNotFound(err) {
		return referrerEntry{}, false, nil // deleted since the listing
	}
	if err != nil {
		return referrerEntry{}, false, fmt.Errorf("registry: read referrer %s of %s in %s: %w", referrer, subject, repo, err)
	}
	var desc v1.Descriptor
	if err := json.Unmarshal(b, &desc); err != nil || desc.Digest != referrer {
		x.log.Warn("registry: skipping a damaged referrers index entry", "repo", repo, "subject", subject.String(), "file", file, "err", err)
		return referrerEntry{}, false, nil
	}
	if _, err := x.driver.Stat(ctx, manifestLinkPath(repo, referrer)); err != nil {
		if isPathNotFound(err) {
			return referrerEntry{}, false, nil // a delete stopped before removing the entry
		}
		return referrerEntry{}, false, fmt.Errorf("registry: stat referrer %s in %s: %w", referrer, repo, err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		return referrerEntry{}, false, err
	}
	e := referrerEntry{artifactType: desc.ArtifactType, json: compact.Bytes()}
	x.cache.put(referrerKey{repo, subject, referrer}, e)
	return e, true, nil
}

func isPathNotFound(err error) bool {
	var nf storagedriver.PathNotFoundError
	return errors.As(err, &nf)
}

// referrerKey names one entry of the referrers index.
type referrerKey struct {
	repo              string
	subject, referrer digest.Digest
}

// referrerEntry is one referrer as listings use it: its descriptor as JSON,
// ready for the response, and its artifact type, for filters.
type referrerEntry struct {
	artifactType string
	json         []byte
}

// descriptorCache remembers the entries of referrers read from or written to
// the index. A referrer's descriptor is a function of its digest, so an entry
// is never out of date; whether the referrer is still listed is decided by
// the storage's listing, never by the cache. It holds at most limit entries;
// when full, an arbitrary one makes room.
type descriptorCache struct {
	mu      sync.RWMutex
	limit   int
	entries map[referrerKey]referrerEntry
}

// referrerCacheEntries bounds the descriptor cache (a few hundred bytes an
// entry, so some tens of MB at most).
const referrerCacheEntries = 100_000

func newDescriptorCache(limit int) *descriptorCache {
	return &descriptorCache{limit: limit, entries: make(map[referrerKey]referrerEntry)}
}

// getAll fills entries[i] and found[i] for every referrers[i] in the cache
// and returns the indexes of those that are not.
func (c *descriptorCache) getAll(repo string, subject digest.Digest, referrers []digest.Digest, entries []referrerEntry, found []bool) (missing []int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i, r := range referrers {
		entries[i], found[i] = c.entries[referrerKey{repo, subject, r}]
		if !found[i] {
			missing = append(missing, i)
		}
	}
	return missing
}

func (c *descriptorCache) put(k referrerKey, e referrerEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[k]; !ok && len(c.entries) >= c.limit {
		for old := range c.entries {
			delete(c.entries, old)
			break
		}
	}
	c.entries[k] = e
}

func (c *descriptorCache) drop(k referrerKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, k)
}

// referrer is what a manifest with a subject adds to the referrers index.
type referrer struct {
	subject digest.Digest
	desc    v1.Descriptor
}

// referrerOf reads the subject of an OCI image manifest or index, which
// distribution's manifest types leave out, and the descriptor that lists it
// among the subject's referrers: its media type, digest and size, its
// artifactType (for an image manifest without one, its config's media type)
// and its annotations. It returns nil for a manifest with no subject, and
// MANIFEST_INVALID for a subject whose digest is malformed.
func referrerOf(mediaType string, payload []byte) (*referrer, error) {
	if mediaType != v1.MediaTypeImageManifest && mediaType != v1.MediaTypeImageIndex {
		return nil, nil
	}
	var m struct {
		ArtifactType string `json:"artifactType"`
		Config       *struct {
			MediaType string `json:"mediaType"`
		} `json:"config"`
		Subject     *v1.Descriptor    `json:"subject"`
		Annotations map[string]string `json:"annotations"`
	}
	if err := json.Unmarshal(payload, &m); err != nil || m.Subject == nil {
		return nil, nil // distribution has parsed it already; no subject
	}
	if err := m.Subject.Digest.Validate(); err != nil {
		return nil, errcode.ErrorCodeManifestInvalid.WithDetail(fmt.Sprintf("subject digest %q: %v", m.Subject.Digest, err))
	}
	artifactType := m.ArtifactType
	if artifactType == "" && mediaType == v1.MediaTypeImageManifest && m.Config != nil {
		artifactType = m.Config.MediaType
	}
	return &referrer{
		subject: m.Subject.Digest,
		desc: v1.Descriptor{
			MediaType:    mediaType,
			Digest:       digest.FromBytes(payload),
			Size:         int64(len(payload)),
			ArtifactType: artifactType,
			Annotations:  m.Annotations,
		},
	}, nil
}
