package main

// Reading the catalog image berth serve publishes, and checking an update
// of it, for the OLM catalog benchmarks (olm.go).

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/berth-registry/berth/olm"
)

const (
	// olmBytesMetric counts the bytes of catalog image blobs and manifests
	// the publisher pushed.
	olmBytesMetric = "berth_olm_bytes_pushed_total"
	// olmPackagesMetric is the packages of the published catalog images;
	// olmPublishesMetric the catalog manifests pushed.
	olmPackagesMetric  = "berth_olm_packages"
	olmPublishesMetric = `berth_olm_publishes_total{result="published"}`
	// maxCatalogRead bounds a catalog manifest or layer read back.
	maxCatalogRead = 64 << 20
	// The schemas of the FBC documents checkFBC reads.
	schemaBundle  = "olm.bundle"
	schemaChannel = "olm.channel"
)

// catalogReader reads a namespace's catalog image and the server's metrics.
type catalogReader struct {
	namespace string
	repo      *remote.Repository
	http      *searcher
}

func newCatalogReader(addr, namespace string) (*catalogReader, error) {
	cl, err := pushClient(addr)
	if err != nil {
		return nil, err
	}
	repo := cl.Repository(addr, olm.CatalogRepository(namespace))
	repo.MaxMetadataBytes = maxCatalogRead
	return &catalogReader{namespace: namespace, repo: repo, http: newSearcher(addr)}, nil
}

// servedImage is a catalog image as the registry serves it.
type servedImage struct {
	desc     ocispec.Descriptor
	manifest ocispec.Manifest
	// bundleHost is the host of its bundle image references, once an
	// update's check has read it.
	bundleHost string
}

// size is the bytes of the whole image: manifest, config and layers.
func (i *servedImage) size() int64 {
	n := i.desc.Size + i.manifest.Config.Size
	for _, l := range i.manifest.Layers {
		n += l.Size
	}
	return n
}

// resolve returns the digest the catalog tag names (HEAD).
func (c *catalogReader) resolve(ctx context.Context) (digest.Digest, error) {
	desc, err := c.repo.Resolve(ctx, olm.CatalogTag)
	if err != nil {
		return "", err
	}
	return desc.Digest, nil
}

// image fetches the manifest the catalog tag names.
func (c *catalogReader) image(ctx context.Context) (*servedImage, error) {
	desc, rc, err := c.repo.FetchReference(ctx, olm.CatalogTag)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxCatalogRead+1))
	if err != nil {
		return nil, err
	}
	if err := checkDescriptor(desc, data); err != nil {
		return nil, fmt.Errorf("catalog manifest: %w", err)
	}
	img := &servedImage{desc: desc}
	if err := json.Unmarshal(data, &img.manifest); err != nil {
		return nil, fmt.Errorf("catalog manifest %s: %w", desc.Digest, err)
	}
	return img, nil
}

// blob fetches one blob of the catalog repository and checks its digest.
func (c *catalogReader) blob(ctx context.Context, desc ocispec.Descriptor) ([]byte, error) {
	if desc.Size > maxCatalogRead {
		return nil, fmt.Errorf("blob %s: %d bytes, more than the %d read back", desc.Digest, desc.Size, maxCatalogRead)
	}
	rc, err := c.repo.Blobs().Fetch(ctx, desc)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, desc.Size+1))
	if err != nil {
		return nil, err
	}
	return data, checkDescriptor(desc, data)
}

// pushedBytes is the value of olmBytesMetric on /metrics; found is false
// when the server has no such counter.
type pushedBytes struct {
	found bool
	bytes int64
}

func (c *catalogReader) pushedBytes(ctx context.Context) (pushedBytes, error) {
	body, err := c.http.get(ctx, "/metrics")
	if err != nil {
		return pushedBytes{}, err
	}
	return parsePushedBytes(body)
}

// metric is the value of the metric name (with its labels, if any) on
// /metrics; found is false when the server has none.
func (c *catalogReader) metric(ctx context.Context, name string) (value int64, found bool, err error) {
	body, err := c.http.get(ctx, "/metrics")
	if err != nil {
		return 0, false, err
	}
	return parseMetric(body, name)
}

// parsePushedBytes reads olmBytesMetric from the Prometheus text format.
func parsePushedBytes(body []byte) (pushedBytes, error) {
	n, found, err := parseMetric(body, olmBytesMetric)
	return pushedBytes{found: found, bytes: n}, err
}

// parseMetric reads the value of the metric name, labels included, from
// the Prometheus text format.
func parseMetric(body []byte, name string) (value int64, found bool, err error) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), name+" ")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(strings.Fields(v)[0], 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s: %w", name, err)
		}
		return int64(f), true, nil
	}
	return 0, false, sc.Err()
}

// waitPushedBytes polls /metrics until olmBytesMetric has grown past
// before: the publisher counts a publish once its manifest is pushed.
func (c *catalogReader) waitPushedBytes(ctx context.Context, srv *catServer, before pushedBytes) (pushedBytes, error) {
	var after pushedBytes
	_, err := pollUntil(ctx, srv.server, olmUpdateTimeout, 10*time.Millisecond, func() (bool, error) {
		var err error
		after, err = c.pushedBytes(ctx)
		return err == nil && after.bytes > before.bytes, err
	})
	if err != nil {
		return pushedBytes{}, fmt.Errorf("waiting for %s to grow past %d: %w", olmBytesMetric, before.bytes, err)
	}
	return after, nil
}

// checkUpdate checks that next differs from prev in one layer only, the
// pushed package's, and that this layer's FBC lists the pushed version's
// bundle in every channel the version names, replacing what it replaces
// there. It returns that layer, and sets next's bundleHost from the
// bundle's image reference.
func checkUpdate(ctx context.Context, c *catalogReader, prev, next *servedImage, p olmPush) (ocispec.Descriptor, error) {
	changed, err := changedLayer(prev.manifest, next.manifest)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	data, err := c.blob(ctx, changed)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	fbc, err := layerFBC(data, p.spec.name)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("layer %s: %w", changed.Digest, err)
	}
	next.bundleHost, err = checkFBC(fbc, c.namespace, p.spec.name, p.pkg.Metadata.CSVName, replacesByChannel(p))
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("layer %s: %w", changed.Digest, err)
	}
	return changed, nil
}

// replacesByChannel is what the pushed version replaces in each of its
// channels.
func replacesByChannel(p olmPush) map[string]string {
	out := map[string]string{}
	for _, ch := range p.pkg.Metadata.Channels {
		out[ch.Name] = ch.Replaces
	}
	return out
}

// changedLayer is the one layer of next that prev lacks, when next has as
// many layers as prev: a new version of a package already in the catalog
// changes its layer and no other.
func changedLayer(prev, next ocispec.Manifest) (ocispec.Descriptor, error) {
	if len(next.Layers) != len(prev.Layers) {
		return ocispec.Descriptor{}, fmt.Errorf("the new image has %d layers, the one before %d", len(next.Layers), len(prev.Layers))
	}
	var changed []ocispec.Descriptor
	for _, l := range next.Layers {
		if !slices.ContainsFunc(prev.Layers, func(o ocispec.Descriptor) bool { return o.Digest == l.Digest }) {
			changed = append(changed, l)
		}
	}
	if len(changed) != 1 {
		return ocispec.Descriptor{}, fmt.Errorf("%d layers changed, want 1", len(changed))
	}
	return changed[0], nil
}

// layerFBC is the FBC of package name in a gzipped catalog layer:
// configs/<name>/catalog.json.
func layerFBC(data []byte, name string) ([]byte, error) {
	want := path.Join(strings.TrimPrefix(olm.ConfigsDir, "/"), name, "catalog.json")
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("no %s in the layer", want)
		}
		if err != nil {
			return nil, err
		}
		if hdr.Name == want {
			return io.ReadAll(io.LimitReader(tr, maxCatalogRead))
		}
	}
}

// fbcDocument holds the fields of the FBC documents checkFBC reads.
type fbcDocument struct {
	Schema  string `json:"schema"`
	Name    string `json:"name"`
	Package string `json:"package"`
	Image   string `json:"image"`
	Entries []struct {
		Name     string `json:"name"`
		Replaces string `json:"replaces"`
	} `json:"entries"`
}

// checkFBC checks that the FBC of package name in namespace has an
// olm.bundle document for bundle, whose image is <host>/namespace/name@...,
// and that each channel of replaces lists bundle replacing the CSV given
// for it. It returns the host.
func checkFBC(fbc []byte, namespace, name, bundle string, replaces map[string]string) (string, error) {
	var host string
	found := map[string]bool{}
	dec := json.NewDecoder(bytes.NewReader(fbc))
	for {
		var d fbcDocument
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("FBC of %s: %w", name, err)
		}
		switch d.Schema {
		case schemaBundle:
			if d.Name != bundle {
				continue
			}
			h, _, ok := strings.Cut(d.Image, "/"+namespace+"/"+name+"@")
			if !ok || h == "" {
				return "", fmt.Errorf("bundle %s: image %q is not <host>/%s/%s@<digest>", bundle, d.Image, namespace, name)
			}
			host = h
		case schemaChannel:
			want, ok := replaces[d.Name]
			if !ok || d.Package != name {
				continue
			}
			for _, e := range d.Entries {
				if e.Name != bundle {
					continue
				}
				if e.Replaces != want {
					return "", fmt.Errorf("channel %s: %s replaces %q, want %q", d.Name, bundle, e.Replaces, want)
				}
				found[d.Name] = true
			}
		}
	}
	if host == "" {
		return "", fmt.Errorf("FBC of %s has no olm.bundle %s", name, bundle)
	}
	for ch := range replaces {
		if !found[ch] {
			return "", fmt.Errorf("FBC of %s: channel %s does not list %s", name, ch, bundle)
		}
	}
	return host, nil
}
