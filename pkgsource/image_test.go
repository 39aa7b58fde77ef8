package pkgsource

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/berth-registry/berth/client/registrytest"
	"github.com/berth-registry/berth/pkgformat"
)

// layer is one layer of a test image.
type layer struct {
	mediaType string
	data      []byte
}

// pushImage pushes an image of the given config media type and layers to
// host/name:tag and returns its manifest digest.
func pushImage(t *testing.T, host, name, tag, configType string, layers ...layer) string {
	t.Helper()
	ctx := context.Background()
	repo, err := remote.NewRepository(host + "/" + name)
	if err != nil {
		t.Fatal(err)
	}
	repo.PlainHTTP = true
	push := func(mediaType string, data []byte) ocispec.Descriptor {
		desc := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}
		if err := repo.Push(ctx, desc, bytes.NewReader(data)); err != nil && !strings.Contains(err.Error(), "exist") {
			t.Fatal(err)
		}
		return desc
	}
	config := push(configType, []byte("{}"))
	var descs []ocispec.Descriptor
	for _, l := range layers {
		descs = append(descs, push(l.mediaType, l.data))
	}
	desc, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, "", oras.PackManifestOptions{ConfigDescriptor: &config, Layers: descs})
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Tag(ctx, desc, tag); err != nil {
		t.Fatal(err)
	}
	return desc.Digest.String()
}

const layerType = ocispec.MediaTypeImageLayerGzip

// gunzip is the tar of a tgz.
func gunzip(t *testing.T, tgz []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestImageFetch(t *testing.T) {
	host := registrytest.New(t, nil)
	ctx := context.Background()
	var berthContent bytes.Buffer
	if err := pkgformat.WriteArchive(&berthContent, []pkgformat.File{{Path: "manifests/deploy.yaml", Mode: 0o644, Data: []byte("kind: Deployment\n")}}); err != nil {
		t.Fatal(err)
	}
	bundle := pushImage(t, host, "ops/bundle", "v1", ocispec.MediaTypeImageConfig,
		layer{layerType, tgz(t, entry{name: "manifests/csv.yaml", body: "version: 0.1.0\n"}, entry{name: "metadata/annotations.yaml", body: "a: b\n"})},
		layer{layerType, tgz(t, entry{name: "manifests/", typ: tar.TypeDir}, entry{name: "manifests/csv.yaml", body: "version: 1.0.0\n"})})
	chart := pushImage(t, host, "charts/web", "1.0.0", pkgformat.HelmConfigMediaType,
		layer{pkgformat.HelmChartContentMediaType, tgz(t, entry{name: "web/Chart.yaml", body: "name: web\n"}, entry{name: "web/templates/svc.yaml", body: "kind: Service\n"})})
	plain := pushImage(t, host, "ops/plain", "v1", ocispec.MediaTypeImageConfig,
		layer{ocispec.MediaTypeImageLayer, gunzip(t, tgz(t, entry{name: "manifests/csv.yaml", body: "version: 2.0.0\n"}))})
	pkg := pushImage(t, host, "team/pkg", "2.0.0", pkgformat.ConfigMediaType, layer{pkgformat.ContentMediaType, berthContent.Bytes()})
	for _, tc := range []struct {
		name, ref, digest string
		files             map[string]string
	}{
		{"registry+v1 bundle, layers in order", host + "/ops/bundle:v1", bundle, map[string]string{"manifests/csv.yaml": "version: 1.0.0\n", "metadata/annotations.yaml": "a: b\n"}},
		{"bundle with an uncompressed layer", host + "/ops/plain:v1", plain, map[string]string{"manifests/csv.yaml": "version: 2.0.0\n"}},
		{"helm chart", host + "/charts/web:1.0.0", chart, map[string]string{"Chart.yaml": "name: web\n", "templates/svc.yaml": "kind: Service\n"}},
		{"berth package", host + "/team/pkg:2.0.0", pkg, map[string]string{"manifests/deploy.yaml": "kind: Deployment\n"}},
		{"by digest", host + "/team/pkg@" + pkg, pkg, map[string]string{"manifests/deploy.yaml": "kind: Deployment\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := Spec{Kind: Image, URL: tc.ref}
			dir := emptyDir(t)
			got, err := Fetch(ctx, spec, dir, loopback)
			if err != nil {
				t.Fatal(err)
			}
			if got.Revision != tc.digest || got.Kind != Image {
				t.Errorf("Fetch resolved %+v, want revision %s", got, tc.digest)
			}
			for name, body := range tc.files {
				if s := readFile(t, filepath.Join(dir, name)); s != body {
					t.Errorf("%s = %q, want %q", name, s, body)
				}
			}
			now, err := Resolve(ctx, spec, got, loopback)
			if err != nil || now.Revision != got.Revision {
				t.Errorf("Resolve = %+v, %v; want revision %s", now, err, got.Revision)
			}
		})
	}
	moved := pushImage(t, host, "ops/bundle", "v1", ocispec.MediaTypeImageConfig, layer{layerType, tgz(t, entry{name: "manifests/csv.yaml", body: "version: 1.0.1\n"})})
	now, err := Resolve(ctx, Spec{Kind: Image, URL: host + "/ops/bundle:v1"}, Resolved{Revision: bundle}, loopback)
	if err != nil || now.Revision != moved {
		t.Errorf("Resolve after the tag moved = %+v, %v; want revision %s", now, err, moved)
	}
}

func TestImageHostile(t *testing.T) {
	host := registrytest.New(t, nil)
	pushImage(t, host, "bad/dotdot", "v1", ocispec.MediaTypeImageConfig, layer{layerType, tgz(t, entry{name: "../../evil", body: "x"})})
	pushImage(t, host, "bad/whiteout", "v1", ocispec.MediaTypeImageConfig,
		layer{layerType, tgz(t, entry{name: "manifests/a.yaml", body: "a"})}, layer{layerType, tgz(t, entry{name: "manifests/.wh.a.yaml"})})
	pushImage(t, host, "bad/zstd", "v1", ocispec.MediaTypeImageConfig, layer{"application/vnd.oci.image.layer.v1.tar+zstd", []byte("zstd")})
	pushImage(t, host, "bad/big", "v1", ocispec.MediaTypeImageConfig, layer{layerType, tgz(t, entry{name: "big.yaml", body: strings.Repeat("x", 1<<20)})})
	pushImage(t, host, "bad/symlink", "v1", ocispec.MediaTypeImageConfig, layer{layerType, tgz(t, entry{name: "manifests/l", typ: tar.TypeSymlink, link: "../../x"})})
	pushImage(t, host, "bad/nochart", "v1", pkgformat.HelmConfigMediaType, layer{layerType, tgz(t, entry{name: "a", body: "x"})})
	small := Limits{AllowPrivate: true, MaxBytes: 64 << 10}
	for _, tc := range []struct {
		name, ref string
		limits    Limits
		want      string
		is        error
	}{
		{"dotdot", "bad/dotdot:v1", small, `path "../../evil" is absolute or goes out of the directory`, ErrInvalid},
		{"whiteout", "bad/whiteout:v1", small, "manifests/.wh.a.yaml is a whiteout", ErrInvalid},
		{"zstd", "bad/zstd:v1", small, "is a application/vnd.oci.image.layer.v1.tar+zstd, not a tar or gzipped tar", ErrInvalid},
		{"too many bytes", "bad/big:v1", Limits{AllowPrivate: true, MaxBytes: 512 << 10}, "more than 524288 bytes unpacked (at big.yaml)", ErrLimit},
		{"symlink out", "bad/symlink:v1", small, "symlink manifests/l points out of the directory", ErrInvalid},
		{"helm without chart", "bad/nochart:v1", small, "a Helm chart without a application/vnd.cncf.helm.chart.content.v1.tar+gzip layer", ErrInvalid},
		{"missing tag", "bad/dotdot:v2", small, "not found", nil},
		{"private address", "bad/dotdot:v1", Limits{}, "is loopback, link-local, private or unspecified", ErrDenied},
		{"host not allowed", "bad/dotdot:v1", Limits{AllowPrivate: true, AllowHosts: []string{"ghcr.io"}}, "host 127.0.0.1 is not in the allowed hosts", ErrDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := host + "/" + tc.ref
			dir := emptyDir(t)
			_, err := Fetch(context.Background(), Spec{Kind: Image, URL: ref}, dir, tc.limits)
			t.Log(err)
			if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Fatalf("Fetch error %v, want one containing %q and wrapping %v", err, tc.want, tc.is)
			}
			if !strings.Contains(err.Error(), "image source "+ref) {
				t.Errorf("error %q does not name the source", err)
			}
			assertEmpty(t, dir)
		})
	}
}
