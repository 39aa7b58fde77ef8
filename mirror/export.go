package mirror

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/signing"
)

// ExportOptions say what Export carries and where it writes it.
type ExportOptions struct {
	// Client reads the source, with its credentials.
	Client *client.Client
	// Source is the berth server exported from, host[:port], and Catalog
	// its catalog API, which resolves the selection and tells the images
	// of each version.
	Source  string
	Catalog ExportCatalog
	// Selection chooses the versions.
	Selection *Selection
	// Output is a directory, or a FILE.tar (split into FILE-001.tar, ...
	// with MaxSize).
	Output  string
	MaxSize int64
	// Base, when set, is what the far side holds already (an inventory, or
	// InventoryOf the previous archive's manifest): only what it lacks is
	// carried. BaseInfo describes it in the archive manifest.
	Base     *Inventory
	BaseInfo *Base
	// SkipImages leaves out the container images the versions run; by
	// default each is carried by digest (see Export).
	SkipImages bool
	// RegistryMap says where the images of a registry are read from; they
	// keep their own names in the archive.
	RegistryMap RegistryMap
	// Platforms, when set, are the platforms whose manifests are carried of
	// an image index; the index itself is carried unchanged. By default
	// every child is.
	Platforms []ocispec.Platform
	// Signer, when set, signs the archive manifest.
	Signer *signing.Signer
	// Concurrency is how many versions are read at a time.
	Concurrency int
	// Progress, when set, is updated as the export goes.
	Progress *Progress
	// Warn is told what the selection matched oddly (a rule that matched
	// nothing); it may be nil.
	Warn func(string)
}

// Export writes the versions the selection chooses in the source, with
// their signatures, attestations and referrers, to an archive. A version
// that cannot be read is reported in Summary.Failed and left out; the
// archive still holds every other version.
//
// Unless SkipImages, it also carries the container images the versions run
// (as the source's catalog lists them), each by digest: a tag is resolved
// when exporting and both are recorded (Manifest.Images); an index keeps
// the children of Platforms only, when set; with each image go its
// cosign tags and referrers. A blob shared between images and packages is
// stored once. An image that cannot be read is reported in
// Summary.ImagesFailed, with the versions that run it, and recorded in the
// manifest with its Problem; the others are carried.
//
// Export fails only when no archive could be written.
func Export(ctx context.Context, opts ExportOptions) (*Summary, error) {
	start := time.Now()
	if opts.Progress == nil {
		opts.Progress = &Progress{}
	}
	res, err := Resolve(ctx, opts.Catalog, opts.Selection)
	if err != nil {
		return nil, err
	}
	if opts.Warn != nil {
		for _, w := range res.Warnings {
			opts.Warn(w)
		}
	}
	w, err := CreateArchive(opts.Output, ArchiveOptions{MaxSize: opts.MaxSize})
	if err != nil {
		return nil, err
	}
	e := &exporter{
		opts:    opts,
		w:       w,
		walker:  newWalker(func(name string) *remote.Repository { return opts.Client.Repository(opts.Source, name) }),
		base:    newHoldings(opts.Base),
		entries: map[digest.Digest]*Entry{},
		images:  map[string]*imageWant{},
	}
	e.imageWalker = newWalker(e.imageRepository)
	opts.Progress.VersionsTotal.Store(int64(len(res.Versions)))
	forEach(ctx, opts.Concurrency, res.Versions, func(s Selected) {
		defer opts.Progress.VersionsDone.Add(1)
		v := Version{Repository: s.Repository(), Tag: s.Tag, Version: s.Version, Format: s.Format, Digest: s.Digest}
		if err := e.export(ctx, v); err != nil {
			e.counts.fail(v, err)
			return
		}
		if !opts.SkipImages {
			e.wantImages(ctx, s, v)
		}
	})
	e.exportImages(ctx)
	if err := ctx.Err(); err != nil {
		return nil, errors.Join(err, w.Abort())
	}
	m := e.manifest()
	if err := w.Finish(e.index(m), m, opts.Signer); err != nil {
		return nil, errors.Join(err, w.Abort())
	}
	sum := e.counts.summary(start)
	sum.Versions = len(m.Versions)
	sum.Bytes = w.Size()
	for _, c := range m.Content {
		if !c.Carried {
			sum.BytesSkipped += c.Size
		}
	}
	sum.Files = []string{opts.Output}
	if len(m.Parts) > 0 {
		sum.Files = sum.Files[:0]
		for _, p := range m.Parts {
			sum.Files = append(sum.Files, filepath.Join(filepath.Dir(opts.Output), p.File))
		}
	}
	return sum, nil
}

// exporter is one export under way.
type exporter struct {
	opts   ExportOptions
	w      *ArchiveWriter
	walker *walker
	// imageWalker walks images, in their registries.
	imageWalker *walker
	base        *holdings
	counts      counters

	mu       sync.Mutex
	versions []Version
	entries  map[digest.Digest]*Entry
	// images are the images wanted, by normalised reference.
	images map[string]*imageWant
}

// export discovers the graph of v in the source and writes to the archive
// what the far side lacks of it.
func (e *exporter) export(ctx context.Context, v Version) error {
	g, err := e.walker.walk(ctx, v, nil)
	if err != nil {
		return err
	}
	repo := e.opts.Client.Repository(e.opts.Source, v.Repository)
	for _, d := range g.version.Needs {
		n := g.nodes[d]
		held, at := e.base.holds(v.Repository, n)
		if held {
			e.record(n, false, at)
			continue
		}
		if err := e.write(ctx, repo, n); err != nil {
			return err
		}
		e.record(n, true, "")
	}
	e.mu.Lock()
	e.versions = append(e.versions, g.version)
	e.mu.Unlock()
	return nil
}

// write adds n to the archive unless it holds it already: a manifest from
// the bytes the walk read, a blob streamed from the source.
func (e *exporter) write(ctx context.Context, repo *remote.Repository, n *node) error {
	if e.w.Has(n.desc.Digest) {
		return nil
	}
	var r io.Reader = bytes.NewReader(n.body)
	if !n.manifest {
		rc, err := repo.Fetch(ctx, n.desc)
		if err != nil {
			return fmt.Errorf("fetch blob %s: %w", n.desc.Digest, err)
		}
		defer rc.Close()
		r = &countingReader{r: rc, n: &e.opts.Progress.BytesDone}
	}
	added, err := e.w.Add(ctx, n.desc, r)
	switch {
	case err != nil:
		return err
	case added && n.manifest:
		e.counts.manifests.Add(1)
	case added:
		e.counts.blobs.Add(1)
	}
	return nil
}

// record notes that the archive carries n, or that the far side holds it
// (in repository at).
func (e *exporter) record(n *node, carried bool, at string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	en, ok := e.entries[n.desc.Digest]
	if !ok {
		en = &Entry{Digest: n.desc.Digest, Size: n.desc.Size, MediaType: n.desc.MediaType, Manifest: n.manifest}
		e.entries[n.desc.Digest] = en
	}
	if carried {
		en.Carried, en.At = true, ""
	} else if !en.Carried && en.At == "" {
		en.At = at
	}
}

// manifest is the archive manifest of the versions exported.
func (e *exporter) manifest() *Manifest {
	e.mu.Lock()
	defer e.mu.Unlock()
	slices.SortFunc(e.versions, func(a, b Version) int {
		if c := cmp.Compare(a.Repository, b.Repository); c != 0 {
			return c
		}
		return cmp.Compare(a.Tag, b.Tag)
	})
	m := &Manifest{
		SchemaVersion: 1,
		MediaType:     ManifestMediaType,
		Source:        e.opts.Source,
		Created:       time.Now().UTC().Truncate(time.Second),
		Selection:     e.opts.Selection,
		Base:          e.opts.BaseInfo,
		Versions:      e.versions,
		Images:        e.imageList(),
	}
	needed := map[digest.Digest]bool{}
	for _, v := range e.versions {
		for _, d := range v.Needs {
			needed[d] = true
		}
	}
	for _, img := range m.Images {
		for _, d := range img.Needs {
			needed[d] = true
		}
	}
	for d, en := range e.entries {
		if needed[d] {
			m.Content = append(m.Content, *en)
		}
	}
	slices.SortFunc(m.Content, func(a, b Entry) int { return cmp.Compare(a.Digest, b.Digest) })
	return m
}

// index is the archive's index.json: every version and cosign tag the
// archive carries under its full reference name (source/repository:tag),
// every image under its full source reference (quay.io/org/img:1.0, or
// @sha256:… when named by digest) and its cosign tags likewise, and every
// referrer it carries, untagged.
func (e *exporter) index(m *Manifest) ocispec.Index {
	idx := ocispec.Index{MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{}}
	idx.SchemaVersion = 2
	carried := map[digest.Digest]Entry{}
	for _, en := range m.Content {
		if en.Carried && en.Manifest {
			carried[en.Digest] = en
		}
	}
	listed := map[string]bool{}
	add := func(d digest.Digest, ref string) {
		en, ok := carried[d]
		if !ok || listed[d.String()+" "+ref] {
			return
		}
		listed[d.String()+" "+ref] = true
		desc := ocispec.Descriptor{MediaType: en.MediaType, Digest: en.Digest, Size: en.Size}
		if ref != "" {
			desc.Annotations = map[string]string{ocispec.AnnotationRefName: ref}
		}
		idx.Manifests = append(idx.Manifests, desc)
	}
	for _, v := range m.Versions {
		add(v.Digest, m.Source+"/"+v.Repository+":"+v.Tag)
		for _, t := range v.Tags {
			add(t.Digest, m.Source+"/"+v.Repository+":"+t.Tag)
		}
		for _, r := range v.Referrers {
			add(r, "")
		}
	}
	for _, img := range m.Images {
		if img.Problem != "" {
			continue
		}
		add(img.Digest, img.Reference)
		for _, t := range img.Tags {
			add(t.Digest, img.Repository+":"+t.Tag)
		}
		for _, r := range img.Referrers {
			add(r, "")
		}
	}
	return idx
}

// holdings is what the far side holds, by repository and by digest.
type holdings struct {
	repos map[string]map[digest.Digest]bool
	// anywhere maps a digest to the first repository, in name order, that
	// holds it.
	anywhere map[digest.Digest]string
	// bySuffix maps every tail of repository names, by whole components
	// (org/img and img of mirror/org/img), to the repositories, in name
	// order, whose names end with it.
	bySuffix map[string][]string
}

func newHoldings(inv *Inventory) *holdings {
	h := &holdings{repos: map[string]map[digest.Digest]bool{}, anywhere: map[digest.Digest]string{}, bySuffix: map[string][]string{}}
	if inv == nil {
		return h
	}
	names := make([]string, 0, len(inv.Repositories))
	for name := range inv.Repositories {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		set := map[digest.Digest]bool{}
		for _, d := range inv.Repositories[name] {
			set[d] = true
			if _, ok := h.anywhere[d]; !ok {
				h.anywhere[d] = name
			}
		}
		h.repos[name] = set
		for tail := name; ; {
			h.bySuffix[tail] = append(h.bySuffix[tail], name)
			_, rest, ok := strings.Cut(tail, "/")
			if !ok {
				break
			}
			tail = rest
		}
	}
	return h
}

// holds reports whether the far side has n where repository needs it: a
// manifest in that very repository (manifests cannot be mounted), a blob in
// any repository, and at is a repository holding it.
func (h *holdings) holds(repository string, n *node) (bool, string) {
	if h.repos[repository][n.desc.Digest] {
		return true, repository
	}
	if n.manifest {
		return false, ""
	}
	at, ok := h.anywhere[n.desc.Digest]
	return ok, at
}
