package olm

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/pkgformat"
)

// gzipOS is the operating system byte of the gzip headers written here:
// "unknown", as pkgformat.WriteArchive writes it.
const gzipOS = 255

// catalogFile is the path of package name's FBC inside a catalog image.
func catalogFile(name string) string {
	return strings.TrimPrefix(ConfigsDir, "/") + "/" + name + "/catalog.json"
}

// catalogShards is how many layers a catalog image has at most. Each
// package's FBC goes into the layer of its shard (shardOf), so that the
// manifest and the config stay small however many packages a namespace
// holds: 128 layer descriptors and diff_ids, about 29 KiB together, where
// a layer per package gave 1.1 MiB at 5,000 packages. A change rewrites
// its shard's layer: about 1/128th of the namespace's FBC.
const catalogShards = 128

// shardOf is the shard of package name: its FNV-1a hash modulo
// catalogShards. It depends on the name alone, so that the layout is the
// same whatever packages a namespace holds and however its image was
// built.
func shardOf(name string) int {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int(h.Sum32() % catalogShards)
}

// shardLayer is what a catalog image keeps of one shard's layer.
type shardLayer struct {
	Shard    int
	Packages []string           // its packages, sorted
	Blob     ocispec.Descriptor // the gzipped tar
	DiffID   digest.Digest      // digest of the tar
	Size     int64              // size of the tar
}

// newShardLayer builds the catalog layer of shard from the FBC of each of
// its packages, fbcs (package name -> FBC, not empty): a tar of configs/,
// then configs/<name>/ and configs/<name>/catalog.json for each package in
// name order, gzipped. The same packages and FBC always give the same
// bytes.
func newShardLayer(shard int, fbcs map[string][]byte) (shardLayer, []byte, error) {
	names := slices.Sorted(maps.Keys(fbcs))
	files := make([]pkgformat.File, len(names))
	for i, name := range names {
		files[i] = pkgformat.File{Path: catalogFile(name), Mode: 0o644, Data: fbcs[name]}
	}
	data, diffID, size, err := tarGzip(files)
	if err != nil {
		return shardLayer{}, nil, fmt.Errorf("catalog layer %d: %w", shard, err)
	}
	return shardLayer{
		Shard:    shard,
		Packages: names,
		Blob: ocispec.Descriptor{
			MediaType: ocispec.MediaTypeImageLayerGzip,
			Digest:    digest.FromBytes(data),
			Size:      int64(len(data)),
		},
		DiffID: diffID,
		Size:   size,
	}, data, nil
}

// tarGzip writes files, sorted by path and each preceded by the directory
// entries it needs, as a reproducible gzipped tar: mode 0755 for directories
// and the file's mode for files, uid and gid 0, no user or group names, mtime
// 0 (Unix epoch), PAX format (plain USTAR headers unless a path needs a PAX
// record), and a gzip header with no name, zero mtime and OS "unknown" at
// the default compression level. It returns the gzipped bytes and the digest
// and size of the tar.
func tarGzip(files []pkgformat.File) ([]byte, digest.Digest, int64, error) {
	var out bytes.Buffer
	zw, err := gzip.NewWriterLevel(&out, gzip.DefaultCompression)
	if err != nil {
		return nil, "", 0, err
	}
	zw.Header = gzip.Header{OS: gzipOS}
	digester := digest.Canonical.Digester()
	counter := &countWriter{}
	tw := tar.NewWriter(io.MultiWriter(zw, digester.Hash(), counter))
	sorted := slices.SortedFunc(slices.Values(files), func(a, b pkgformat.File) int { return strings.Compare(a.Path, b.Path) })
	dirs := map[string]bool{}
	for _, f := range sorted {
		if err := writeDirs(tw, dirs, path.Dir(f.Path)); err != nil {
			return nil, "", 0, err
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.Path, Size: int64(len(f.Data)), Mode: int64(f.Mode.Perm()), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, "", 0, fmt.Errorf("%s: %w", f.Path, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, "", 0, fmt.Errorf("%s: %w", f.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", 0, err
	}
	if err := zw.Close(); err != nil {
		return nil, "", 0, err
	}
	return out.Bytes(), digester.Digest(), counter.n, nil
}

// writeDirs writes the directory entries of dir and its parents that are
// not in written yet, outermost first.
func writeDirs(tw *tar.Writer, written map[string]bool, dir string) error {
	if dir == "." || dir == "/" || written[dir] {
		return nil
	}
	if err := writeDirs(tw, written, path.Dir(dir)); err != nil {
		return err
	}
	written[dir] = true
	hdr := &tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	return nil
}

// countWriter counts the bytes written to it.
type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

// catalogImage returns the config blob and the manifest of the catalog image
// made of layers, given in shard order: an OCI image for linux/amd64
// labelled LabelConfigs=ConfigsDir, with no timestamps. The same layers
// always give the same bytes; no layers give an image with none.
func catalogImage(layers []shardLayer) (config Blob, manifest Blob, err error) {
	img := ocispec.Image{
		Platform: ocispec.Platform{Architecture: "amd64", OS: "linux"},
		Config:   ocispec.ImageConfig{Labels: map[string]string{LabelConfigs: ConfigsDir}},
		RootFS:   ocispec.RootFS{Type: "layers", DiffIDs: make([]digest.Digest, len(layers))},
	}
	m := ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Layers:    make([]ocispec.Descriptor, len(layers)),
	}
	for i, l := range layers {
		img.RootFS.DiffIDs[i] = l.DiffID
		m.Layers[i] = l.Blob
	}
	if config, err = jsonBlob(ocispec.MediaTypeImageConfig, img); err != nil {
		return Blob{}, Blob{}, err
	}
	m.Config = config.Descriptor
	if manifest, err = jsonBlob(ocispec.MediaTypeImageManifest, m); err != nil {
		return Blob{}, Blob{}, err
	}
	return config, manifest, nil
}

// jsonBlob marshals v as a blob of media type mediaType.
func jsonBlob(mediaType string, v any) (Blob, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return Blob{}, err
	}
	return Blob{Descriptor: ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}, Data: data}, nil
}

// readLayer reads the catalog layer l back from reg and calls each with
// the name of every package it holds, in the layer's order, and a reader of
// that package's FBC, valid until each returns.
func readLayer(ctx context.Context, reg Registry, repo string, l shardLayer, each func(name string, fbc io.Reader) error) error {
	rc, err := reg.Blob(ctx, repo, l.Blob.Digest.String())
	if err != nil {
		return fmt.Errorf("read layer %s: %w", l.Blob.Digest, err)
	}
	defer rc.Close()
	zr, err := gzip.NewReader(io.LimitReader(rc, l.Blob.Size))
	if err != nil {
		return fmt.Errorf("read layer %s: %w", l.Blob.Digest, err)
	}
	tr := tar.NewReader(io.LimitReader(zr, l.Size))
	found := 0
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read layer %s: %w", l.Blob.Digest, err)
		}
		name, ok := catalogPackage(hdr.Name)
		if !ok || hdr.Typeflag != tar.TypeReg {
			continue
		}
		if _, known := slices.BinarySearch(l.Packages, name); !known {
			return fmt.Errorf("read layer %s: %s is not one of its packages", l.Blob.Digest, hdr.Name)
		}
		found++
		if err := each(name, tr); err != nil {
			return err
		}
	}
	if found != len(l.Packages) {
		return fmt.Errorf("read layer %s: %d packages, want %d", l.Blob.Digest, found, len(l.Packages))
	}
	return nil
}

// catalogPackage is the package whose FBC is at path p in a catalog
// layer, configs/<name>/catalog.json.
func catalogPackage(p string) (string, bool) {
	rest, ok := strings.CutPrefix(p, strings.TrimPrefix(ConfigsDir, "/")+"/")
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, "/catalog.json")
	return name, ok && name != "" && !strings.Contains(name, "/")
}

// readShard returns the FBC of every package of the catalog layer l, read
// back from reg.
func readShard(ctx context.Context, reg Registry, repo string, l shardLayer) (map[string][]byte, error) {
	out := make(map[string][]byte, len(l.Packages))
	err := readLayer(ctx, reg, repo, l, func(name string, fbc io.Reader) error {
		data, err := io.ReadAll(fbc)
		out[name] = data
		return err
	})
	return out, err
}

// writeDocuments copies the JSON Lines of r to w, those that keep keeps.
func writeDocuments(w io.Writer, r io.Reader, pkg string, keep func(schema, pkg string) bool) error {
	if keep == nil {
		_, err := io.Copy(w, r)
		return err
	}
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var doc struct {
				Schema string `json:"schema"`
			}
			if jerr := json.Unmarshal(line, &doc); jerr != nil {
				return fmt.Errorf("read FBC: %w", jerr)
			}
			if keep(doc.Schema, pkg) {
				if _, werr := w.Write(line); werr != nil {
					return werr
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
