package olm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeSource is a Source of packages held in memory.
type fakeSource struct {
	mu       sync.Mutex
	packages map[string]map[string][]Version // namespace -> name -> versions
	fail     error                           // when set, every call fails
	read     []string                        // packages OLMVersions was asked for, in order
}

func newFakeSource() *fakeSource {
	return &fakeSource{packages: map[string]map[string][]Version{}}
}

// set stores the versions of a package; none deletes it.
func (s *fakeSource) set(ns, name string, versions ...Version) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.packages[ns] == nil {
		s.packages[ns] = map[string][]Version{}
	}
	if len(versions) == 0 {
		delete(s.packages[ns], name)
		return
	}
	s.packages[ns][name] = versions
}

func (s *fakeSource) OLMPackages(context.Context) (map[string][]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	out := map[string][]string{}
	for ns, pkgs := range s.packages {
		for name := range pkgs {
			out[ns] = append(out[ns], name)
		}
	}
	return out, nil
}

func (s *fakeSource) OLMVersions(_ context.Context, ns, name string) ([]Version, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.read = append(s.read, ns+"/"+name)
	if s.fail != nil {
		return nil, s.fail
	}
	return s.packages[ns][name], nil
}

// fakeRegistry is a Registry and Resolver held in memory that records pushes.
type fakeRegistry struct {
	mu        sync.Mutex
	blobs     map[string][]byte             // repo@digest -> bytes
	tags      map[string]ocispec.Descriptor // repo:tag -> manifest
	manifests map[digest.Digest][]byte
	pushed    []string // "blob <digest>" and "manifest <digest>", in order
	asked     []string // digests BlobExists was asked about, in order
	fail      error    // when set, every push fails
}

func newFakeRegistry() *fakeRegistry {
	return &fakeRegistry{blobs: map[string][]byte{}, tags: map[string]ocispec.Descriptor{}, manifests: map[digest.Digest][]byte{}}
}

func (r *fakeRegistry) BlobExists(_ context.Context, repo string, d digest.Digest) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, d.String())
	_, ok := r.blobs[repo+"@"+d.String()]
	return ok, nil
}

func (r *fakeRegistry) PushBlob(_ context.Context, repo string, b Blob) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	if digest.FromBytes(b.Data) != b.Descriptor.Digest || int64(len(b.Data)) != b.Descriptor.Size {
		return fmt.Errorf("blob %s does not match its descriptor", b.Descriptor.Digest)
	}
	r.blobs[repo+"@"+b.Descriptor.Digest.String()] = bytes.Clone(b.Data)
	r.pushed = append(r.pushed, "blob "+b.Descriptor.Digest.String())
	return nil
}

func (r *fakeRegistry) PushManifest(_ context.Context, repo, tag string, desc ocispec.Descriptor, payload []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(payload, &m); err != nil {
		return err
	}
	for _, d := range append([]ocispec.Descriptor{m.Config}, m.Layers...) {
		if _, ok := r.blobs[repo+"@"+d.Digest.String()]; !ok {
			return fmt.Errorf("manifest refers to blob %s, missing", d.Digest)
		}
	}
	r.tags[repo+":"+tag] = desc
	r.manifests[desc.Digest] = bytes.Clone(payload)
	r.pushed = append(r.pushed, "manifest "+desc.Digest.String())
	return nil
}

func (r *fakeRegistry) Blob(_ context.Context, repo, d string) (io.ReadCloser, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.blobs[repo+"@"+d]
	if !ok {
		return nil, fmt.Errorf("blob %s: not found", d)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (r *fakeRegistry) Resolve(_ context.Context, repo, tag string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.tags[repo+":"+tag]
	if !ok {
		return "", fmt.Errorf("%s:%s: not found", repo, tag)
	}
	return d.Digest.String(), nil
}

// takePushed returns the pushes since the last call.
func (r *fakeRegistry) takePushed() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.pushed
	r.pushed, r.asked = nil, nil
	return out
}

// manifest returns the manifest the namespace's catalog tag points to.
func (r *fakeRegistry) manifest(t *testing.T, ns string) ocispec.Manifest {
	t.Helper()
	d, err := r.Resolve(context.Background(), CatalogRepository(ns), CatalogTag)
	if err != nil {
		t.Fatal(err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(r.manifests[digest.Digest(d)], &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// env is a Publisher on a fake Source and Registry.
type env struct {
	src *fakeSource
	reg *fakeRegistry
	pub *Publisher
}

// newEnv returns a Publisher, its Source holding etcd, jaeger and kong in
// namespace ns.
func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{src: newFakeSource(), reg: newFakeRegistry()}
	for _, name := range []string{"kong", "etcd", "jaeger"} {
		e.src.set("ns", name, olmVersion(name, "1.0.0", ch("stable", "")))
	}
	e.pub = e.newPublisher(t, e.reg)
	if err := e.pub.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.reg.takePushed()
	return e
}

func (e *env) newPublisher(t *testing.T, reg Registry) *Publisher {
	t.Helper()
	p, err := NewPublisher(PublisherOptions{Source: e.src, Registry: reg, Host: testHost})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// flush flushes the Publisher, failing the test on error.
func (e *env) flush(t *testing.T) {
	t.Helper()
	if err := e.pub.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// layerDigests returns the layer digests of the catalog manifest of ns.
func layerDigests(t *testing.T, r *fakeRegistry, ns string) []string {
	t.Helper()
	var out []string
	for _, l := range r.manifest(t, ns).Layers {
		out = append(out, l.Digest.String())
	}
	return out
}

// fbcOf returns the FBC of the packages, rendered one by one, concatenated.
func fbcOf(t *testing.T, src *fakeSource, ns string, names ...string) string {
	t.Helper()
	var buf bytes.Buffer
	for _, name := range names {
		if err := RenderPackage(&buf, testHost, ns, name, src.packages[ns][name]); err != nil {
			t.Fatal(err)
		}
	}
	return buf.String()
}

// writeFBC returns the output of WriteFBC.
func writeFBC(t *testing.T, p *Publisher, ns string, allow func(string) bool, keep func(string, string) bool) string {
	t.Helper()
	var buf bytes.Buffer
	if err := p.WriteFBC(context.Background(), &buf, ns, allow, keep); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestPublisherInitialPublish(t *testing.T) {
	src, reg := newFakeSource(), newFakeRegistry()
	for _, name := range []string{"kong", "etcd", "jaeger"} {
		src.set("ns", name, olmVersion(name, "1.0.0", ch("stable", "")))
	}
	src.set("other", "etcd", olmVersion("etcd", "2.0.0", ch("stable", "")))
	p, err := NewPublisher(PublisherOptions{Source: src, Registry: reg, Host: testHost})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	desc, ok := p.Catalog("ns")
	if !ok || desc.MediaType != ocispec.MediaTypeImageManifest {
		t.Fatalf("Catalog(ns) = %+v, %v; want a manifest", desc, ok)
	}
	if tagged, _ := reg.Resolve(context.Background(), "ns/olm/catalog", "latest"); tagged != desc.Digest.String() {
		t.Errorf("ns/olm/catalog:latest is %s, want %s", tagged, desc.Digest)
	}
	m := reg.manifest(t, "ns")
	if len(m.Layers) != 3 {
		t.Fatalf("%d layers, want one per shard: the three packages' are distinct", len(m.Layers))
	}
	if got, want := writeFBC(t, p, "ns", nil, nil), fbcOf(t, src, "ns", "etcd", "kong", "jaeger"); got != want {
		t.Errorf("FBC\n%s\nwant the packages' in shard order (etcd 11, kong 12, jaeger 123)\n%s", got, want)
	}
	stats, ok := p.LastPublish("ns")
	size := m.Config.Size + desc.Size
	for _, l := range m.Layers {
		size += l.Size
	}
	if !ok || !stats.Pushed || stats.Digest != desc.Digest || stats.Layers != 3 || stats.LayersPushed != 3 || stats.BytesPushed != size {
		t.Errorf("LastPublish = %+v, want 3 layers pushed, %d bytes, digest %s", stats, size, desc.Digest)
	}
	if _, ok := p.Catalog("other"); !ok {
		t.Error("namespace other has no catalog")
	}

	// Another Publisher renders the same image.
	again, err := NewPublisher(PublisherOptions{Source: src, Registry: newFakeRegistry(), Host: testHost})
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d, _ := again.Catalog("ns"); d.Digest != desc.Digest {
		t.Errorf("the same packages give catalog %s, then %s", desc.Digest, d.Digest)
	}
}

func TestPublisherChangeRebuildsOneLayer(t *testing.T) {
	e := newEnv(t)
	before := layerDigests(t, e.reg, "ns")
	e.src.set("ns", "jaeger", olmVersion("jaeger", "1.0.0", ch("stable", "")), olmVersion("jaeger", "1.1.0", ch("stable", "jaeger.v1.0.0")))
	e.pub.Changed("ns", "jaeger")
	e.flush(t)
	after := layerDigests(t, e.reg, "ns")
	if len(after) != 3 || after[0] != before[0] || after[1] != before[1] || after[2] == before[2] {
		t.Fatalf("layers %v -> %v: want only jaeger's shard's (the third) changed", before, after)
	}
	m := e.reg.manifest(t, "ns")
	desc, _ := e.pub.Catalog("ns")
	if asked := []string{after[2], m.Config.Digest.String()}; !slices.Equal(e.reg.asked, asked) {
		t.Errorf("asked the registry about %q, want %q: the other layers are known", e.reg.asked, asked)
	}
	want := []string{"blob " + after[2], "blob " + m.Config.Digest.String(), "manifest " + desc.Digest.String()}
	if got := e.reg.takePushed(); !slices.Equal(got, want) {
		t.Errorf("pushed %q, want %q", got, want)
	}
	stats, _ := e.pub.LastPublish("ns")
	if stats.LayersPushed != 1 || stats.BytesPushed != m.Layers[2].Size+m.Config.Size+desc.Size {
		t.Errorf("LastPublish = %+v, want one layer pushed and its, the config's and the manifest's bytes", stats)
	}
	if !strings.Contains(writeFBC(t, e.pub, "ns", nil, nil), `"name":"jaeger.v1.1.0"`) {
		t.Error("the FBC lacks the new version")
	}
}

func TestPublisherChangeInASharedShard(t *testing.T) {
	// alpha and hello share shard 43: a change of hello re-renders hello
	// alone and takes alpha's FBC from the layer in the registry.
	e := newEnv(t)
	e.src.set("ns", "alpha", olmVersion("alpha", "1.0.0", ch("stable", "")))
	e.src.set("ns", "hello", olmVersion("hello", "1.0.0", ch("stable", "")))
	e.pub.Changed("ns", "alpha")
	e.pub.Changed("ns", "hello")
	e.flush(t)
	if n := len(e.reg.manifest(t, "ns").Layers); n != 4 {
		t.Fatalf("%d layers, want 4: etcd's, kong's, alpha's and hello's, jaeger's", n)
	}
	before := layerDigests(t, e.reg, "ns")
	e.src.set("ns", "hello", olmVersion("hello", "1.0.0", ch("stable", "")), olmVersion("hello", "1.1.0", ch("stable", "hello.v1.0.0")))
	e.src.read = nil
	e.pub.Changed("ns", "hello")
	e.flush(t)
	if !slices.Equal(e.src.read, []string{"ns/hello"}) {
		t.Errorf("read the versions of %q, want hello's alone", e.src.read)
	}
	after := layerDigests(t, e.reg, "ns")
	if len(after) != 4 || after[2] == before[2] || after[0] != before[0] || after[1] != before[1] || after[3] != before[3] {
		t.Errorf("layers %v -> %v: want only the shared shard's (the third) changed", before, after)
	}
	if got, want := writeFBC(t, e.pub, "ns", nil, nil), fbcOf(t, e.src, "ns", "etcd", "kong", "alpha", "hello", "jaeger"); got != want {
		t.Errorf("FBC\n%s\nwant\n%s", got, want)
	}
	// What the updates built is what a Publisher building it all at once builds.
	fresh := e.newPublisher(t, newFakeRegistry())
	if err := fresh.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _ := e.pub.Catalog("ns")
	if want, _ := fresh.Catalog("ns"); got.Digest != want.Digest {
		t.Errorf("updated catalog %s, built from scratch %s", got.Digest, want.Digest)
	}
	stats, _ := e.pub.LastPublish("ns")
	if stats.Layers != 4 || stats.Packages != 5 {
		t.Errorf("LastPublish = %+v, want 4 layers holding 5 packages", stats)
	}

	// A Publisher whose registry lost the shared layer renders the shard again.
	lost := newFakeRegistry()
	p := e.newPublisher(t, lost)
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	lost.mu.Lock()
	for k := range lost.blobs {
		if strings.HasSuffix(k, after[2]) {
			delete(lost.blobs, k)
		}
	}
	lost.mu.Unlock()
	e.src.read = nil
	p.Changed("ns", "hello")
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e.src.read, []string{"ns/alpha", "ns/hello"}) {
		t.Errorf("read the versions of %q, want the shard's alpha and hello", e.src.read)
	}
	if d, _ := p.Catalog("ns"); d.Digest != got.Digest {
		t.Errorf("catalog %s after rendering the shard again, want %s", d.Digest, got.Digest)
	}
}

func TestPublisherDeleteAndEmpty(t *testing.T) {
	e := newEnv(t)
	e.src.set("ns", "jaeger")
	e.pub.Changed("ns", "jaeger")
	e.flush(t)
	if got, want := writeFBC(t, e.pub, "ns", nil, nil), fbcOf(t, e.src, "ns", "etcd", "kong"); got != want {
		t.Errorf("after deleting jaeger, FBC\n%s\nwant\n%s", got, want)
	}
	if n := len(e.reg.manifest(t, "ns").Layers); n != 2 {
		t.Errorf("%d layers, want 2", n)
	}
	e.src.set("ns", "etcd")
	e.src.set("ns", "kong")
	e.pub.Changed("ns", "etcd")
	e.pub.Changed("ns", "kong")
	e.flush(t)
	if n := len(e.reg.manifest(t, "ns").Layers); n != 0 {
		t.Errorf("%d layers, want none once every package is deleted", n)
	}
	if _, ok := e.pub.Catalog("ns"); !ok {
		t.Error("the emptied namespace has no catalog, want an empty one")
	}
	if got := writeFBC(t, e.pub, "ns", nil, nil); got != "" {
		t.Errorf("empty catalog's FBC %q, want nothing", got)
	}
}

func TestPublisherUnchanged(t *testing.T) {
	e := newEnv(t)
	desc, _ := e.pub.Catalog("ns")
	e.pub.Changed("ns", "etcd")
	e.pub.Changed("ns", "kong")
	e.flush(t)
	if len(e.reg.asked) != 0 {
		t.Errorf("asked the registry about %q: unchanged layers are known", e.reg.asked)
	}
	if got := e.reg.takePushed(); len(got) != 0 {
		t.Errorf("an unchanged catalog pushed %q", got)
	}
	if d, _ := e.pub.Catalog("ns"); d.Digest != desc.Digest {
		t.Errorf("catalog %s -> %s, want unchanged", desc.Digest, d.Digest)
	}
	if stats, _ := e.pub.LastPublish("ns"); stats.Pushed || stats.BytesPushed != 0 {
		t.Errorf("LastPublish = %+v, want nothing pushed", stats)
	}
}

func TestPublisherBurst(t *testing.T) {
	e := newEnv(t)
	for i := range 5 {
		v := fmt.Sprintf("1.0.%d", i+1)
		e.src.set("ns", "etcd", olmVersion("etcd", v, ch("stable", "")))
		e.src.set("ns", "kong", olmVersion("kong", v, ch("stable", "")))
		e.pub.Changed("ns", "etcd")
		e.pub.Changed("ns", "kong")
	}
	e.flush(t)
	var manifests, blobs int
	for _, p := range e.reg.takePushed() {
		if strings.HasPrefix(p, "manifest ") {
			manifests++
		} else {
			blobs++
		}
	}
	if manifests != 1 || blobs != 3 {
		t.Errorf("a burst pushed %d manifests and %d blobs, want 1 and 3 (two layers, the config)", manifests, blobs)
	}
}

func TestPublisherRetriesFailures(t *testing.T) {
	e := newEnv(t)
	desc, _ := e.pub.Catalog("ns")
	e.reg.fail = errors.New("registry down")
	e.src.set("ns", "etcd", olmVersion("etcd", "1.0.1", ch("stable", "")))
	e.pub.Changed("ns", "etcd")
	if err := e.pub.Flush(context.Background()); err == nil || !strings.Contains(err.Error(), "registry down") || !strings.Contains(err.Error(), "ns") {
		t.Fatalf("Flush error %v, want the registry's, naming the namespace", err)
	}
	if d, _ := e.pub.Catalog("ns"); d.Digest != desc.Digest {
		t.Errorf("a failed publish changed the catalog to %s", d.Digest)
	}
	e.reg.fail = nil
	e.flush(t) // no new change: the failed one is still pending
	if d, _ := e.pub.Catalog("ns"); d.Digest == desc.Digest {
		t.Error("the failed change was lost")
	}
	if !strings.Contains(writeFBC(t, e.pub, "ns", nil, nil), "etcd.v1.0.1") {
		t.Error("the FBC lacks the change that failed at first")
	}
	e.reg.takePushed()

	e.src.fail = errors.New("catalog down")
	e.pub.Changed("ns", "kong")
	if err := e.pub.Flush(context.Background()); err == nil || !strings.Contains(err.Error(), "catalog down") {
		t.Fatalf("Flush error %v, want the source's", err)
	}
	e.src.fail = nil
	e.flush(t)
	if got := e.reg.takePushed(); len(got) != 0 {
		t.Errorf("re-reading an unchanged kong pushed %q", got)
	}
}

func TestPublisherWriteFBC(t *testing.T) {
	e := newEnv(t)
	onlyBundles := func(schema, pkg string) bool { return schema == SchemaBundle }
	tests := []struct {
		name  string
		allow func(string) bool
		keep  func(string, string) bool
		want  []string // schema name
	}{
		{"all", nil, nil, []string{
			"olm.package etcd", "olm.channel stable", "olm.bundle etcd.v1.0.0",
			"olm.package kong", "olm.channel stable", "olm.bundle kong.v1.0.0",
			"olm.package jaeger", "olm.channel stable", "olm.bundle jaeger.v1.0.0",
		}},
		{"allowed packages", func(name string) bool { return name != "jaeger" }, nil, []string{
			"olm.package etcd", "olm.channel stable", "olm.bundle etcd.v1.0.0",
			"olm.package kong", "olm.channel stable", "olm.bundle kong.v1.0.0",
		}},
		{"one schema", nil, onlyBundles, []string{"olm.bundle etcd.v1.0.0", "olm.bundle kong.v1.0.0", "olm.bundle jaeger.v1.0.0"}},
		{"one package", nil, func(schema, pkg string) bool { return pkg == "kong" }, []string{
			"olm.package kong", "olm.channel stable", "olm.bundle kong.v1.0.0",
		}},
		{"both", func(name string) bool { return name == "etcd" }, onlyBundles, []string{"olm.bundle etcd.v1.0.0"}},
		{"none allowed", func(string) bool { return false }, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := summary(parseFBC(t, []byte(writeFBC(t, e.pub, "ns", tt.allow, tt.keep))))
			if !slices.Equal(got, tt.want) {
				t.Errorf("documents %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPublisherNoCatalog(t *testing.T) {
	e := newEnv(t)
	// A package that is not OLM changes in a namespace with no catalog.
	e.pub.Changed("empty", "helm-chart")
	e.flush(t)
	for _, ns := range []string{"empty", "unknown"} {
		err := e.pub.WriteFBC(context.Background(), io.Discard, ns, nil, nil)
		if !errors.Is(err, ErrNoCatalog) || !strings.Contains(err.Error(), ns) {
			t.Errorf("WriteFBC(%s) error %v, want ErrNoCatalog naming the namespace", ns, err)
		}
		if _, ok := e.pub.Catalog(ns); ok {
			t.Errorf("namespace %s has a catalog", ns)
		}
	}
	if got := e.reg.takePushed(); len(got) != 0 {
		t.Errorf("pushed %q for a namespace with no OLM package", got)
	}
}

func TestPublisherIgnoresInvalidNames(t *testing.T) {
	e := newEnv(t)
	for _, c := range [][2]string{{"NS", "etcd"}, {"ns", "../etcd"}, {"", "etcd"}, {"ns/olm", "catalog"}} {
		e.pub.Changed(c[0], c[1])
	}
	e.flush(t)
	if got := e.reg.takePushed(); len(got) != 0 {
		t.Errorf("invalid names pushed %q", got)
	}
	if _, ok := e.pub.Catalog("NS"); ok {
		t.Error("an invalid namespace has a catalog")
	}
}

// noResolve hides the Resolver of a Registry.
type noResolve struct{ Registry }

func TestPublisherRestart(t *testing.T) {
	e := newEnv(t)
	desc, _ := e.pub.Catalog("ns")
	tests := []struct {
		name string
		reg  Registry
		want []string // pushes
	}{
		{"resolver", e.reg, nil},
		{"no resolver: the same manifest again", noResolve{e.reg}, []string{"manifest " + desc.Digest.String()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := e.newPublisher(t, tt.reg)
			if err := p.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := e.reg.takePushed(); !slices.Equal(got, tt.want) {
				t.Errorf("a restart with no change pushed %q, want %q", got, tt.want)
			}
			if d, _ := p.Catalog("ns"); d.Digest != desc.Digest {
				t.Errorf("catalog %s after restart, want %s", d.Digest, desc.Digest)
			}
		})
	}
}

func TestPublisherRefreshDropsUnlisted(t *testing.T) {
	e := newEnv(t)
	e.src.set("ns", "kong") // deleted with no Changed
	if err := e.pub.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := writeFBC(t, e.pub, "ns", nil, nil), fbcOf(t, e.src, "ns", "etcd", "jaeger"); got != want {
		t.Errorf("FBC after refresh\n%s\nwant\n%s", got, want)
	}
	e.src.fail = errors.New("catalog down")
	if err := e.pub.Refresh(context.Background()); err == nil {
		t.Error("Refresh succeeded with a failing source")
	}
}

func TestPublisherMetrics(t *testing.T) {
	src, reg := newFakeSource(), newFakeRegistry()
	src.set("ns", "etcd", olmVersion("etcd", "1.0.0", ch("stable", "")))
	src.set("ns", "kong", olmVersion("kong", "1.0.0", ch("stable", "")))
	prom := prometheus.NewRegistry()
	p, err := NewPublisher(PublisherOptions{Source: src, Registry: reg, Host: testHost, Metrics: prom})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	stats, _ := p.LastPublish("ns")
	p.Changed("ns", "etcd") // unchanged
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	reg.fail = errors.New("down")
	src.set("ns", "etcd")
	p.Changed("ns", "etcd")
	if err := p.Flush(context.Background()); err == nil {
		t.Fatal("Flush succeeded with a failing registry")
	}
	checks := []struct {
		name string
		got  float64
		want float64
	}{
		{"published", testutil.ToFloat64(p.metrics.publishes.WithLabelValues(resultPublished)), 1},
		{"unchanged", testutil.ToFloat64(p.metrics.publishes.WithLabelValues(resultUnchanged)), 1},
		{"failed", testutil.ToFloat64(p.metrics.publishes.WithLabelValues(resultFailed)), 1},
		{"bytes", testutil.ToFloat64(p.metrics.bytes), float64(stats.BytesPushed)},
		{"packages", testutil.ToFloat64(p.metrics.packages), 2},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if n := testutil.CollectAndCount(prom, "berth_olm_publish_duration_seconds"); n != 1 {
		t.Errorf("%d duration histograms registered, want 1", n)
	}
}

func TestNewPublisherErrors(t *testing.T) {
	src, reg := newFakeSource(), newFakeRegistry()
	tests := []struct {
		name string
		opts PublisherOptions
		want string
	}{
		{"no source", PublisherOptions{Registry: reg, Host: testHost}, "no Source"},
		{"no registry", PublisherOptions{Source: src, Host: testHost}, "no Registry"},
		{"no host", PublisherOptions{Source: src, Registry: reg}, "no Host"},
		{"negative debounce", PublisherOptions{Source: src, Registry: reg, Host: testHost, Debounce: -time.Second}, "negative Debounce -1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewPublisher(tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}

// TestPublisherRun runs the Publisher: it publishes every namespace, then
// follows changes. It waits for each outcome, however long it takes.
func TestPublisherRun(t *testing.T) {
	src, reg := newFakeSource(), newFakeRegistry()
	src.set("ns", "etcd", olmVersion("etcd", "1.0.0", ch("stable", "")))
	p, err := NewPublisher(PublisherOptions{Source: src, Registry: reg, Host: testHost, Debounce: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		p.Run(ctx)
		close(done)
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s", what)
			}
		}
	}
	waitFor("initial catalog", func() bool { _, ok := p.Catalog("ns"); return ok })
	first, _ := p.Catalog("ns")
	src.set("ns", "kong", olmVersion("kong", "1.0.0", ch("stable", "")))
	p.Changed("ns", "kong")
	waitFor("catalog with kong", func() bool { d, _ := p.Catalog("ns"); return d.Digest != first.Digest })
	if got, want := writeFBC(t, p, "ns", nil, nil), fbcOf(t, src, "ns", "etcd", "kong"); got != want {
		t.Errorf("FBC\n%s\nwant\n%s", got, want)
	}
	cancel()
	<-done
}

// reconcilingSource is a fakeSource that is a Reconciler.
type reconcilingSource struct {
	*fakeSource
	reconciling atomic.Bool
}

func (s *reconcilingSource) Reconciling() bool { return s.reconciling.Load() }

func TestPublisherDue(t *testing.T) {
	const d = 100 * time.Millisecond
	p := &Publisher{debounce: d}
	at := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return at.Add(time.Duration(n) * time.Millisecond) }
	tests := []struct {
		name                 string
		first, last, retryAt time.Time
		reconciling          bool
		want                 time.Time
	}{
		{"one change", ms(0), ms(0), time.Time{}, false, ms(100)},
		{"a burst", ms(0), ms(300), time.Time{}, false, ms(400)},
		{"a burst past its cap", ms(0), ms(450), time.Time{}, false, ms(500)},
		{"a retry later", ms(0), ms(0), ms(2000), false, ms(2000)},
		{"one change while reconciling", ms(0), ms(0), time.Time{}, true, ms(500)},
		{"a long burst while reconciling: no cap", ms(0), ms(9000), time.Time{}, true, ms(9500)},
		{"a retry later while reconciling", ms(0), ms(0), ms(2000), true, ms(2000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &space{first: tt.first, last: tt.last, retryAt: tt.retryAt}
			if got := p.due(s, tt.reconciling); !got.Equal(tt.want) {
				t.Errorf("due = +%s, want +%s", got.Sub(at), tt.want.Sub(at))
			}
		})
	}
}

// TestPublisherSettlesWhileReconciling: a burst of changes that lasts past
// the cap is published once while the Source reconciles, several times
// otherwise.
func TestPublisherSettlesWhileReconciling(t *testing.T) {
	for _, tt := range []struct {
		name        string
		reconciling bool
		publishes   func(n float64) bool
	}{
		{"reconciling", true, func(n float64) bool { return n == 1 }},
		{"not reconciling", false, func(n float64) bool { return n > 1 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := &reconcilingSource{fakeSource: newFakeSource()}
			src.set("ns", "etcd", olmVersion("etcd", "1.0.0", ch("stable", "")))
			src.reconciling.Store(tt.reconciling)
			reg := prometheus.NewRegistry()
			p, err := NewPublisher(PublisherOptions{Source: src, Registry: newFakeRegistry(), Host: testHost, Debounce: 40 * time.Millisecond, Metrics: reg})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				p.Run(ctx)
				close(done)
			}()
			defer func() {
				cancel()
				<-done
			}()
			waitPublished := func(packages int) {
				t.Helper()
				for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					if stats, ok := p.LastPublish("ns"); ok && stats.Packages == packages {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("no catalog of %d packages", packages)
					}
				}
			}
			waitPublished(1) // Run's first publish
			before := testutil.ToFloat64(p.metrics.publishes.WithLabelValues(resultPublished))
			// 40 packages, one every 10ms: 400ms, twice the cap of 200ms.
			for i := range 40 {
				name := fmt.Sprintf("op%02d", i)
				src.set("ns", name, olmVersion(name, "1.0.0", ch("stable", "")))
				p.Changed("ns", name)
				time.Sleep(10 * time.Millisecond)
			}
			waitPublished(41)
			published := testutil.ToFloat64(p.metrics.publishes.WithLabelValues(resultPublished)) - before
			if !tt.publishes(published) {
				t.Errorf("%v catalog manifests published for a burst of 40 changes", published)
			}
		})
	}
}

// TestPublisherFollowerTakesOver: two replicas' Publishers on one registry.
// The follower renders what the leader pushes and pushes nothing; when the
// leader died before pushing a change, the follower that takes over pushes
// it at its Refresh.
func TestPublisherFollowerTakesOver(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	var leads atomic.Bool
	follower, err := NewPublisher(PublisherOptions{Source: e.src, Registry: e.reg, Host: testHost, Leader: leads.Load})
	if err != nil {
		t.Fatal(err)
	}
	if err := follower.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.reg.takePushed(); len(got) != 0 {
		t.Fatalf("a follower pushed %v", got)
	}
	leaderDesc, _ := e.pub.Catalog("ns")
	if d, ok := follower.Catalog("ns"); !ok || d.Digest != leaderDesc.Digest {
		t.Fatalf("the follower's catalog is %s (%v), the leader's %s", d.Digest, ok, leaderDesc.Digest)
	}
	if got, want := writeFBC(t, follower, "ns", nil, nil), fbcOf(t, e.src, "ns", "etcd", "kong", "jaeger"); got != want {
		t.Errorf("the follower serves\n%s\nwant\n%s", got, want)
	}

	// A change the leader dies before pushing: only the follower hears of it.
	e.src.set("ns", "jaeger", olmVersion("jaeger", "1.0.0", ch("stable", "")), olmVersion("jaeger", "1.1.0", ch("stable", "jaeger.v1.0.0")))
	follower.Changed("ns", "jaeger")
	if err := follower.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.reg.takePushed(); len(got) != 0 {
		t.Fatalf("a follower pushed %v", got)
	}
	rendered, _ := follower.Catalog("ns")
	if tagged, _ := e.reg.Resolve(ctx, "ns/olm/catalog", "latest"); tagged == rendered.Digest.String() {
		t.Fatal("the registry has the change nobody pushed")
	}

	leads.Store(true)
	if err := follower.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if tagged, _ := e.reg.Resolve(ctx, "ns/olm/catalog", "latest"); tagged != rendered.Digest.String() {
		t.Fatalf("after taking over, the tag names %s, want %s", tagged, rendered.Digest)
	}
	if got := layerDigests(t, e.reg, "ns"); len(got) != 3 {
		t.Fatalf("layers %v", got)
	}
	for _, l := range e.reg.manifest(t, "ns").Layers {
		if ok, _ := e.reg.BlobExists(ctx, "ns/olm/catalog", l.Digest); !ok {
			t.Errorf("layer %s of the pushed catalog is missing", l.Digest)
		}
	}
	e.reg.takePushed()
	if err := follower.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.reg.takePushed(); len(got) != 0 {
		t.Errorf("a verified leader with nothing changed pushed %v", got)
	}
}
