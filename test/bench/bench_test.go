package main

// These tests cover the harness's pure parts only. Nothing here starts a
// server or times anything: the harness itself runs with `make bench`.

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/test/bench/internal/floor"
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
		num, den float64
		percent  int
		want     string
		meets    bool
	}{
		{412.3, 418.9, 95, "0.98x", true},
		{150, 100, 95, "1.50x", true},
		{0.9496, 1, 95, "0.95x", true}, // the verdict follows the printed number
		{0.9449, 1, 95, "0.94x", false},
		{80, 100, 95, "0.80x", false},
		{1.1951, 1, 120, "1.20x", true},
		{1.1949, 1, 120, "1.19x", false},
		{0.9951, 1, 100, "1.00x", true},
		{0.9949, 1, 100, "0.99x", false},
		{1, 0, 95, "-", false},
		{0, 1, 95, "-", false},
	} {
		if got := formatRatio(tc.num, tc.den); got != tc.want {
			t.Errorf("formatRatio(%v, %v) = %q, want %q", tc.num, tc.den, got, tc.want)
		}
		if got := meetsTarget(tc.num, tc.den, tc.percent); got != tc.meets {
			t.Errorf("meetsTarget(%v, %v, %d) = %v, want %v", tc.num, tc.den, tc.percent, got, tc.meets)
		}
	}
}

func TestRowTarget(t *testing.T) {
	for _, tc := range []struct {
		kind                 rowKind
		berth, upstream, zot float64 // zot 0: skipped
		meets                bool
	}{
		// Package and mixed rows: berth/zot >= 1.20x, whatever upstream.
		{packageRow, 120, 200, 100, true},
		{packageRow, 119.4, 50, 100, false},
		{packageRow, 119.5, 50, 100, true}, // prints 1.20x
		// Without zot: berth/upstream >= 0.95x.
		{packageRow, 95, 100, 0, true},
		{packageRow, 94, 100, 0, false},
		// Blob rows: berth >= 1.00x the better of upstream and zot.
		{blobRow, 100, 100, 90, true},
		{blobRow, 100, 90, 100, true},
		{blobRow, 99, 100, 90, false},
		{blobRow, 99, 90, 100, false},
		{blobRow, 99.6, 90, 100, true}, // prints 1.00x
		{blobRow, 100, 100, 0, true},
		{blobRow, 98, 100, 0, false},
		// berth without samples misses.
		{blobRow, 0, 100, 100, false},
		{packageRow, 0, 100, 100, false},
	} {
		if got := meetsRowTarget(tc.kind, tc.berth, tc.upstream, tc.zot); got != tc.meets {
			t.Errorf("meetsRowTarget(%v, berth %v, upstream %v, zot %v) = %v, want %v", tc.kind, tc.berth, tc.upstream, tc.zot, got, tc.meets)
		}
	}
}

func TestRunOrder(t *testing.T) {
	// Two targets alternate which goes first: ABBA.
	for rep, w := range [][]int{{0, 1}, {1, 0}, {0, 1}, {1, 0}} {
		if got := runOrder(rep, 2); !slices.Equal(got, w) {
			t.Errorf("runOrder(%d, 2) = %v, want %v", rep, got, w)
		}
	}
	// Over any n runs in a row, each of n targets takes each place once.
	for n := 1; n <= 5; n++ {
		for first := range 2 * n {
			seen := make([][]bool, n) // place, target
			for i := range seen {
				seen[i] = make([]bool, n)
			}
			for rep := first; rep < first+n; rep++ {
				order := runOrder(rep, n)
				if len(order) != n {
					t.Fatalf("runOrder(%d, %d) = %v", rep, n, order)
				}
				for place, target := range order {
					if target < 0 || target >= n || seen[place][target] {
						t.Fatalf("runs %d..%d of %d targets: target %d at place %d twice, or out of range (run %d: %v)", first, first+n-1, n, target, place, rep, order)
					}
					seen[place][target] = true
				}
			}
		}
	}
}

func TestMixedSchedule(t *testing.T) {
	// Every fifth operation a push: 20%.
	for _, tc := range []struct{ n, pulled, pushes int }{{300, 300, 60}, {30, 30, 6}, {7, 7, 1}, {12, 5, 2}, {4, 4, 0}} {
		ops := mixedSchedule(tc.n, tc.pulled)
		if len(ops) != tc.n {
			t.Fatalf("mixedSchedule(%d, %d): %d operations", tc.n, tc.pulled, len(ops))
		}
		pushes, pulls := 0, 0
		for i, op := range ops {
			if op.push {
				if op.index != pushes {
					t.Errorf("mixedSchedule(%d, %d)[%d]: push of fresh package %d, want %d", tc.n, tc.pulled, i, op.index, pushes)
				}
				pushes++
				continue
			}
			if op.index != pulls%tc.pulled {
				t.Errorf("mixedSchedule(%d, %d)[%d]: pull of package %d, want %d", tc.n, tc.pulled, i, op.index, pulls%tc.pulled)
			}
			pulls++
		}
		if pushes != tc.pushes || pulls != tc.n-tc.pushes || tc.n/mixedEvery != tc.pushes {
			t.Errorf("mixedSchedule(%d, %d): %d pushes and %d pulls, want %d and %d", tc.n, tc.pulled, pushes, pulls, tc.pushes, tc.n-tc.pushes)
		}
		// 80/20 throughout: one push in every five operations.
		for i := 0; i+mixedEvery <= tc.n; i += mixedEvery {
			in := 0
			for _, op := range ops[i : i+mixedEvery] {
				if op.push {
					in++
				}
			}
			if in != 1 {
				t.Errorf("mixedSchedule(%d, %d)[%d:%d]: %d pushes, want 1", tc.n, tc.pulled, i, i+mixedEvery, in)
			}
		}
	}
}

func TestPrintTable(t *testing.T) {
	rows := func(n int, samples ...[]float64) []*row {
		r := []*row{
			newRow("64 MiB blob push", "MB/s", blobRow, n),
			newRow("64 MiB blob pull", "MB/s", blobRow, n),
			newRow("300 packages push (c=8)", "packages/s", packageRow, n),
			newRow("mixed 80% pull / 20% push (c=8)", "ops/s", packageRow, n),
		}
		for i, s := range samples {
			r[i/n].samples[i%n] = s
		}
		return r
	}
	targets := []*target{{name: "berth"}, {name: "upstream"}, {name: "zot"}, {name: "floor"}}
	all := rows(4,
		[]float64{400, 420, 410}, []float64{400, 400, 400}, []float64{380, 390, 385}, nil,
		[]float64{900, 910, 905}, []float64{920, 920, 920}, []float64{800, 800, 800}, []float64{1800, 1810, 1805},
		[]float64{240, 250, 245}, []float64{160, 170, 165}, []float64{200, 200, 200}, nil,
		[]float64{300, 310, 305}, []float64{250, 250, 250}, []float64{250, 250, 250}, nil,
	)
	var out bytes.Buffer
	printTable(&out, peerTable("machine: test", targets, lineup{berth: 0, upstream: 1, zot: 2, floor: 3}, all), true)
	want := `machine: test
row                               berth (median)     upstream (median)   zot (median)       floor (median)   berth/upstream   berth/zot   berth/floor   result
64 MiB blob push                  410.0 MB/s         400.0 MB/s          385.0 MB/s         -                1.02x            1.06x       -             met
64 MiB blob pull                  905.0 MB/s         920.0 MB/s          800.0 MB/s         1805.0 MB/s      0.98x            1.13x       0.50x         MISS
300 packages push (c=8)           245.0 packages/s   165.0 packages/s    200.0 packages/s   -                1.48x            1.23x       -             met
mixed 80% pull / 20% push (c=8)   305.0 ops/s        250.0 ops/s         250.0 ops/s        -                1.22x            1.22x       -             met
target: package and mixed rows berth/zot >= 1.20x, blob rows berth >= 1.00x max(upstream, zot); berth/floor has none (1 of 4 rows MISS)

samples, in run order:
64 MiB blob push                  berth      400.0 420.0 410.0 MB/s
64 MiB blob push                  upstream   400.0 400.0 400.0 MB/s
64 MiB blob push                  zot        380.0 390.0 385.0 MB/s
64 MiB blob pull                  berth      900.0 910.0 905.0 MB/s
64 MiB blob pull                  upstream   920.0 920.0 920.0 MB/s
64 MiB blob pull                  zot        800.0 800.0 800.0 MB/s
64 MiB blob pull                  floor      1800.0 1810.0 1805.0 MB/s
300 packages push (c=8)           berth      240.0 250.0 245.0 packages/s
300 packages push (c=8)           upstream   160.0 170.0 165.0 packages/s
300 packages push (c=8)           zot        200.0 200.0 200.0 packages/s
mixed 80% pull / 20% push (c=8)   berth      300.0 310.0 305.0 ops/s
mixed 80% pull / 20% push (c=8)   upstream   250.0 250.0 250.0 ops/s
mixed 80% pull / 20% push (c=8)   zot        250.0 250.0 250.0 ops/s
`
	if got := out.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}

	// zot skipped: no zot column, and the package rows' target falls back
	// to berth/upstream >= 0.95x.
	noZot := rows(3,
		[]float64{410}, []float64{400}, nil,
		[]float64{905}, []float64{920}, []float64{1805},
		[]float64{157}, []float64{165}, nil,
		[]float64{230}, []float64{250}, nil,
	)
	out.Reset()
	printTable(&out, peerTable("machine: test", []*target{targets[0], targets[1], targets[3]}, lineup{berth: 0, upstream: 1, zot: -1, floor: 2}, noZot), false)
	want = `machine: test
row                               berth (median)     upstream (median)   floor (median)   berth/upstream   berth/floor   result
64 MiB blob push                  410.0 MB/s         400.0 MB/s          -                1.02x            -             met
64 MiB blob pull                  905.0 MB/s         920.0 MB/s          1805.0 MB/s      0.98x            0.50x         MISS
300 packages push (c=8)           157.0 packages/s   165.0 packages/s    -                0.95x            -             met
mixed 80% pull / 20% push (c=8)   230.0 ops/s        250.0 ops/s         -                0.92x            -             MISS
target (zot skipped): package and mixed rows berth/upstream >= 0.95x, blob rows berth >= 1.00x upstream; berth/floor has none (2 of 4 rows MISS)
`
	if got := out.String(); got != want {
		t.Errorf("table without zot:\n%s\nwant:\n%s", got, want)
	}

	auth := []*target{{name: "berth+auth"}, {name: "berth"}}
	authRows := []*row{
		newRow("300 packages push (c=1)", "packages/s", packageRow, 2),
		newRow("300 packages pull (c=1)", "packages/s", packageRow, 2),
	}
	authRows[0].samples = [][]float64{{90, 80, 85}, {100, 100, 100}}
	authRows[1].samples = [][]float64{{99}, {100}}
	out.Reset()
	printTable(&out, authTable(auth, authRows), false)
	want = `auth on against auth off (berth+auth: htpasswd user, bcrypt cost 10, token flow with oras-go's token cache)
row                       berth+auth (median)   berth (median)     berth+auth/berth   result
300 packages push (c=1)   85.0 packages/s       100.0 packages/s   0.85x              MISS
300 packages pull (c=1)   99.0 packages/s       100.0 packages/s   0.99x              met
target: berth+auth >= 0.95x berth on every row (1 of 2 rows MISS)
`
	if got := out.String(); got != want {
		t.Errorf("auth table:\n%s\nwant:\n%s", got, want)
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

func TestNewPackagesOffset(t *testing.T) {
	rnd := rand.NewChaCha8([32]byte{2})
	base := packageSet{prefix: "bench/run-1-c8", count: 12, repos: 4, contentSize: 1 << 10}
	first, err := newPackages(rnd, base)
	if err != nil {
		t.Fatal(err)
	}
	more := base
	more.count, more.offset = base.count/mixedEvery, base.count
	fresh, err := newPackages(rnd, more)
	if err != nil {
		t.Fatal(err)
	}
	repos, refs := map[string]bool{}, map[string]bool{}
	for _, p := range first {
		repos[p.repo] = true
		refs[p.repo+":"+p.tag] = true
	}
	for _, p := range fresh {
		ref := p.repo + ":" + p.tag
		if !repos[p.repo] {
			t.Errorf("%s: a repository the first set does not use", ref)
		}
		if refs[ref] {
			t.Errorf("%s: made twice", ref)
		}
		refs[ref] = true
	}
	if want := []string{"bench/run-1-c8/pkg-0001:1.0.3", "bench/run-1-c8/pkg-0002:1.0.3"}; fresh[0].repo+":"+fresh[0].tag != want[0] || fresh[1].repo+":"+fresh[1].tag != want[1] {
		t.Errorf("fresh packages start with %s:%s, %s:%s, want %q", fresh[0].repo, fresh[0].tag, fresh[1].repo, fresh[1].tag, want)
	}
}

func TestParseZotVersion(t *testing.T) {
	for _, tc := range []struct{ out, want string }{
		{`{"time":"2026-11-23T22:17:57Z","level":"info","message":"version","distribution-spec":"1.1.1","commit":"v2.1.20-0-g3b5796d8","binary-type":"minimal","go version":"go1.26.8"}` + "\n", "v2.1.20-0-g3b5796d8, minimal"},
		{`{"level":"info","message":"version","commit":"v2.1.20-0-g3b5796d8","binary-type":""}`, "v2.1.20-0-g3b5796d8"},
		// Built with go build, without zot's Makefile's -ldflags.
		{`{"level":"info","message":"version","distribution-spec":"1.1.1","commit":"","binary-type":"","go version":""}`, ""},
		{"Error: unknown flag: --version\n", ""},
		{"", ""},
	} {
		if got := parseZotVersion([]byte(tc.out)); got != tc.want {
			t.Errorf("parseZotVersion(%q) = %q, want %q", tc.out, got, tc.want)
		}
	}
}

func TestZotConfig(t *testing.T) {
	b, err := zotConfig("/tmp/bench/zot/data", "127.0.0.1:41234")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		DistSpecVersion string
		Storage         map[string]any
		HTTP            map[string]any
		Log             map[string]any
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if c.DistSpecVersion != "1.1.1" ||
		len(c.Storage) != 2 || c.Storage["rootDirectory"] != "/tmp/bench/zot/data" || c.Storage["commit"] != true ||
		len(c.HTTP) != 2 || c.HTTP["address"] != "127.0.0.1" || c.HTTP["port"] != "41234" ||
		len(c.Log) != 1 || c.Log["level"] != "error" {
		t.Errorf("zot config:\n%s", b)
	}
}

// TestFloorServesPulls pulls through oras-go, as the pull rows do, from
// the floor's handler serving what the harness writes into its store.
func TestFloorServesPulls(t *testing.T) {
	dir := t.TempDir()
	store, err := floor.NewStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	srv := httptest.NewServer(floor.Handler(root))
	defer srv.Close()
	ft := newTarget("floor", srv.Listener.Addr().String())
	ft.store = store

	pkgs, err := newPackages(rand.NewChaCha8([32]byte{3}), packageSet{prefix: "bench/run-1-c8", count: 6, repos: 2, contentSize: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := ft.put(pkgs); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := pullRound(ctx, ft, pkgs, 2); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 1<<20)
	rand.NewChaCha8([32]byte{4}).Read(data)
	desc := descriptor("application/octet-stream", data)
	if err := store.PutBlob(desc.Digest, data); err != nil {
		t.Fatal(err)
	}
	if _, err := blobPull(ctx, ft, desc); err != nil {
		t.Fatal(err)
	}
	missing := pkgs[0]
	missing.tag = "9.9.9"
	if err := pullPackage(ctx, ft.repository(missing.repo), &missing); err == nil {
		t.Error("pulled a tag the floor does not hold")
	}
}
