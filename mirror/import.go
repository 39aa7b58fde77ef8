package mirror

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/signing"
)

// ImportOptions say where Import writes and what it checks.
type ImportOptions struct {
	// Client writes to the target, with its credentials.
	Client *client.Client
	// Target is the registry imported into, host[:port]: berth, the
	// upstream registry, zot or any OCI registry.
	Target string
	// ArchiveKey, when set, must have signed the archive manifest; it is
	// checked before anything else is read.
	ArchiveKey *signing.Key
	// Policy, when set, is the trust policy a version's signatures must
	// satisfy, for the repositories it covers, before the version is
	// tagged; a version that fails is quarantined: imported by digest,
	// left untagged and reported.
	Policy *signing.Policy
	// Concurrency is how many versions are imported at a time.
	Concurrency int
	// Progress, when set, is updated as the import goes.
	Progress *Progress
	// ImagePrefixes say where the archive's images go in the target; by
	// default under DefaultImagePrefix.
	ImagePrefixes ImagePrefixes
	// ResourcesDir is where the resources a cluster needs to pull the
	// images from the target are written.
	ResourcesDir string
	// Warn is told what did not stop the import but should be known (an
	// image the export could not carry, a berth target that did not record
	// where the images now live); it may be nil.
	Warn func(string)
	// ChunkSize is the size of the chunks in which blobs larger than it
	// are sent; if <= 0, DefaultChunkSize.
	ChunkSize int64
	// StateDir, when set, is where the uploads of those blobs are
	// recorded (created 0700 when first needed), so that a rerun of a
	// killed import takes each up at the offset the target holds rather
	// than from zero.
	StateDir string
	// Log, when set, says when an upload is resumed or cannot be.
	Log *slog.Logger
}

// Import copies the images and versions of an archive into the target.
// First each image, to the repository ImagePrefixes give it (quay.io/org/img
// to PREFIX/org/img), by digest: blobs, manifests (children before their
// index), cosign's tags and referrers, and last its tag when its reference
// names one (a tag of the target naming another digest is re-pointed and
// reported in Summary.Moved). Then for each version its blobs and
// manifests by digest (skipping what the target has), then cosign's tags,
// then, last, the version's tag, so that a version half imported is never
// tagged; its images are in place by then. A berth target records where
// the images now live (Summary.ImageMirrors). Every blob is checked against its digest
// as it is read. A version whose blobs are all in the archive is imported
// though a part is missing or cut (Summary.Damaged says what is lost). A version that cannot be imported (a corrupt entry, a
// refused push) is reported in Summary.Failed and left untagged; the others
// are imported. Killed at any point, Import run again finishes the job,
// sending only what the target still lacks.
func Import(ctx context.Context, a *Archive, opts ImportOptions) (*Summary, error) {
	start := time.Now()
	if opts.Progress == nil {
		opts.Progress = &Progress{}
	}
	if opts.ArchiveKey != nil {
		if err := a.CheckSignature(*opts.ArchiveKey); err != nil {
			return nil, err
		}
	}
	m := a.Manifest()
	entries, err := checkManifest(m)
	if err != nil {
		return nil, err
	}
	mapping, err := mapImages(m, opts.ImagePrefixes, opts.Target)
	if err != nil {
		return nil, err
	}
	warn := opts.Warn
	if warn == nil {
		warn = func(string) {}
	}
	for _, img := range m.Images {
		if img.Problem != "" {
			warn(fmt.Sprintf("the archive lacks image %s (needed by %s): %s", img.Reference, strings.Join(img.Versions, ", "), img.Problem))
		}
	}
	t := newTarget(ctx, opts.Client, opts.Target, opts.Policy, opts.Progress, len(m.Versions)+len(m.Images))
	t.up = newUploader(opts.ChunkSize, opts.StateDir, opts.Log)
	opts.Progress.VersionsTotal.Store(int64(len(m.Versions)))
	var total int64
	for _, en := range entries {
		if !en.Manifest {
			total += en.Size
		}
	}
	opts.Progress.BytesTotal.Store(total)
	src := archiveSource{a: a, entries: entries}
	mountFrom := mapping.mountFrom(m, entries, opts.ImagePrefixes)
	t.importImages(ctx, a, m, entries, mapping, opts.Concurrency, src, mountFrom)
	forEach(ctx, opts.Concurrency, m.Versions, func(v Version) {
		defer opts.Progress.VersionsDone.Add(1)
		g, err := archiveGraph(a, v, entries)
		if err == nil {
			_, err = t.put(ctx, g, src, mountFrom)
		}
		if err != nil {
			t.counts.fail(v, err)
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sum := t.counts.summary(start)
	sum.BytesResumed = t.up.resumed.Load()
	sum.Damaged = a.Damage()
	// The cluster resources name every mirror the target records, so that
	// applying them after this import keeps what earlier imports mirrored.
	var mirrors []apiv1.ImageMirror
	if len(mapping) > 0 {
		sum.ImageMirrors = mapping.mirrors(opts.Target)
		mirrors = recordMirrors(ctx, opts.Client, opts.Target, sum.ImageMirrors, warn)
	}
	if mirrors == nil {
		mirrors = sum.ImageMirrors
	}
	if opts.ResourcesDir != "" {
		files, err := WriteClusterResources(opts.ResourcesDir, resourcesFor(m, opts.Target, mirrors))
		if err != nil {
			return sum, fmt.Errorf("writing the cluster resources: %w", err)
		}
		sum.Resources = files
	}
	return sum, nil
}

// checkManifest checks that an archive manifest (whose media type
// OpenArchive checked) is whole: every version and image names a valid
// repository, tag and digest, and every digest one needs has its entry. It returns the entries by digest.
func checkManifest(m *Manifest) (map[digest.Digest]Entry, error) {
	entries := make(map[digest.Digest]Entry, len(m.Content))
	for _, en := range m.Content {
		if err := en.Digest.Validate(); err != nil {
			return nil, fmt.Errorf("%s: content entry %q: %w", ManifestFile, en.Digest, err)
		}
		if en.Size < 0 {
			return nil, fmt.Errorf("%s: content entry %s has a negative size", ManifestFile, en.Digest)
		}
		if en.Manifest && en.Size > client.MaxManifestSize {
			return nil, fmt.Errorf("%s: manifest %s of %d bytes; the limit is %d", ManifestFile, en.Digest, en.Size, client.MaxManifestSize)
		}
		entries[en.Digest] = en
	}
	for i, v := range m.Versions {
		what := fmt.Sprintf("%s: version %d (%s:%s)", ManifestFile, i+1, v.Repository, v.Tag)
		if err := pkgformat.ValidRepository(v.Repository); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if err := v.Digest.Validate(); err != nil {
			return nil, fmt.Errorf("%s: digest: %w", what, err)
		}
		tags := []string{v.Tag}
		for _, t := range v.Tags {
			tags = append(tags, t.Tag)
		}
		for _, tag := range tags {
			if err := pkgformat.ValidTag(tag); err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
		}
		if err := checkNeeds(what, v.Needs, v.Digest, v.Referrers, v.Tags, entries); err != nil {
			return nil, err
		}
	}
	if err := checkImages(m, entries); err != nil {
		return nil, err
	}
	return entries, nil
}

// checkNeeds checks that every digest of needs has its entry, and that
// the root manifest, its referrers and the manifests its tags name are
// manifests among needs; what names the version or image.
func checkNeeds(what string, needs []digest.Digest, root digest.Digest, referrers []digest.Digest, tags []Tag, entries map[digest.Digest]Entry) error {
	set := make(map[digest.Digest]bool, len(needs))
	for _, d := range needs {
		if _, ok := entries[d]; !ok {
			return fmt.Errorf("%s needs %s, which the content list lacks", what, d)
		}
		set[d] = true
	}
	for _, d := range append(append([]digest.Digest{root}, referrers...), tagDigests(tags)...) {
		if !set[d] || !entries[d].Manifest {
			return fmt.Errorf("%s: manifest %s is not among what it needs", what, d)
		}
	}
	return nil
}

func tagDigests(tags []Tag) []digest.Digest {
	out := make([]digest.Digest, len(tags))
	for i, t := range tags {
		out[i] = t.Digest
	}
	return out
}

// archiveGraph is the graph of version v as the archive has it: the
// manifests it carries are read (and checked against their digests) to
// order them; what it does not carry the target holds already.
func archiveGraph(a *Archive, v Version, entries map[digest.Digest]Entry) (*graph, error) {
	g := &graph{version: v, nodes: make(map[digest.Digest]*node, len(v.Needs))}
	for _, d := range v.Needs {
		en := entries[d]
		n := &node{desc: ocispec.Descriptor{MediaType: en.MediaType, Digest: en.Digest, Size: en.Size}, manifest: en.Manifest}
		g.nodes[d] = n
		if !en.Manifest || !en.Carried {
			continue
		}
		var err error
		if n.body, err = readAll(a, d); err != nil {
			return nil, err
		}
		if _, _, err := n.parse(); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// readAll reads a manifest of the archive, checked against its digest.
func readAll(a *Archive, d digest.Digest) ([]byte, error) {
	rc, err := a.Open(d)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	body, err := io.ReadAll(io.LimitReader(rc, client.MaxManifestSize+1))
	if err != nil {
		return nil, err
	}
	if len(body) > client.MaxManifestSize {
		return nil, fmt.Errorf("manifest %s: more than %d bytes", d, client.MaxManifestSize)
	}
	return body, nil
}

// archiveSource serves the blobs of an archive.
type archiveSource struct {
	a       *Archive
	entries map[digest.Digest]Entry
}

func (s archiveSource) open(_ context.Context, _ string, desc ocispec.Descriptor) (io.ReadCloser, error) {
	if !s.entries[desc.Digest].Carried {
		return nil, fmt.Errorf("%s: %w", desc.Digest, ErrNotInArchive)
	}
	return s.a.Open(desc.Digest)
}
