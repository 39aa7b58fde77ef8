package main

// Loading the catalog benchmarks' corpus into the registry storage of berth
// serve, in process.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/distribution/distribution/v3"
	_ "github.com/distribution/distribution/v3/manifest/ocischema" // OCI image manifests for UnmarshalManifest
	dstorage "github.com/distribution/distribution/v3/registry/storage"
	cachememory "github.com/distribution/distribution/v3/registry/storage/cache/memory"
	storagedriver "github.com/distribution/distribution/v3/registry/storage/driver"
	"github.com/distribution/reference"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"

	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/registry"
	berthstorage "github.com/berth-registry/berth/storage"
)

// loaded is what loadCorpus wrote.
type loaded struct {
	versions, packages int
	bytes              int64 // config, content and manifest bytes
	took               time.Duration
}

// loadJob builds the versions of one package.
type loadJob struct {
	namespace string
	build     func() ([]*pkgformat.Package, error)
}

// loadCorpus writes every version of c, and of the fixtures, into the
// registry storage berth serve --data dataDir uses, in process, through
// distribution's storage API: blobs, manifest, tag, as a push does.
func loadCorpus(ctx context.Context, dataDir string, c *corpus, o catalogOptions) (loaded, error) {
	cfg := &config.Config{Data: dataDir}
	cfg.SetDefaults()
	ns, closeStorage, err := openStorage(ctx, cfg, o.loadFsync)
	if err != nil {
		return loaded{}, err
	}
	defer closeStorage()

	var jobs []loadJob
	for i := range c.packages {
		p := &c.packages[i]
		jobs = append(jobs, loadJob{namespace: p.namespace, build: p.build})
	}
	if o.fixtures != "" {
		fx, err := fixtureJobs(o.fixtures)
		if err != nil {
			return loaded{}, fmt.Errorf("fixtures (-catalog-fixtures): %w", err)
		}
		jobs = append(jobs, fx...)
	}

	logf("loading %d packages into %s, %d at a time", len(jobs), cfg.Storage.Filesystem.RootDirectory, o.loadWorkers)
	var versions, bytes atomic.Int64
	start := time.Now()
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				n := versions.Load()
				logf("load: %s versions written (%s/s)", thousands(int(n)), thousands(int(float64(n)/time.Since(start).Seconds())))
			}
		}
	}()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.loadWorkers)
	for _, job := range jobs {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			pkgs, err := job.build()
			if err != nil {
				return err
			}
			for _, p := range pkgs {
				a, err := p.Artifact()
				if err != nil {
					return fmt.Errorf("%s/%s %s: %w", job.namespace, p.Metadata.Name, p.Metadata.Version, err)
				}
				if err := putArtifact(gctx, ns, job.namespace+"/"+p.Metadata.Name, pkgformat.Tag(p.Metadata.Version), a); err != nil {
					return err
				}
				versions.Add(1)
				bytes.Add(int64(len(a.Config) + len(a.Content) + len(a.Manifest)))
			}
			return nil
		})
	}
	err = g.Wait()
	close(done)
	if err != nil {
		return loaded{}, err
	}
	return loaded{versions: int(versions.Load()), packages: len(jobs), bytes: bytes.Load(), took: time.Since(start)}, nil
}

// openStorage opens the registry storage of cfg for writing. With fsync it
// is berth's own registry (registry.New), whose filesystem driver syncs every
// file and its directory as it writes them; else it is distribution's storage
// on the same filesystem driver, except that files are written without those
// syncs (bulkDriver) and the caller syncs once at the end.
func openStorage(ctx context.Context, cfg *config.Config, fsync bool) (distribution.Namespace, func(), error) {
	if fsync {
		secret, err := registry.LoadOrCreateSecret(cfg.Registry.HTTPSecretFile)
		if err != nil {
			return nil, nil, err
		}
		reg, err := registry.New(ctx, registry.Options{
			Storage:    &cfg.Storage,
			HTTPSecret: secret,
			Logger:     slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
		})
		if err != nil {
			return nil, nil, err
		}
		return reg.Namespace(), func() { reg.Close() }, nil
	}
	if cfg.Storage.Driver != "filesystem" {
		return nil, nil, fmt.Errorf("storage driver %s: the loader writes to the filesystem driver only", cfg.Storage.Driver)
	}
	driver, err := berthstorage.Open(ctx, &cfg.Storage)
	if err != nil {
		return nil, nil, err
	}
	ns, err := dstorage.NewRegistry(ctx, &bulkDriver{StorageDriver: driver, root: cfg.Storage.Filesystem.RootDirectory},
		dstorage.EnableDelete, dstorage.BlobDescriptorCacheProvider(cachememory.NewInMemoryBlobDescriptorCacheProvider(cachememory.DefaultSize)))
	if err != nil {
		return nil, nil, err
	}
	return ns, func() {}, nil
}

// bulkDriver is distribution's filesystem driver rooted at root, whose
// PutContent, which writes every blob and link of a push, writes the file
// as the driver does (a temporary file renamed into place, mode 0666 and
// directories 0777 before the umask) but without syncing the file and its
// directory: a bulk load syncs once at the end instead of twice per file.
type bulkDriver struct {
	storagedriver.StorageDriver
	root string
	tmp  atomic.Int64
}

func (d *bulkDriver) PutContent(_ context.Context, subPath string, content []byte) error {
	full := filepath.Join(d.root, filepath.FromSlash(subPath))
	if err := os.MkdirAll(filepath.Dir(full), 0o777); err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", full, d.tmp.Add(1))
	if err := os.WriteFile(tmp, content, 0o666); err != nil {
		return err
	}
	return os.Rename(tmp, full)
}

// fixtureJobs are the jobs that read the fixtures: every KUDO package of
// dir/kudo into kudoFixtureNamespace, every OLM package of dir/olm-community
// into olmFixtureNamespace.
func fixtureJobs(dir string) ([]loadJob, error) {
	var jobs []loadJob
	kudo := filepath.Join(dir, "kudo")
	names, err := subdirs(kudo)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		folders, err := subdirs(filepath.Join(kudo, name))
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, loadJob{namespace: kudoFixtureNamespace, build: func() ([]*pkgformat.Package, error) {
			var out []*pkgformat.Package
			for _, folder := range folders {
				p, err := pkgformat.Load(filepath.Join(kudo, name, folder), pkgformat.Options{})
				if err != nil {
					return nil, err
				}
				out = append(out, p)
			}
			return out, nil
		}})
	}
	olm := filepath.Join(dir, "olm-community")
	pkgs, err := subdirs(olm)
	if err != nil {
		return nil, err
	}
	for _, pkg := range pkgs {
		jobs = append(jobs, loadJob{namespace: olmFixtureNamespace, build: func() ([]*pkgformat.Package, error) {
			return pkgformat.LoadRepository(filepath.Join(olm, pkg), pkgformat.Options{})
		}})
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("%s holds no fixtures", dir)
	}
	return jobs, nil
}

// putArtifact stores a package version as the registry's manifest PUT by tag
// does: both blobs, the manifest, then the tag.
func putArtifact(ctx context.Context, ns distribution.Namespace, repoName, tag string, a *pkgformat.Artifact) error {
	named, err := reference.WithName(repoName)
	if err != nil {
		return fmt.Errorf("%s: %w", repoName, err)
	}
	repo, err := ns.Repository(ctx, named)
	if err != nil {
		return fmt.Errorf("%s: %w", repoName, err)
	}
	blobs := repo.Blobs(ctx)
	for _, b := range []struct {
		desc ocispec.Descriptor
		data []byte
	}{{a.ConfigDesc, a.Config}, {a.ContentDesc, a.Content}} {
		desc, err := blobs.Put(ctx, b.desc.MediaType, b.data)
		if err != nil {
			return fmt.Errorf("%s:%s: blob %s: %w", repoName, tag, b.desc.Digest, err)
		}
		if desc.Digest != b.desc.Digest {
			return fmt.Errorf("%s:%s: blob stored as %s, expected %s", repoName, tag, desc.Digest, b.desc.Digest)
		}
	}
	ms, err := repo.Manifests(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", repoName, err)
	}
	m, _, err := distribution.UnmarshalManifest(a.ManifestDesc.MediaType, a.Manifest)
	if err != nil {
		return fmt.Errorf("%s:%s: manifest: %w", repoName, tag, err)
	}
	dgst, err := ms.Put(ctx, m, distribution.WithTag(tag))
	if err != nil {
		return fmt.Errorf("%s:%s: put manifest: %w", repoName, tag, err)
	}
	if dgst != a.ManifestDesc.Digest {
		return fmt.Errorf("%s:%s: manifest stored as %s, expected %s", repoName, tag, dgst, a.ManifestDesc.Digest)
	}
	desc := ocispec.Descriptor{MediaType: a.ManifestDesc.MediaType, Digest: dgst, Size: a.ManifestDesc.Size}
	if err := repo.Tags(ctx).Tag(ctx, tag, desc); err != nil {
		return fmt.Errorf("%s:%s: tag: %w", repoName, tag, err)
	}
	return nil
}
