package main

// The source of the images row of the mirror benchmarks (mirror_images.go):
// generated container images, pushed to upstream `registry` processes
// standing in for quay.io and ghcr.io, and 20 OLM packages in a source
// berth whose CSVs name them (deployment containers and relatedImages).

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"

	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/pkgformat"
)

const (
	// imagePackages OLM packages, in namespace imageNamespace, one version
	// each; the delta adds version deltaVersion to the first.
	imagePackages  = 20
	imageNamespace = "operators"
	imageVersion   = "1.0.0"
	deltaVersion   = "1.1.0"
	// The stand-ins' registries, and the prefix images are imported under.
	operatorRegistry = "quay.io"
	operandRegistry  = "ghcr.io"
	imagePrefix      = "mirror"
	// baseShare of the image bytes are in each of the three base layers
	// that many images share.
	baseShare = 0.05
)

// imageNames name the 20 packages.
var imageNames = []string{"etcd", "redis", "kafka", "postgres", "mongo", "minio", "vault", "nats", "rabbit", "keycloak",
	"grafana", "loki", "tempo", "argo", "flux", "istio", "linkerd", "cert", "velero", "harbor"}

// layer is a blob of size random bytes made from seed.
type layer struct {
	seed uint64
	size int64
	desc ocispec.Descriptor // once pushed or digested
}

// reader streams the layer's bytes.
func (l *layer) reader() io.Reader {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], l.seed)
	return io.LimitReader(rand.NewChaCha8(key), l.size)
}

// digest computes the layer's descriptor, once.
func (l *layer) digest() (ocispec.Descriptor, error) {
	if l.desc.Digest == "" {
		h := sha256.New()
		if _, err := io.Copy(h, l.reader()); err != nil {
			return l.desc, err
		}
		l.desc = ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayerGzip, Digest: digest.NewDigest(digest.SHA256, h), Size: l.size}
	}
	return l.desc, nil
}

// platform is one platform of an image and its layers.
type platform struct {
	os, arch string
	layers   []*layer
}

// image is a generated image: a manifest, or an index of one manifest per
// platform when it has more than one.
type image struct {
	name      string // its source name, registry host first: quay.io/benchops/etcd-operator
	tag       string
	platforms []platform
	// Set when pushed: the digest of its manifest or index, and what it
	// holds, manifests included.
	digest digest.Digest
	blobs  []ocispec.Descriptor
}

// host and path split the source name.
func (im *image) host() string { h, _, _ := strings.Cut(im.name, "/"); return h }
func (im *image) path() string { _, p, _ := strings.Cut(im.name, "/"); return p }

// byDigest is the image's reference by digest, as a CSV names it.
func (im *image) byDigest() string { return im.name + "@" + im.digest.String() }

// imagePackage is an OLM package of the set and the images its version names.
type imagePackage struct {
	name     string
	version  string
	operator *image
	operands []*image
	// byTag: its deployment names the operator by tag (resolved at export).
	byTag bool
}

// imageSet is the generated images and packages.
type imageSet struct {
	packages []*imagePackage
	images   []*image // each once
	ownSize  int64    // the size of a layer of one image alone
	seed     uint64
}

// planImages plans about total bytes of images for imagePackages packages:
// three base layers shared by many images; per package an operator image
// (every fifth an index of linux/amd64 and linux/arm64) and one or two
// operand images; a kube-rbac-proxy image that every fourth package names
// too. Each image has two layers of its own, of sizes alternating half and
// one and a half times ownSize.
func planImages(total int64, seed uint64) *imageSet {
	s := &imageSet{seed: seed}
	base := make([]*layer, 3)
	for i := range base {
		base[i] = &layer{seed: seed<<32 | uint64(i), size: max(1, int64(float64(total)*baseShare))}
	}
	var own []*layer
	newImage := func(name, tag string, bases []*layer, arches ...string) *image {
		im := &image{name: name, tag: tag}
		for _, arch := range arches {
			p := platform{os: "linux", arch: arch, layers: append([]*layer{}, bases...)}
			for range 2 {
				l := &layer{seed: seed<<32 | uint64(1000+len(own))}
				own = append(own, l)
				p.layers = append(p.layers, l)
			}
			im.platforms = append(im.platforms, p)
		}
		s.images = append(s.images, im)
		return im
	}
	proxy := newImage(operatorRegistry+"/benchops/kube-rbac-proxy", "v0.16.0", base[:1], "amd64")
	for i := range imagePackages {
		n := imageNames[i%len(imageNames)]
		arches := []string{"amd64"}
		if i%5 == 0 {
			arches = append(arches, "arm64")
		}
		p := &imagePackage{name: n, version: imageVersion, byTag: i%2 == 1,
			operator: newImage(operatorRegistry+"/benchops/"+n+"-operator", "v"+imageVersion, base[i%3:i%3+1], arches...)}
		for _, operand := range []string{"server", "exporter"}[:1+i%2] {
			p.operands = append(p.operands, newImage(operandRegistry+"/benchapps/"+n+"-"+operand, "v"+imageVersion, base[(i+1)%3:(i+1)%3+1], "amd64"))
		}
		if i%4 == 0 {
			p.operands = append(p.operands, proxy)
		}
		s.packages = append(s.packages, p)
	}
	rest := total - 3*base[0].size
	s.ownSize = max(1, rest/int64(len(own)))
	for i, l := range own {
		l.size = max(1, s.ownSize/2)
		if i%2 == 1 {
			l.size = 2*s.ownSize - s.ownSize/2
		}
	}
	return s
}

// deltaImage is the new image of the delta: an operand of the first
// package, on a base layer the others have and two layers of its own.
func (s *imageSet) deltaImage() *image {
	first := s.packages[0].operands[0]
	bases := first.platforms[0].layers[:1]
	im := &image{name: operandRegistry + "/benchapps/" + s.packages[0].name + "-server", tag: "v" + deltaVersion}
	p := platform{os: "linux", arch: "amd64", layers: append([]*layer{}, bases...)}
	for i := range 2 {
		p.layers = append(p.layers, &layer{seed: s.seed<<32 | uint64(900000+i), size: s.ownSize})
	}
	im.platforms = []platform{p}
	return im
}

// imagePusher pushes images to the stand-ins, by source registry host.
type imagePusher struct {
	clients map[string]*client.Client
	addrs   map[string]string
	// first names a repository, with its host, that has each blob, to
	// mount it from.
	first map[digest.Digest]string
}

func newImagePusher(addrs map[string]string) (*imagePusher, error) {
	p := &imagePusher{clients: map[string]*client.Client{}, addrs: addrs, first: map[digest.Digest]string{}}
	for host, addr := range addrs {
		c, err := pushClient(addr)
		if err != nil {
			return nil, err
		}
		p.clients[host] = c
	}
	return p, nil
}

func (p *imagePusher) repo(im *image) *remote.Repository {
	return p.clients[im.host()].Repository(p.addrs[im.host()], im.path())
}

// push pushes im (layers, configs, manifests, its index) and tags it.
func (p *imagePusher) push(ctx context.Context, im *image) error {
	repo := p.repo(im)
	var manifests []ocispec.Descriptor
	im.blobs = nil
	for _, pl := range im.platforms {
		var layers []ocispec.Descriptor
		for _, l := range pl.layers {
			desc, err := l.digest()
			if err != nil {
				return err
			}
			if err := p.pushBlob(ctx, repo, im, desc, l.reader); err != nil {
				return err
			}
			layers = append(layers, desc)
		}
		config, _ := json.Marshal(ocispec.Image{Platform: ocispec.Platform{OS: pl.os, Architecture: pl.arch},
			Config: ocispec.ImageConfig{Labels: map[string]string{"org.opencontainers.image.title": im.name}},
			RootFS: ocispec.RootFS{Type: "layers"}})
		cfg := content.NewDescriptorFromBytes(ocispec.MediaTypeImageConfig, config)
		if err := p.pushBlob(ctx, repo, im, cfg, func() io.Reader { return strings.NewReader(string(config)) }); err != nil {
			return err
		}
		body, _ := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest, Config: cfg, Layers: layers})
		man := content.NewDescriptorFromBytes(ocispec.MediaTypeImageManifest, body)
		man.Platform = &ocispec.Platform{OS: pl.os, Architecture: pl.arch}
		if err := repo.Manifests().Push(ctx, man, strings.NewReader(string(body))); err != nil {
			return fmt.Errorf("push %s manifest: %w", im.name, err)
		}
		im.blobs = append(im.blobs, man)
		manifests = append(manifests, man)
	}
	top := manifests[0]
	if len(manifests) > 1 {
		body, _ := json.Marshal(ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: manifests})
		top = content.NewDescriptorFromBytes(ocispec.MediaTypeImageIndex, body)
		if err := repo.Manifests().Push(ctx, top, strings.NewReader(string(body))); err != nil {
			return fmt.Errorf("push %s index: %w", im.name, err)
		}
		im.blobs = append(im.blobs, top)
	}
	top.Platform = nil
	if err := repo.Tag(ctx, top, im.tag); err != nil {
		return fmt.Errorf("tag %s:%s: %w", im.name, im.tag, err)
	}
	im.digest = top.Digest
	return nil
}

// pushBlob pushes a blob to repo, or mounts it from the repository of
// the same stand-in that has it.
func (p *imagePusher) pushBlob(ctx context.Context, repo *remote.Repository, im *image, desc ocispec.Descriptor, open func() io.Reader) error {
	im.blobs = append(im.blobs, desc)
	from, seen := p.first[desc.Digest]
	switch {
	case seen && from == im.name:
		return nil
	case seen && strings.HasPrefix(from, im.host()+"/"):
		_, path, _ := strings.Cut(from, "/")
		if err := repo.Mount(ctx, desc, path, func() (io.ReadCloser, error) { return io.NopCloser(open()), nil }); err != nil {
			return fmt.Errorf("mount %s into %s: %w", desc.Digest, im.name, err)
		}
		return nil
	}
	if err := repo.Blobs().Push(ctx, desc, open()); err != nil {
		return fmt.Errorf("push %s to %s: %w", desc.Digest, im.name, err)
	}
	if !seen {
		p.first[desc.Digest] = im.name
	}
	return nil
}

// csv is the ClusterServiceVersion of p: its operator in the deployment's
// container (by tag when p.byTag) and every image in relatedImages.
func (p *imagePackage) csv() string {
	container := p.operator.byDigest()
	if p.byTag {
		container = p.operator.name + ":" + p.operator.tag
	}
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: %[1]s-operator.v%[2]s
  annotations:
    containerImage: %[3]s
spec:
  displayName: %[1]s operator
  description: Runs %[1]s on Kubernetes.
  version: %[2]s
  provider:
    name: bench
  installModes:
  - {type: AllNamespaces, supported: true}
  install:
    strategy: deployment
    spec:
      deployments:
      - name: %[1]s-operator
        spec:
          replicas: 1
          selector:
            matchLabels: {app: %[1]s}
          template:
            metadata:
              labels: {app: %[1]s}
            spec:
              containers:
              - name: manager
                image: %[4]s
  relatedImages:
  - name: operator
    image: %[3]s
`, p.name, p.version, p.operator.byDigest(), container)
	for _, im := range p.operands {
		fmt.Fprintf(&b, "  - name: %s\n    image: %s\n", im.path()[strings.LastIndex(im.path(), "/")+1:], im.byDigest())
	}
	return b.String()
}

// bundle is p's OLM bundle as berth reads it.
func (p *imagePackage) bundle() (*pkgformat.Package, error) {
	return pkgformat.New([]pkgformat.File{
		file("manifests/"+p.name+"-operator.clusterserviceversion.yaml", p.csv()),
		file("metadata/annotations.yaml", fmt.Sprintf(`annotations:
  operators.operatorframework.io.bundle.mediatype.v1: registry+v1
  operators.operatorframework.io.bundle.manifests.v1: manifests/
  operators.operatorframework.io.bundle.metadata.v1: metadata/
  operators.operatorframework.io.bundle.package.v1: %s
  operators.operatorframework.io.bundle.channels.v1: stable
  operators.operatorframework.io.bundle.channel.default.v1: stable
`, p.name)),
	}, pkgformat.Options{Name: p.name, Version: p.version})
}

// pushBundle pushes p's bundle into the source berth at addr and returns
// the descriptors of what it holds (manifest, config, layers).
func pushBundle(ctx context.Context, c *client.Client, addr string, p *imagePackage) ([]ocispec.Descriptor, error) {
	pkg, err := p.bundle()
	if err != nil {
		return nil, fmt.Errorf("bundle %s %s: %w", p.name, p.version, err)
	}
	art, err := pkg.Artifact()
	if err != nil {
		return nil, err
	}
	ref := client.Reference{Registry: addr, Namespace: imageNamespace, Name: p.name, Tag: pkgformat.Tag(p.version)}
	desc, err := c.Push(ctx, ref, art)
	if err != nil {
		return nil, fmt.Errorf("push %s: %w", ref, err)
	}
	rc, err := c.Repository(addr, imageNamespace+"/"+p.name).Fetch(ctx, desc)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	body, err := content.ReadAll(rc, desc)
	if err != nil {
		return nil, err
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	return append([]ocispec.Descriptor{desc, m.Config}, m.Layers...), nil
}

// uniqueBytes adds up the sizes of descs, each digest once.
func uniqueBytes(descs ...[]ocispec.Descriptor) (int64, int) {
	seen := map[digest.Digest]bool{}
	var total int64
	for _, ds := range descs {
		for _, d := range ds {
			if !seen[d.Digest] {
				seen[d.Digest] = true
				total += d.Size
			}
		}
	}
	return total, len(seen)
}

// checkImages fails unless the berth at addr holds every image of images
// by digest under imagePrefix, with every manifest of an index, and every
// package version.
func checkImages(ctx context.Context, addr string, images []*image, packages []*imagePackage) error {
	t := newTarget("destination", addr)
	var missing []string
	for _, im := range images {
		repo := t.repository(imagePrefix + "/" + im.path())
		for _, b := range im.blobs {
			if b.MediaType != ocispec.MediaTypeImageManifest && b.MediaType != ocispec.MediaTypeImageIndex {
				continue
			}
			if _, err := repo.Resolve(ctx, b.Digest.String()); err != nil {
				missing = append(missing, fmt.Sprintf("%s/%s@%s (%v)", imagePrefix, im.path(), b.Digest, err))
			}
		}
	}
	for _, p := range packages {
		if _, err := t.repository(imageNamespace+"/"+p.name).Resolve(ctx, pkgformat.Tag(p.version)); err != nil {
			missing = append(missing, fmt.Sprintf("%s/%s:%s (%v)", imageNamespace, p.name, p.version, err))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the destination lacks %d images and versions: %s", len(missing), strings.Join(missing[:min(3, len(missing))], ", "))
	}
	return nil
}
