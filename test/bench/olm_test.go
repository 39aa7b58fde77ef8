package main

// Tests of the OLM catalog benchmarks' pure parts: the corpus, the full
// rebuild and an update in process at a tiny scale, and the checks and
// rows of the served image. Nothing here starts a server or times anything.

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/olm"
	"github.com/berth-registry/berth/pkgformat"
)

func TestOLMCorpus(t *testing.T) {
	for _, tc := range []struct{ packages, versions int }{
		{1, 1}, {1, 10}, {20, 20}, {20, 70}, {20, 200}, {7, 33},
	} {
		c := newOLMCorpus(3, tc.packages, tc.versions, "operators")
		if len(c.packages) != tc.packages || c.versions != tc.versions {
			t.Errorf("%d/%d: planned %d packages, %d versions", tc.packages, tc.versions, len(c.packages), c.versions)
		}
		total := 0
		names := map[string]bool{}
		for _, p := range c.packages {
			total += p.versions
			if p.format != pkgformat.OLM || p.namespace != "operators" || len(p.channels) == 0 {
				t.Errorf("%d/%d: %s is %s in %q with channels %v, want OLM in operators with channels", tc.packages, tc.versions, p.name, p.format, p.namespace, p.channels)
			}
			if p.versions < 1 || p.versions > maxOLMVersions {
				t.Errorf("%d/%d: %s has %d versions", tc.packages, tc.versions, p.name, p.versions)
			}
			if names[p.name] {
				t.Errorf("%d/%d: name %s twice", tc.packages, tc.versions, p.name)
			}
			names[p.name] = true
		}
		if total != c.versions {
			t.Errorf("%d/%d: the packages hold %d versions, the corpus says %d", tc.packages, tc.versions, total, c.versions)
		}
	}
	if a, b := newOLMCorpus(3, 20, 70, "operators"), newOLMCorpus(3, 20, 70, "operators"); !reflect.DeepEqual(a, b) {
		t.Error("two OLM corpora from the same seed differ")
	}
}

func TestOLMCorpusBuilds(t *testing.T) {
	c := newOLMCorpus(1, 12, 45, "operators")
	for i := range c.packages {
		p := &c.packages[i]
		pkgs, err := p.build()
		if err != nil {
			t.Fatal(err)
		}
		if len(pkgs) != p.versions {
			t.Errorf("%s: built %d versions, want %d", p.name, len(pkgs), p.versions)
		}
		head := pkgs[len(pkgs)-1]
		next, err := p.nextVersion()
		if err != nil {
			t.Fatal(err)
		}
		md := next.Metadata
		if md.Format != pkgformat.OLM || md.Name != p.name || md.CSVName == "" {
			t.Errorf("%s: next version read back as %s %s, CSV %q", p.name, md.Name, md.Format, md.CSVName)
		}
		for _, v := range pkgs {
			if v.Metadata.Version == md.Version || v.Metadata.CSVName == md.CSVName {
				t.Errorf("%s: next version %s (%s) is already version %s", p.name, md.Version, md.CSVName, v.Metadata.Version)
			}
		}
		var channels []string
		for _, ch := range md.Channels {
			channels = append(channels, ch.Name)
			if ch.Replaces != head.Metadata.CSVName {
				t.Errorf("%s: next version replaces %q in %s, want the head %q", p.name, ch.Replaces, ch.Name, head.Metadata.CSVName)
			}
		}
		if want := slices.Sorted(slices.Values(p.channels)); !slices.Equal(slices.Sorted(slices.Values(channels)), want) {
			t.Errorf("%s: next version is in channels %v, want all of %v", p.name, channels, p.channels)
		}
	}
}

func TestPushTargets(t *testing.T) {
	for _, tc := range []struct{ packages, n int }{{10, 10}, {10, 3}, {5000, 50}, {1, 1}} {
		c := &corpus{packages: make([]pkgSpec, tc.packages)}
		got := pushTargets(c, tc.n)
		if len(got) != tc.n || got[0] != 0 || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != tc.n || got[tc.n-1] >= tc.packages {
			t.Errorf("pushTargets(%d packages, %d) = %v, want %d different indexes from 0, in range", tc.packages, tc.n, got, tc.n)
		}
	}
}

func TestOLMOptionsValidate(t *testing.T) {
	good := olmOptions{packages: 5000, versions: 25_000, pushes: 50, runs: 3, loadWorkers: 4}
	for _, tc := range []struct {
		change func(*olmOptions)
		want   string // "" for valid
	}{
		{func(*olmOptions) {}, ""},
		{func(o *olmOptions) { o.packages, o.versions, o.pushes = 1, 10, 1 }, ""},
		{func(o *olmOptions) { o.pushes = 0 }, "-olm-pushes must be at least 1"},
		{func(o *olmOptions) { o.runs = 0 }, "-olm-runs must be at least 1"},
		{func(o *olmOptions) { o.versions = 4999 }, "-olm-versions must be between -olm-packages and 10 times it"},
		{func(o *olmOptions) { o.versions = 50_001 }, "-olm-versions must be between"},
		{func(o *olmOptions) { o.packages, o.versions = 20, 40 }, "-olm-pushes must not exceed -olm-packages"},
	} {
		o := good
		tc.change(&o)
		err := o.validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", o, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: error %v, want one containing %q", o, err, tc.want)
		}
	}
}

// manifestOf reads the catalog manifest the registry's tag names.
func manifestOf(t *testing.T, reg *memRegistry, namespace string) (ocispec.Descriptor, ocispec.Manifest) {
	t.Helper()
	repo := olm.CatalogRepository(namespace)
	desc, ok := reg.tags[repo+":"+olm.CatalogTag]
	if !ok {
		t.Fatalf("no %s:%s", repo, olm.CatalogTag)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(reg.manifests[repo+"@"+desc.Digest.String()], &m); err != nil {
		t.Fatal(err)
	}
	return desc, m
}

// TestRebuildAndUpdateInProcess runs the full rebuild at a tiny scale, then
// an update as berth serve makes it, and checks the update as the
// benchmark checks the served one.
func TestRebuildAndUpdateInProcess(t *testing.T) {
	ctx := context.Background()
	const ns, host = "operators", "registry.test:5000"
	c := newOLMCorpus(1, 12, 40, ns)
	src, err := buildOLMSource(ctx, c, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(src.versions) != 12 {
		t.Fatalf("source holds %d packages, want 12", len(src.versions))
	}
	full, err := fullRebuild(ctx, src, host)
	if err != nil {
		t.Fatal(err)
	}
	if full.blobs < 2 || full.blobs > 13 {
		t.Errorf("full rebuild pushed %d blobs, want a config and a layer per shard: 1 to 12 for 12 packages", full.blobs)
	}
	again, err := fullRebuild(ctx, src, host)
	if err != nil {
		t.Fatal(err)
	}
	if again != (rebuildResult{took: again.took, digest: full.digest, bytes: full.bytes, blobs: full.blobs}) {
		t.Errorf("two full rebuilds of the same source differ: %+v and %+v", full, again)
	}

	// The publisher of berth serve, in process: everything once, then one
	// package's new version.
	reg := newMemRegistry()
	pub, err := olm.NewPublisher(olm.PublisherOptions{Source: src, Registry: reg, Host: host})
	if err != nil {
		t.Fatal(err)
	}
	for name := range src.versions {
		pub.Changed(ns, name)
	}
	if err := pub.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	prevDesc, prev := manifestOf(t, reg, ns)
	if prevDesc.Digest != full.digest {
		t.Errorf("the publisher's first image is %s, the full rebuild's %s", prevDesc.Digest, full.digest)
	}
	before, _ := reg.counts()
	if before != full.bytes {
		t.Errorf("the publisher's first image pushed %d bytes, the full rebuild %d", before, full.bytes)
	}
	push, err := buildPushes(c, 1)
	if err != nil {
		t.Fatal(err)
	}
	p := push[0]
	src.versions[p.spec.name] = append(src.versions[p.spec.name], p.version)
	pub.Changed(ns, p.spec.name)
	if err := pub.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	nextDesc, next := manifestOf(t, reg, ns)
	layer, err := changedLayer(prev, next)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := reg.counts()
	if want := layer.Size + next.Config.Size + nextDesc.Size; after-before != want {
		t.Errorf("the update pushed %d bytes, want the layer, config and manifest: %d", after-before, want)
	}
	data := reg.blobs[olm.CatalogRepository(ns)+"@"+layer.Digest.String()]
	fbc, err := layerFBC(data, p.spec.name)
	if err != nil {
		t.Fatal(err)
	}
	got, err := checkFBC(fbc, ns, p.spec.name, p.pkg.Metadata.CSVName, replacesByChannel(p))
	if err != nil || got != host {
		t.Errorf("checkFBC of the updated layer = %q, %v; want %q", got, err, host)
	}

	// The full rebuild of the namespace after the push is the same image.
	withPush, err := buildOLMSource(ctx, c, map[string]olm.Version{p.spec.name: p.version}, 2)
	if err != nil {
		t.Fatal(err)
	}
	r, err := fullRebuild(ctx, withPush, host)
	if err != nil {
		t.Fatal(err)
	}
	if r.digest != nextDesc.Digest {
		t.Errorf("full rebuild after the push gave %s, the update %s", r.digest, nextDesc.Digest)
	}
}

func TestMemRegistryRefusesMismatchedBytes(t *testing.T) {
	ctx := context.Background()
	reg := newMemRegistry()
	data := []byte("layer")
	desc := ocispec.Descriptor{Digest: digest.FromBytes(data), Size: int64(len(data))}
	for _, tc := range []struct {
		name string
		desc ocispec.Descriptor
		want string
	}{
		{"size", ocispec.Descriptor{Digest: desc.Digest, Size: 4}, "5 bytes, descriptor says 4"},
		{"digest", ocispec.Descriptor{Digest: digest.FromString("other"), Size: 5}, "bytes digest to " + desc.Digest.String()},
	} {
		if err := reg.PushBlob(ctx, "r", olm.Blob{Descriptor: tc.desc, Data: data}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: PushBlob error %v, want one containing %q", tc.name, err, tc.want)
		}
		if err := reg.PushManifest(ctx, "r", "latest", tc.desc, data); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: PushManifest error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if n, blobs := reg.counts(); n != 0 || blobs != 0 {
		t.Errorf("refused pushes counted: %d bytes, %d blobs", n, blobs)
	}
}

func layerDesc(s string) ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayerGzip, Digest: digest.FromString(s), Size: int64(len(s))}
}

func TestChangedLayer(t *testing.T) {
	a, b, c, d := layerDesc("a"), layerDesc("b"), layerDesc("c"), layerDesc("d")
	prev := ocispec.Manifest{Layers: []ocispec.Descriptor{a, b, c}}
	for _, tc := range []struct {
		name   string
		layers []ocispec.Descriptor
		want   ocispec.Descriptor
		err    string
	}{
		{"one changed", []ocispec.Descriptor{a, d, c}, d, ""},
		{"none changed", []ocispec.Descriptor{a, b, c}, ocispec.Descriptor{}, "0 layers changed, want 1"},
		{"two changed", []ocispec.Descriptor{d, layerDesc("e"), c}, ocispec.Descriptor{}, "2 layers changed, want 1"},
		{"one added", []ocispec.Descriptor{a, b, c, d}, ocispec.Descriptor{}, "the new image has 4 layers, the one before 3"},
	} {
		got, err := changedLayer(prev, ocispec.Manifest{Layers: tc.layers})
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || got.Digest != tc.want.Digest {
			t.Errorf("%s: %v, %v; want %s", tc.name, got.Digest, err, tc.want.Digest)
		}
	}
}

func TestLayerFBC(t *testing.T) {
	var buf bytes.Buffer
	if err := pkgformat.WriteArchive(&buf, []pkgformat.File{
		file("configs/other/catalog.json", "other"), file("configs/etcd/catalog.json", "etcd fbc"),
	}); err != nil {
		t.Fatal(err)
	}
	layer := buf.Bytes()
	if got, err := layerFBC(layer, "etcd"); err != nil || string(got) != "etcd fbc" {
		t.Errorf("layerFBC(etcd) = %q, %v", got, err)
	}
	if _, err := layerFBC(layer, "redis"); err == nil || err.Error() != "no configs/redis/catalog.json in the layer" {
		t.Errorf("layerFBC(redis) error %v, want it to name the missing file", err)
	}
	if _, err := layerFBC([]byte("not gzip"), "etcd"); err == nil {
		t.Error("layerFBC of bytes that are not gzip: no error")
	}
}

func TestCheckFBC(t *testing.T) {
	const (
		pkg    = `{"schema":"olm.package","name":"etcd","defaultChannel":"stable"}`
		stable = `{"schema":"olm.channel","name":"stable","package":"etcd","entries":[{"name":"etcd.v1.0.0"},{"name":"etcd.v1.1.0","replaces":"etcd.v1.0.0"}]}`
		alpha  = `{"schema":"olm.channel","name":"alpha","package":"etcd","entries":[{"name":"etcd.v1.1.0","replaces":"etcd.v1.0.0"}]}`
		bundle = `{"schema":"olm.bundle","name":"etcd.v1.1.0","package":"etcd","image":"127.0.0.1:5000/operators/etcd@sha256:aa"}`
		old    = `{"schema":"olm.bundle","name":"etcd.v1.0.0","package":"etcd","image":"127.0.0.1:5000/operators/etcd@sha256:bb"}`
	)
	both := map[string]string{"stable": "etcd.v1.0.0", "alpha": "etcd.v1.0.0"}
	for _, tc := range []struct {
		name     string
		fbc      string
		replaces map[string]string
		err      string
	}{
		{"good", strings.Join([]string{pkg, stable, alpha, old, bundle}, "\n"), both, ""},
		{"no bundle document", strings.Join([]string{pkg, stable, alpha, old}, "\n"), both, "FBC of etcd has no olm.bundle etcd.v1.1.0"},
		{"not in a channel", strings.Join([]string{pkg, stable, old, bundle}, "\n"), both, "FBC of etcd: channel alpha does not list etcd.v1.1.0"},
		{"wrong replaces", strings.Join([]string{pkg, stable, old, bundle}, "\n"), map[string]string{"stable": "etcd.v0.9.0"},
			`channel stable: etcd.v1.1.0 replaces "etcd.v1.0.0", want "etcd.v0.9.0"`},
		{"image of another package", strings.Replace(strings.Join([]string{pkg, stable, bundle}, "\n"), "operators/etcd@", "operators/redis@", 1), map[string]string{"stable": "etcd.v1.0.0"},
			`bundle etcd.v1.1.0: image "127.0.0.1:5000/operators/redis@sha256:aa" is not <host>/operators/etcd@<digest>`},
		{"not JSON", pkg + "\n{", both, "FBC of etcd: unexpected EOF"},
	} {
		host, err := checkFBC([]byte(tc.fbc), "operators", "etcd", "etcd.v1.1.0", tc.replaces)
		if tc.err == "" {
			if err != nil || host != "127.0.0.1:5000" {
				t.Errorf("%s: %q, %v; want 127.0.0.1:5000", tc.name, host, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.err)
		}
	}
}

func TestParsePushedBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want pushedBytes
		err  string
	}{
		{"counter", "# HELP berth_olm_bytes_pushed_total Bytes.\n# TYPE berth_olm_bytes_pushed_total counter\nberth_olm_bytes_pushed_total 1.234567e+06\nberth_olm_packages 5000\n",
			pushedBytes{found: true, bytes: 1_234_567}, ""},
		{"a longer name first", "berth_olm_bytes_pushed_total_other 7\nberth_olm_bytes_pushed_total 42\n", pushedBytes{found: true, bytes: 42}, ""},
		{"none", "go_goroutines 12\n", pushedBytes{}, ""},
		{"bad value", "berth_olm_bytes_pushed_total many\n", pushedBytes{}, "berth_olm_bytes_pushed_total: strconv.ParseFloat"},
	} {
		got, err := parsePushedBytes([]byte(tc.body))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

func TestParseMetric(t *testing.T) {
	body := []byte("berth_olm_publishes_total{result=\"failed\"} 2\nberth_olm_publishes_total{result=\"published\"} 7\nberth_olm_packages 5000\n")
	for _, tc := range []struct {
		name  string
		want  int64
		found bool
	}{
		{olmPublishesMetric, 7, true},
		{olmPackagesMetric, 5000, true},
		{"berth_olm_publishes_total", 0, false},
	} {
		got, found, err := parseMetric(body, tc.name)
		if err != nil || got != tc.want || found != tc.found {
			t.Errorf("parseMetric(%s) = %d, %v, %v; want %d, %v", tc.name, got, found, err, tc.want, tc.found)
		}
	}
}

func TestUpdateRows(t *testing.T) {
	initial := &servedImage{desc: ocispec.Descriptor{Size: 1000}, manifest: ocispec.Manifest{
		Config: ocispec.Descriptor{Size: 500}, Layers: []ocispec.Descriptor{{Size: 98_500}},
	}}
	update := func(ms int, metric int64) olmUpdate {
		return olmUpdate{latency: time.Duration(ms) * time.Millisecond, metricBytes: metric, layer: 800, config: 150, manifest: 50}
	}
	for _, tc := range []struct {
		name                 string
		updates              []olmUpdate
		latency, bytesResult string
		bytesValue           string
	}{
		{"met", []olmUpdate{update(120, 1000), update(180, 1000), update(150, 1000)}, "met", "met", "1000 B"},
		{"slow, and more bytes than allowed", []olmUpdate{update(120, 1000), update(1500, 800+64<<10+1)}, "MISS", "MISS", "1000 B"},
		{"no metric", []olmUpdate{update(120, -1), update(130, -1)}, "met", "ERROR", "1000 B"},
	} {
		rows := updateRows(tc.updates, initial)
		if len(rows) != 2 {
			t.Fatalf("%s: %d rows", tc.name, len(rows))
		}
		if rows[0].result != tc.latency || rows[1].result != tc.bytesResult || rows[1].value != tc.bytesValue {
			t.Errorf("%s: latency %s, bytes %s %s; want %s, %s %s", tc.name, rows[0].result, rows[1].value, rows[1].result, tc.latency, tc.bytesValue, tc.bytesResult)
		}
		if !strings.Contains(rows[1].detail, "1.000% of the whole image (97.7 KiB)") {
			t.Errorf("%s: bytes detail %q does not compare with the whole image", tc.name, rows[1].detail)
		}
	}
}
