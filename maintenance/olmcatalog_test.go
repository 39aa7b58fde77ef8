package maintenance

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/olm"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/storage"
)

// olmPackages is an olm.Source of one package, etcd in namespace ns, whose
// versions the test sets.
type olmPackages struct{ versions []olm.Version }

func (s *olmPackages) OLMPackages(context.Context) (map[string][]string, error) {
	return map[string][]string{"ns": {"etcd"}}, nil
}

func (s *olmPackages) OLMVersions(_ context.Context, ns, name string) ([]olm.Version, error) {
	if ns != "ns" || name != "etcd" {
		return nil, nil
	}
	return s.versions, nil
}

// etcdVersion is version v of etcd in channel stable, replacing prev.
func etcdVersion(v, prev string) olm.Version {
	csv := "etcd.v" + v
	pv, _ := json.Marshal(map[string]string{"packageName": "etcd", "version": v})
	ch := pkgformat.Channel{Name: "stable"}
	if prev != "" {
		ch.Replaces = "etcd.v" + prev
	}
	return olm.Version{
		Version: v,
		Digest:  digest.FromString("etcd@" + v).String(),
		Metadata: &pkgformat.Metadata{
			Name: "etcd", Version: v, Format: pkgformat.OLM, CSVName: csv, Channels: []pkgformat.Channel{ch},
		},
		Bundle: &olm.BundleRecord{
			Digest:     digest.FromString("bundle etcd@" + v).String(),
			Name:       csv,
			Properties: []olm.Property{{Type: "olm.package", Value: pv}},
		},
	}
}

// TestCollectionReclaimsSupersededCatalogImages: after several updates of
// a namespace's catalog image, a collection past the grace deletes the
// images the updates superseded, even in a namespace that keeps untagged
// manifests for 30 days, and leaves the current one whole.
func TestCollectionReclaimsSupersededCatalogImages(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	reg, err := registry.New(ctx, registry.Options{Storage: &storage.Config{Driver: "inmemory"}, HTTPSecret: "test", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	dist := catalog.NewDistributionSource(reg.Namespace(), reg.Referrers, reg.UntagDangling)
	src := &olmPackages{}
	pub, err := olm.NewPublisher(olm.PublisherOptions{Source: src, Registry: dist, Host: "berth.test"})
	if err != nil {
		t.Fatal(err)
	}
	repo := olm.CatalogRepository("ns")
	manifest := func() ocispec.Manifest {
		t.Helper()
		d, err := dist.Resolve(ctx, repo, olm.CatalogTag)
		if err != nil {
			t.Fatal(err)
		}
		_, payload, err := dist.Manifest(ctx, repo, d)
		if err != nil {
			t.Fatal(err)
		}
		var m ocispec.Manifest
		if err := json.Unmarshal(payload, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	var superseded []digest.Digest
	prev := ""
	for _, v := range []string{"1.0.0", "1.1.0", "1.2.0"} {
		if prev != "" {
			m := manifest()
			superseded = append(superseded, m.Config.Digest, m.Layers[0].Digest)
		}
		src.versions = append(src.versions, etcdVersion(v, prev))
		prev = v
		pub.Changed("ns", "etcd")
		if err := pub.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	current := manifest()

	cfg := &config.Config{
		GC:         config.GC{Grace: time.Millisecond},
		Namespaces: []config.Namespace{{Name: "ns", UntaggedOlderThan: 720 * time.Hour}},
	}
	m, err := New(Options{Config: cfg, Registry: reg, Catalog: noVersions{}, Logger: log, Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // past the grace
	rep, err := m.Run(ctx, false, "test")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Manifests != 2 {
		t.Errorf("collected %d manifests, want the 2 superseded catalog images", rep.Manifests)
	}
	for _, d := range superseded {
		if ok, err := dist.BlobExists(ctx, repo, d); err != nil || ok {
			t.Errorf("blob %s of a superseded catalog image is still there (%v)", d, err)
		}
	}
	for _, d := range append([]ocispec.Descriptor{current.Config}, current.Layers...) {
		rc, err := dist.Blob(ctx, repo, d.Digest.String())
		if err != nil {
			t.Fatalf("blob %s of the current catalog image: %v", d.Digest, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || digest.FromBytes(got) != d.Digest {
			t.Errorf("blob %s of the current catalog image reads back as %s (%v)", d.Digest, digest.FromBytes(got), err)
		}
	}
	if got := manifest(); got.Config.Digest != current.Config.Digest {
		t.Errorf("the catalog tag moved to an image of config %s", got.Config.Digest)
	}
}
