package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/mirror"
)

// bigImageArchive writes an archive of one version, apps/big:1.0.0, an
// image whose one layer is size random bytes; it returns the archive.
func bigImageArchive(t *testing.T, dir string, size int) string {
	t.Helper()
	layer := make([]byte, size)
	rand.NewChaCha8([32]byte{26}).Read(layer)
	config := []byte(`{"architecture":"amd64","os":"linux","rootfs":{"type":"layers"}}`)
	desc := func(mediaType string, b []byte) ocispec.Descriptor {
		return ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(b), Size: int64(len(b))}
	}
	cfg, lay := desc(ocispec.MediaTypeImageConfig, config), desc(ocispec.MediaTypeImageLayerGzip, layer)
	body, err := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest, Config: cfg, Layers: []ocispec.Descriptor{lay}})
	if err != nil {
		t.Fatal(err)
	}
	man := desc(ocispec.MediaTypeImageManifest, body)
	path := filepath.Join(dir, "big.tar")
	w, err := mirror.CreateArchive(path, mirror.ArchiveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	m := &mirror.Manifest{SchemaVersion: 1, MediaType: mirror.ManifestMediaType, Source: "berth.example:5000", Created: time.Now().UTC()}
	var needs []digest.Digest
	for _, c := range []struct {
		d    ocispec.Descriptor
		data []byte
	}{{cfg, config}, {lay, layer}, {man, body}} {
		if _, err := w.Add(context.Background(), c.d, bytes.NewReader(c.data)); err != nil {
			t.Fatal(err)
		}
		m.Content = append(m.Content, mirror.Entry{Digest: c.d.Digest, Size: c.d.Size, MediaType: c.d.MediaType, Carried: true, Manifest: c.d.Digest == man.Digest})
		needs = append(needs, c.d.Digest)
	}
	slices.Sort(needs)
	m.Versions = []mirror.Version{{Repository: "apps/big", Tag: "1.0.0", Digest: man.Digest, Needs: needs}}
	if err := w.Finish(ocispec.Index{Manifests: []ocispec.Descriptor{man}}, m, nil); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMirrorImportResumesWithinABlob kills berth mirror import (SIGKILL)
// when berth serve holds 40 % of a 64 MiB layer; the same command run
// again takes the upload up where the target has it and sends the rest.
func TestMirrorImportResumesWithinABlob(t *testing.T) {
	const size, chunk = 64 << 20, 1 << 20
	work := t.TempDir()
	archive := bigImageArchive(t, work, size)
	target := startServer(t, "")
	state := filepath.Join(work, "state")
	args := []string{"mirror", "import", archive, target.addr, "--chunk-size", "1MiB", "--state-dir", state, "--format", "json"}

	cmd := exec.Command(berthBin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	uploads := filepath.Join(target.data, "registry", "docker", "registry", "v2", "repositories", "apps", "big", "_uploads")
	deadline := time.Now().Add(60 * time.Second)
	for uploaded(uploads) < size*40/100 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if cmd.ProcessState.ExitCode() == 0 {
		t.Fatal("the import finished before it was killed")
	}
	// The server notices the cut connection and stops writing.
	held := uploaded(uploads)
	for settled := time.Now().Add(5 * time.Second); time.Now().Before(settled); {
		time.Sleep(100 * time.Millisecond)
		n := uploaded(uploads)
		if n == held {
			break
		}
		held = n
	}
	if fi, err := os.Stat(state); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("state directory after the kill: %v; want mode 0700", err)
	}

	again := summaryOf(t, berth(t, work, args...).stdout)
	if again.Versions != 1 || len(again.Failed) != 0 {
		t.Fatalf("the import run again: %+v", again)
	}
	if again.BytesResumed < held-chunk || again.BytesResumed > held {
		t.Errorf("the rerun resumed %d bytes; the target held %d", again.BytesResumed, held)
	}
	t.Logf("killed when the target held %d of %d bytes; the rerun resumed %d and sent %d", held, size, again.BytesResumed, again.Bytes)
	if limit := int64(size) - held + chunk + 1<<10; again.Bytes > limit {
		t.Errorf("the rerun sent %d bytes; the target held %d of %d", again.Bytes, held, size)
	}
	if ents, err := os.ReadDir(state); err != nil || len(ents) != 0 {
		t.Errorf("the journal after the import: %v, %v; want it empty", ents, err)
	}
}

// uploaded is the size of the largest upload in progress under dir.
func uploaded(dir string) int64 {
	var n int64
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if fi, err := os.Stat(filepath.Join(dir, e.Name(), "data")); err == nil {
			n = max(n, fi.Size())
		}
	}
	return n
}
