package catalog_test

import (
	"context"
	"io"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/berth-registry/berth/catalog"
)

// recentFake holds one manifest and one blob of ns/p.
type recentFake struct{ manifest, blob []byte }

func (f recentFake) RecentManifest(repo string, d digest.Digest) (string, []byte, bool) {
	if repo != "ns/p" || d != digest.FromBytes(f.manifest) {
		return "", nil, false
	}
	return "application/vnd.oci.image.manifest.v1+json", f.manifest, true
}

func (f recentFake) RecentBlob(repo string, d digest.Digest) ([]byte, bool) {
	return f.blob, repo == "ns/p" && d == digest.FromBytes(f.blob)
}

// TestDistributionSourceReadsRecentFirst: what the registry holds of what
// it just received is read without the storage (the source here has no
// namespace to read, so a read of the storage would fail).
func TestDistributionSourceReadsRecentFirst(t *testing.T) {
	fake := recentFake{manifest: []byte(`{"schemaVersion":2}`), blob: []byte("content")}
	src := catalog.NewDistributionSource(nil, nil, nil).ReadRecent(fake)
	ctx := context.Background()
	mt, payload, err := src.Manifest(ctx, "ns/p", digest.FromBytes(fake.manifest).String())
	if err != nil || string(payload) != string(fake.manifest) || mt != "application/vnd.oci.image.manifest.v1+json" {
		t.Fatalf("Manifest = %q, %q, %v; want the recent manifest", mt, payload, err)
	}
	rc, err := src.Blob(ctx, "ns/p", digest.FromBytes(fake.blob).String())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if b, err := io.ReadAll(rc); err != nil || string(b) != "content" {
		t.Fatalf("Blob = %q, %v; want the recent blob", b, err)
	}
}
