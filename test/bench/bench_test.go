package main

// These tests cover the harness's pure parts only. Nothing here starts a
// server or times anything: the harness itself runs with `make bench`.

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/pkgformat"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{9, 1, 8, 2, 7}, 7},
	} {
		in := slices.Clone(tc.in)
		if got := median(in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("median reordered its input: %v", in)
		}
	}
}

func TestRatio(t *testing.T) {
	for _, tc := range []struct {
		berth, upstream float64
		want            string
		meets           bool
	}{
		{412.3, 418.9, "0.98x", true},
		{150, 100, "1.50x", true},
		{0.9496, 1, "0.95x", true}, // the verdict follows the printed number
		{0.9449, 1, "0.94x", false},
		{80, 100, "0.80x", false},
		{1, 0, "-", false},
	} {
		if got := formatRatio(tc.berth, tc.upstream); got != tc.want {
			t.Errorf("formatRatio(%v, %v) = %q, want %q", tc.berth, tc.upstream, got, tc.want)
		}
		if got := meetsTarget(tc.berth, tc.upstream); got != tc.meets {
			t.Errorf("meetsTarget(%v, %v) = %v, want %v", tc.berth, tc.upstream, got, tc.meets)
		}
	}
}

func TestRunOrderAlternates(t *testing.T) {
	want := [][2]int{{0, 1}, {1, 0}, {0, 1}, {1, 0}}
	for rep, w := range want {
		if got := runOrder(rep); got != w {
			t.Errorf("runOrder(%d) = %v, want %v", rep, got, w)
		}
	}
}

func TestPrintTable(t *testing.T) {
	targets := [2]*target{{name: "berth"}, {name: "upstream"}}
	rows := []*row{
		{name: "64 MiB blob push", unit: "MB/s", samples: [2][]float64{{400, 420, 410}, {400, 400, 400}}},
		{name: "1000 packages pull (c=4)", unit: "packages/s", samples: [2][]float64{{90, 80, 85}, {100, 100, 100}}},
	}
	var out bytes.Buffer
	printTable(&out, "machine: test", targets, rows, true)
	want := `machine: test
row                        berth (median)    upstream (median)   berth/upstream
64 MiB blob push           410.0 MB/s        400.0 MB/s          1.02x
1000 packages pull (c=4)   85.0 packages/s   100.0 packages/s    0.85x  MISS
target: berth >= 0.95x upstream on every row (1 of 2 rows MISS)

samples, in run order:
64 MiB blob push           berth      400.0 420.0 410.0 MB/s
64 MiB blob push           upstream   400.0 400.0 400.0 MB/s
1000 packages pull (c=4)   berth      90.0 80.0 85.0 packages/s
1000 packages pull (c=4)   upstream   100.0 100.0 100.0 packages/s
`
	if got := out.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

func TestNewPackages(t *testing.T) {
	rnd := rand.NewChaCha8([32]byte{1})
	set := packageSet{prefix: "bench/run-1", count: 12, repos: 4, contentSize: 50 << 10}
	pkgs, err := newPackages(rnd, set)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != set.count {
		t.Fatalf("got %d packages, want %d", len(pkgs), set.count)
	}
	refs := map[string]bool{}
	versions := map[string]int{}
	contents := map[digest.Digest]bool{}
	for _, p := range pkgs {
		ref := p.repo + ":" + p.tag
		if refs[ref] {
			t.Errorf("%s made twice", ref)
		}
		refs[ref] = true
		versions[p.repo]++
		if !strings.HasPrefix(p.repo, set.prefix+"/pkg-") {
			t.Errorf("repository %s is not under %s", p.repo, set.prefix)
		}
		if len(p.content) != set.contentSize {
			t.Errorf("%s: content is %d bytes, want %d", ref, len(p.content), set.contentSize)
		}
		contents[p.contentDesc.Digest] = true
		for _, b := range []struct {
			data      []byte
			desc      ocispec.Descriptor
			mediaType string
		}{
			{p.config, p.configDesc, pkgformat.ConfigMediaType},
			{p.content, p.contentDesc, pkgformat.ContentMediaType},
			{p.manifest, p.manifestDesc, ocispec.MediaTypeImageManifest},
		} {
			if b.desc.Digest != digest.FromBytes(b.data) || b.desc.Size != int64(len(b.data)) || b.desc.MediaType != b.mediaType {
				t.Errorf("%s: descriptor %+v does not describe its %s", ref, b.desc, b.mediaType)
			}
		}

		var m ocispec.Manifest
		if err := json.Unmarshal(p.manifest, &m); err != nil {
			t.Fatal(err)
		}
		if m.ArtifactType != pkgformat.ArtifactType || m.Config.Digest != p.configDesc.Digest ||
			len(m.Layers) != 1 || m.Layers[0].Digest != p.contentDesc.Digest {
			t.Errorf("%s: manifest %s is not a package manifest of its blobs", ref, p.manifest)
		}
		var md pkgformat.Metadata
		if err := json.Unmarshal(p.config, &md); err != nil {
			t.Fatal(err)
		}
		if p.repo != set.prefix+"/"+md.Name || md.Version != p.tag {
			t.Errorf("%s: config names %s %s", ref, md.Name, md.Version)
		}
	}
	if len(versions) != set.repos {
		t.Errorf("packages spread over %d repositories, want %d", len(versions), set.repos)
	}
	for repo, n := range versions {
		if n != set.count/set.repos {
			t.Errorf("%s has %d versions, want %d", repo, n, set.count/set.repos)
		}
	}
	if len(contents) != set.count {
		t.Errorf("%d distinct contents among %d packages", len(contents), set.count)
	}
}

func TestServerEnv(t *testing.T) {
	got := serverEnv([]string{"PATH=/bin", "BERTH_LOG_LEVEL=debug", "REGISTRY_LOG_LEVEL=debug", "OTEL_EXPORTER_OTLP_ENDPOINT=http://example.com", "HOME=/root"})
	want := []string{"PATH=/bin", "HOME=/root", "OTEL_TRACES_EXPORTER=none"}
	if !slices.Equal(got, want) {
		t.Errorf("serverEnv = %q, want %q", got, want)
	}
}

func TestModuleVersion(t *testing.T) {
	dep := &debug.BuildInfo{Main: debug.Module{Path: "github.com/berth-registry/berth"},
		Deps: []*debug.Module{{Path: "golang.org/x/sync", Version: "v0.1.0"}, {Path: distributionModule, Version: "v3.1.2"}}}
	own := &debug.BuildInfo{Main: debug.Module{Path: distributionModule, Version: "v3.1.2"}}
	none := &debug.BuildInfo{Main: debug.Module{Path: "example.com/other"}}
	for _, tc := range []struct {
		info *debug.BuildInfo
		want string
	}{{dep, "v3.1.2"}, {own, "v3.1.2"}, {none, ""}} {
		if got := moduleVersion(tc.info, distributionModule); got != tc.want {
			t.Errorf("moduleVersion(%s) = %q, want %q", tc.info.Main.Path, got, tc.want)
		}
	}
}
