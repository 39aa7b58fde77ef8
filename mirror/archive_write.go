package mirror

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/signing"
)

// The tar accounting of a part of a split archive. Every part starts with
// its oci-layout file and the blobs/ and blobs/sha256/ directory entries
// (partHead bytes); each blob costs a 512-byte header and its content
// padded to 512 bytes; and each part keeps room for its berth-part.json
// listing (a header, and at most listingFixed bytes plus listingPerBlob per
// blob, padded) and the tar end marker (two zero blocks).
const (
	blockSize      = 512
	partHead       = 4 * blockSize
	listingFixed   = 256
	listingPerBlob = 128
)

// layoutJSON is the oci-layout file.
var layoutJSON = []byte(`{"imageLayoutVersion":"` + ocispec.ImageLayoutVersion + `"}`)

// ArchiveOptions tune CreateArchive. The zero value writes one directory or
// one tar file.
type ArchiveOptions struct {
	// MaxSize > 0 splits a tar archive into parts of at most MaxSize bytes
	// each, the tar overhead included: per part 2 KiB for its oci-layout and
	// directory entries, 512 bytes of header per blob and file with the
	// content padded to 512 bytes, and room kept for its berth-part.json
	// listing (at most 256 bytes plus 128 per blob) and the 1 KiB tar end
	// marker. Only for .tar outputs.
	MaxSize int64
	// ModTime is the modification time of every tar entry, rounded down to
	// the second; zero is the Unix epoch. A fixed time (such as the
	// manifest's Created) makes the output reproducible.
	ModTime time.Time
}

// ArchiveWriter writes an archive: blobs with Add, then index.json and the
// archive manifest with Finish, or nothing at all with Abort. Add may be
// called from several goroutines; Finish and Abort once, after them.
type ArchiveWriter struct {
	path    string // as given to CreateArchive
	dir     string // the output directory, or the directory of the tar files
	isTar   bool
	maxSize int64
	modTime time.Time
	madeDir bool // CreateArchive made the output directory

	size atomic.Int64

	mu       sync.Mutex
	done     map[digest.Digest]int // added blobs: the part carrying each (0 when not split)
	pending  map[digest.Digest]chan struct{}
	temps    map[string]bool // spool files in use
	closed   bool            // Finish or Abort began: no more Adds
	finished bool
	aborted  bool
	err      error // a failed tar append left the tar unusable

	tarMu sync.Mutex // serializes writes to the tar
	id    string     // the archive ID all parts share
	cur   *tarPart
	parts []Part // the parts closed so far
	files []string
}

// tarPart is the tar file being written.
type tarPart struct {
	number int // from 1 in a split archive, else 0
	path   string
	f      *os.File
	out    *countWriter
	tw     *tar.Writer
	blobs  []PartBlob
}

// countWriter counts (and, for parts, hashes) what is written to a tar file.
type countWriter struct {
	w     io.Writer
	n     int64
	h     hash.Hash // nil unless split
	total *atomic.Int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.total.Add(int64(n))
	if c.h != nil {
		c.h.Write(p[:n])
	}
	return n, err
}

var errWriterClosed = errors.New("archive writer already finished or aborted")

// partName is the name of part n of the split archive path: out.tar →
// out-001.tar.
func partName(path string, n int) string {
	return fmt.Sprintf("%s-%03d.tar", strings.TrimSuffix(path, ".tar"), n)
}

// CreateArchive starts an archive at path: a tar file when path ends in
// ".tar" (split into path-001.tar, path-002.tar, ... when opts.MaxSize > 0),
// else a directory, which must be empty or not exist. It never overwrites:
// an existing tar file or part, or a non-empty directory, is an error naming
// the path.
func CreateArchive(path string, opts ArchiveOptions) (*ArchiveWriter, error) {
	if opts.MaxSize < 0 {
		return nil, fmt.Errorf("%s: max size %d is negative", path, opts.MaxSize)
	}
	w := &ArchiveWriter{
		path:    path,
		maxSize: opts.MaxSize,
		modTime: opts.ModTime.Truncate(time.Second),
		done:    map[digest.Digest]int{},
		pending: map[digest.Digest]chan struct{}{},
		temps:   map[string]bool{},
	}
	if opts.ModTime.IsZero() {
		w.modTime = time.Unix(0, 0).UTC()
	}
	if !strings.HasSuffix(path, ".tar") {
		if opts.MaxSize > 0 {
			return nil, fmt.Errorf("%s: a max size splits only a .tar archive, not a directory", path)
		}
		if err := w.createDir(); err != nil {
			return nil, err
		}
		return w, nil
	}
	w.isTar = true
	w.dir = filepath.Dir(path)
	if opts.MaxSize > 0 {
		if min := int64(partHead) + partTail(1) + blockSize + blockSize; opts.MaxSize < min {
			return nil, fmt.Errorf("%s: max size %d is too small: a part needs at least %d bytes", path, opts.MaxSize, min)
		}
		if err := noParts(path); err != nil {
			return nil, err
		}
		var id [16]byte
		_, _ = rand.Read(id[:]) // never fails
		w.id = hex.EncodeToString(id[:])
	}
	w.tarMu.Lock()
	err := w.openPart()
	w.tarMu.Unlock()
	if err != nil {
		return nil, errors.Join(err, w.Abort())
	}
	return w, nil
}

// noParts refuses to start a split archive next to parts of an older one,
// which could be mistaken for parts of the new one.
func noParts(path string) error {
	base := strings.TrimSuffix(path, ".tar")
	matches, err := filepath.Glob(globEscape(base) + "-[0-9][0-9][0-9]*.tar")
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	re := regexp.MustCompile(`^-[0-9]{3,}\.tar$`)
	for _, m := range matches {
		if re.MatchString(strings.TrimPrefix(m, base)) {
			return fmt.Errorf("%s already exists: remove the parts of the earlier archive first; not overwriting them", m)
		}
	}
	return nil
}

// globEscape quotes the glob metacharacters of a path.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (w *ArchiveWriter) createDir() error {
	w.dir = w.path
	fi, err := os.Stat(w.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(w.path, 0o755); err != nil {
			return err
		}
		w.madeDir = true
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s exists and is not a directory (an archive path ending in .tar makes a tar file); not overwriting it", w.path)
	default:
		entries, err := os.ReadDir(w.path)
		if err != nil {
			return err
		}
		if len(entries) > 0 {
			return fmt.Errorf("%s is not empty (it holds %s): an archive directory must be empty or not exist; not overwriting it", w.path, entries[0].Name())
		}
	}
	if err := os.MkdirAll(filepath.Join(w.path, ocispec.ImageBlobsDir, "sha256"), 0o755); err != nil {
		return errors.Join(err, w.Abort())
	}
	return nil
}

// partTail is the room a part keeps at its end for its listing of n blobs
// and the tar end marker.
func partTail(n int) int64 {
	return blockSize + padded(listingFixed+listingPerBlob*int64(n)) + 2*blockSize
}

// padded rounds n up to whole tar blocks.
func padded(n int64) int64 {
	return (n + blockSize - 1) / blockSize * blockSize
}

// entrySize is what a file of n bytes takes in a tar: header and padded content.
func entrySize(n int64) int64 {
	return blockSize + padded(n)
}

// tooBig says a blob of size bytes cannot fit in any part.
func (w *ArchiveWriter) tooBig(size int64) bool {
	return partHead+entrySize(size)+partTail(1) > w.maxSize
}

// Size is the number of bytes written so far: the tar files (all parts), or
// the files of the directory. Blobs being spooled are not counted.
func (w *ArchiveWriter) Size() int64 { return w.size.Load() }

// Has says the blob d has been added.
func (w *ArchiveWriter) Has(d digest.Digest) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.done[d]
	return ok
}

// Add adds the blob desc, reading it from r. It spools the content to a
// temporary file next to the output, checking its size and sha256 digest on
// the way, and then moves it into the archive; content that does not match
// desc is an error wrapping ErrCorrupt, and nothing of it stays in the
// output. A blob already added, or being added by another goroutine, is not
// added again: Add returns false without reading r (waiting for the other
// goroutine, and adding the blob itself if the other fails). Only sha256
// digests are supported. In a split archive a blob larger than a part can
// hold is an error.
func (w *ArchiveWriter) Add(ctx context.Context, desc ocispec.Descriptor, r io.Reader) (added bool, err error) {
	d := desc.Digest
	if err := d.Validate(); err != nil {
		return false, fmt.Errorf("add %q: %w", d, err)
	}
	if d.Algorithm() != digest.SHA256 {
		return false, fmt.Errorf("add %s: only sha256 digests are supported", d)
	}
	if desc.Size < 0 {
		return false, fmt.Errorf("add %s: negative size %d", d, desc.Size)
	}
	if w.maxSize > 0 && w.tooBig(desc.Size) {
		return false, fmt.Errorf("%s: %d bytes do not fit in a part of at most %d bytes (max size): cannot split a blob across parts", d, desc.Size, w.maxSize)
	}
	claimed, err := w.claim(ctx, d)
	if !claimed || err != nil {
		return false, err
	}
	part, err := w.add(ctx, desc, r)
	w.mu.Lock()
	if err == nil {
		w.done[d] = part
	}
	close(w.pending[d])
	delete(w.pending, d)
	w.mu.Unlock()
	return err == nil, err
}

// claim makes this goroutine the one adding d; false when d is added
// already, or by another goroutine that succeeds.
func (w *ArchiveWriter) claim(ctx context.Context, d digest.Digest) (bool, error) {
	w.mu.Lock()
	for {
		if w.closed {
			w.mu.Unlock()
			return false, fmt.Errorf("add %s: %w", d, errWriterClosed)
		}
		if w.err != nil {
			err := w.err
			w.mu.Unlock()
			return false, err
		}
		if _, ok := w.done[d]; ok {
			w.mu.Unlock()
			return false, nil
		}
		busy, ok := w.pending[d]
		if !ok {
			w.pending[d] = make(chan struct{})
			w.mu.Unlock()
			return true, nil
		}
		w.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return false, ctx.Err()
		}
		w.mu.Lock()
	}
}

// add spools the blob and moves it into the archive; it returns the number
// of the part that carries it.
func (w *ArchiveWriter) add(ctx context.Context, desc ocispec.Descriptor, r io.Reader) (int, error) {
	f, err := w.spool(ctx, desc, r)
	if err != nil {
		return 0, err
	}
	defer w.dropTemp(f)
	if w.isTar {
		return w.appendBlob(desc, f)
	}
	// A directory: the spool file becomes the blob, under its final name
	// only once complete and synced.
	if err := f.Chmod(0o644); err != nil {
		return 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	if err := os.Rename(f.Name(), filepath.Join(w.dir, ocispec.ImageBlobsDir, "sha256", desc.Digest.Encoded())); err != nil {
		return 0, err
	}
	w.size.Add(desc.Size)
	return 0, nil
}

// spool copies r to a new temporary file, checking its size and digest
// against desc. The caller must dropTemp the file.
func (w *ArchiveWriter) spool(ctx context.Context, desc ocispec.Descriptor, r io.Reader) (*os.File, error) {
	f, err := os.CreateTemp(w.dir, ".berth-spool-*")
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.temps[f.Name()] = true
	w.mu.Unlock()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(ctxReader{ctx, r}, desc.Size+1))
	switch {
	case err != nil:
		err = fmt.Errorf("%s: %w", desc.Digest, err)
	case n > desc.Size:
		err = fmt.Errorf("%s: %w: more than the %d bytes its descriptor says", desc.Digest, ErrCorrupt, desc.Size)
	case n < desc.Size:
		err = fmt.Errorf("%s: %w: %d bytes, its descriptor says %d", desc.Digest, ErrCorrupt, n, desc.Size)
	default:
		if got := digest.NewDigest(digest.SHA256, h); got != desc.Digest {
			err = fmt.Errorf("%s: %w: the content has digest %s", desc.Digest, ErrCorrupt, got)
		}
	}
	if err != nil {
		w.dropTemp(f)
		return nil, err
	}
	return f, nil
}

// dropTemp closes and removes a spool file, if still there.
func (w *ArchiveWriter) dropTemp(f *os.File) {
	_ = f.Close()
	_ = os.Remove(f.Name())
	w.mu.Lock()
	delete(w.temps, f.Name())
	w.mu.Unlock()
}

// ctxReader stops reading once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// fail records an error that leaves the tar unusable: every later Add and
// Finish returns it.
func (w *ArchiveWriter) fail(err error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
	return w.err
}

// appendBlob appends the spooled blob f to the tar, first starting a new
// part when it would not fit in the current one.
func (w *ArchiveWriter) appendBlob(desc ocispec.Descriptor, f *os.File) (int, error) {
	w.tarMu.Lock()
	defer w.tarMu.Unlock()
	w.mu.Lock()
	err, closed := w.err, w.closed
	w.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if closed || w.cur == nil {
		return 0, fmt.Errorf("add %s: %w", desc.Digest, errWriterClosed)
	}
	p := w.cur
	if w.maxSize > 0 && len(p.blobs) > 0 && p.out.n+entrySize(desc.Size)+partTail(len(p.blobs)+1) > w.maxSize {
		if err := w.closePart(false); err != nil {
			return 0, w.fail(err)
		}
		if err := w.openPart(); err != nil {
			return 0, w.fail(err)
		}
		p = w.cur
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	if err := p.tw.WriteHeader(w.header(blobName(desc.Digest), desc.Size)); err != nil {
		return 0, w.fail(fmt.Errorf("%s: %w", p.path, err))
	}
	if _, err := io.Copy(p.tw, f); err != nil {
		return 0, w.fail(fmt.Errorf("%s: writing %s: %w", p.path, desc.Digest, err))
	}
	if err := p.tw.Flush(); err != nil {
		return 0, w.fail(fmt.Errorf("%s: %w", p.path, err))
	}
	p.blobs = append(p.blobs, PartBlob{Digest: desc.Digest, Size: desc.Size})
	return p.number, nil
}

// blobName is a blob's path in the layout.
func blobName(d digest.Digest) string {
	return ocispec.ImageBlobsDir + "/sha256/" + d.Encoded()
}

func (w *ArchiveWriter) header(name string, size int64) *tar.Header {
	return &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o644, ModTime: w.modTime}
}

// openPart starts the tar file (the next part of a split archive) with its
// oci-layout and directory entries. The caller holds tarMu.
func (w *ArchiveWriter) openPart() error {
	path, number := w.path, 0
	if w.maxSize > 0 {
		number = len(w.parts) + 1
		path = partName(w.path, number)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s already exists; not overwriting it", path)
	}
	if err != nil {
		return err
	}
	w.files = append(w.files, path)
	p := &tarPart{number: number, path: path, f: f, out: &countWriter{w: f, total: &w.size}}
	if w.maxSize > 0 {
		p.out.h = sha256.New()
	}
	p.tw = tar.NewWriter(p.out)
	w.cur = p
	if err := p.writeFile(w.header(ocispec.ImageLayoutFile, int64(len(layoutJSON))), layoutJSON); err != nil {
		return err
	}
	for _, dir := range []string{ocispec.ImageBlobsDir + "/", ocispec.ImageBlobsDir + "/sha256/"} {
		if err := p.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: w.modTime}); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return p.tw.Flush()
}

// writeFile appends a small file.
func (p *tarPart) writeFile(h *tar.Header, b []byte) error {
	if err := p.tw.WriteHeader(h); err != nil {
		return fmt.Errorf("%s: %s: %w", p.path, h.Name, err)
	}
	if _, err := p.tw.Write(b); err != nil {
		return fmt.Errorf("%s: %s: %w", p.path, h.Name, err)
	}
	if err := p.tw.Flush(); err != nil {
		return fmt.Errorf("%s: %s: %w", p.path, h.Name, err)
	}
	return nil
}

// listing is the berth-part.json of the current part.
func (w *ArchiveWriter) listing(last bool) []byte {
	blobs := w.cur.blobs
	if blobs == nil {
		blobs = []PartBlob{}
	}
	b, err := json.Marshal(PartListing{MediaType: PartMediaType, Archive: w.id, Number: w.cur.number, Last: last, Blobs: blobs})
	if err != nil {
		panic(err) // plain strings and numbers always marshal
	}
	return append(b, '\n')
}

// closePart ends the current part of a split archive with its listing (and
// the single tar without one), syncs and closes it. The caller holds tarMu.
func (w *ArchiveWriter) closePart(last bool) error {
	p := w.cur
	if w.maxSize > 0 {
		l := w.listing(last)
		if err := p.writeFile(w.header(PartFile, int64(len(l))), l); err != nil {
			return err
		}
	}
	if err := p.tw.Close(); err != nil {
		return fmt.Errorf("%s: %w", p.path, err)
	}
	if err := p.f.Sync(); err != nil {
		return fmt.Errorf("%s: %w", p.path, err)
	}
	if err := p.f.Close(); err != nil {
		return fmt.Errorf("%s: %w", p.path, err)
	}
	if w.maxSize > 0 && p.out.n > w.maxSize {
		// The accounting above keeps this from happening.
		return fmt.Errorf("%s: %d bytes, over the max size %d", p.path, p.out.n, w.maxSize)
	}
	part := Part{Number: p.number, File: filepath.Base(p.path), Size: p.out.n}
	if p.out.h != nil {
		part.Digest = digest.NewDigest(digest.SHA256, p.out.h)
	}
	w.parts = append(w.parts, part)
	w.cur = nil
	return nil
}

// Finish completes the archive: it writes index, and m as berth-mirror.json
// (indented JSON), signed with signer into berth-mirror.json.sig when signer
// is not nil, then syncs and closes everything. Before writing m it fills in
// m.Parts (for a split archive: every part, with the size and digest of each
// but the last, which holds m) and the Part of each entry of m.Content the
// archive carries. Every entry marked Carried, and every manifest index
// names, must have been added. index gets schemaVersion 2 and the image
// index media type when it has none. After an error, call Abort.
func (w *ArchiveWriter) Finish(index ocispec.Index, m *Manifest, signer *signing.Signer) error {
	if m == nil {
		return errors.New("finish: no manifest")
	}
	w.mu.Lock()
	switch {
	case w.closed:
		w.mu.Unlock()
		return fmt.Errorf("finish: %w", errWriterClosed)
	case len(w.pending) > 0:
		w.mu.Unlock()
		return errors.New("finish: blobs are still being added")
	case w.err != nil:
		w.mu.Unlock()
		return w.err
	}
	w.closed = true
	w.mu.Unlock()
	if err := w.finish(index, m, signer); err != nil {
		return err
	}
	w.mu.Lock()
	w.finished = true
	w.mu.Unlock()
	return nil
}

func (w *ArchiveWriter) finish(index ocispec.Index, m *Manifest, signer *signing.Signer) error {
	if index.SchemaVersion == 0 {
		index.SchemaVersion = 2
	}
	if index.MediaType == "" {
		index.MediaType = ocispec.MediaTypeImageIndex
	}
	if index.SchemaVersion != 2 || index.MediaType != ocispec.MediaTypeImageIndex {
		return fmt.Errorf("finish: index.json must be an image index (schemaVersion 2, %s), not schemaVersion %d, %s", ocispec.MediaTypeImageIndex, index.SchemaVersion, index.MediaType)
	}
	for _, desc := range index.Manifests {
		if _, ok := w.done[desc.Digest]; !ok {
			return fmt.Errorf("finish: index.json names %s, which was never added to the archive", desc.Digest)
		}
	}
	for i := range m.Content {
		e := &m.Content[i]
		e.Part = 0
		if !e.Carried {
			continue
		}
		part, ok := w.done[e.Digest]
		if !ok {
			return fmt.Errorf("finish: %s: %s says the archive carries it, but it was never added", e.Digest, ManifestFile)
		}
		e.Part = part
	}
	indexJSON, err := json.MarshalIndent(index, "", "  ")
	if err != nil {
		return fmt.Errorf("finish: index.json: %w", err)
	}
	indexJSON = append(indexJSON, '\n')
	if !w.isTar {
		m.Parts = nil
		manifest, sig, err := marshalManifest(m, signer)
		if err != nil {
			return err
		}
		return w.finishDir(indexJSON, manifest, sig)
	}
	w.tarMu.Lock()
	defer w.tarMu.Unlock()
	for {
		m.Parts = nil
		if w.maxSize > 0 {
			m.Parts = append(append([]Part(nil), w.parts...), Part{Number: w.cur.number, File: filepath.Base(w.cur.path)})
		}
		manifest, sig, err := marshalManifest(m, signer)
		if err != nil {
			return err
		}
		p := w.cur
		if w.maxSize > 0 {
			need := entrySize(int64(len(indexJSON))) + entrySize(int64(len(manifest))) + entrySize(int64(len(w.listing(true)))) + 2*blockSize
			if sig != nil {
				need += entrySize(int64(len(sig)))
			}
			if p.out.n+need > w.maxSize {
				if len(p.blobs) == 0 {
					return fmt.Errorf("%s: index.json and %s (%d bytes) do not fit in a part of at most %d bytes (max size)", p.path, ManifestFile, len(indexJSON)+len(manifest), w.maxSize)
				}
				// They go in a part of their own.
				if err := w.closePart(false); err != nil {
					return w.fail(err)
				}
				if err := w.openPart(); err != nil {
					return w.fail(err)
				}
				continue
			}
		}
		files := []struct {
			name string
			b    []byte
		}{{ocispec.ImageIndexFile, indexJSON}, {ManifestFile, manifest}, {SignatureFile, sig}}
		for _, f := range files {
			if f.b == nil {
				continue
			}
			if err := p.writeFile(w.header(f.name, int64(len(f.b))), f.b); err != nil {
				return w.fail(err)
			}
		}
		if err := w.closePart(true); err != nil {
			return w.fail(err)
		}
		return nil
	}
}

// marshalManifest is m as written and, with a signer, its signature.
func marshalManifest(m *Manifest, signer *signing.Signer) (manifest, sig []byte, err error) {
	manifest, err = json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, nil, fmt.Errorf("finish: %s: %w", ManifestFile, err)
	}
	manifest = append(manifest, '\n')
	if signer == nil {
		return manifest, nil, nil
	}
	s, err := signing.SignBlob(signer, manifest)
	if err != nil {
		return nil, nil, fmt.Errorf("finish: %s: %w", SignatureFile, err)
	}
	return manifest, []byte(s), nil
}

func (w *ArchiveWriter) finishDir(indexJSON, manifest, sig []byte) error {
	files := []struct {
		name string
		b    []byte
	}{{ocispec.ImageLayoutFile, layoutJSON}, {ocispec.ImageIndexFile, indexJSON}, {ManifestFile, manifest}, {SignatureFile, sig}}
	for _, f := range files {
		if f.b == nil {
			continue
		}
		if err := w.writeDirFile(f.name, f.b); err != nil {
			return err
		}
	}
	for _, d := range []string{filepath.Join(w.dir, ocispec.ImageBlobsDir, "sha256"), filepath.Join(w.dir, ocispec.ImageBlobsDir), w.dir} {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// writeDirFile writes a new file of the directory and syncs it.
func (w *ArchiveWriter) writeDirFile(name string, b []byte) error {
	path := filepath.Join(w.dir, name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	w.size.Add(int64(len(b)))
	return nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	return nil
}

// Abort removes everything the writer created: the tar files or the
// directory's files (the directory too when CreateArchive made it) and any
// spool files. Adds still running fail. After a successful Finish, Abort
// does nothing, so that it can be deferred.
func (w *ArchiveWriter) Abort() error {
	w.mu.Lock()
	if w.finished || w.aborted {
		w.mu.Unlock()
		return nil
	}
	w.aborted, w.closed = true, true
	w.mu.Unlock()

	w.tarMu.Lock()
	defer w.tarMu.Unlock()
	var errs []error
	remove := func(path string) {
		if err := os.RemoveAll(path); err != nil {
			errs = append(errs, err)
		}
	}
	if w.cur != nil {
		_ = w.cur.f.Close()
		w.cur = nil
	}
	for _, f := range w.files {
		remove(f)
	}
	w.mu.Lock()
	for f := range w.temps {
		remove(f)
	}
	w.mu.Unlock()
	if !w.isTar {
		if w.madeDir {
			remove(w.dir)
		} else {
			for _, name := range []string{ocispec.ImageLayoutFile, ocispec.ImageIndexFile, ManifestFile, SignatureFile, ocispec.ImageBlobsDir} {
				remove(filepath.Join(w.dir, name))
			}
		}
	}
	return errors.Join(errs...)
}
