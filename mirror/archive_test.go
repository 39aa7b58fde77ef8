package mirror

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/sigstore/pkg/cryptoutils"

	"github.com/berth-registry/berth/signing"
	"github.com/berth-registry/berth/signing/signingtest"
)

var created = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

// testBlobs are n blobs of about size bytes each, different sizes, made
// from seed.
func testBlobs(n, size int, seed uint64) [][]byte {
	r := mathrand.New(mathrand.NewPCG(seed, 1))
	blobs := make([][]byte, n)
	for i := range blobs {
		b := make([]byte, size/2+r.IntN(size))
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		blobs[i] = b
	}
	return blobs
}

func descOf(b []byte) ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: "application/octet-stream", Digest: digest.FromBytes(b), Size: int64(len(b))}
}

// testManifest is a manifest carrying blobs; its index names the first.
func testManifest(blobs [][]byte) (ocispec.Index, *Manifest) {
	m := &Manifest{SchemaVersion: 1, MediaType: ManifestMediaType, Source: "berth.example:5000", Created: created}
	for _, b := range blobs {
		d := descOf(b)
		m.Content = append(m.Content, Entry{Digest: d.Digest, Size: d.Size, MediaType: d.MediaType, Carried: true})
	}
	slices.SortFunc(m.Content, func(a, b Entry) int { return strings.Compare(string(a.Digest), string(b.Digest)) })
	index := ocispec.Index{Manifests: []ocispec.Descriptor{descOf(blobs[0])}}
	index.Manifests[0].MediaType = ocispec.MediaTypeImageManifest
	return index, m
}

// writeArchive writes blobs, in order, to an archive at path.
func writeArchive(t *testing.T, path string, opts ArchiveOptions, blobs [][]byte, signer *signing.Signer) *Manifest {
	t.Helper()
	w, err := CreateArchive(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	for _, b := range blobs {
		if _, err := w.Add(context.Background(), descOf(b), bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
	}
	index, m := testManifest(blobs)
	if err := w.Finish(index, m, signer); err != nil {
		t.Fatal(err)
	}
	return m
}

// openArchive opens an archive, closed when the test ends.
func openArchive(t *testing.T, paths ...string) *Archive {
	t.Helper()
	a, err := OpenArchive(paths...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// readBlob reads a blob of the archive whole.
func readBlob(a *Archive, d digest.Digest) ([]byte, error) {
	r, err := a.Open(d)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// wantErr fails unless err holds every part of want.
func wantErr(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not contain %q", err, w)
		}
	}
}

// noLeftovers fails when dir holds a spool file.
func noLeftovers(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".berth-spool-") {
			t.Errorf("spool file %s left in %s", e.Name(), dir)
		}
	}
}

func TestArchiveRoundTrip(t *testing.T) {
	blobs := testBlobs(12, 10<<10, 1)
	for _, tc := range []struct {
		name    string
		path    string
		maxSize int64
	}{
		{"directory", "out", 0},
		{"tar", "out.tar", 0},
		{"parts", "out.tar", 40 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, tc.path)
			w, err := CreateArchive(path, ArchiveOptions{MaxSize: tc.maxSize, ModTime: created})
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range blobs {
				added, err := w.Add(context.Background(), descOf(b), bytes.NewReader(b))
				if err != nil || !added {
					t.Fatalf("Add = %v, %v", added, err)
				}
				if !w.Has(descOf(b).Digest) {
					t.Fatalf("Has(%s) = false after Add", descOf(b).Digest)
				}
			}
			if added, err := w.Add(context.Background(), descOf(blobs[3]), strings.NewReader("not read")); added || err != nil {
				t.Fatalf("Add again = %v, %v; want false, nil", added, err)
			}
			index, m := testManifest(blobs)
			if err := w.Finish(index, m, nil); err != nil {
				t.Fatal(err)
			}
			if err := w.Abort(); err != nil {
				t.Fatalf("Abort after Finish: %v", err)
			}
			noLeftovers(t, dir)

			paths := []string{path}
			var onDisk int64
			if tc.maxSize > 0 {
				if paths, err = filepath.Glob(filepath.Join(dir, "out-*.tar")); err != nil {
					t.Fatal(err)
				}
				if len(paths) < 3 {
					t.Fatalf("%d parts, want at least 3", len(paths))
				}
				if _, err := os.Stat(path); err == nil {
					t.Errorf("%s exists beside its parts", path)
				}
			}
			if tc.path == "out.tar" {
				for _, p := range paths {
					fi, err := os.Stat(p)
					if err != nil {
						t.Fatal(err)
					}
					onDisk += fi.Size()
					if tc.maxSize > 0 && fi.Size() > tc.maxSize {
						t.Errorf("%s: %d bytes, over the max size %d", p, fi.Size(), tc.maxSize)
					}
				}
				if w.Size() != onDisk {
					t.Errorf("Size() = %d, the files have %d bytes", w.Size(), onDisk)
				}
			}

			// The parts go in any order.
			shuffled := slices.Clone(paths)
			slices.Reverse(shuffled)
			a := openArchive(t, shuffled...)
			got := a.Manifest()
			if tc.maxSize > 0 {
				checkParts(t, dir, paths, blobs, got)
			} else {
				if len(got.Parts) != 0 {
					t.Errorf("Parts = %v, want none", got.Parts)
				}
				for _, e := range got.Content {
					if e.Part != 0 {
						t.Errorf("%s: Part = %d, want 0", e.Digest, e.Part)
					}
				}
			}
			want, _ := json.MarshalIndent(m, "", "  ")
			if !bytes.Equal(a.ManifestBytes(), append(want, '\n')) {
				t.Errorf("ManifestBytes =\n%s\nwant the manifest Finish filled in:\n%s", a.ManifestBytes(), want)
			}
			if gi := a.Index(); gi.SchemaVersion != 2 || gi.MediaType != ocispec.MediaTypeImageIndex || len(gi.Manifests) != 1 || gi.Manifests[0].Digest != index.Manifests[0].Digest {
				t.Errorf("Index = %+v", gi)
			}
			for _, b := range blobs {
				d := descOf(b).Digest
				if !a.Has(d) {
					t.Errorf("Has(%s) = false", d)
				}
				rb, err := readBlob(a, d)
				if err != nil || !bytes.Equal(rb, b) {
					t.Errorf("Open(%s): %d bytes, %v; want the %d bytes added", d, len(rb), err, len(b))
				}
			}
			missing := digest.FromString("missing")
			if a.Has(missing) {
				t.Error("Has(missing) = true")
			}
			if _, err := a.Open(missing); !errors.Is(err, ErrNotInArchive) {
				t.Errorf("Open(missing) = %v, want ErrNotInArchive", err)
			}
			var done, total int64
			if err := a.Verify(context.Background(), func(d, t int64) { done, total = d, t }); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if done == 0 || done != total {
				t.Errorf("Verify progress ended at %d of %d", done, total)
			}
			if err := a.CheckSignature(signing.Key{}); err == nil || !strings.Contains(err.Error(), "not signed") {
				t.Errorf("CheckSignature of an unsigned archive = %v, want an error saying it is not signed", err)
			}
		})
	}
}

// checkParts checks a split archive's parts: each on its own with
// VerifyPart, their listings together list the blobs in the order added, and
// the manifest's Parts and Entry.Part.
func checkParts(t *testing.T, dir string, paths []string, blobs [][]byte, m *Manifest) {
	t.Helper()
	var listed []digest.Digest
	partOf := map[digest.Digest]int{}
	var id string
	for i, p := range paths {
		l, err := VerifyPart(p)
		if err != nil {
			t.Fatalf("VerifyPart(%s): %v", p, err)
		}
		if want := fmt.Sprintf("out-%03d.tar", i+1); filepath.Base(p) != want || l.Number != i+1 {
			t.Errorf("%s is part %d, want %s", p, l.Number, want)
		}
		if l.Last != (i == len(paths)-1) {
			t.Errorf("%s: Last = %v", p, l.Last)
		}
		if id == "" {
			id = l.Archive
		} else if l.Archive != id {
			t.Errorf("%s: archive %q, part 1 has %q", p, l.Archive, id)
		}
		for _, b := range l.Blobs {
			listed = append(listed, b.Digest)
			partOf[b.Digest] = l.Number
		}
	}
	var added []digest.Digest
	for _, b := range blobs {
		added = append(added, descOf(b).Digest)
	}
	if !slices.Equal(listed, added) {
		t.Errorf("the parts list %v, want the blobs in the order added %v", listed, added)
	}
	if len(m.Parts) != len(paths) {
		t.Fatalf("Parts = %+v, want %d", m.Parts, len(paths))
	}
	for i, p := range m.Parts {
		fi, err := os.Stat(paths[i])
		if err != nil {
			t.Fatal(err)
		}
		last := i == len(paths)-1
		if p.Number != i+1 || p.File != filepath.Base(paths[i]) {
			t.Errorf("part %d: %+v", i+1, p)
		}
		if last && (p.Size != 0 || p.Digest != "") {
			t.Errorf("last part %+v has a size or digest", p)
		}
		if !last {
			b, err := os.ReadFile(paths[i])
			if err != nil {
				t.Fatal(err)
			}
			if p.Size != fi.Size() || p.Digest != digest.FromBytes(b) {
				t.Errorf("part %d: %+v; the file has %d bytes, %s", i+1, p, fi.Size(), digest.FromBytes(b))
			}
		}
	}
	for _, e := range m.Content {
		if e.Part != partOf[e.Digest] {
			t.Errorf("%s: Part = %d, it is in part %d", e.Digest, e.Part, partOf[e.Digest])
		}
	}
}

func TestArchiveTarReproducible(t *testing.T) {
	blobs := testBlobs(3, 1<<10, 2)
	dir := t.TempDir()
	var files [][]byte
	for _, name := range []string{"a.tar", "b.tar"} {
		writeArchive(t, filepath.Join(dir, name), ArchiveOptions{ModTime: created}, blobs, nil)
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, b)
	}
	if !bytes.Equal(files[0], files[1]) {
		t.Error("two archives of the same content differ")
	}
	tr := tar.NewReader(bytes.NewReader(files[0]))
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if !h.ModTime.Equal(created) {
			t.Errorf("%s: ModTime %v, want %v", h.Name, h.ModTime, created)
		}
		if h.Typeflag == tar.TypeReg && h.Mode != 0o644 {
			t.Errorf("%s: mode %o, want 644", h.Name, h.Mode)
		}
	}
	want := []string{"oci-layout", "blobs/", "blobs/sha256/"}
	for _, b := range blobs {
		want = append(want, "blobs/sha256/"+descOf(b).Digest.Encoded())
	}
	want = append(want, "index.json", ManifestFile)
	if !slices.Equal(names, want) {
		t.Errorf("entries %q, want %q", names, want)
	}
}

func TestCreateArchiveRefuses(t *testing.T) {
	dir := t.TempDir()
	write := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("full/file")
	write("existing.tar")
	write("split-002.tar")
	write("plain")
	for _, tc := range []struct {
		name string
		path string
		opts ArchiveOptions
		want []string
	}{
		{"non-empty directory", "full", ArchiveOptions{}, []string{"full", "not empty"}},
		{"existing tar", "existing.tar", ArchiveOptions{}, []string{"existing.tar", "already exists"}},
		{"existing part", "split.tar", ArchiveOptions{MaxSize: 1 << 20}, []string{"split-002.tar", "already exists"}},
		{"file for a directory", "plain", ArchiveOptions{}, []string{"plain", "not a directory"}},
		{"max size for a directory", "newdir", ArchiveOptions{MaxSize: 1 << 20}, []string{"newdir", "only a .tar"}},
		{"max size too small", "small.tar", ArchiveOptions{MaxSize: 1000}, []string{"small.tar", "too small"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := CreateArchive(filepath.Join(dir, tc.path), tc.opts)
			if err == nil {
				w.Abort()
			}
			wantErr(t, err, tc.want...)
		})
	}
	for _, name := range []string{"full/file", "existing.tar", "split-002.tar", "plain"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != "keep" {
			t.Errorf("%s was overwritten: %q, %v", name, b, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "newdir")); err == nil {
		t.Error("newdir was created")
	}
}

func TestArchiveAddRejects(t *testing.T) {
	good := testBlobs(1, 4<<10, 3)[0]
	big := testBlobs(1, 64<<10, 4)[0]
	flipped := slices.Clone(good)
	flipped[100] ^= 1
	d := descOf(good)
	for _, tc := range []struct {
		name    string
		path    string
		maxSize int64
		desc    ocispec.Descriptor
		content []byte
		corrupt bool
		want    []string
	}{
		{"flipped byte, directory", "out", 0, d, flipped, true, []string{d.Digest.String(), "has digest"}},
		{"flipped byte, tar", "out.tar", 0, d, flipped, true, []string{d.Digest.String(), "has digest"}},
		{"short", "out.tar", 0, d, good[:len(good)-1], true, []string{d.Digest.String(), fmt.Sprintf("%d bytes, its descriptor says %d", len(good)-1, len(good))}},
		{"long", "out", 0, d, append(slices.Clone(good), 0), true, []string{d.Digest.String(), "more than"}},
		{"bigger than a part", "out.tar", 32 << 10, descOf(big), big, false, []string{descOf(big).Digest.String(), fmt.Sprint(len(big)), fmt.Sprint(32 << 10), "cannot split a blob across parts"}},
		{"sha512", "out.tar", 0, ocispec.Descriptor{Digest: digest.SHA512.FromBytes(good), Size: d.Size}, good, false, []string{"only sha256"}},
		{"bad digest", "out.tar", 0, ocispec.Descriptor{Digest: "sha256:xyz", Size: d.Size}, good, false, []string{"sha256:xyz"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, tc.path)
			w, err := CreateArchive(path, ArchiveOptions{MaxSize: tc.maxSize})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Abort()
			added, err := w.Add(context.Background(), tc.desc, bytes.NewReader(tc.content))
			if added {
				t.Error("added")
			}
			wantErr(t, err, tc.want...)
			if errors.Is(err, ErrCorrupt) != tc.corrupt {
				t.Errorf("errors.Is(%v, ErrCorrupt) = %v, want %v", err, !tc.corrupt, tc.corrupt)
			}
			if w.Has(tc.desc.Digest) {
				t.Error("Has the rejected blob")
			}
			noLeftovers(t, dir)
			// The writer goes on; the blob is in no output.
			other := testBlobs(1, 1<<10, 5)[0]
			if _, err := w.Add(context.Background(), descOf(other), bytes.NewReader(other)); err != nil {
				t.Fatal(err)
			}
			index, m := testManifest([][]byte{other})
			if err := w.Finish(index, m, nil); err != nil {
				t.Fatal(err)
			}
			paths := []string{path}
			if tc.maxSize > 0 {
				paths = []string{strings.TrimSuffix(path, ".tar") + "-001.tar"}
			}
			a := openArchive(t, paths...)
			if a.Has(tc.desc.Digest) {
				t.Error("the archive has the rejected blob")
			}
			if err := a.Verify(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			if tc.path == "out" {
				entries, _ := os.ReadDir(filepath.Join(path, "blobs", "sha256"))
				if len(entries) != 1 {
					t.Errorf("blobs/sha256 holds %d files, want 1", len(entries))
				}
			}
		})
	}
}

func TestArchiveFinishRejects(t *testing.T) {
	blobs := testBlobs(2, 1<<10, 6)
	for _, tc := range []struct {
		name  string
		edit  func(*ocispec.Index, *Manifest)
		want  []string
		other digest.Digest
	}{
		{"carried but not added", func(_ *ocispec.Index, m *Manifest) {
			m.Content = append(m.Content, Entry{Digest: digest.FromString("x"), Size: 1, Carried: true})
		}, []string{digest.FromString("x").String(), "never added"}, ""},
		{"index names what was not added", func(i *ocispec.Index, _ *Manifest) {
			i.Manifests = append(i.Manifests, ocispec.Descriptor{Digest: digest.FromString("y"), Size: 1})
		}, []string{"index.json names " + digest.FromString("y").String()}, ""},
		{"index of another kind", func(i *ocispec.Index, _ *Manifest) {
			i.MediaType = ocispec.MediaTypeImageManifest
		}, []string{"must be an image index"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := CreateArchive(filepath.Join(t.TempDir(), "out.tar"), ArchiveOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Abort()
			for _, b := range blobs {
				if _, err := w.Add(context.Background(), descOf(b), bytes.NewReader(b)); err != nil {
					t.Fatal(err)
				}
			}
			index, m := testManifest(blobs)
			tc.edit(&index, m)
			wantErr(t, w.Finish(index, m, nil), tc.want...)
		})
	}
}

func TestArchiveManifestInItsOwnPart(t *testing.T) {
	blobs := testBlobs(6, 8<<10, 7)
	dir := t.TempDir()
	path := filepath.Join(dir, "out.tar")
	w, err := CreateArchive(path, ArchiveOptions{MaxSize: 40 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	for _, b := range blobs {
		if _, err := w.Add(context.Background(), descOf(b), bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
	}
	index, m := testManifest(blobs)
	// Entries the far side holds already make the manifest too big to
	// share a part with blobs.
	for i := range 150 {
		m.Content = append(m.Content, Entry{Digest: digest.FromString(fmt.Sprint(i)), Size: 1000, MediaType: "application/octet-stream", At: "ns/name"})
	}
	if err := w.Finish(index, m, nil); err != nil {
		t.Fatal(err)
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "out-*.tar"))
	last, err := VerifyPart(paths[len(paths)-1])
	if err != nil {
		t.Fatal(err)
	}
	if !last.Last || len(last.Blobs) != 0 {
		t.Errorf("last part %+v, want one holding no blob", last)
	}
	a := openArchive(t, paths...)
	if err := a.Verify(context.Background(), nil); err != nil {
		t.Fatal(err)
	}

	// A manifest no part can hold is an error.
	w, err = CreateArchive(filepath.Join(dir, "huge.tar"), ArchiveOptions{MaxSize: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	m.Content = m.Content[len(blobs):] // only what the far side holds
	wantErr(t, w.Finish(ocispec.Index{}, m, nil), "huge-001.tar", "do not fit in a part of at most 16384 bytes")
}

func TestArchiveAddConcurrent(t *testing.T) {
	blobs := testBlobs(16, 8<<10, 8)
	dir := t.TempDir()
	path := filepath.Join(dir, "out.tar")
	w, err := CreateArchive(path, ArchiveOptions{MaxSize: 48 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	var wg sync.WaitGroup
	var added atomic.Int32
	errs := make(chan error, 8*len(blobs))
	for i := range 8 {
		for _, b := range blobs {
			wg.Go(func() {
				// One copy of each blob is corrupt: a goroutine adding it fails,
				// and another adds the good copy.
				content := b
				if i == 0 {
					content = slices.Clone(b)
					content[0] ^= 1
				}
				ok, err := w.Add(context.Background(), descOf(b), bytes.NewReader(content))
				if ok {
					added.Add(1)
				}
				if err != nil && (i != 0 || !errors.Is(err, ErrCorrupt)) {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if int(added.Load()) != len(blobs) {
		t.Errorf("%d Adds added, want %d: each blob once", added.Load(), len(blobs))
	}
	index, m := testManifest(blobs)
	if err := w.Finish(index, m, nil); err != nil {
		t.Fatal(err)
	}
	noLeftovers(t, dir)
	paths, _ := filepath.Glob(filepath.Join(dir, "out-*.tar"))
	count := map[digest.Digest]int{}
	for _, p := range paths {
		l, err := VerifyPart(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range l.Blobs {
			count[b.Digest]++
		}
	}
	for _, b := range blobs {
		if n := count[descOf(b).Digest]; n != 1 {
			t.Errorf("%s written %d times", descOf(b).Digest, n)
		}
	}
	a := openArchive(t, paths...)
	if err := a.Verify(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
}

func TestArchiveAbort(t *testing.T) {
	blobs := testBlobs(6, 8<<10, 9)
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path    string
		maxSize int64
	}{{filepath.Join(dir, "new", "out"), 0}, {empty, 0}, {filepath.Join(dir, "out.tar"), 0}, {filepath.Join(dir, "split.tar"), 20 << 10}} {
		w, err := CreateArchive(tc.path, ArchiveOptions{MaxSize: tc.maxSize})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blobs {
			if _, err := w.Add(context.Background(), descOf(b), bytes.NewReader(b)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Abort(); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Add(context.Background(), descOf(blobs[0]), bytes.NewReader(blobs[0])); err == nil {
			t.Errorf("%s: Add after Abort succeeded", tc.path)
		}
	}
	var left []string
	filepath.WalkDir(dir, func(p string, _ os.DirEntry, _ error) error {
		left = append(left, strings.TrimPrefix(p, dir))
		return nil
	})
	if want := []string{"", "/empty", "/new"}; !slices.Equal(left, want) {
		t.Errorf("after Abort %s holds %q, want %q", dir, left, want)
	}
}

// blobOffset is where the content of blob d starts in a tar file.
func blobOffset(t *testing.T, path string, d digest.Digest) int64 {
	t.Helper()
	tf, err := scanTar(path)
	if err != nil {
		t.Fatal(err)
	}
	defer tf.f.Close()
	for _, b := range tf.blobs {
		if b.digest == d {
			return b.off
		}
	}
	t.Fatalf("%s: no %s", path, d)
	return 0
}

// flipByte flips a byte of a file.
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x20
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestArchiveCorruptBlob(t *testing.T) {
	blobs := testBlobs(4, 4<<10, 10)
	d := descOf(blobs[2]).Digest
	for _, tc := range []struct {
		name  string
		path  string
		entry string
	}{
		{"directory", "out", filepath.Join("out", "blobs", "sha256", d.Encoded())},
		{"tar", "out.tar", "out.tar: blobs/sha256/" + d.Encoded()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, tc.path)
			writeArchive(t, path, ArchiveOptions{}, blobs, nil)
			if tc.path == "out" {
				flipByte(t, filepath.Join(path, "blobs", "sha256", d.Encoded()), 7)
			} else {
				flipByte(t, path, blobOffset(t, path, d)+7)
			}
			a := openArchive(t, path)
			_, err := readBlob(a, d)
			wantErr(t, err, tc.entry, d.String(), "has digest")
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("%v is not ErrCorrupt", err)
			}
			if b, err := readBlob(a, descOf(blobs[1]).Digest); err != nil || !bytes.Equal(b, blobs[1]) {
				t.Errorf("another blob: %v", err)
			}
			err = a.Verify(context.Background(), nil)
			wantErr(t, err, tc.entry, d.String())
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("Verify: %v is not ErrCorrupt", err)
			}
		})
	}
}

func TestArchiveDirectoryDamage(t *testing.T) {
	blobs := testBlobs(3, 1<<10, 11)
	d := descOf(blobs[1]).Digest
	blob := filepath.Join("blobs", "sha256", d.Encoded())
	for _, tc := range []struct {
		name   string
		damage func(dir string) error
		open   []string // OpenArchive's error; nil when it opens
		verify []string // then Verify's error
	}{
		{"blob missing", func(dir string) error { return os.Remove(filepath.Join(dir, blob)) },
			nil, []string{d.String(), "not in the archive"}},
		{"blob longer", func(dir string) error { return appendFile(filepath.Join(dir, blob), "x") },
			nil, []string{d.String(), blob, fmt.Sprintf("%d bytes", len(blobs[1])+1)}},
		{"stray file in blobs", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "blobs", "sha256", "stray"), nil, 0o644)
		},
			[]string{"stray", "not a blob name"}, nil},
		{"symlinked blob", func(dir string) error {
			p := filepath.Join(dir, blob)
			return errors.Join(os.Remove(p), os.Symlink("/etc/passwd", p))
		}, []string{blob, "not a regular file"}, nil},
		{"index.json not JSON", writeFile("index.json", "{"), []string{"index.json is not valid JSON"}, nil},
		{"index.json of another kind", writeFile("index.json", `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json"}`), []string{"index.json is not an image index"}, nil},
		{"manifest not JSON", writeFile(ManifestFile, "[1,"), []string{ManifestFile + " is not valid JSON"}, nil},
		{"manifest of another kind", writeFile(ManifestFile, `{"mediaType":"application/json"}`), []string{ManifestFile, `mediaType "application/json"`}, nil},
		{"no manifest", func(dir string) error { return os.Remove(filepath.Join(dir, ManifestFile)) }, []string{"not a berth archive"}, nil},
		{"no oci-layout", func(dir string) error { return os.Remove(filepath.Join(dir, "oci-layout")) }, []string{"not an OCI image layout"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			writeArchive(t, dir, ArchiveOptions{}, blobs, nil)
			if err := tc.damage(dir); err != nil {
				t.Fatal(err)
			}
			a, err := OpenArchive(dir)
			if tc.open != nil {
				wantErr(t, err, append(tc.open, dir)...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			wantErr(t, a.Verify(context.Background(), nil), tc.verify...)
		})
	}
}

func writeFile(name, content string) func(dir string) error {
	return func(dir string) error { return os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644) }
}

func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	return errors.Join(err, f.Close())
}

func TestArchiveTruncatedTar(t *testing.T) {
	blobs := testBlobs(3, 4<<10, 12)
	dir := t.TempDir()
	path := filepath.Join(dir, "out.tar")
	writeArchive(t, path, ArchiveOptions{}, blobs, nil)
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(full))
	mid := blobOffset(t, path, descOf(blobs[1]).Digest) + 100
	for _, tc := range []struct {
		name string
		n    int64
		want []string // OpenArchive's error; none when the manifest is left
	}{
		{"inside a blob", mid, []string{"it ends inside blobs/sha256/" + descOf(blobs[1]).Digest.Encoded(), ManifestFile + " are written at the end", "copy it again"}},
		{"inside the manifest", size - 1024 - 512 - 200, []string{"it ends inside " + ManifestFile, "lost"}},
		{"inside the first entries", 700, []string{"truncated", ManifestFile + " are written at the end"}},
		{"empty", 0, []string{"truncated", "no end marker"}},
		{"no end marker", size - 1024, nil},
		{"half the end marker", size - 512, nil},
		{"one byte", size - 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "cut.tar")
			if err := os.WriteFile(p, full[:tc.n], 0o644); err != nil {
				t.Fatal(err)
			}
			a, err := OpenArchive(p)
			if tc.want != nil {
				wantErr(t, err, append([]string{p}, tc.want...)...)
				return
			}
			// The manifest and every blob are there: each is read, and
			// the archive says it is cut.
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if d := a.Damage(); len(d) != 1 || !strings.Contains(d[0], p+": truncated tar file") {
				t.Errorf("damage %q", d)
			}
			for _, b := range blobs {
				if got, err := readBlob(a, descOf(b).Digest); err != nil || !bytes.Equal(got, b) {
					t.Errorf("blob %s: %v", descOf(b).Digest, err)
				}
			}
			wantErr(t, a.Verify(context.Background(), nil), p, "truncated")
		})
	}
}

// TestArchiveDamagedParts: a split archive with a part missing or cut
// still opens; every blob of the parts left is read, and a blob lost is
// an error naming the part and what happened to it.
func TestArchiveDamagedParts(t *testing.T) {
	blobs := testBlobs(8, 8<<10, 14)
	dir := t.TempDir()
	paths := splitArchive(t, filepath.Join(dir, "a.tar"), blobs)
	m := openArchive(t, paths...).Manifest()
	inPart := func(n int) (in, out [][]byte) {
		for _, b := range blobs {
			if m.Content[slices.IndexFunc(m.Content, func(e Entry) bool { return e.Digest == descOf(b).Digest })].Part == n {
				in = append(in, b)
			} else {
				out = append(out, b)
			}
		}
		return in, out
	}
	lostPart, _ := inPart(2)
	if len(lostPart) < 2 {
		t.Fatalf("part 2 holds %d blobs, want 2 or more", len(lostPart))
	}
	// Part 2 cut inside its last blob, under its own name.
	cutDir := t.TempDir()
	cut := filepath.Join(cutDir, filepath.Base(paths[1]))
	full, _ := os.ReadFile(paths[1])
	lastBlob := descOf(lostPart[len(lostPart)-1]).Digest
	os.WriteFile(cut, full[:blobOffset(t, paths[1], lastBlob)+10], 0o644)
	// Part 1 cut after its listing, in its end marker: nothing is lost.
	marker := filepath.Join(cutDir, filepath.Base(paths[0]))
	full, _ = os.ReadFile(paths[0])
	os.WriteFile(marker, full[:len(full)-100], 0o644)
	with := func(i int, p string) []string {
		s := slices.Clone(paths)
		s[i] = p
		return s
	}
	for _, tc := range []struct {
		name   string
		paths  []string
		damage string
		lost   [][]byte
		why    []string
	}{
		{"missing part", slices.Delete(slices.Clone(paths), 1, 2), "part 2 of", lostPart, []string{"part 2 of", filepath.Base(paths[1]) + ") is missing"}},
		{"cut part", with(1, cut), cut + ": truncated tar file", lostPart[len(lostPart)-1:], []string{cut, "it ends inside blobs/sha256/" + lastBlob.Encoded()}},
		{"end marker cut", with(0, marker), marker + ": truncated tar file", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := openArchive(t, tc.paths...)
			if d := a.Damage(); len(d) != 1 || !strings.Contains(d[0], tc.damage) {
				t.Errorf("damage %q, want %q", d, tc.damage)
			}
			for _, b := range blobs {
				d := descOf(b).Digest
				got, err := readBlob(a, d)
				if slices.ContainsFunc(tc.lost, func(l []byte) bool { return bytes.Equal(l, b) }) {
					wantErr(t, err, append([]string{d.String()}, tc.why...)...)
					if !errors.Is(err, ErrCorrupt) {
						t.Errorf("%v is not ErrCorrupt", err)
					}
					continue
				}
				if err != nil || !bytes.Equal(got, b) {
					t.Errorf("blob %s: %v", d, err)
				}
			}
			wantErr(t, a.Verify(context.Background(), nil), tc.damage)
		})
	}
	t.Run("cut part under another name", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "other.tar")
		b, _ := os.ReadFile(cut)
		os.WriteFile(p, b, 0o644)
		_, err := OpenArchive(with(1, p)...)
		wantErr(t, err, p, "its name is not a part's")
	})
	t.Run("last part cut before the manifest", func(t *testing.T) {
		last := paths[len(paths)-1]
		p := filepath.Join(t.TempDir(), filepath.Base(last))
		full, _ := os.ReadFile(last)
		os.WriteFile(p, full[:len(layoutJSON)+3*blockSize+10], 0o644)
		_, err := OpenArchive(with(len(paths)-1, p)...)
		wantErr(t, err, p, "truncated", ManifestFile, "lost")
	})
}

// tarEntry is an entry of a tar made by hand.
type tarEntry struct {
	h    tar.Header
	body string
}

func reg(name, body string) tarEntry {
	return tarEntry{tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body))}, body}
}

// handTar writes a tar of a valid archive's files and the extra entries.
func handTar(t *testing.T, path string, extra ...tarEntry) {
	t.Helper()
	blob := "blob"
	index, m := testManifest([][]byte{[]byte(blob)})
	index.SchemaVersion, index.MediaType = 2, ocispec.MediaTypeImageIndex
	ib, _ := json.Marshal(index)
	mb, _ := json.Marshal(m)
	entries := append([]tarEntry{
		reg("oci-layout", string(layoutJSON)),
		reg(blobName(digest.FromString(blob)), blob),
		reg("index.json", string(ib)),
		reg(ManifestFile, string(mb)),
	}, extra...)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if err := tw.WriteHeader(&e.h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestArchiveHostileTar(t *testing.T) {
	hex := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name  string
		entry tarEntry
		want  []string
	}{
		{"none", tarEntry{}, nil},
		{"dot dot", reg("../x", "x"), []string{`"../x"`, "outside the archive"}},
		{"dot dot inside", reg("blobs/../../x", "x"), []string{"outside the archive"}},
		{"absolute", reg("/abs", "x"), []string{`"/abs"`, "outside the archive"}},
		{"symlink", tarEntry{tar.Header{Typeflag: tar.TypeSymlink, Name: "blobs/sha256/" + hex, Linkname: "/etc/passwd"}, ""}, []string{hex, "not a regular file"}},
		{"hard link", tarEntry{tar.Header{Typeflag: tar.TypeLink, Name: "blobs/sha256/" + hex, Linkname: "oci-layout"}, ""}, []string{hex, "not a regular file"}},
		{"device", tarEntry{tar.Header{Typeflag: tar.TypeChar, Name: "dev"}, ""}, []string{"dev", "not a regular file"}},
		{"duplicate", reg("index.json", "{}"), []string{"index.json is in the tar twice"}},
		{"duplicate blob", reg("./"+blobName(digest.FromString("blob")), "blob"), []string{"in the tar twice"}},
		{"short blob name", reg("blobs/sha256/abc", "x"), []string{"blobs/sha256/abc", "unexpected entry"}},
		{"upper-case hex", reg("blobs/sha256/"+strings.ToUpper(hex), "x"), []string{"unexpected entry"}},
		{"other algorithm", reg("blobs/sha512/"+hex+hex, "x"), []string{"unexpected entry"}},
		{"unknown file", reg("etc/passwd", "x"), []string{"etc/passwd", "unexpected entry"}},
		{"unknown directory", tarEntry{tar.Header{Typeflag: tar.TypeDir, Name: "etc/"}, ""}, []string{"unexpected directory"}},
		{"current directory", tarEntry{tar.Header{Typeflag: tar.TypeDir, Name: "./"}, ""}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "hand.tar")
			if tc.want == nil {
				if tc.entry.h.Name != "" {
					handTar(t, p, tc.entry)
				} else {
					handTar(t, p)
				}
				a := openArchive(t, p)
				if err := a.Verify(context.Background(), nil); err != nil {
					t.Fatalf("the valid hand-made tar: %v", err)
				}
				return
			}
			handTar(t, p, tc.entry)
			_, err := OpenArchive(p)
			wantErr(t, err, append(tc.want, p)...)
		})
	}
}

func TestArchiveBadMetadataTar(t *testing.T) {
	for _, tc := range []struct {
		name  string
		entry tarEntry
		want  string
	}{
		{"index.json not JSON", reg("index.json", "nope"), "index.json is not valid JSON"},
		{"manifest of another kind", reg(ManifestFile, `{"mediaType":"x"}`), `mediaType "x"`},
		{"oci-layout of another version", reg("oci-layout", `{"imageLayoutVersion":"2.0.0"}`), "not an OCI image layout version"},
		{"berth-part.json not JSON", reg(PartFile, "{"), PartFile + " is not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The hand-made tar with the one file replaced.
			p := filepath.Join(t.TempDir(), "bad.tar")
			handTar(t, p)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			tr, tw := tar.NewReader(bytes.NewReader(b)), tar.NewWriter(&out)
			replaced := false
			for {
				h, err := tr.Next()
				if err == io.EOF {
					break
				}
				body, _ := io.ReadAll(tr)
				if h.Name == tc.entry.h.Name {
					*h, body, replaced = tc.entry.h, []byte(tc.entry.body), true
				}
				tw.WriteHeader(h)
				tw.Write(body)
			}
			if !replaced {
				tw.WriteHeader(&tc.entry.h)
				tw.Write([]byte(tc.entry.body))
			}
			tw.Close()
			if err := os.WriteFile(p, out.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = OpenArchive(p)
			wantErr(t, err, p, tc.want)
		})
	}
}

// splitArchive writes a split archive of blobs and returns its parts in order.
func splitArchive(t *testing.T, path string, blobs [][]byte) []string {
	t.Helper()
	writeArchive(t, path, ArchiveOptions{MaxSize: 24 << 10}, blobs, nil)
	paths, err := filepath.Glob(strings.TrimSuffix(path, ".tar") + "-*.tar")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 3 {
		t.Fatalf("%d parts, want at least 3", len(paths))
	}
	return paths
}

func TestArchiveParts(t *testing.T) {
	blobs := testBlobs(8, 8<<10, 13)
	dir := t.TempDir()
	a := splitArchive(t, filepath.Join(dir, "a.tar"), blobs)
	b := splitArchive(t, filepath.Join(dir, "b.tar"), blobs)
	single := filepath.Join(dir, "single.tar")
	writeArchive(t, single, ArchiveOptions{}, blobs, nil)

	truncated := filepath.Join(dir, "truncated.tar")
	full, _ := os.ReadFile(a[1])
	os.WriteFile(truncated, full[:len(full)-700], 0o644)
	// A copy of part 2 with one byte changed where no tar reader looks: only
	// the part's digest in the manifest catches it.
	padded := filepath.Join(dir, "padded.tar")
	full[len(layoutJSON)+blockSize+10] = 'x'
	os.WriteFile(padded, full, 0o644)

	with := func(i int, p string) []string {
		s := slices.Clone(a)
		s[i] = p
		return s
	}
	for _, tc := range []struct {
		name  string
		paths []string
		want  []string
	}{
		{"duplicate part", append(slices.Clone(a), a[1]), []string{a[1], "both part 2"}},
		{"part of another archive", with(1, b[1]), []string{b[1], "different archives"}},
		{"no last part", a[:len(a)-1], []string{"no last part", a[0]}},
		{"single tar among parts", append(slices.Clone(a), single), []string{single, "not a part"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := OpenArchive(tc.paths...)
			wantErr(t, err, tc.want...)
		})
	}

	t.Run("part altered outside its blobs", func(t *testing.T) {
		if _, err := VerifyPart(padded); err != nil {
			t.Fatalf("VerifyPart: %v", err)
		}
		ar := openArchive(t, with(1, padded)...)
		err := ar.Verify(context.Background(), nil)
		wantErr(t, err, padded, "part 2 has digest")
	})
	t.Run("VerifyPart", func(t *testing.T) {
		_, err := VerifyPart(single)
		wantErr(t, err, single, "not a part")
		_, err = VerifyPart(truncated)
		wantErr(t, err, truncated, "truncated")

		l, err := VerifyPart(a[0])
		if err != nil {
			t.Fatal(err)
		}
		flipped := filepath.Join(dir, "flipped.tar")
		full, _ := os.ReadFile(a[0])
		os.WriteFile(flipped, full, 0o644)
		d := l.Blobs[0].Digest
		flipByte(t, flipped, blobOffset(t, flipped, d)+1)
		_, err = VerifyPart(flipped)
		wantErr(t, err, flipped, "blobs/sha256/"+d.Encoded(), d.String(), "has digest")
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%v is not ErrCorrupt", err)
		}
	})
	t.Run("listing and content disagree", func(t *testing.T) {
		// Part 1 with a listing that leaves out its last blob.
		l, _ := VerifyPart(a[0])
		l.Blobs = l.Blobs[:len(l.Blobs)-1]
		lb, _ := json.Marshal(l)
		full, _ := os.ReadFile(a[0])
		tr := tar.NewReader(bytes.NewReader(full))
		var out bytes.Buffer
		tw := tar.NewWriter(&out)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			body, _ := io.ReadAll(tr)
			if h.Name == PartFile {
				body, h.Size = lb, int64(len(lb))
			}
			tw.WriteHeader(h)
			tw.Write(body)
		}
		tw.Close()
		p := filepath.Join(dir, "unlisted.tar")
		os.WriteFile(p, out.Bytes(), 0o644)
		_, err := VerifyPart(p)
		wantErr(t, err, p, "not listed in "+PartFile)
	})
}

func TestArchiveSignature(t *testing.T) {
	kp := signingtest.NewKeyPair(t, "")
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pemBytes, err := cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	otherKey, err := signing.ParsePublicKey(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	blobs := testBlobs(2, 1<<10, 14)
	for _, path := range []string{"out", "out.tar", "split.tar"} {
		t.Run(path, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, path)
			var opts ArchiveOptions
			if path == "split.tar" {
				opts.MaxSize = 1 << 20
			}
			writeArchive(t, p, opts, blobs, kp.Signer)
			if opts.MaxSize > 0 {
				p = filepath.Join(dir, "split-001.tar")
			}
			a := openArchive(t, p)
			if err := a.CheckSignature(kp.Key); err != nil {
				t.Fatalf("CheckSignature with the signing key: %v", err)
			}
			if err := signing.VerifyBlob(kp.Key, a.ManifestBytes(), string(a.sig)); err != nil {
				t.Fatal(err)
			}
			wantErr(t, a.CheckSignature(otherKey), SignatureFile, "not signed by key "+otherKey.ID)
		})
	}
	t.Run("altered manifest", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "out")
		writeArchive(t, dir, ArchiveOptions{}, blobs, kp.Signer)
		mf := filepath.Join(dir, ManifestFile)
		b, _ := os.ReadFile(mf)
		os.WriteFile(mf, bytes.Replace(b, []byte("berth.example"), []byte("evil.example!"), 1), 0o644)
		a := openArchive(t, dir)
		if a.Manifest().Source != "evil.example!:5000" {
			t.Fatalf("Source %q: the manifest was not altered", a.Manifest().Source)
		}
		wantErr(t, a.CheckSignature(kp.Key), SignatureFile, "not signed by key")
	})
	t.Run("missing", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "out")
		writeArchive(t, dir, ArchiveOptions{}, blobs, kp.Signer)
		os.Remove(filepath.Join(dir, SignatureFile))
		a := openArchive(t, dir)
		wantErr(t, a.CheckSignature(kp.Key), "not signed", SignatureFile)
	})
}

// TestPartListingBound checks the room a part keeps for its listing holds
// the largest listing.
func TestPartListingBound(t *testing.T) {
	l := PartListing{MediaType: PartMediaType, Archive: strings.Repeat("f", 32), Number: 1<<63 - 1, Last: true, Blobs: []PartBlob{}}
	for n := range 5 {
		b, _ := json.Marshal(l)
		if int64(len(b)+1) > listingFixed+listingPerBlob*int64(n) {
			t.Fatalf("a listing of %d blobs has %d bytes, over the %d kept", n, len(b)+1, listingFixed+listingPerBlob*n)
		}
		l.Blobs = append(l.Blobs, PartBlob{Digest: digest.FromString(fmt.Sprint(n)), Size: 1<<63 - 1})
	}
}
