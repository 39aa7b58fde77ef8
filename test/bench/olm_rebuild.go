package main

// The anchor of the OLM catalog benchmarks (olm.go): the namespace's whole
// catalog rebuilt from scratch, in process, and opm's render of its FBC
// directory: what opm users do today after every change.

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"

	"github.com/berth-registry/berth/olm"
	"github.com/berth-registry/berth/pkgformat"
)

// olmVersion is one version of the OLM corpus as the catalog indexes it,
// with its bundle image's record, and the artifact it is pushed as.
func olmVersion(p *pkgformat.Package) (olm.Version, *pkgformat.Artifact, error) {
	a, err := p.Artifact()
	if err != nil {
		return olm.Version{}, nil, err
	}
	b, err := olm.BuildBundle(p, a.ContentDesc, a.Content, a.ManifestDesc)
	if err != nil {
		return olm.Version{}, nil, fmt.Errorf("bundle of %s %s: %w", p.Metadata.Name, p.Metadata.Version, err)
	}
	md := p.Metadata // a copy, so that the package's files are not kept
	return olm.Version{
		Version:  pkgformat.Tag(md.Version),
		Digest:   a.ManifestDesc.Digest.String(),
		Metadata: &md,
		Bundle:   b.Record,
	}, a, nil
}

// memSource is an olm.Source holding the versions of the packages of one
// namespace in memory.
type memSource struct {
	namespace string
	versions  map[string][]olm.Version // by package name
}

// buildOLMSource builds every version of the packages of c, workers packages
// at a time, and extra's versions after their package's own: the namespace
// as the catalog holds it.
func buildOLMSource(ctx context.Context, c *corpus, extra map[string]olm.Version, workers int) (*memSource, error) {
	s := &memSource{versions: make(map[string][]olm.Version, len(c.packages))}
	if len(c.packages) > 0 {
		s.namespace = c.packages[0].namespace
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i := range c.packages {
		p := &c.packages[i]
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			pkgs, err := p.build()
			if err != nil {
				return err
			}
			vs := make([]olm.Version, 0, len(pkgs)+1)
			for _, pkg := range pkgs {
				v, _, err := olmVersion(pkg)
				if err != nil {
					return err
				}
				vs = append(vs, v)
			}
			if v, ok := extra[p.name]; ok {
				vs = append(vs, v)
			}
			mu.Lock()
			s.versions[p.name] = vs
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *memSource) OLMPackages(context.Context) (map[string][]string, error) {
	names := make([]string, 0, len(s.versions))
	for name := range s.versions {
		names = append(names, name)
	}
	slices.Sort(names)
	return map[string][]string{s.namespace: names}, nil
}

func (s *memSource) OLMVersions(_ context.Context, namespace, name string) ([]olm.Version, error) {
	if namespace != s.namespace {
		return nil, nil
	}
	return s.versions[name], nil
}

// memRegistry is an olm.Registry in memory that counts what is pushed to it.
type memRegistry struct {
	mu        sync.Mutex
	blobs     map[string][]byte // by repository and digest: repo@digest
	tags      map[string]ocispec.Descriptor
	manifests map[string][]byte
	// pushed is the bytes of the blobs and manifests pushed, blobs the
	// blobs pushed.
	pushed int64
	blobN  int
}

func newMemRegistry() *memRegistry {
	return &memRegistry{blobs: map[string][]byte{}, tags: map[string]ocispec.Descriptor{}, manifests: map[string][]byte{}}
}

func (m *memRegistry) BlobExists(_ context.Context, repo string, d digest.Digest) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.blobs[repo+"@"+d.String()]
	return ok, nil
}

func (m *memRegistry) PushBlob(_ context.Context, repo string, b olm.Blob) error {
	if err := checkDescriptor(b.Descriptor, b.Data); err != nil {
		return fmt.Errorf("blob: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.blobs[repo+"@"+b.Descriptor.Digest.String()] = b.Data
	m.pushed += int64(len(b.Data))
	m.blobN++
	return nil
}

func (m *memRegistry) PushManifest(_ context.Context, repo, tag string, desc ocispec.Descriptor, payload []byte) error {
	if err := checkDescriptor(desc, payload); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.manifests[repo+"@"+desc.Digest.String()] = payload
	m.tags[repo+":"+tag] = desc
	m.pushed += int64(len(payload))
	return nil
}

func (m *memRegistry) Blob(_ context.Context, repo, d string) (io.ReadCloser, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	data, ok := m.blobs[repo+"@"+d]
	if !ok {
		return nil, fmt.Errorf("%s: blob %s not found", repo, d)
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// counts returns the bytes and blobs pushed so far.
func (m *memRegistry) counts() (int64, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pushed, m.blobN
}

// checkDescriptor checks that data is what desc describes.
func checkDescriptor(desc ocispec.Descriptor, data []byte) error {
	if int64(len(data)) != desc.Size {
		return fmt.Errorf("%s: %d bytes, descriptor says %d", desc.Digest, len(data), desc.Size)
	}
	if d := digest.FromBytes(data); d != desc.Digest {
		return fmt.Errorf("bytes digest to %s, descriptor says %s", d, desc.Digest)
	}
	return nil
}

// rebuildResult is one full rebuild of the namespace's catalog image.
type rebuildResult struct {
	took   time.Duration
	digest digest.Digest // of the catalog manifest
	bytes  int64         // every blob and the manifest: the whole image
	blobs  int
}

// fullRebuild renders every package of s and builds and pushes the whole
// catalog image into an empty registry in memory, with a Publisher of its
// own: every package changed, then Flush. host is the registry host of the
// bundle image references.
func fullRebuild(ctx context.Context, s *memSource, host string) (rebuildResult, error) {
	reg := newMemRegistry()
	pub, err := olm.NewPublisher(olm.PublisherOptions{Source: s, Registry: reg, Host: host})
	if err != nil {
		return rebuildResult{}, err
	}
	start := time.Now()
	for name := range s.versions {
		pub.Changed(s.namespace, name)
	}
	if err := pub.Flush(ctx); err != nil {
		return rebuildResult{}, fmt.Errorf("full rebuild: %w", err)
	}
	took := time.Since(start)
	desc, ok := pub.Catalog(s.namespace)
	if !ok {
		return rebuildResult{}, fmt.Errorf("full rebuild: no catalog image for %s", s.namespace)
	}
	bytes, blobs := reg.counts()
	return rebuildResult{took: took, digest: desc.Digest, bytes: bytes, blobs: blobs}, nil
}

// writeFBCDir writes the FBC of every package of s into dir, as an FBC
// directory is laid out: <package>/catalog.json. It returns the bytes written.
func writeFBCDir(dir, host string, s *memSource) (int64, error) {
	var total int64
	for name, versions := range s.versions {
		var buf bytes.Buffer
		if err := olm.RenderPackage(&buf, host, s.namespace, name, versions); err != nil {
			return 0, fmt.Errorf("render %s: %w", name, err)
		}
		if buf.Len() == 0 {
			continue
		}
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			return 0, err
		}
		if err := os.WriteFile(filepath.Join(dir, name, "catalog.json"), buf.Bytes(), 0o644); err != nil {
			return 0, err
		}
		total += int64(buf.Len())
	}
	return total, nil
}

// opmRender runs `opm render dir -o json` and returns its run time and the
// bytes it wrote.
func opmRender(ctx context.Context, opm, dir string) (time.Duration, int64, error) {
	var out countWriter
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, opm, "render", dir, "-o", "json")
	cmd.Stdout, cmd.Stderr = &out, &stderr
	cmd.Env = serverEnv(os.Environ())
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if err != nil {
		return 0, 0, fmt.Errorf("opm render %s: %w\n%s", dir, err, strings.TrimSpace(stderr.String()))
	}
	return took, out.n, nil
}

// opmVersion is the operator-registry version opm was built from, or ""
// when its build information does not say.
func opmVersion(opm string) string {
	info, err := buildinfo.ReadFile(opm)
	if err != nil {
		return ""
	}
	return moduleVersion(info, "github.com/operator-framework/operator-registry")
}

// countWriter counts the bytes written to it.
type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}
