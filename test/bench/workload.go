package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
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
	"github.com/berth-registry/berth/test/bench/internal/floor"
)

// target is one server as the workloads see it: its address and the one
// HTTP client every request to it goes through.
type target struct {
	name string
	addr string
	// also are more replicas of the same registry: each repository goes
	// to one of addr and also, by its name.
	also   []string
	client *http.Client
	// login, when set, is the registry API's client instead of client: it
	// logs in through the token flow.
	login *auth.Client
	// store, when set, makes t the floor: it serves pulls only, of content
	// the harness writes into store instead of pushing it.
	store *floor.Store
	// https is whether t serves TLS; client trusts its certificate.
	https bool
}

func newTarget(name, addr string, also ...string) *target {
	return &target{name: name, addr: addr, also: also, client: &http.Client{Transport: loopbackTransport(append([]string{addr}, also...)...)}}
}

// repository is an oras-go client for one repository of t, over plain
// HTTP, or HTTPS when t serves TLS.
func (t *target) repository(name string) *remote.Repository {
	var client remote.Client = t.client
	if t.login != nil {
		client = t.login
	}
	addr := t.addr
	if len(t.also) > 0 {
		h := fnv.New32a()
		h.Write([]byte(name))
		addrs := append([]string{t.addr}, t.also...)
		addr = addrs[int(h.Sum32()%uint32(len(addrs)))]
	}
	return &remote.Repository{
		Client:    client,
		Reference: registry.Reference{Registry: addr, Repository: name},
		PlainHTTP: !t.https,
	}
}

// blobRepository is where the large-blob workload pushes.
const blobRepository = "bench/blob"

// blobPush pushes data, described by desc, as a blob to t (a monolithic
// upload: POST, then one PUT with the whole body). It returns the
// throughput in MB/s.
func blobPush(ctx context.Context, t *target, desc ocispec.Descriptor, data []byte) (float64, error) {
	start := time.Now()
	if err := t.repository(blobRepository).Blobs().Push(ctx, desc, bytes.NewReader(data)); err != nil {
		return 0, fmt.Errorf("%s: push blob %s: %w", t.name, desc.Digest, err)
	}
	return mbPerSecond(desc.Size, time.Since(start)), nil
}

// blobPull fetches the blob desc from t, reads it to the end and verifies
// its digest. It returns the throughput in MB/s.
func blobPull(ctx context.Context, t *target, desc ocispec.Descriptor) (float64, error) {
	buf := make([]byte, 1<<20)
	start := time.Now()
	rc, err := t.repository(blobRepository).Blobs().Fetch(ctx, desc)
	if err != nil {
		return 0, fmt.Errorf("%s: fetch blob %s: %w", t.name, desc.Digest, err)
	}
	defer rc.Close()
	vr := content.NewVerifyReader(rc, desc)
	if err := drain(vr, buf); err != nil {
		return 0, fmt.Errorf("%s: read blob %s: %w", t.name, desc.Digest, err)
	}
	if err := vr.Verify(); err != nil {
		return 0, fmt.Errorf("%s: blob %s: %w", t.name, desc.Digest, err)
	}
	return mbPerSecond(desc.Size, time.Since(start)), nil
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

func mbPerSecond(n int64, d time.Duration) float64 {
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
	offset      int // the set's packages are numbered from offset on
	repos       int // packages are spread round-robin over this many repositories
	contentSize int // bytes of random content per package
}

// newPackages makes the packages of set with content read from rnd. Package
// number n (offset+i for the set's i-th) goes to repository n%repos with
// version 1.0.<n/repos>, so with offset 0 each repository holds count/repos
// versions, and a set with the same prefix and repos whose offset is another
// set's count adds new versions to that set's repositories.
func newPackages(rnd io.Reader, set packageSet) ([]pkg, error) {
	pkgs := make([]pkg, set.count)
	for i := range pkgs {
		n := set.offset + i
		name := fmt.Sprintf("pkg-%04d", n%set.repos+1)
		version := fmt.Sprintf("1.0.%d", n/set.repos)
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
	repos := t.repositories(pkgs)
	if push, err = timeEach(ctx, t, pkgs, concurrency, func(ctx context.Context, p *pkg) error {
		return pushPackage(ctx, repos[p.repo], p)
	}); err != nil {
		return 0, 0, err
	}
	if pull, err = pullRound(ctx, t, pkgs, concurrency); err != nil {
		return 0, 0, err
	}
	return push, pull, nil
}

// pullRound pulls pkgs from t as packageRound does. It returns the
// throughput in packages/s.
func pullRound(ctx context.Context, t *target, pkgs []pkg, concurrency int) (float64, error) {
	repos := t.repositories(pkgs)
	return timeEach(ctx, t, pkgs, concurrency, func(ctx context.Context, p *pkg) error {
		return pullPackage(ctx, repos[p.repo], p)
	})
}

// mixedEvery makes every mixedEvery-th operation of the mixed row a push:
// 20% pushes, 80% pulls.
const mixedEvery = 5

// mixedOp is one operation of the mixed row: a push of the index-th fresh
// package, or a pull of the index-th package already there.
type mixedOp struct {
	push  bool
	index int
}

// mixedSchedule is the mixed row's n operations, in the order they start:
// every mixedEvery-th a push of the next fresh package, the others pulls of
// the pulled packages already there, in turn. It has n/mixedEvery pushes.
func mixedSchedule(n, pulled int) []mixedOp {
	ops := make([]mixedOp, n)
	pushes, pulls := 0, 0
	for i := range ops {
		if i%mixedEvery == mixedEvery-1 {
			ops[i] = mixedOp{push: true, index: pushes}
			pushes++
		} else {
			ops[i] = mixedOp{index: pulls % pulled}
			pulls++
		}
	}
	return ops
}

// mixedRound runs ops on t, concurrency at a time: pulls of existing (as
// pullPackage does) and pushes of fresh (as pushPackage does). It returns
// the throughput in operations/s.
func mixedRound(ctx context.Context, t *target, ops []mixedOp, existing, fresh []pkg, concurrency int) (float64, error) {
	repos := t.repositories(existing, fresh)
	return timeEach(ctx, t, ops, concurrency, func(ctx context.Context, op *mixedOp) error {
		if op.push {
			p := &fresh[op.index]
			return pushPackage(ctx, repos[p.repo], p)
		}
		p := &existing[op.index]
		return pullPackage(ctx, repos[p.repo], p)
	})
}

// repositories are clients for the repositories of every package in sets.
func (t *target) repositories(sets ...[]pkg) map[string]*remote.Repository {
	repos := map[string]*remote.Repository{}
	for _, pkgs := range sets {
		for _, p := range pkgs {
			if repos[p.repo] == nil {
				repos[p.repo] = t.repository(p.repo)
			}
		}
	}
	return repos
}

// timeEach runs fn on every item, concurrency at a time, and stops at the
// first error. It returns the items done per second.
func timeEach[T any](ctx context.Context, t *target, items []T, concurrency int, fn func(context.Context, *T) error) (float64, error) {
	start := time.Now()
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for i := range items {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error { return fn(ctx, &items[i]) })
	}
	if err := g.Wait(); err != nil {
		return 0, fmt.Errorf("%s: %w", t.name, err)
	}
	return float64(len(items)) / time.Since(start).Seconds(), nil
}

// put writes pkgs into the floor's store, as a push would leave them.
func (t *target) put(pkgs []pkg) error {
	for i := range pkgs {
		p := &pkgs[i]
		for _, b := range []struct {
			desc ocispec.Descriptor
			data []byte
		}{{p.configDesc, p.config}, {p.contentDesc, p.content}} {
			if err := t.store.PutBlob(b.desc.Digest, b.data); err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
		}
		if err := t.store.PutManifest(p.repo, p.tag, p.manifestDesc.Digest, p.manifest); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
	}
	return nil
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
