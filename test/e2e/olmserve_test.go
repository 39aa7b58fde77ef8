package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// TestOLMCatalogImageServesWithOpm extracts berth's catalog image of a
// namespace as a Kubernetes image volume mounts it and runs the real
// opm serve over its /configs, as the catalog Deployment of docs/olm.md
// and of the UI's OLM v0 snippet does. opm builds its serving cache from
// the content and is ready to serve (--cache-only stops there, before
// opening a port on every interface). OLM v0's extractContent, with
// cacheDir naming a directory the image lacks, cannot start: its copy
// has no cache to copy, and opm serve over an empty cache directory dies
// with "integrity check failed".
func TestOLMCatalogImageServesWithOpm(t *testing.T) {
	opm := newOpm(t)
	const ns = "served"
	s := startServer(t, "")
	berth(t, "", "push", filepath.Join(fixtures, "olm-community", "cockroachdb", "5.0.4"), s.addr+"/"+ns+"/cockroachdb")
	digest := steadyCatalog(t, s, ns)

	root := t.TempDir()
	var m ocispec.Manifest
	registryJSON(t, s, "/v2/"+ns+"/olm/catalog/manifests/"+digest, &m)
	for _, l := range m.Layers {
		code, body := s.get(t, "/v2/"+ns+"/olm/catalog/blobs/"+l.Digest.String())
		if code != http.StatusOK {
			t.Fatalf("GET the layer %s: %d", l.Digest, code)
		}
		extractLayer(t, []byte(body), root)
	}
	configs := filepath.Join(root, "configs")
	if _, err := os.Stat(filepath.Join(configs, "cockroachdb", "catalog.json")); err != nil {
		t.Fatalf("the image has no configs/cockroachdb/catalog.json: %v", err)
	}

	doc := string(readFile(t, filepath.Join("..", "..", "docs", "olm.md")))
	for _, line := range []string{"args: [serve, /catalog/configs]", "mountPath: /catalog", "reference: berth.example.com/community/olm/catalog:latest"} {
		if !strings.Contains(doc, line) {
			t.Errorf("docs/olm.md's catalog Deployment has no %q: this test runs what it runs", line)
		}
	}
	log := "--termination-log=" + filepath.Join(root, "termination-log")
	if r := runWith(t, command{env: opm.env}, opm.bin, "serve", configs, "--cache-only", "--pprof-addr=", log); r.code != 0 {
		t.Errorf("opm serve %s: exit %d\n%s%s", configs, r.code, r.stdout, r.stderr)
	}

	if _, err := os.Stat(filepath.Join(root, "tmp", "cache")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the image holds /tmp/cache (%v); extractContent's copy of it is what this test says fails", err)
	}
	empty := t.TempDir()
	r := runWith(t, command{env: opm.env}, opm.bin, "serve", configs, "--cache-dir="+empty, "--pprof-addr=", log)
	if r.code == 0 || !strings.Contains(r.stderr+r.stdout, "integrity check failed") {
		t.Errorf("opm serve --cache-dir over an empty directory: exit %d, want it to die with \"integrity check failed\"\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// extractLayer unpacks a gzipped tar layer into root, as a container
// runtime does.
func extractLayer(t *testing.T, layer []byte, root string) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(layer))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if !filepath.IsLocal(hdr.Name) {
			t.Fatalf("layer entry %q leaves the root", hdr.Name)
		}
		dst := filepath.Join(root, hdr.Name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(dst, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
				var data []byte
				if data, err = io.ReadAll(tr); err == nil {
					err = os.WriteFile(dst, data, 0o644)
				}
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
