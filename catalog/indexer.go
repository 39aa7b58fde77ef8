package catalog

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/olm"
	"github.com/berth-registry/berth/pkgformat"
)

// indexer reads what a tag names into an Entry.
type indexer struct {
	source Source
	limits pkgformat.Limits
	now    func() time.Time
	// timeout bounds the reading of one package; memory is shared by the
	// packages read at once.
	timeout time.Duration
	memory  *memoryBudget
}

// read reads the manifest repo@digest, tagged tag, into an entry. Whatever is
// wrong with the artifact itself is recorded in the entry (status invalid or
// ignored, with the reason); the error is reserved for a registry that could
// not be read, and wraps ErrNotFound when the manifest is gone.
func (ix *indexer) read(ctx context.Context, repo, tag, dgst string) (*Entry, error) {
	// A repository not shaped <namespace>/<name> is recorded, and ignored, under
	// the part before its first "/" and the rest, which no package can collide with.
	ns, name, _ := strings.Cut(repo, "/")
	e := &Entry{Namespace: ns, Name: name, Tag: tag, Digest: dgst, Indexed: ix.now().UTC()}
	if reason := repositoryProblem(repo); reason != "" {
		return e.ignore(reason), nil
	}
	mediaType, payload, err := ix.source.Manifest(ctx, repo, dgst)
	if err != nil {
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnavailable) || ctx.Err() != nil {
			return nil, err
		}
		return e.ignore(fmt.Sprintf("unreadable manifest: %v", err)), nil
	}
	return ix.readManifest(ctx, e, repo, mediaType, payload, true)
}

// readManifest reads into e the package a manifest, read or being pushed,
// describes, with an OLM version's bundle image when withBundle is set; its
// errors are read's.
func (ix *indexer) readManifest(ctx context.Context, e *Entry, repo, mediaType string, payload []byte, withBundle bool) (*Entry, error) {
	dgst := e.Digest
	e.IndexVersion = IndexVersion
	class := pkgformat.ClassifyManifest(mediaType, payload)
	if !class.IsPackage() {
		return e.ignore(class.Reason), nil
	}
	pkgCtx, cancel := context.WithTimeout(ctx, ix.timeout)
	subject := ocispec.Descriptor{MediaType: mediaType, Digest: digest.Digest(dgst), Size: int64(len(payload))}
	err := ix.readPackage(pkgCtx, e, repo, class.Content, subject, withBundle)
	cancel()
	if err != nil {
		if errors.Is(err, ErrUnavailable) || ctx.Err() != nil {
			return nil, err
		}
		err = tooLong(err, ix.timeout)
		e.Status, e.Reason, e.Metadata, e.Files = apiv1.StatusInvalid, err.Error(), nil, nil
		return e, nil
	}
	e.Status = apiv1.StatusIndexed
	return e, nil
}

func (e *Entry) ignore(reason string) *Entry {
	e.Status, e.Reason = apiv1.StatusIgnored, reason
	return e
}

// repositoryProblem says why repo cannot hold a package, or "".
func repositoryProblem(repo string) string {
	parts := strings.Split(repo, "/")
	if len(parts) != 2 {
		return "not a package repository: packages live at <namespace>/<name>"
	}
	for _, err := range []error{pkgformat.ValidNamespace(parts[0]), pkgformat.ValidName(parts[1])} {
		if err != nil {
			return fmt.Sprintf("not a package repository: %v", err)
		}
	}
	return ""
}

// readPackage reads the content of a package into e. Its metadata is derived
// from the content alone, as pkgformat reads a package directory: whatever the
// config blob claims is not read (docs/package-format.md, "What the catalog
// trusts"). With withBundle, an OLM version also gets its bundle image
// (olm.BuildBundle), whose subject is the version's manifest; one that cannot
// have one is still a version, without it (e.bundleErr says why), and one
// whose bundle opm would refuse (olm.ValidateBundle) is invalid. Its errors
// describe what is wrong with the package; errors of the registry wrap
// ErrUnavailable.
func (ix *indexer) readPackage(ctx context.Context, e *Entry, repo string, layer, subject ocispec.Descriptor, withBundle bool) error {
	content, err := ix.blob(ctx, repo, layer, ix.limits.MaxArchiveSize, "content layer")
	if err != nil {
		return err
	}
	files, err := pkgformat.ReadArchive(bytes.NewReader(content), ix.limits)
	if err != nil {
		return fmt.Errorf("content: %w", err)
	}
	release, err := ix.memory.acquire(ctx, packageCost(files, ix.limits))
	if err != nil {
		return err
	}
	defer release()
	p, err := pkgformat.New(files, pkgformat.Options{Limits: ix.limits, Name: e.Name, Version: e.Tag, Context: ctx})
	if err != nil {
		return err
	}
	located, err := locateFiles(content, files, p.Metadata.Files)
	if err != nil {
		return err
	}
	e.Metadata = &p.Metadata
	e.Files = located
	e.Content = apiv1.Content{Digest: layer.Digest.String(), Size: layer.Size, MediaType: layer.MediaType}
	if withBundle && p.Metadata.Format == pkgformat.OLM {
		bundle, err := olm.BuildBundle(p, layer, content, subject)
		if err != nil {
			e.bundleErr, e.Examples = err, csvExamples(ctx, e, files, ix.limits)
			return nil
		}
		// A bundle opm would refuse makes the namespace's whole catalog
		// invalid: the version is invalid, with opm's rule as its reason.
		if err := olm.ValidateBundle(&p.Metadata, bundle.Record); err != nil {
			return err
		}
		e.bundle, e.OLM = bundle, bundle.Record
	}
	e.Examples = csvExamples(ctx, e, files, ix.limits)
	return nil
}

// blob reads a blob of at most max bytes and checks its digest and size.
func (ix *indexer) blob(ctx context.Context, repo string, desc ocispec.Descriptor, max int64, what string) ([]byte, error) {
	if desc.Size > max {
		return nil, fmt.Errorf("%s of %d bytes is over the %d byte limit", what, desc.Size, max)
	}
	rc, err := ix.source.Blob(ctx, repo, desc.Digest.String())
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%s %s is missing from the registry", what, desc.Digest)
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, max+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %w", what, desc.Digest, ErrUnavailable, err)
	}
	if int64(len(b)) != desc.Size {
		return nil, fmt.Errorf("%s %s: the manifest says %d bytes, the blob has %d", what, desc.Digest, desc.Size, len(b))
	}
	if desc.Digest.Validate() != nil || desc.Digest.Algorithm().FromBytes(b) != desc.Digest {
		return nil, fmt.Errorf("%s %s: content does not match its digest", what, desc.Digest)
	}
	return b, nil
}

// locateFiles finds where each file of the package starts in the
// uncompressed tar stream of content. files are the content's files as
// pkgformat read them (links materialised); want is the package's file list,
// derived from files by pkgformat.New, whose paths are relative to a single
// top-level folder of the tarball when pkgformat found the package inside
// one, as in a `helm package` chart.
func locateFiles(content []byte, files []pkgformat.File, want []pkgformat.FileInfo) ([]FileEntry, error) {
	offsets, err := tarOffsets(content)
	if err != nil {
		return nil, fmt.Errorf("content: %w", err)
	}
	byPath := make(map[string]pkgformat.File, len(files))
	for _, f := range files {
		byPath[f.Path] = f
	}
	prefix := ""
	if len(want) > 0 && len(files) > 0 {
		if _, ok := byPath[want[0].Path]; !ok {
			if dir, _, found := strings.Cut(files[0].Path, "/"); found {
				prefix = dir + "/"
			}
		}
	}
	out := make([]FileEntry, 0, len(want))
	for _, w := range want {
		f, known := byPath[prefix+w.Path]
		off, ok := offsets[f.Path]
		if known && !ok {
			// A link, materialised by pkgformat: serve the bytes of the
			// regular file with the same content.
			off, ok = sameData(offsets, byPath, f)
		}
		if !known || !ok {
			return nil, fmt.Errorf("content: cannot locate %s in the tarball", w.Path)
		}
		out = append(out, FileEntry{Path: w.Path, Size: w.Size, Offset: off})
	}
	return out, nil
}

// tarOffsets maps the clean path of every regular file in a gzipped tar to the
// offset of its data in the uncompressed stream.
func tarOffsets(content []byte) (map[string]int64, error) {
	zr, err := gzip.NewReader(bytes.NewReader(content))
	if err != nil {
		return nil, err
	}
	cr := &countingReader{r: zr}
	tr := tar.NewReader(cr)
	offsets := make(map[string]int64)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return offsets, nil
		}
		if err != nil && !errors.Is(err, tar.ErrInsecurePath) {
			return nil, err
		}
		if hdr.Typeflag == tar.TypeReg {
			offsets[path.Clean(strings.TrimPrefix(hdr.Name, "./"))] = cr.n
		}
	}
}

func sameData(offsets map[string]int64, byPath map[string]pkgformat.File, link pkgformat.File) (int64, bool) {
	for p, off := range offsets {
		if f, ok := byPath[p]; ok && bytes.Equal(f.Data, link.Data) {
			return off, true
		}
	}
	return 0, false
}

// countingReader counts the bytes read through it. archive/tar reads headers
// in exact blocks, so after Next the count is the offset of the entry's data.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
