package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"

	"github.com/berth-registry/berth/client/registrytest"
	"github.com/berth-registry/berth/pkgformat"
)

// controlNames are file names with a C0 or C1 control character or DEL, and
// how berth quotes each in an error.
var controlNames = []struct{ label, name, quoted string }{
	{"ESC", "templates/\x1b[2Jx.yaml", `"templates/\x1b[2Jx.yaml"`},
	{"BEL", "a\ab.yaml", `"a\ab.yaml"`},
	{"tab", "a\tb.yaml", `"a\tb.yaml"`},
	{"newline", "a\nb.yaml", `"a\nb.yaml"`},
	{"DEL", "a\x7fb.yaml", `"a\x7fb.yaml"`},
	{"NEL (U+0085)", "a\u0085b.yaml", `"a\u0085b.yaml"`},
	{"CSI (U+009B)", "a\u009b2Jb.yaml", `"a\u009b2Jb.yaml"`},
}

// controlRule is the end of the rule the errors name.
const controlRule = "(C0, DEL and C1 control characters are not allowed): invalid package"

// TestPackageRefusesControlCharacters: berth package of a folder holding
// a file whose name has a control character fails, naming it, and writes
// no tarball.
func TestPackageRefusesControlCharacters(t *testing.T) {
	for _, tc := range controlNames {
		t.Run(tc.label, func(t *testing.T) {
			dir := setup(t)
			chart := writeChart(t, dir, "demo", "1.0.0")
			writeFiles(t, chart, map[string]string{tc.name: "x"})
			code, stdout, stderr := berth(t, "package", chart, "-o", "demo.tgz")
			if code == 0 || !strings.Contains(stderr, tc.quoted+": path contains the control character") || !strings.Contains(stderr, controlRule) {
				t.Errorf("berth package: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
			}
			if _, err := os.Stat("demo.tgz"); err == nil {
				t.Error("berth package wrote demo.tgz")
			}
		})
	}
}

// TestPullRefusesControlCharacters: a package whose content holds a path
// with a control character, pushed by a tool other than berth, is refused
// by berth pull, which writes nothing. With berth's config the metadata
// comes from the config and extraction refuses it; with the empty config it
// comes from the content, which is refused before.
func TestPullRefusesControlCharacters(t *testing.T) {
	setup(t)
	host := registrytest.New(t, nil)
	ctx := context.Background()
	configs := []struct {
		mediaType string
		data      []byte
	}{
		{pkgformat.ConfigMediaType, []byte(`{"schemaVersion":1,"name":"demo","version":"1.0.0","format":"helm"}`)},
		{ocispec.MediaTypeEmptyJSON, []byte("{}")},
	}
	for _, tc := range controlNames {
		for _, cfg := range configs {
			t.Run(tc.label+" "+cfg.mediaType, func(t *testing.T) {
				repo := orasRepo(host, "charts/demo")
				content := hostileTarball(t, map[string]string{
					"Chart.yaml": "apiVersion: v2\nname: demo\nversion: 1.0.0\n",
					tc.name:      "x",
				})
				configDesc := pushBlob(t, repo, cfg.mediaType, cfg.data)
				layer := pushBlob(t, repo, pkgformat.ContentMediaType, content)
				m, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, pkgformat.ArtifactType,
					oras.PackManifestOptions{ConfigDescriptor: &configDesc, Layers: []ocispec.Descriptor{layer}})
				if err != nil {
					t.Fatal(err)
				}
				if err := repo.Tag(ctx, m, "1.0.0"); err != nil {
					t.Fatal(err)
				}
				out := filepath.Join(t.TempDir(), "out")
				code, stdout, stderr := berth(t, "pull", host+"/charts/demo:1.0.0", "-o", out)
				if code == 0 || !strings.Contains(stderr, tc.quoted+": path contains the control character") || !strings.Contains(stderr, controlRule) {
					t.Errorf("berth pull: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
				}
				if _, err := os.Lstat(out); err == nil {
					t.Errorf("berth pull created %s", out)
				}
			})
		}
	}
}

// pushBlob pushes data to repo and returns its descriptor.
func pushBlob(t *testing.T, repo oras.Target, mediaType string, data []byte) ocispec.Descriptor {
	t.Helper()
	desc := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}
	if err := repo.Push(context.Background(), desc, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	return desc
}

// hostileTarball is a gzipped tar of files written as they are, with no
// check of their names.
func hostileTarball(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
