package catalog_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/distribution/distribution/v3"
	"github.com/distribution/reference"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/sqlite"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/storage"
)

// BenchmarkReconcileIntact measures the reconciliation of a restart: a
// registry on the filesystem (under $TMPDIR: /dev/shm spares the load its
// fsyncs) whose every tag the store already holds at the same digest, so
// that it reads no package and only compares tag → digest.
func BenchmarkReconcileIntact(b *testing.B) {
	const versions, perPackage = 2000, 5
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg, err := registry.New(ctx, registry.Options{
		Storage:    &storage.Config{Driver: "filesystem", Filesystem: storage.Filesystem{RootDirectory: b.TempDir()}},
		HTTPSecret: "bench",
		Logger:     quiet,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer reg.Close()
	for i := range versions {
		p, err := pkgformat.New([]pkgformat.File{{Path: "manifests/cm.yaml", Mode: 0o644, Data: fmt.Appendf(nil,
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c%d\n", i)}},
			pkgformat.Options{Name: fmt.Sprintf("pkg%d", i/perPackage), Version: fmt.Sprintf("1.0.%d", i%perPackage)})
		if err != nil {
			b.Fatal(err)
		}
		if err := putPackage(ctx, reg.Namespace(), "bench/"+p.Metadata.Name, p); err != nil {
			b.Fatal(err)
		}
	}
	store, err := sqlite.Open(ctx, b.TempDir()+"/catalog.db")
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	cat, err := catalog.New(catalog.Options{Store: store, ReconcileInterval: -1, Logger: quiet,
		Source: catalog.NewDistributionSource(reg.Namespace(), reg.Referrers, reg.UntagDangling)})
	if err != nil {
		b.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		cat.Run(runCtx)
	}()
	defer func() {
		stop()
		<-done
	}()
	for {
		st, err := cat.Status(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if st.Reconcile.Runs > 0 {
			if st.Versions != versions {
				b.Fatalf("the rebuild indexed %d versions of %d", st.Versions, versions)
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cpu := cpuTime(b)
	for b.Loop() {
		st, err := cat.Reconcile(ctx)
		if err != nil || st.Indexed != 0 || st.Removed != 0 || st.Failed != 0 {
			b.Fatalf("%+v %v", st, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/versions, "µs/tag")
	b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/float64(b.N)/versions, "cpu-µs/tag")
}

// putPackage writes a package into the registry's storage as a manifest PUT
// by tag does, without HTTP.
func putPackage(ctx context.Context, ns distribution.Namespace, repoName string, p *pkgformat.Package) error {
	a, err := p.Artifact()
	if err != nil {
		return err
	}
	named, err := reference.WithName(repoName)
	if err != nil {
		return err
	}
	repo, err := ns.Repository(ctx, named)
	if err != nil {
		return err
	}
	for _, blob := range [][]byte{a.Config, a.Content} {
		if _, err := repo.Blobs(ctx).Put(ctx, "application/octet-stream", blob); err != nil {
			return err
		}
	}
	ms, err := repo.Manifests(ctx)
	if err != nil {
		return err
	}
	m, _, err := distribution.UnmarshalManifest(a.ManifestDesc.MediaType, a.Manifest)
	if err != nil {
		return err
	}
	if _, err := ms.Put(ctx, m, distribution.WithTag(pkgformat.Tag(p.Metadata.Version))); err != nil {
		return err
	}
	return repo.Tags(ctx).Tag(ctx, pkgformat.Tag(p.Metadata.Version), a.ManifestDesc)
}
