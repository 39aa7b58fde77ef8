package registry

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/coord"
	"github.com/berth-registry/berth/internal/pgtest"
)

// markFixture is what a repository holds before a collection, every file
// two hours old: a tagged image; an old blob nothing references; an
// untagged image and a signature of it, dead; a garbage blob.
type markFixture struct {
	b                       blobs
	tagged, untagged, sig   ocispec.Descriptor
	untaggedManifest        ocispec.Manifest
	old, garbage            ocispec.Descriptor
	untaggedLayer, sigLayer digest.Digest
}

const markRepo = "team/app"

func newMarkFixture(t *testing.T, h http.Handler) *markFixture {
	f := &markFixture{b: pushBlobs(t, h, markRepo)}
	withLayer := func(layer string, subject *ocispec.Descriptor) ocispec.Manifest {
		m := f.b.image(subject, "", "", nil)
		m.Layers = []ocispec.Descriptor{putBlob(t, h, markRepo, ocispec.MediaTypeImageLayer, []byte(layer))}
		return m
	}
	f.tagged = mustPut(t, h, markRepo, "1.0.0", withLayer("tagged", nil))
	f.old = putBlob(t, h, markRepo, ocispec.MediaTypeImageLayer, []byte("old, referenced by nothing"))
	f.untaggedManifest = withLayer("untagged", nil)
	f.untagged = mustPut(t, h, markRepo, "", f.untaggedManifest)
	f.sig = mustPut(t, h, markRepo, "", withLayer("sig", &f.untagged))
	f.garbage = putBlob(t, h, markRepo, ocispec.MediaTypeImageLayer, []byte("garbage"))
	f.untaggedLayer, f.sigLayer = digest.FromString("untagged"), digest.FromString("sig")
	return f
}

// TestCollectGarbageKeepsWhatIsWrittenDuringTheMark writes, between the
// mark and the sweep, what makes content the mark found dead live again,
// through the collecting registry or through another replica on the same
// storage and database: the sweep, which reads only its journal, must keep
// it, and delete the rest of the garbage.
func TestCollectGarbageKeepsWhatIsWrittenDuringTheMark(t *testing.T) {
	for _, tc := range []struct {
		name string
		// during writes through w and returns what must stay: blobs
		// (manifests included) stored, and manifests served.
		during        func(t *testing.T, w http.Handler, f *markFixture) (blobs, manifests []digest.Digest)
		wantManifests int
	}{
		{"image pushed by tag with an old unreferenced blob", func(t *testing.T, w http.Handler, f *markFixture) ([]digest.Digest, []digest.Digest) {
			m := f.b.image(nil, "", "", nil)
			m.Layers = []ocispec.Descriptor{f.old}
			d := mustPut(t, w, markRepo, "2.0.0", m).Digest
			return []digest.Digest{f.old.Digest, d}, []digest.Digest{d}
		}, 2},
		{"image pushed by digest with an old unreferenced blob", func(t *testing.T, w http.Handler, f *markFixture) ([]digest.Digest, []digest.Digest) {
			m := f.b.image(nil, "", "", nil)
			m.Layers = []ocispec.Descriptor{f.old}
			d := mustPut(t, w, markRepo, "", m).Digest
			return []digest.Digest{f.old.Digest, d}, []digest.Digest{d}
		}, 2},
		{"index listing an old untagged image", func(t *testing.T, w http.Handler, f *markFixture) ([]digest.Digest, []digest.Digest) {
			idx := mustPut(t, w, markRepo, "multi", ocispec.Index{Versioned: f.untaggedManifest.Versioned, MediaType: ocispec.MediaTypeImageIndex,
				Manifests: []ocispec.Descriptor{f.untagged}}).Digest
			// The image is live, and so is its signature.
			return []digest.Digest{idx, f.untagged.Digest, f.untaggedLayer, f.sig.Digest, f.sigLayer},
				[]digest.Digest{idx, f.untagged.Digest, f.sig.Digest}
		}, 0},
		{"old untagged image pushed again by tag", func(t *testing.T, w http.Handler, f *markFixture) ([]digest.Digest, []digest.Digest) {
			mustPut(t, w, markRepo, "again", f.untaggedManifest)
			return []digest.Digest{f.untagged.Digest, f.untaggedLayer, f.sig.Digest, f.sigLayer}, []digest.Digest{f.untagged.Digest, f.sig.Digest}
		}, 0},
		{"upload of an old blob finished", func(t *testing.T, w http.Handler, f *markFixture) ([]digest.Digest, []digest.Digest) {
			putBlob(t, w, markRepo, ocispec.MediaTypeImageLayer, []byte("old, referenced by nothing"))
			return []digest.Digest{f.old.Digest}, nil
		}, 2},
		{"old blob mounted into another repository", func(t *testing.T, w http.Handler, f *markFixture) ([]digest.Digest, []digest.Digest) {
			if resp := do(w, http.MethodPost, "/v2/other/app/blobs/uploads/?from="+markRepo+"&mount="+f.old.Digest.String(), "", nil); resp.StatusCode != http.StatusCreated {
				t.Fatalf("mount: %s", resp.Status)
			}
			return []digest.Digest{f.old.Digest}, nil
		}, 2},
		{"new blob uploaded", func(t *testing.T, w http.Handler, f *markFixture) ([]digest.Digest, []digest.Digest) {
			return []digest.Digest{putBlob(t, w, markRepo, ocispec.MediaTypeImageLayer, []byte("new")).Digest}, nil
		}, 2},
		{"tagged image deleted", func(t *testing.T, w http.Handler, f *markFixture) ([]digest.Digest, []digest.Digest) {
			if resp := do(w, http.MethodDelete, "/v2/"+markRepo+"/manifests/"+f.tagged.Digest.String(), "", nil); resp.StatusCode != http.StatusAccepted {
				t.Fatalf("delete: %s", resp.Status)
			}
			// Live when the mark read it: it is collected next time.
			return []digest.Digest{digest.FromString("tagged")}, nil
		}, 2},
		{"dead image deleted by a client", func(t *testing.T, w http.Handler, f *markFixture) ([]digest.Digest, []digest.Digest) {
			if resp := do(w, http.MethodDelete, "/v2/"+markRepo+"/manifests/"+f.untagged.Digest.String(), "", nil); resp.StatusCode != http.StatusAccepted {
				t.Fatalf("delete: %s", resp.Status)
			}
			return nil, nil
		}, 1},
	} {
		for _, replicas := range []string{"one process", "two replicas"} {
			t.Run(tc.name+"/"+replicas, func(t *testing.T) {
				dir := t.TempDir()
				var reg, writer *Registry
				if replicas == "one process" {
					reg = newRegistry(t, Options{Storage: onDisk(dir)})
					writer = reg
				} else {
					dsn := pgtest.Database(t)
					reg = newRegistry(t, Options{Storage: onDisk(dir), Locks: openCoord(t, dsn)})
					writer = newRegistry(t, Options{Storage: onDisk(dir), Locks: openCoord(t, dsn)})
				}
				f := newMarkFixture(t, reg)
				age(t, dir, 2*time.Hour)
				var keepBlobs, keepManifests []digest.Digest
				reg.gcBeforeSweep = func() { keepBlobs, keepManifests = tc.during(t, writer, f) }
				rep, err := reg.CollectGarbage(context.Background(), GCOptions{Grace: time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				if rep.Manifests != tc.wantManifests {
					t.Errorf("%d manifests deleted, want %d", rep.Manifests, tc.wantManifests)
				}
				keep := map[digest.Digest]bool{f.b.config.Digest: true}
				for _, d := range keepBlobs {
					keep[d] = true
				}
				for _, d := range keepBlobs {
					if _, err := os.Stat(filepath.Join(dir, blobDataPath(d))); err != nil {
						t.Errorf("live blob %s deleted: %v", d, err)
					}
				}
				for _, d := range keepManifests {
					if code := status(reg, "/v2/"+markRepo+"/manifests/"+d.String()); code != http.StatusOK {
						t.Errorf("live manifest %s: GET = %d, want 200", d, code)
					}
				}
				for _, d := range []digest.Digest{f.garbage.Digest, f.old.Digest, f.untagged.Digest, f.untaggedLayer, f.sig.Digest, f.sigLayer} {
					if _, err := os.Stat(filepath.Join(dir, blobDataPath(d))); !keep[d] && !os.IsNotExist(err) {
						t.Errorf("garbage blob %s still stored (%v)", d, err)
					}
				}
			})
		}
	}
}

// openCoord is a replica's coordination on the database at dsn.
func openCoord(t *testing.T, dsn string) *coord.Postgres {
	t.Helper()
	p, err := coord.OpenPostgres(context.Background(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// TestParseJournalRefusesWhatItCannotRead: an entry that names nothing
// readable stops the collection, naming the entry.
func TestParseJournalRefusesWhatItCannotRead(t *testing.T) {
	for _, e := range []string{"", "manifest team/app", "manifest team/app@sha256:nothex", "blob nope", "tag team/app:1.0.0"} {
		if _, err := parseJournal([]string{e}); err == nil {
			t.Errorf("entry %q: read", e)
		}
	}
	d := digest.FromString("x")
	got, err := parseJournal([]string{manifestEntry("team/app", d), blobEntry(d)})
	if err != nil || len(got.manifests) != 1 || got.manifests[0] != (repoManifest{"team/app", d}) || len(got.blobs) != 1 || got.blobs[0] != d {
		t.Errorf("parseJournal = %+v, %v", got, err)
	}
}
