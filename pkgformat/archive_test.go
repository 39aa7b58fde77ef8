package pkgformat

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

func TestWriteArchiveIsReproducible(t *testing.T) {
	files := []File{
		file("templates/b.yaml", "b: 1\n"),
		{Path: "bin/run.sh", Mode: 0o700, Data: []byte("#!/bin/sh\n")},
		file("operator.yaml", goodOperator),
		{Path: "long/" + string(bytes.Repeat([]byte("x"), 200)) + ".yaml", Mode: 0o600, Data: []byte("a: b\n")},
	}
	var first, second bytes.Buffer
	must(t, WriteArchive(&first, files))
	shuffled := slices.Clone(files)
	slices.Reverse(shuffled)
	must(t, WriteArchive(&second, shuffled))
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Fatal("the same files in another order give other bytes")
	}

	zr, err := gzip.NewReader(bytes.NewReader(first.Bytes()))
	must(t, err)
	if zr.Name != "" || !zr.ModTime.IsZero() || zr.OS != gzipOS || zr.Comment != "" {
		t.Errorf("gzip header %+v", zr.Header)
	}
	tr := tar.NewReader(zr)
	var paths []string
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		must(t, err)
		paths = append(paths, hdr.Name)
		wantMode := int64(0o644)
		if hdr.Name == "bin/run.sh" {
			wantMode = 0o755
		}
		if hdr.Typeflag != tar.TypeReg || hdr.Mode != wantMode || !hdr.ModTime.Equal(time.Unix(0, 0)) ||
			hdr.Uid != 0 || hdr.Gid != 0 || hdr.Uname != "" || hdr.Gname != "" {
			t.Errorf("header %+v", hdr)
		}
	}
	if !slices.IsSorted(paths) || len(paths) != len(files) {
		t.Errorf("entries %v", paths)
	}

	got, err := ReadArchive(bytes.NewReader(first.Bytes()), Limits{})
	must(t, err)
	want, err := checkFiles(files, DefaultLimits())
	must(t, err)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip: got %v\nwant %v", got, want)
	}
}

func TestReadArchiveAccepts(t *testing.T) {
	archive := tgz(t,
		tarEntry{name: "./", typ: tar.TypeDir},
		tarEntry{name: "./templates/", typ: tar.TypeDir},
		reg("./operator.yaml", goodOperator),
		reg("./templates/a.yaml", "a: b\n"),
		tarEntry{name: "./templates/sym.yaml", typ: tar.TypeSymlink, link: "a.yaml"},
		tarEntry{name: "./templates/chain.yaml", typ: tar.TypeSymlink, link: "../templates/sym.yaml"},
		tarEntry{name: "./hard.yaml", typ: tar.TypeLink, link: "templates/a.yaml"},
		tarEntry{name: "pax_global_header", typ: tar.TypeXGlobalHeader},
	)
	files, err := ReadArchive(bytes.NewReader(archive), Limits{})
	must(t, err)
	want := []File{
		file("hard.yaml", "a: b\n"),
		file("operator.yaml", goodOperator),
		file("templates/a.yaml", "a: b\n"),
		file("templates/chain.yaml", "a: b\n"),
		file("templates/sym.yaml", "a: b\n"),
	}
	if !reflect.DeepEqual(files, want) {
		t.Errorf("got %v\nwant %v", files, want)
	}
}

// reproducibleFixtures are packages of each format and layout.
// channelsBeside marks a version folder of the package-manifest layout: its
// channels come from the *.package.yaml beside it, and its content must carry
// them.
var reproducibleFixtures = []struct {
	path           string
	opts           Options
	channelsBeside bool
}{
	{filepath.Join(fixtures, "kudo/kafka/2.5.1-1.3.2"), Options{}, false},
	{filepath.Join(fixtures, "olm-community/etcd/0.9.4"), Options{Name: "etcd"}, true},
	{filepath.Join(fixtures, "olm-community/kogito-operator/1.6.0"), Options{}, false},
	{filepath.Join(fixtures, "olm-community/redis-operator/0.3.0"), Options{}, false},
	{"testdata/hello-chart", Options{}, false},
	{"testdata/plain-bundle", Options{Name: "widgets", Version: "0.1.0"}, false},
}

func TestArtifactIsReproducible(t *testing.T) {
	for _, fx := range reproducibleFixtures {
		t.Run(filepath.Base(fx.path), func(t *testing.T) {
			first, second := loadArtifact(t, fx.path, fx.opts), loadArtifact(t, fx.path, fx.opts)
			if !bytes.Equal(first.Manifest, second.Manifest) || !bytes.Equal(first.Config, second.Config) ||
				!bytes.Equal(first.Content, second.Content) || first.ManifestDesc.Digest != second.ManifestDesc.Digest {
				t.Fatal("two loads of the same directory give different artifacts")
			}
			p, err := Load(fx.path, fx.opts)
			must(t, err)
			files, err := ReadArchive(bytes.NewReader(first.Content), Limits{})
			must(t, err)
			if !reflect.DeepEqual(files, p.Files) {
				t.Error("the content does not read back as the package files")
			}
			again, err := New(files, fx.opts)
			must(t, err)
			if fx.channelsBeside && (len(again.Metadata.Channels) == 0 || again.Metadata.DefaultChannel == "") {
				t.Fatal("the content of a version folder does not carry the channels of its package file")
			}
			if !reflect.DeepEqual(again.Metadata, p.Metadata) {
				t.Error("the content does not give the same metadata")
			}
			var md Metadata
			must(t, json.Unmarshal(first.Config, &md))
			if !reflect.DeepEqual(md, p.Metadata) {
				t.Error("the config does not decode to the package metadata")
			}
			checkManifest(t, first, p.Metadata)
		})
	}
}

func loadArtifact(t *testing.T, path string, opts Options) *Artifact {
	t.Helper()
	p, err := Load(path, opts)
	must(t, err)
	a, err := p.Artifact()
	must(t, err)
	return a
}

// checkManifest checks the manifest against DESIGN.md, "Package artifact".
func checkManifest(t *testing.T, a *Artifact, md Metadata) {
	t.Helper()
	var m ocispec.Manifest
	must(t, json.Unmarshal(a.Manifest, &m))
	if m.SchemaVersion != 2 || m.MediaType != ocispec.MediaTypeImageManifest || m.ArtifactType != ArtifactType {
		t.Errorf("manifest header %d %s %s", m.SchemaVersion, m.MediaType, m.ArtifactType)
	}
	if !reflect.DeepEqual(m.Config, a.ConfigDesc) || m.Config.MediaType != ConfigMediaType || m.Config.Digest.Validate() != nil {
		t.Errorf("config descriptor %+v", m.Config)
	}
	if len(m.Layers) != 1 || !reflect.DeepEqual(m.Layers[0], a.ContentDesc) || m.Layers[0].MediaType != ContentMediaType ||
		m.Layers[0].Annotations[ocispec.AnnotationTitle] != ContentTitle(md.Name, md.Version) {
		t.Errorf("layers %+v", m.Layers)
	}
	if a.ManifestDesc.Size != int64(len(a.Manifest)) || a.ManifestDesc.ArtifactType != ArtifactType {
		t.Errorf("manifest descriptor %+v", a.ManifestDesc)
	}
	want := map[string]string{
		ocispec.AnnotationTitle:   md.Name,
		ocispec.AnnotationVersion: md.Version,
		AnnotationFormat:          string(md.Format),
	}
	for k, v := range want {
		if m.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, m.Annotations[k], v)
		}
	}
	if _, ok := m.Annotations[ocispec.AnnotationCreated]; ok != (md.Created != nil) {
		t.Errorf("created annotation %q with Created %v", m.Annotations[ocispec.AnnotationCreated], md.Created)
	}
	for k, v := range m.Annotations {
		if v == "" {
			t.Errorf("empty annotation %s", k)
		}
	}
}

func TestArtifactWithAnnotations(t *testing.T) {
	p, err := Load("testdata/hello-chart", Options{})
	must(t, err)
	plain, err := p.Artifact()
	must(t, err)
	extra := map[string]string{ocispec.AnnotationSource: "https://git.example.com/hello.git", ocispec.AnnotationRevision: "0123abc"}
	a, err := p.ArtifactWith(extra)
	must(t, err)
	checkManifest(t, a, p.Metadata)
	var m ocispec.Manifest
	must(t, json.Unmarshal(a.Manifest, &m))
	for k, v := range extra {
		if m.Annotations[k] != v || a.ManifestDesc.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, m.Annotations[k], v)
		}
	}
	if a.ManifestDesc.Digest == plain.ManifestDesc.Digest || a.ConfigDesc.Digest != plain.ConfigDesc.Digest || a.ContentDesc.Digest != plain.ContentDesc.Digest {
		t.Error("the annotations must change the manifest and nothing else")
	}
	for _, key := range []string{AnnotationFormat, ocispec.AnnotationTitle, ocispec.AnnotationVersion} {
		if _, err := p.ArtifactWith(map[string]string{key: "x"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), key) {
			t.Errorf("annotation %s replaced: %v", key, err)
		}
	}
}
