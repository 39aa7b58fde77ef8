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
	"io"
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

// packageLayer is what a catalog image keeps of one package's layer.
type packageLayer struct {
	Name   string             // the package
	Blob   ocispec.Descriptor // the gzipped tar
	DiffID digest.Digest      // digest of the tar
	Size   int64              // size of the tar
}

// newPackageLayer builds the catalog layer of package name, whose FBC is
// fbc: a tar of configs/, configs/<name>/ and configs/<name>/catalog.json,
// gzipped. The same name and FBC always give the same bytes.
func newPackageLayer(name string, fbc []byte) (packageLayer, []byte, error) {
	data, diffID, size, err := tarGzip([]pkgformat.File{{Path: catalogFile(name), Mode: 0o644, Data: fbc}})
	if err != nil {
		return packageLayer{}, nil, fmt.Errorf("%s: catalog layer: %w", name, err)
	}
	return packageLayer{
		Name: name,
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
// made of layers, given in package name order: an OCI image for linux/amd64
// labelled LabelConfigs=ConfigsDir, with no timestamps. The same layers
// always give the same bytes; no layers give an image with none.
func catalogImage(layers []packageLayer) (config Blob, manifest Blob, err error) {
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

// writeLayer writes the FBC documents of one catalog layer, read from reg,
// that keep keeps.
func writeLayer(ctx context.Context, reg Registry, w io.Writer, repo string, l packageLayer, keep func(schema, pkg string) bool) error {
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
	want := catalogFile(l.Name)
	for {
		hdr, err := tr.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("no %s", want)
			}
			return fmt.Errorf("read layer %s: %w", l.Blob.Digest, err)
		}
		if hdr.Name == want && hdr.Typeflag == tar.TypeReg {
			return writeDocuments(w, tr, l.Name, keep)
		}
	}
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
