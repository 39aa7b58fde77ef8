package mirror

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/signing"
)

var (
	// ErrCorrupt says content does not match its digest or size.
	ErrCorrupt = errors.New("corrupt content")
	// ErrNotInArchive says the archive does not carry a blob.
	ErrNotInArchive = errors.New("not in the archive")
	// ErrNotPart says a tar is not a part of a split archive.
	ErrNotPart = errors.New("not a part of a split archive")
)

// maxMetaSize caps the files an archive reader reads whole: index.json,
// berth-mirror.json, its signature, berth-part.json and oci-layout.
const maxMetaSize = 64 << 20

var blobNameRE = regexp.MustCompile(`^blobs/sha256/[0-9a-f]{64}$`)

// Archive is an archive opened for reading: a directory, a tar file, or the
// parts of a split archive. Its blobs are read in place, never loaded whole.
// Open may be called from several goroutines.
type Archive struct {
	dir      string     // a directory archive, else ""
	files    []*tarFile // the tar files, in part order
	blobs    map[digest.Digest]blobLoc
	index    ocispec.Index
	manifest *Manifest
	raw      []byte // berth-mirror.json as read
	sig      []byte // berth-mirror.json.sig, nil when unsigned
	// lost says, by part number (0 for a single tar file), why the blobs
	// the manifest places there are not all readable: the part is cut or
	// missing. damage is the same, in part order.
	lost   map[int]string
	damage []string
}

// blobLoc is where a blob is.
type blobLoc struct {
	file int    // index in Archive.files; -1 in a directory
	name string // for errors: "file: entry" or the blob file's path
	off  int64  // of the content in the tar
	size int64
}

// tarFile is a tar file read by scanTar: where each blob is, and the small
// files read whole.
type tarFile struct {
	path    string
	f       *os.File
	size    int64
	blobs   []tarBlob // in file order, each whole
	meta    map[string][]byte
	listing *PartListing // berth-part.json, nil in a tar that is no part
	// cut, when the file is truncated, says where: what it holds before the
	// cut is read, what was after it is lost.
	cut string
	// number is the part number, from 1; 0 in a single tar file.
	number int
}

type tarBlob struct {
	digest    digest.Digest
	off, size int64
}

// OpenArchive opens an archive: one directory, one tar file, or the parts
// of a split archive in any order. It reads and checks oci-layout,
// index.json and berth-mirror.json, and where every blob is, but no blob's
// content (see Verify). A duplicate part, parts of different archives,
// hostile tar entries, and a truncated tar or missing part that loses
// berth-mirror.json are errors naming the files. A part missing, or a tar
// file truncated after its berth-mirror.json or before the end of a part
// that is not the last, is not: the blobs still there are read, Damage says
// what is lost, and opening a lost blob is an error that says so.
func OpenArchive(paths ...string) (*Archive, error) {
	if len(paths) == 0 {
		return nil, errors.New("open archive: no path")
	}
	if len(paths) == 1 {
		fi, err := os.Stat(paths[0])
		if err != nil {
			return nil, err
		}
		if fi.IsDir() {
			return openDir(paths[0])
		}
	}
	a := &Archive{blobs: map[digest.Digest]blobLoc{}}
	for _, p := range paths {
		t, err := scanTar(p)
		if err != nil {
			a.Close()
			return nil, err
		}
		a.files = append(a.files, t)
	}
	if err := a.assemble(); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

func (a *Archive) paths() []string {
	var p []string
	for _, t := range a.files {
		p = append(p, t.path)
	}
	return p
}

// readMeta reads and checks oci-layout, index.json, berth-mirror.json and
// the signature, naming where as their place in errors.
func (a *Archive) readMeta(where string, read func(name string) ([]byte, error)) error {
	layout, err := read(ocispec.ImageLayoutFile)
	if err != nil {
		return fmt.Errorf("%s: not an OCI image layout: %s: %w", where, ocispec.ImageLayoutFile, err)
	}
	var l ocispec.ImageLayout
	if err := json.Unmarshal(layout, &l); err != nil || l.Version != ocispec.ImageLayoutVersion {
		return fmt.Errorf("%s: %s: not an OCI image layout version %s", where, ocispec.ImageLayoutFile, ocispec.ImageLayoutVersion)
	}
	b, err := read(ocispec.ImageIndexFile)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", where, ocispec.ImageIndexFile, err)
	}
	if err := json.Unmarshal(b, &a.index); err != nil {
		return fmt.Errorf("%s: %s is not valid JSON: %w", where, ocispec.ImageIndexFile, err)
	}
	if a.index.SchemaVersion != 2 || a.index.MediaType != ocispec.MediaTypeImageIndex {
		return fmt.Errorf("%s: %s is not an image index (schemaVersion 2, mediaType %s): schemaVersion %d, mediaType %q", where, ocispec.ImageIndexFile, ocispec.MediaTypeImageIndex, a.index.SchemaVersion, a.index.MediaType)
	}
	if a.raw, err = read(ManifestFile); err != nil {
		return fmt.Errorf("%s: not a berth archive: %s: %w", where, ManifestFile, err)
	}
	if a.manifest, err = parseManifestFile(a.raw); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	a.sig, err = read(SignatureFile)
	if errors.Is(err, fs.ErrNotExist) {
		a.sig, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("%s: %s: %w", where, SignatureFile, err)
	}
	return nil
}

// openDir opens a directory archive.
func openDir(dir string) (*Archive, error) {
	a := &Archive{dir: dir, blobs: map[digest.Digest]blobLoc{}}
	if err := a.readMeta(dir, func(name string) ([]byte, error) {
		return readSmallFile(filepath.Join(dir, name))
	}); err != nil {
		return nil, err
	}
	blobs := filepath.Join(dir, ocispec.ImageBlobsDir)
	algs, err := os.ReadDir(blobs)
	if err != nil {
		return nil, err
	}
	for _, alg := range algs {
		if alg.Name() != "sha256" || !alg.IsDir() {
			return nil, fmt.Errorf("%s: unexpected %s: only sha256 blobs are supported", dir, filepath.Join(ocispec.ImageBlobsDir, alg.Name()))
		}
	}
	sha := filepath.Join(blobs, "sha256")
	entries, err := os.ReadDir(sha)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, e := range entries {
		p := filepath.Join(sha, e.Name())
		if !blobNameRE.MatchString("blobs/sha256/" + e.Name()) {
			return nil, fmt.Errorf("%s: not a blob name (sha256 hex digest)", p)
		}
		if !e.Type().IsRegular() {
			return nil, fmt.Errorf("%s: not a regular file", p)
		}
		fi, err := e.Info()
		if err != nil {
			return nil, err
		}
		a.blobs[digest.NewDigestFromEncoded(digest.SHA256, e.Name())] = blobLoc{file: -1, name: p, size: fi.Size()}
	}
	return a, nil
}

// readSmallFile reads a file of at most maxMetaSize bytes.
func readSmallFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMetaSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxMetaSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, maxMetaSize)
	}
	return b, nil
}

// scanTar reads the headers of a tar file, the small files whole, and where
// each blob's content is. It rejects hostile or unexpected entries and a
// truncated file. The file stays open.
func scanTar(p string) (*tarFile, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	t, err := scanTarFile(p, f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return t, nil
}

func scanTarFile(p string, f *os.File) (*tarFile, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	t := &tarFile{path: p, f: f, size: fi.Size(), meta: map[string][]byte{}}
	tr := tar.NewReader(f)
	seen := map[string]bool{}
	var end int64 // the end of the last entry, padding included
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			t.cut = fmt.Sprintf("%s: truncated tar file: it ends after %d bytes, in a tar header", p, t.size)
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: not a tar file: %w", p, err)
		}
		off, err := f.Seek(0, io.SeekCurrent)
		if err != nil {
			return nil, err
		}
		name, err := entryName(h)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if seen[name] {
			return nil, fmt.Errorf("%s: %s is in the tar twice", p, h.Name)
		}
		seen[name] = true
		if off+h.Size > t.size {
			t.cut = fmt.Sprintf("%s: truncated tar file: it ends inside %s, after %d of its %d bytes", p, h.Name, t.size-off, h.Size)
			break
		}
		end = off + padded(h.Size)
		if h.Typeflag == tar.TypeDir {
			if name != "." && name != ocispec.ImageBlobsDir && name != ocispec.ImageBlobsDir+"/sha256" {
				return nil, fmt.Errorf("%s: unexpected directory %s", p, h.Name)
			}
			continue
		}
		switch name {
		case ocispec.ImageLayoutFile, ocispec.ImageIndexFile, ManifestFile, SignatureFile, PartFile:
			if h.Size > maxMetaSize {
				return nil, fmt.Errorf("%s: %s: %d bytes, larger than %d", p, name, h.Size, maxMetaSize)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", p, name, err)
			}
			t.meta[name] = b
			continue
		}
		if !blobNameRE.MatchString(name) {
			return nil, fmt.Errorf("%s: unexpected entry %s: not a blob (blobs/sha256/<hex digest>) nor a file of a berth archive", p, h.Name)
		}
		t.blobs = append(t.blobs, tarBlob{digest: digest.NewDigestFromEncoded(digest.SHA256, path.Base(name)), off: off, size: h.Size})
	}
	// archive/tar takes a file that stops between entries, without the end
	// marker of two zero blocks, for a whole one.
	if pos, err := f.Seek(0, io.SeekCurrent); err != nil {
		return nil, err
	} else if t.cut == "" && pos < end+2*blockSize {
		t.cut = fmt.Sprintf("%s: truncated tar file: no end marker", p)
	}
	if _, ok := t.meta[ocispec.ImageLayoutFile]; !ok {
		if t.cut != "" {
			return nil, fmt.Errorf("%s, before its %s: nothing is left to read", t.cut, ocispec.ImageLayoutFile)
		}
		return nil, fmt.Errorf("%s: not an OCI image layout: no %s", p, ocispec.ImageLayoutFile)
	}
	if b, ok := t.meta[PartFile]; ok {
		var l PartListing
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, fmt.Errorf("%s: %s is not valid JSON: %w", p, PartFile, err)
		}
		if l.MediaType != PartMediaType {
			return nil, fmt.Errorf("%s: %s has mediaType %q, not %s", p, PartFile, l.MediaType, PartMediaType)
		}
		if err := t.checkListing(&l); err != nil {
			return nil, err
		}
		t.listing = &l
	}
	return t, nil
}

// entryName checks a tar entry is a regular file or directory with a
// relative name inside the archive, and returns the name cleaned.
func entryName(h *tar.Header) (string, error) {
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeDir:
	default:
		return "", fmt.Errorf("%s: not a regular file or directory (type %q)", h.Name, h.Typeflag)
	}
	name := h.Name
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, `\`) || slices.Contains(strings.Split(name, "/"), "..") {
		return "", fmt.Errorf("%q: entry name outside the archive", h.Name)
	}
	return path.Clean(name), nil
}

// checkListing checks a part holds exactly the blobs its listing lists.
func (t *tarFile) checkListing(l *PartListing) error {
	held := map[digest.Digest]int64{}
	for _, b := range t.blobs {
		held[b.digest] = b.size
	}
	for _, b := range l.Blobs {
		size, ok := held[b.Digest]
		if !ok {
			return fmt.Errorf("%s: %s lists %s, which the part does not hold", t.path, PartFile, b.Digest)
		}
		if size != b.Size {
			return fmt.Errorf("%s: %s: %d bytes, %s says %d", t.path, blobName(b.Digest), size, PartFile, b.Size)
		}
		delete(held, b.Digest)
	}
	for _, b := range t.blobs {
		if _, ok := held[b.digest]; ok {
			return fmt.Errorf("%s: %s is not listed in %s", t.path, blobName(b.digest), PartFile)
		}
	}
	return nil
}

// Manifest is the archive manifest, berth-mirror.json.
func (a *Archive) Manifest() *Manifest { return a.manifest }

// ManifestBytes is berth-mirror.json as read, the bytes its signature signs.
func (a *Archive) ManifestBytes() []byte { return a.raw }

// Index is index.json.
func (a *Archive) Index() ocispec.Index { return a.index }

// CheckSignature checks berth-mirror.json.sig, a cosign sign-blob signature
// of berth-mirror.json, against k. An archive without one is an error.
func (a *Archive) CheckSignature(k signing.Key) error {
	if a.sig == nil {
		return fmt.Errorf("the archive is not signed: it has no %s", SignatureFile)
	}
	if err := signing.VerifyBlob(k, a.raw, string(a.sig)); err != nil {
		return fmt.Errorf("%s: %w", SignatureFile, err)
	}
	return nil
}

// Has says the archive carries the blob d.
func (a *Archive) Has(d digest.Digest) bool {
	_, ok := a.blobs[d]
	return ok
}

// Open streams the blob d. The reader checks the content's size (the
// manifest's, for a blob it lists) and digest: its Read returns an error
// wrapping ErrCorrupt, naming the entry and digest, at the end of content
// that does not match. A digest the archive lacks is an error wrapping
// ErrNotInArchive; one the manifest says the archive carries, in a part
// missing or cut, is an error wrapping ErrCorrupt that says so.
func (a *Archive) Open(d digest.Digest) (io.ReadCloser, error) {
	loc, ok := a.blobs[d]
	if !ok {
		return nil, a.missing(d)
	}
	want := loc.size
	if e := a.entry(d); e != nil {
		want = e.Size
	}
	var r io.Reader
	var c io.Closer = io.NopCloser(nil)
	if loc.file < 0 {
		f, err := os.Open(loc.name)
		if err != nil {
			return nil, err
		}
		r, c = f, f
	} else {
		r = io.NewSectionReader(a.files[loc.file].f, loc.off, loc.size)
	}
	return &checkReader{r: io.LimitReader(r, want+1), c: c, h: sha256.New(), want: want, d: d, name: loc.name}, nil
}

// missing is the error for a blob no file of the archive holds.
func (a *Archive) missing(d digest.Digest) error {
	e := a.entry(d)
	if e == nil || !e.Carried {
		return fmt.Errorf("%s: %w", d, ErrNotInArchive)
	}
	if why, ok := a.lost[e.Part]; ok {
		return fmt.Errorf("%s: %w: the archive carries it, but %s", d, ErrCorrupt, why)
	}
	return fmt.Errorf("%s: %w: %s says the archive carries it, but no part holds it", d, ErrCorrupt, ManifestFile)
}

// entry is the manifest's entry for d, or nil.
func (a *Archive) entry(d digest.Digest) *Entry {
	c := a.manifest.Content
	i := sort.Search(len(c), func(i int) bool { return c[i].Digest >= d })
	if i < len(c) && c[i].Digest == d {
		return &c[i]
	}
	for i := range c { // Content should be ordered by digest; do not count on it
		if c[i].Digest == d {
			return &c[i]
		}
	}
	return nil
}

// checkReader reads a blob, checking its size and digest.
type checkReader struct {
	r    io.Reader
	c    io.Closer
	h    hash.Hash
	n    int64
	want int64
	d    digest.Digest
	name string
	err  error
}

func (r *checkReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.r.Read(p)
	r.n += int64(n)
	r.h.Write(p[:n])
	if r.n > r.want {
		r.err = fmt.Errorf("%s: %s: %w: more than %d bytes", r.name, r.d, ErrCorrupt, r.want)
		return 0, r.err
	}
	if err == io.EOF {
		if r.n < r.want {
			r.err = fmt.Errorf("%s: %s: %w: %d bytes, want %d", r.name, r.d, ErrCorrupt, r.n, r.want)
		} else if got := digest.NewDigest(digest.SHA256, r.h); got != r.d {
			r.err = fmt.Errorf("%s: %s: %w: the content has digest %s", r.name, r.d, ErrCorrupt, got)
		}
		if r.err != nil {
			return n, r.err
		}
	}
	return n, err
}

func (r *checkReader) Close() error { return r.c.Close() }

// Close closes the archive's files.
func (a *Archive) Close() error {
	var errs []error
	for _, t := range a.files {
		if err := t.f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Verify reads the whole archive and checks it: that the manifest is whole
// (every version and image names what it needs, see Import); every blob
// against its digest; that every entry the manifest marks carried is in the archive
// with its size (and in its part); that index.json names only manifests the
// archive carries; and for a split archive, the size and sha256 of each part
// but the last against the manifest. progress, when not nil, is called as
// the bytes are read. The error names the entry and digest.
func (a *Archive) Verify(ctx context.Context, progress func(done, total int64)) error {
	if len(a.damage) > 0 {
		return fmt.Errorf("%w: %s", ErrCorrupt, strings.Join(a.damage, "; "))
	}
	if _, err := checkManifest(a.manifest); err != nil {
		return err
	}
	for _, e := range a.manifest.Content {
		if !e.Carried {
			continue
		}
		loc, ok := a.blobs[e.Digest]
		if !ok {
			return fmt.Errorf("%s: %s says the archive carries it, but it is not in the archive: %w", e.Digest, ManifestFile, ErrNotInArchive)
		}
		if loc.size != e.Size {
			return fmt.Errorf("%s: %s: %w: %d bytes, %s says %d", loc.name, e.Digest, ErrCorrupt, loc.size, ManifestFile, e.Size)
		}
		if len(a.manifest.Parts) > 0 {
			if n := a.files[loc.file].number; e.Part != n {
				return fmt.Errorf("%s: %s says %s is in part %d, it is in part %d", loc.name, ManifestFile, e.Digest, e.Part, n)
			}
		}
	}
	for _, desc := range a.index.Manifests {
		if !a.Has(desc.Digest) {
			return fmt.Errorf("%s names %s, which the archive does not carry: %w", ocispec.ImageIndexFile, desc.Digest, ErrNotInArchive)
		}
	}
	p := &progressCounter{fn: progress}
	if a.dir != "" {
		var ds []digest.Digest
		for d, loc := range a.blobs {
			ds = append(ds, d)
			p.total += loc.size
		}
		slices.Sort(ds)
		for _, d := range ds {
			if err := a.verifyBlob(ctx, d, p); err != nil {
				return err
			}
		}
		p.report()
		return nil
	}
	for _, t := range a.files {
		p.total += t.size
	}
	for _, t := range a.files {
		sum, err := t.verify(ctx, p)
		if err != nil {
			return err
		}
		if t.number > 0 && t.number < len(a.manifest.Parts) {
			if want := a.manifest.Parts[t.number-1].Digest; sum != want {
				return fmt.Errorf("%s: %w: part %d has digest %s, %s says %s", t.path, ErrCorrupt, t.number, sum, ManifestFile, want)
			}
		}
	}
	p.report()
	return nil
}

func (a *Archive) verifyBlob(ctx context.Context, d digest.Digest, p *progressCounter) error {
	r, err := a.Open(d)
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = io.Copy(p, ctxReader{ctx, r})
	return err
}

// verify reads the tar file once, from start to end, checking each blob's
// digest, and returns the sha256 of the whole file.
func (t *tarFile) verify(ctx context.Context, p *progressCounter) (digest.Digest, error) {
	whole := sha256.New()
	r := io.TeeReader(ctxReader{ctx, io.NewSectionReader(t.f, 0, t.size)}, io.MultiWriter(whole, p))
	var pos int64
	for _, b := range t.blobs {
		if _, err := io.CopyN(io.Discard, r, b.off-pos); err != nil {
			return "", fmt.Errorf("%s: %w", t.path, err)
		}
		name := t.path + ": " + blobName(b.digest)
		cr := &checkReader{r: io.LimitReader(r, b.size), c: io.NopCloser(nil), h: sha256.New(), want: b.size, d: b.digest, name: name}
		if _, err := io.Copy(io.Discard, cr); err != nil {
			return "", err
		}
		pos = b.off + b.size
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return "", fmt.Errorf("%s: %w", t.path, err)
	}
	return digest.NewDigest(digest.SHA256, whole), nil
}

// progressCounter counts bytes read and reports them every MiB.
type progressCounter struct {
	fn          func(done, total int64)
	done, total int64
	reported    int64
}

func (p *progressCounter) Write(b []byte) (int, error) {
	p.done += int64(len(b))
	if p.done-p.reported >= 1<<20 {
		p.report()
	}
	return len(b), nil
}

func (p *progressCounter) report() {
	p.reported = p.done
	if p.fn != nil {
		p.fn(p.done, p.total)
	}
}

// VerifyPart checks one part of a split archive on its own: the tar is
// whole, every blob its berth-part.json lists is there with its size and
// digest, and nothing else is; the last part's index.json and manifest are
// valid. It returns the part's listing. The error names the entry.
func VerifyPart(path string) (*PartListing, error) {
	t, err := scanTar(path)
	if err != nil {
		return nil, err
	}
	defer t.f.Close()
	if t.cut != "" {
		return nil, fmt.Errorf("%w: %s", ErrCorrupt, t.cut)
	}
	if t.listing == nil {
		return nil, fmt.Errorf("%s: %w: it has no %s", path, ErrNotPart, PartFile)
	}
	if t.listing.Last {
		var a Archive
		if err := a.readMeta(path, func(name string) ([]byte, error) {
			b, ok := t.meta[name]
			if !ok {
				return nil, fs.ErrNotExist
			}
			return b, nil
		}); err != nil {
			return nil, err
		}
	}
	if _, err := t.verify(context.Background(), &progressCounter{}); err != nil {
		return nil, err
	}
	return t.listing, nil
}
