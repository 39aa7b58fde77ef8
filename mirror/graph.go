package mirror

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/signing"
)

// maxGraphManifests caps the manifests one version's graph may hold (the
// version, its signatures, attestations and their referrers), so that a
// hostile registry cannot make a walk endless.
const maxGraphManifests = 1024

// maxGraphBytes caps the bytes of the manifests one graph holds in memory
// (each is at most client.MaxManifestSize): an index of many platforms,
// each with its signatures, cannot take more.
const maxGraphBytes = 64 << 20

// maxRepositoryTags caps the tags listed of one repository, so that a
// registry that pages its tag list without end cannot make a walk endless.
const maxRepositoryTags = 1 << 17

// childFilter chooses, of the manifests an image's index lists, those to
// carry, and returns them with the platforms they are for.
type childFilter func(children []ocispec.Descriptor) (kept []ocispec.Descriptor, platforms []string)

// node is a manifest or blob of a version's graph.
type node struct {
	desc ocispec.Descriptor
	// For a manifest: its bytes, the manifests it lists (an index's
	// entries), its blobs (config and layers) and its subject.
	manifest bool
	body     []byte
	children []digest.Digest
	subject  digest.Digest
}

// parse reads what manifest n references: it records the manifests an
// index lists and its subject in n, and returns those manifests and its
// blobs (config and layers).
func (n *node) parse() (children, blobs []ocispec.Descriptor, err error) {
	children, blobs, subject, err := parseManifest(n.desc, n.body)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range children {
		n.children = append(n.children, c.Digest)
	}
	if subject != nil {
		n.subject = subject.Digest
	}
	return children, blobs, nil
}

// graph is everything one version needs in its repository: its manifest,
// the manifests and blobs that manifest references, cosign's tags of it and
// of its referrers, and its referrers, followed until there are none left.
type graph struct {
	version Version
	nodes   map[digest.Digest]*node
	// platforms are those a childFilter kept of the root's index.
	platforms []string
}

// manifests returns the graph's manifests in push order: an index's
// entries before the index, and a subject before the manifests that refer
// to it.
func (g *graph) manifests() []*node {
	var (
		order []*node
		seen  = map[digest.Digest]bool{}
		visit func(d digest.Digest)
	)
	// referrersOf lists the manifests whose subject is d, in digest order.
	referrersOf := map[digest.Digest][]digest.Digest{}
	for d, n := range g.nodes {
		if n.manifest && n.subject != "" {
			referrersOf[n.subject] = append(referrersOf[n.subject], d)
		}
	}
	for _, refs := range referrersOf {
		slices.Sort(refs)
	}
	visit = func(d digest.Digest) {
		n, ok := g.nodes[d]
		if !ok || !n.manifest || seen[d] {
			return
		}
		seen[d] = true
		for _, c := range n.children {
			visit(c)
		}
		order = append(order, n)
		for _, r := range referrersOf[d] {
			visit(r)
		}
	}
	visit(g.version.Digest)
	for _, t := range g.version.Tags {
		visit(t.Digest)
	}
	for _, r := range g.version.Referrers {
		visit(r)
	}
	// Whatever is left (a referrer whose subject is not in the graph) goes
	// last, in digest order.
	rest := make([]digest.Digest, 0)
	for d, n := range g.nodes {
		if n.manifest && !seen[d] {
			rest = append(rest, d)
		}
	}
	slices.Sort(rest)
	for _, d := range rest {
		visit(d)
	}
	return order
}

// blobs returns the graph's blobs in digest order.
func (g *graph) blobs() []*node {
	var out []*node
	for _, n := range g.nodes {
		if !n.manifest {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b *node) int { return cmp.Compare(a.desc.Digest, b.desc.Digest) })
	return out
}

// parseManifest reads what a manifest references: the manifests an index
// lists, the config and layers of an image manifest, and its subject.
func parseManifest(desc ocispec.Descriptor, body []byte) (children, blobs []ocispec.Descriptor, subject *ocispec.Descriptor, err error) {
	var m struct {
		MediaType string               `json:"mediaType"`
		Config    *ocispec.Descriptor  `json:"config"`
		Layers    []ocispec.Descriptor `json:"layers"`
		Blobs     []ocispec.Descriptor `json:"blobs"`
		Manifests []ocispec.Descriptor `json:"manifests"`
		Subject   *ocispec.Descriptor  `json:"subject"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, nil, nil, fmt.Errorf("manifest %s is not JSON: %w", desc.Digest, err)
	}
	if m.Config != nil {
		blobs = append(blobs, *m.Config)
	}
	blobs = append(blobs, m.Layers...)
	blobs = append(blobs, m.Blobs...)
	for _, d := range append(append([]ocispec.Descriptor{}, blobs...), m.Manifests...) {
		if err := d.Digest.Validate(); err != nil {
			return nil, nil, nil, fmt.Errorf("manifest %s references %q: %w", desc.Digest, d.Digest, err)
		}
		if d.Size < 0 {
			return nil, nil, nil, fmt.Errorf("manifest %s references %s with a negative size", desc.Digest, d.Digest)
		}
	}
	return m.Manifests, blobs, m.Subject, nil
}

// walker discovers the graphs of versions in the repositories of one
// registry. It lists each repository's tags once, so that finding cosign's
// tags costs no request per manifest.
type walker struct {
	repo func(name string) *remote.Repository

	mu   sync.Mutex
	tags map[string]*tagList
}

// tagList is the tags of one repository, listed once.
type tagList struct {
	once sync.Once
	tags map[string]bool
	err  error
}

func newWalker(repo func(name string) *remote.Repository) *walker {
	return &walker{repo: repo, tags: map[string]*tagList{}}
}

// tagsOf returns the tags of repository name.
func (w *walker) tagsOf(ctx context.Context, name string) (map[string]bool, error) {
	w.mu.Lock()
	l, ok := w.tags[name]
	if !ok {
		l = &tagList{}
		w.tags[name] = l
	}
	w.mu.Unlock()
	l.once.Do(func() {
		l.tags = map[string]bool{}
		l.err = w.repo(name).Tags(ctx, "", func(tags []string) error {
			for _, t := range tags {
				l.tags[t] = true
			}
			if len(l.tags) > maxRepositoryTags {
				return fmt.Errorf("more than %d tags; refusing to list more", maxRepositoryTags)
			}
			return nil
		})
		if l.err != nil {
			l.err = fmt.Errorf("list the tags of %s: %w", name, l.err)
		}
	})
	return l.tags, l.err
}

// walk discovers the graph of the version v names (Repository, Tag and
// Digest set) in its repository. keep, when not nil, chooses which of the
// manifests the root lists (when it is an index) are followed; the root
// itself is kept as it is.
func (w *walker) walk(ctx context.Context, v Version, keep childFilter) (*graph, error) {
	repo := w.repo(v.Repository)
	tags, err := w.tagsOf(ctx, v.Repository)
	if err != nil {
		return nil, err
	}
	g := &graph{version: v, nodes: map[digest.Digest]*node{}}
	g.version.Tags, g.version.Referrers, g.version.Needs = nil, nil, nil
	// fetched are manifests read by reference (the version, cosign's tags),
	// whose descriptor and bytes come in one request.
	fetched := map[digest.Digest]*node{}
	root, err := fetchReference(ctx, repo, v.Digest.String())
	if err != nil {
		return nil, fmt.Errorf("%s@%s: %w", v.Repository, v.Digest, err)
	}
	if root.desc.Digest != v.Digest {
		return nil, fmt.Errorf("%s@%s: the registry answered %s", v.Repository, v.Digest, root.desc.Digest)
	}
	fetched[root.desc.Digest] = root
	queue := []ocispec.Descriptor{root.desc}
	referrers := map[digest.Digest]bool{}
	var held int64
	for len(queue) > 0 {
		desc := queue[0]
		queue = queue[1:]
		if _, ok := g.nodes[desc.Digest]; ok {
			continue
		}
		if len(g.nodes) >= maxGraphManifests*4 {
			return nil, fmt.Errorf("%s@%s: more than %d manifests and blobs refer to the version; refusing to follow more", v.Repository, v.Digest, maxGraphManifests*4)
		}
		n, ok := fetched[desc.Digest]
		if !ok {
			if n, err = fetchManifest(ctx, repo, desc); err != nil {
				return nil, fmt.Errorf("%s@%s: %w", v.Repository, desc.Digest, err)
			}
		}
		if held += int64(len(n.body)); held > maxGraphBytes {
			return nil, fmt.Errorf("%s@%s: its manifests, signatures and referrers take more than %d MiB; refusing to hold more", v.Repository, v.Digest, maxGraphBytes>>20)
		}
		g.nodes[desc.Digest] = n
		children, blobs, err := n.parse()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", v.Repository, err)
		}
		if keep != nil && desc.Digest == v.Digest && len(children) > 0 {
			children, g.platforms = keep(children)
			if len(children) == 0 {
				return nil, fmt.Errorf("%s@%s: the index has none of the platforms asked for (--platform)", v.Repository, v.Digest)
			}
		}
		queue = append(queue, children...)
		for _, b := range blobs {
			if len(b.URLs) > 0 {
				// A non-distributable layer (a Windows base layer) is
				// pulled from its URLs; registries need not hold it.
				continue
			}
			if _, ok := g.nodes[b.Digest]; !ok {
				g.nodes[b.Digest] = &node{desc: ocispec.Descriptor{MediaType: b.MediaType, Digest: b.Digest, Size: b.Size}}
			}
		}
		for _, tag := range signing.CosignTags(desc.Digest) {
			if !tags[tag] {
				continue
			}
			tn, err := fetchReference(ctx, repo, tag)
			if errors.Is(err, errdef.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("%s:%s: %w", v.Repository, tag, err)
			}
			if _, ok := fetched[tn.desc.Digest]; !ok {
				fetched[tn.desc.Digest] = tn
			}
			g.version.Tags = append(g.version.Tags, Tag{Tag: tag, Digest: tn.desc.Digest})
			queue = append(queue, tn.desc)
		}
		err = repo.Referrers(ctx, desc, "", func(refs []ocispec.Descriptor) error {
			for _, r := range refs {
				if !referrers[r.Digest] {
					referrers[r.Digest] = true
					queue = append(queue, ocispec.Descriptor{MediaType: r.MediaType, Digest: r.Digest, Size: r.Size})
				}
			}
			return nil
		})
		if err != nil && !errors.Is(err, errdef.ErrNotFound) && !errors.Is(err, errdef.ErrUnsupported) {
			return nil, fmt.Errorf("the referrers of %s@%s: %w", v.Repository, desc.Digest, err)
		}
		if len(referrers) > maxGraphManifests {
			return nil, fmt.Errorf("%s@%s: more than %d referrers; refusing to follow more", v.Repository, v.Digest, maxGraphManifests)
		}
	}
	for d := range referrers {
		g.version.Referrers = append(g.version.Referrers, d)
	}
	slices.Sort(g.version.Referrers)
	slices.SortFunc(g.version.Tags, func(a, b Tag) int { return cmp.Compare(a.Tag, b.Tag) })
	for d := range g.nodes {
		g.version.Needs = append(g.version.Needs, d)
	}
	slices.Sort(g.version.Needs)
	return g, nil
}

// fetchReference reads the manifest a tag or digest names, in one request,
// capped; the digest the registry gives is checked against the bytes.
func fetchReference(ctx context.Context, repo *remote.Repository, ref string) (*node, error) {
	desc, rc, err := repo.FetchReference(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if err := checkManifestDescriptor(desc); err != nil {
		return nil, err
	}
	return readManifest(desc, rc)
}

// fetchManifest reads a manifest, capped and verified against its digest.
func fetchManifest(ctx context.Context, f content.Fetcher, desc ocispec.Descriptor) (*node, error) {
	if err := checkManifestDescriptor(desc); err != nil {
		return nil, err
	}
	rc, err := f.Fetch(ctx, desc)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return readManifest(desc, rc)
}

// readManifest reads the manifest desc describes from r, verified against
// its digest and size.
func readManifest(desc ocispec.Descriptor, r io.Reader) (*node, error) {
	body, err := content.ReadAll(r, desc)
	if err != nil {
		return nil, err
	}
	return &node{desc: desc, manifest: true, body: body}, nil
}

// checkManifestDescriptor refuses a descriptor that is not a manifest's, or
// of a manifest larger than client.MaxManifestSize.
func checkManifestDescriptor(desc ocispec.Descriptor) error {
	if desc.Size > client.MaxManifestSize {
		return fmt.Errorf("manifest of %d bytes; the limit is %d", desc.Size, client.MaxManifestSize)
	}
	if !client.IsManifest(desc.MediaType) {
		return fmt.Errorf("media type %q is not a manifest's", desc.MediaType)
	}
	return nil
}
