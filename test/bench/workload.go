package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/berth-registry/berth/pkgformat"
)

// target is one server as the workloads see it: its address and the one
// HTTP client every request to it goes through.
type target struct {
	name   string
	addr   string
	client *http.Client
	// login, when set, is the registry API's client instead of client: it
	// logs in through the token flow.
	login *auth.Client
}

func newTarget(name, addr string) *target {
	return &target{name: name, addr: addr, client: &http.Client{Transport: loopbackTransport(addr)}}
}

// repository is an oras-go client for one repository of t, over plain HTTP.
func (t *target) repository(name string) *remote.Repository {
	var client remote.Client = t.client
	if t.login != nil {
		client = t.login
	}
	return &remote.Repository{
		Client:    client,
		Reference: registry.Reference{Registry: t.addr, Repository: name},
		PlainHTTP: true,
	}
}

// blobRepository is where the large-blob workload pushes.
const blobRepository = "bench/blob"

// blobRound pushes data as a blob to t (a monolithic upload: POST, then one
// PUT with the whole body), fetches it back, reads it to the end and verifies
// its digest. It returns both throughputs in MB/s.
func blobRound(ctx context.Context, t *target, data []byte) (push, pull float64, err error) {
	size := len(data)
	desc := descriptor("application/octet-stream", data)
	blobs := t.repository(blobRepository).Blobs()

	start := time.Now()
	if err := blobs.Push(ctx, desc, bytes.NewReader(data)); err != nil {
		return 0, 0, fmt.Errorf("%s: push blob %s: %w", t.name, desc.Digest, err)
	}
	push = mbPerSecond(size, time.Since(start))

	buf := make([]byte, 1<<20)
	start = time.Now()
	rc, err := blobs.Fetch(ctx, desc)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: fetch blob %s: %w", t.name, desc.Digest, err)
	}
	defer rc.Close()
	vr := content.NewVerifyReader(rc, desc)
	if err := drain(vr, buf); err != nil {
		return 0, 0, fmt.Errorf("%s: read blob %s: %w", t.name, desc.Digest, err)
	}
	if err := vr.Verify(); err != nil {
		return 0, 0, fmt.Errorf("%s: blob %s: %w", t.name, desc.Digest, err)
	}
	pull = mbPerSecond(size, time.Since(start))
	return push, pull, nil
}

// drain reads r to the end through buf (io.Copy to io.Discard would read
// in 8 KiB pieces).
func drain(r io.Reader, buf []byte) error {
	for {
		_, err := r.Read(buf)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func mbPerSecond(n int, d time.Duration) float64 {
	return float64(n) / 1e6 / d.Seconds()
}

// pkg is one package version as `berth push` sends it: a config blob with
// the package metadata, one content layer, and an OCI image manifest with
// berth's artifact type, pushed by tag.
type pkg struct {
	repo, tag                             string
	config, content, manifest             []byte
	configDesc, contentDesc, manifestDesc ocispec.Descriptor
}

// packageSet describes the packages of one round.
type packageSet struct {
	prefix      string // repositories are prefix/pkg-0001 ...
	count       int
	repos       int // packages are spread round-robin over this many repositories
	contentSize int // bytes of random content per package
}

// newPackages makes the packages of set with content read from rnd. Package
// i goes to repository i%repos with version 1.0.<i/repos>, so each repository
// holds count/repos versions.
func newPackages(rnd io.Reader, set packageSet) ([]pkg, error) {
	pkgs := make([]pkg, set.count)
	for i := range pkgs {
		name := fmt.Sprintf("pkg-%04d", i%set.repos+1)
		version := fmt.Sprintf("1.0.%d", i/set.repos)
		p := &pkgs[i]
		p.repo, p.tag = set.prefix+"/"+name, version

		var err error
		p.config, err = json.Marshal(pkgformat.Metadata{
			SchemaVersion: pkgformat.MetadataSchemaVersion,
			Name:          name,
			Version:       version,
			Format:        pkgformat.Plain,
			Description:   "berth benchmark package",
		})
		if err != nil {
			return nil, err
		}
		p.configDesc = descriptor(pkgformat.ConfigMediaType, p.config)

		p.content = make([]byte, set.contentSize)
		if _, err := io.ReadFull(rnd, p.content); err != nil {
			return nil, err
		}
		p.contentDesc = descriptor(pkgformat.ContentMediaType, p.content)
		p.contentDesc.Annotations = map[string]string{ocispec.AnnotationTitle: pkgformat.ContentTitle(name, version)}

		p.manifest, err = json.Marshal(ocispec.Manifest{
			Versioned:    specs.Versioned{SchemaVersion: 2},
			MediaType:    ocispec.MediaTypeImageManifest,
			ArtifactType: pkgformat.ArtifactType,
			Config:       p.configDesc,
			Layers:       []ocispec.Descriptor{p.contentDesc},
			Annotations: map[string]string{
				ocispec.AnnotationTitle:    name,
				ocispec.AnnotationVersion:  version,
				pkgformat.AnnotationFormat: string(pkgformat.Plain),
			},
		})
		if err != nil {
			return nil, err
		}
		p.manifestDesc = descriptor(ocispec.MediaTypeImageManifest, p.manifest)
	}
	return pkgs, nil
}

func descriptor(mediaType string, data []byte) ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}
}

// packageRound pushes pkgs to t, concurrency packages at a time (config,
// content, then the manifest by tag), then pulls them all back the same way
// (resolve the tag, fetch the manifest, config and content, verifying every
// digest). It returns both throughputs in packages/s.
func packageRound(ctx context.Context, t *target, pkgs []pkg, concurrency int) (push, pull float64, err error) {
	repos := map[string]*remote.Repository{}
	for _, p := range pkgs {
		if repos[p.repo] == nil {
			repos[p.repo] = t.repository(p.repo)
		}
	}
	perSecond := func(d time.Duration) float64 { return float64(len(pkgs)) / d.Seconds() }

	start := time.Now()
	if err := forEach(ctx, pkgs, concurrency, func(ctx context.Context, p *pkg) error {
		return pushPackage(ctx, repos[p.repo], p)
	}); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", t.name, err)
	}
	push = perSecond(time.Since(start))

	start = time.Now()
	if err := forEach(ctx, pkgs, concurrency, func(ctx context.Context, p *pkg) error {
		return pullPackage(ctx, repos[p.repo], p)
	}); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", t.name, err)
	}
	pull = perSecond(time.Since(start))
	return push, pull, nil
}

// forEach runs fn on every package, concurrency at a time, and stops at the
// first error.
func forEach(ctx context.Context, pkgs []pkg, concurrency int, fn func(context.Context, *pkg) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for i := range pkgs {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error { return fn(ctx, &pkgs[i]) })
	}
	return g.Wait()
}

func pushPackage(ctx context.Context, repo *remote.Repository, p *pkg) error {
	if err := repo.Push(ctx, p.configDesc, bytes.NewReader(p.config)); err != nil {
		return fmt.Errorf("push %s:%s config: %w", p.repo, p.tag, err)
	}
	if err := repo.Push(ctx, p.contentDesc, bytes.NewReader(p.content)); err != nil {
		return fmt.Errorf("push %s:%s content: %w", p.repo, p.tag, err)
	}
	if err := repo.PushReference(ctx, p.manifestDesc, bytes.NewReader(p.manifest), p.tag); err != nil {
		return fmt.Errorf("push %s:%s manifest: %w", p.repo, p.tag, err)
	}
	return nil
}

func pullPackage(ctx context.Context, repo *remote.Repository, p *pkg) error {
	desc, err := repo.Resolve(ctx, p.tag)
	if err != nil {
		return fmt.Errorf("resolve %s:%s: %w", p.repo, p.tag, err)
	}
	if desc.Digest != p.manifestDesc.Digest {
		return fmt.Errorf("resolve %s:%s: got %s, pushed %s", p.repo, p.tag, desc.Digest, p.manifestDesc.Digest)
	}
	raw, err := content.FetchAll(ctx, repo, desc)
	if err != nil {
		return fmt.Errorf("fetch %s:%s manifest: %w", p.repo, p.tag, err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("%s:%s manifest: %w", p.repo, p.tag, err)
	}
	if len(m.Layers) != 1 || m.Config.Digest != p.configDesc.Digest || m.Layers[0].Digest != p.contentDesc.Digest {
		return fmt.Errorf("%s:%s: manifest %s is not the one pushed", p.repo, p.tag, desc.Digest)
	}
	for _, d := range []ocispec.Descriptor{m.Config, m.Layers[0]} {
		if _, err := content.FetchAll(ctx, repo, d); err != nil {
			return fmt.Errorf("fetch %s:%s blob %s: %w", p.repo, p.tag, d.Digest, err)
		}
	}
	return nil
}
