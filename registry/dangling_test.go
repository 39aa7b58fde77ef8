package registry

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/storage"
)

// TestDanglingPackageTagCanBeRepointed: a crash in the middle of a manifest
// delete leaves a tag naming a package manifest that is gone. Such a tag names
// no version, so a push may point it at another package.
func TestDanglingPackageTagCanBeRepointed(t *testing.T) {
	ctx := context.Background()
	reg, err := New(ctx, Options{
		Storage:        &storage.Config{Driver: "inmemory"},
		HTTPSecret:     "test",
		AllowOverwrite: func(string) bool { return false },
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(reg)
	t.Cleanup(func() { srv.Close(); reg.Close() })
	const repo = "kudo/kafka"
	first, second := manifest(t, srv.URL, repo, "first", berthPkg), manifest(t, srv.URL, repo, "second", berthPkg)
	if status, e := putManifest(t, srv.URL, repo, "1.0.0", first); status != http.StatusCreated {
		t.Fatalf("first push: %d %v", status, e)
	}

	// A crash between deleting the manifest and its tag, as distribution's own
	// manifest DELETE orders them, leaves the tag: delete the manifest, then
	// write the tag back.
	r := repository(t, reg, repo)
	ms, err := r.Manifests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ms.Delete(ctx, digest.FromBytes(first)); err != nil {
		t.Fatal(err)
	}
	if err := r.Tags(ctx).Tag(ctx, "1.0.0", ocispec.Descriptor{Digest: digest.FromBytes(first)}); err != nil {
		t.Fatal(err)
	}
	if d, err := r.Tags(ctx).Get(ctx, "1.0.0"); err != nil || d.Digest != digest.FromBytes(first) {
		t.Fatalf("the tag should be left dangling at %s: %v, %v", digest.FromBytes(first), d, err)
	}

	if status, e := putManifest(t, srv.URL, repo, "1.0.0", second); status != http.StatusCreated {
		t.Fatalf("push to the dangling tag: status %d (%v), want %d", status, e, http.StatusCreated)
	}
	if got := tagDigest(t, srv.URL, repo, "1.0.0"); got != digest.FromBytes(second) {
		t.Errorf("tag points at %s, want %s", got, digest.FromBytes(second))
	}
}
