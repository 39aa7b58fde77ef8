package olm

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/pkgformat"
)

// tarEntry is an entry of a tar, as tests compare them.
type tarEntry struct {
	name string
	typ  byte
	mode int64
	data string
}

// readTar returns the entries of a tar, failing the test unless each has uid
// and gid 0, no user or group names, mtime 0 and no PAX records.
func readTar(t *testing.T, tarball []byte) []tarEntry {
	t.Helper()
	var out []tarEntry
	tr := tar.NewReader(bytes.NewReader(tarball))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Uid != 0 || hdr.Gid != 0 || hdr.Uname != "" || hdr.Gname != "" || !hdr.ModTime.Equal(time.Unix(0, 0)) || len(hdr.PAXRecords) != 0 {
			t.Errorf("%s: header %+v, want uid/gid 0, no names, mtime 0, no PAX records", hdr.Name, hdr)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tarEntry{hdr.Name, hdr.Typeflag, hdr.Mode, string(b)})
	}
}

func TestShardLayer(t *testing.T) {
	// alpha and hello share shard 43.
	fbcs := map[string][]byte{
		"hello": []byte(`{"schema":"olm.package","name":"hello","defaultChannel":"stable"}` + "\n"),
		"alpha": []byte(`{"schema":"olm.package","name":"alpha","defaultChannel":"stable"}` + "\n"),
	}
	l, data, err := newShardLayer(43, fbcs)
	if err != nil {
		t.Fatal(err)
	}
	if l.Shard != 43 || !slices.Equal(l.Packages, []string{"alpha", "hello"}) || l.Blob.MediaType != ocispec.MediaTypeImageLayerGzip || l.Blob.Digest != digest.FromBytes(data) || l.Blob.Size != int64(len(data)) {
		t.Errorf("layer %+v does not describe its %d bytes and sorted packages", l, len(data))
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || zr.Comment != "" || !zr.ModTime.IsZero() || zr.OS != gzipOS || len(zr.Extra) != 0 {
		t.Errorf("gzip header %+v, want no name, comment or mtime and OS unknown", zr.Header)
	}
	tarball, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if l.DiffID != digest.FromBytes(tarball) || l.Size != int64(len(tarball)) {
		t.Errorf("diff_id %s size %d, want those of the tar: %s %d", l.DiffID, l.Size, digest.FromBytes(tarball), len(tarball))
	}
	want := []tarEntry{
		{"configs/", tar.TypeDir, 0o755, ""},
		{"configs/alpha/", tar.TypeDir, 0o755, ""},
		{"configs/alpha/catalog.json", tar.TypeReg, 0o644, string(fbcs["alpha"])},
		{"configs/hello/", tar.TypeDir, 0o755, ""},
		{"configs/hello/catalog.json", tar.TypeReg, 0o644, string(fbcs["hello"])},
	}
	if got := readTar(t, tarball); !reflect.DeepEqual(got, want) {
		t.Errorf("tar entries %+v, want %+v", got, want)
	}
	again, _, err := newShardLayer(43, maps.Clone(fbcs))
	if err != nil || !reflect.DeepEqual(again, l) {
		t.Errorf("the same FBC gave layer %+v, then %+v (%v)", l, again, err)
	}
	reg := newFakeRegistry()
	if err := reg.PushBlob(context.Background(), "ns/olm/catalog", Blob{Descriptor: l.Blob, Data: data}); err != nil {
		t.Fatal(err)
	}
	if back, err := readShard(context.Background(), reg, "ns/olm/catalog", l); err != nil || !reflect.DeepEqual(back, fbcs) {
		t.Errorf("read back %q (%v), want %q", back, err, fbcs)
	}
}

func TestShardOf(t *testing.T) {
	tests := []struct {
		name  string
		shard int
	}{
		{"etcd", 11}, {"kong", 12}, {"jaeger", 123}, {"alpha", 43}, {"hello", 43},
	}
	for _, tt := range tests {
		if got := shardOf(tt.name); got != tt.shard {
			t.Errorf("shardOf(%q) = %d, want %d: the layout of every published catalog image would change", tt.name, got, tt.shard)
		}
	}
}

func TestReadLayerRefusesAStrangeLayer(t *testing.T) {
	l, data, err := newShardLayer(43, map[string][]byte{"alpha": []byte("{}\n"), "hello": []byte("{}\n")})
	if err != nil {
		t.Fatal(err)
	}
	reg := newFakeRegistry()
	if err := reg.PushBlob(context.Background(), "r", Blob{Descriptor: l.Blob, Data: data}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		packages []string
		want     string
	}{
		{"a package it does not list", []string{"alpha"}, "configs/hello/catalog.json is not one of its packages"},
		{"a package it lacks", []string{"alpha", "hello", "zeta"}, "2 packages, want 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			strange := l
			strange.Packages = tt.packages
			if _, err := readShard(context.Background(), reg, "r", strange); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("readShard error %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := readShard(context.Background(), reg, "other", l); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("readShard of a missing blob: error %v, want the registry's", err)
	}
}

func TestTarGzipSortsAndSharesDirectories(t *testing.T) {
	files := []pkgformat.File{
		{Path: "metadata/annotations.yaml", Mode: 0o644, Data: []byte("a")},
		{Path: "manifests/b.yaml", Mode: 0o644, Data: []byte("b")},
		{Path: "manifests/a.yaml", Mode: 0o755, Data: []byte("c")},
	}
	data, _, _, err := tarGzip(files)
	if err != nil {
		t.Fatal(err)
	}
	reversed := slices.Clone(files)
	slices.Reverse(reversed)
	if again, _, _, err := tarGzip(reversed); err != nil || !bytes.Equal(again, data) {
		t.Errorf("files in another order give other bytes (%v)", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tarball, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range readTar(t, tarball) {
		names = append(names, e.name)
	}
	want := []string{"manifests/", "manifests/a.yaml", "manifests/b.yaml", "metadata/", "metadata/annotations.yaml"}
	if !slices.Equal(names, want) {
		t.Errorf("entries %q, want %q", names, want)
	}
}

func TestCatalogImage(t *testing.T) {
	var layers []shardLayer
	for _, name := range []string{"a", "b"} {
		l, _, err := newShardLayer(shardOf(name), map[string][]byte{name: []byte(`{"schema":"olm.package","name":"` + name + `"}` + "\n")})
		if err != nil {
			t.Fatal(err)
		}
		layers = append(layers, l)
	}
	tests := []struct {
		name   string
		layers []shardLayer
	}{
		{"two packages", layers},
		{"no packages", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			config, manifest, err := catalogImage(tt.layers)
			if err != nil {
				t.Fatal(err)
			}
			var img map[string]any
			if err := json.Unmarshal(config.Data, &img); err != nil {
				t.Fatal(err)
			}
			diffIDs := []any{}
			for _, l := range tt.layers {
				diffIDs = append(diffIDs, string(l.DiffID))
			}
			wantImg := map[string]any{
				"architecture": "amd64",
				"os":           "linux",
				"config":       map[string]any{"Labels": map[string]any{LabelConfigs: ConfigsDir}},
				"rootfs":       map[string]any{"type": "layers", "diff_ids": diffIDs},
			}
			if !reflect.DeepEqual(img, wantImg) {
				t.Errorf("config %s, want %v (no timestamps)", config.Data, wantImg)
			}
			if config.Descriptor.MediaType != ocispec.MediaTypeImageConfig || config.Descriptor.Digest != digest.FromBytes(config.Data) {
				t.Errorf("config descriptor %+v does not describe it", config.Descriptor)
			}
			var m ocispec.Manifest
			if err := json.Unmarshal(manifest.Data, &m); err != nil {
				t.Fatal(err)
			}
			if m.SchemaVersion != 2 || m.MediaType != ocispec.MediaTypeImageManifest || !reflect.DeepEqual(m.Config, config.Descriptor) {
				t.Errorf("manifest %s: want schema 2, OCI image manifest, config %+v", manifest.Data, config.Descriptor)
			}
			if len(m.Layers) != len(tt.layers) || !strings.Contains(string(manifest.Data), `"layers":[`) {
				t.Errorf("manifest %s, want %d layers, listed even when none", manifest.Data, len(tt.layers))
			}
			for i, l := range tt.layers {
				if !reflect.DeepEqual(m.Layers[i], l.Blob) {
					t.Errorf("layer %d = %+v, want %+v", i, m.Layers[i], l.Blob)
				}
			}
			if manifest.Descriptor.MediaType != ocispec.MediaTypeImageManifest || manifest.Descriptor.Digest != digest.FromBytes(manifest.Data) {
				t.Errorf("manifest descriptor %+v does not describe it", manifest.Descriptor)
			}
			_, again, err := catalogImage(slices.Clone(tt.layers))
			if err != nil || again.Descriptor.Digest != manifest.Descriptor.Digest {
				t.Errorf("the same layers gave manifest %s, then %s (%v)", manifest.Descriptor.Digest, again.Descriptor.Digest, err)
			}
		})
	}
}
