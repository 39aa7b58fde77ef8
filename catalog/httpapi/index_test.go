package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"
	"sigs.k8s.io/yaml"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/httpapi"
	"github.com/berth-registry/berth/internal/forwarded"
	"github.com/berth-registry/berth/internal/kudoindex"
	"github.com/berth-registry/berth/pkgformat"
)

// kudoCompare orders versions as KUDO does (PackageVersions.Less in
// index.go): by appVersion, then operatorVersion, as semver, a version that
// does not parse being less. Where KUDO's Less is not a strict order (two
// versions without a parsable appVersion are each less than the other),
// operatorVersion decides.
func kudoCompare(x, y *kudoindex.PackageVersion) int {
	ax, errX := semver.NewVersion(x.AppVersion)
	ay, errY := semver.NewVersion(y.AppVersion)
	switch {
	case errX == nil && errY == nil && !ax.Equal(ay):
		return ax.Compare(ay)
	case errX == nil && errY != nil:
		return 1
	case errX != nil && errY == nil:
		return -1
	}
	ox, errX := semver.NewVersion(x.OperatorVersion)
	oy, errY := semver.NewVersion(y.OperatorVersion)
	switch {
	case errX == nil && errY == nil:
		return ox.Compare(oy)
	case errX == nil:
		return 1
	case errY == nil:
		return -1
	}
	return 0
}

// trickyDescription holds what YAML reads as something other than a string
// when unquoted, and characters YAML does not allow raw.
const trickyDescription = "yes: no # null ~ 1e3 0x1F - [a] {b} &c *d !e %f @g `h` 'i' \"j\" back\\slash\n" +
	"line two\ttab \x01 \x7f \u0085 \u2028 \ufeff 🚀 \xff  "

func digestOf(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }

func kudoEntry(ns, name, app, op string, c byte) *catalog.Entry {
	version := op
	if app != "" {
		version = app + "_" + op
	}
	return &catalog.Entry{
		Namespace: ns, Name: name, Tag: version, Digest: digestOf('m'), Status: apiv1.StatusIndexed, Indexed: t0,
		Metadata: &pkgformat.Metadata{
			SchemaVersion: 1, Name: name, Version: version, Format: pkgformat.KUDO, AppVersion: app, OperatorVersion: op,
			Description: name + " " + version, Created: &tMeta,
			Maintainers: []pkgformat.Maintainer{{Name: "Jane", Email: "jane@example.com"}, {Name: "Team"}},
		},
		Content: apiv1.Content{Digest: digestOf(c), Size: 100, MediaType: pkgformat.ContentMediaType},
	}
}

func olmEntry(ns, name, version string, c byte) *catalog.Entry {
	return &catalog.Entry{
		Namespace: ns, Name: name, Tag: version, Digest: digestOf('m'), Status: apiv1.StatusIndexed, Indexed: t0,
		Metadata: &pkgformat.Metadata{SchemaVersion: 1, Name: name, Version: version, Format: pkgformat.OLM},
		Content:  apiv1.Content{Digest: digestOf(c), Size: 100, MediaType: pkgformat.ContentMediaType},
	}
}

// indexFake holds packages in three namespaces; kafka is in two of them.
func indexFake() *fakeCatalog {
	f := newFake()
	weird := olmEntry("olm", "weird", "1.0.0", 'f')
	weird.Metadata.Description = trickyDescription
	weird.Metadata.Maintainers = []pkgformat.Maintainer{{Name: "null", Email: "a\"b@example.com"}}
	f.entries = []*catalog.Entry{
		kudoEntry("community", "kafka", "3.0.0", "1.0.0", '1'),
		kudoEntry("kudo", "kafka", "2.5.1", "1.3.2", '2'),
		kudoEntry("kudo", "kafka", "", "1.3.1", '3'),
		kudoEntry("kudo", "kafka", "2.6.0", "1.3.2", '4'),
		kudoEntry("kudo", "kafka", "2.5.1", "1.3.10", '5'),
		kudoEntry("kudo", "zookeeper", "", "0.3.0", '6'),
		olmEntry("olm", "etcd", "0.9.2", '7'),
		olmEntry("olm", "etcd", "0.9.4", '8'),
		weird,
	}
	return f
}

func parseIndex(t *testing.T, body []byte) *kudoindex.IndexFile {
	t.Helper()
	var idx kudoindex.IndexFile
	if err := yaml.Unmarshal(body, &idx); err != nil {
		t.Fatalf("KUDO cannot parse the index: %v\n%s", err, body)
	}
	if idx.APIVersion != "v1" {
		t.Errorf("apiVersion %q", idx.APIVersion)
	}
	for key, versions := range idx.Entries {
		for _, v := range versions {
			if v.Metadata == nil || v.OperatorVersion == "" {
				t.Errorf("%s: an entry without operatorVersion makes KUDO refuse the index", key)
			}
		}
		for i := 1; i < len(versions); i++ {
			if kudoCompare(versions[i-1], versions[i]) < 0 {
				t.Errorf("%s: versions not newest first in KUDO's order", key)
			}
		}
	}
	return &idx
}

func TestIndex(t *testing.T) {
	f := indexFake()
	res := serve(t, newHandler(f, nil, nil), "GET", "/index.yaml", nil)
	if res.status != 200 || res.header.Get("Content-Type") != "application/yaml" || res.header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("status %d, headers %v", res.status, res.header)
	}
	if got, want := f.called(), []string{"FeedHead", "Walk", "Walk"}; !slices.Equal(got, want) {
		t.Errorf("catalog calls %v, want %v: nothing that loads the catalog at once", got, want)
	}
	idx := parseIndex(t, res.body)

	var keys []string
	for k := range idx.Entries {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"community/kafka", "etcd", "kudo/kafka", "weird", "zookeeper"}; !slices.Equal(keys, want) {
		t.Errorf("keys %v, want %v", keys, want)
	}

	var versions []string
	for _, v := range idx.Entries["kudo/kafka"] {
		versions = append(versions, v.AppVersion+"_"+v.OperatorVersion)
	}
	if want := []string{"2.6.0_1.3.2", "2.5.1_1.3.10", "2.5.1_1.3.2", "_1.3.1"}; !slices.Equal(versions, want) {
		t.Errorf("kudo/kafka versions %v, want %v", versions, want)
	}

	v := idx.Entries["kudo/kafka"][1]
	if v.Name != "kafka" || v.OperatorVersion != "1.3.10" || v.AppVersion != "2.5.1" || v.Description != "kafka 2.5.1_1.3.10" {
		t.Errorf("entry %+v", *v.Metadata)
	}
	if want := strings.Repeat("5", 64); v.Digest != want {
		t.Errorf("digest %q, want %q (the content tarball's sha256 in hex)", v.Digest, want)
	}
	if want := []string{"http://berth.example/v2/kudo/kafka/blobs/" + digestOf('5')}; !slices.Equal(v.URLs, want) {
		t.Errorf("urls %v, want %v", v.URLs, want)
	}
	if v.Removed {
		t.Error("removed")
	}
	wantM := []kudoindex.Maintainer{{Name: "Jane", Email: "jane@example.com"}, {Name: "Team"}}
	if len(v.Maintainers) != len(wantM) {
		t.Fatalf("maintainers %v", v.Maintainers)
	}
	for i, m := range v.Maintainers {
		if *m != wantM[i] {
			t.Errorf("maintainer %d = %+v, want %+v", i, *m, wantM[i])
		}
	}

	etcd := idx.Entries["etcd"]
	if len(etcd) != 2 || etcd[0].OperatorVersion != "0.9.4" || etcd[1].OperatorVersion != "0.9.2" || etcd[0].AppVersion != "" {
		t.Errorf("etcd entries %+v %+v", etcd[0].Metadata, etcd[1].Metadata)
	}
	weird := idx.Entries["weird"][0]
	if wantD := strings.ToValidUTF8(trickyDescription, "\uFFFD"); weird.Description != wantD {
		t.Errorf("description read back as %q, want %q", weird.Description, wantD)
	}
	if m := weird.Maintainers[0]; m.Name != "null" || m.Email != `a"b@example.com` {
		t.Errorf("maintainer read back as %+v", m)
	}

	// The fields beside KUDO's: version and created.
	var raw struct {
		Entries map[string][]map[string]any `json:"entries"`
	}
	if err := yaml.Unmarshal(res.body, &raw); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string][2]string{
		"kudo/kafka": {"1.3.2", tMeta.Format(time.RFC3339)}, // KUDO: version is the operatorVersion; created from the metadata
		"etcd":       {"0.9.4", t0.Format(time.RFC3339)},    // no created in the metadata: when it was indexed
	} {
		e := raw.Entries[key][0]
		if e["version"] != want[0] || e["created"] != want[1] {
			t.Errorf("%s: version %v created %v, want %v", key, e["version"], e["created"], want)
		}
	}
}

func TestNamespaceIndex(t *testing.T) {
	f := indexFake()
	res := serve(t, newHandler(f, nil, nil), "GET", "/kudo/index.yaml", nil)
	if got, want := f.called(), []string{"FeedHead", "Walk"}; !slices.Equal(got, want) {
		t.Errorf("catalog calls %v, want %v", got, want)
	}
	idx := parseIndex(t, res.body)
	if len(idx.Entries) != 2 || len(idx.Entries["kafka"]) != 4 || len(idx.Entries["zookeeper"]) != 1 {
		t.Errorf("entries %v, want kafka (4 versions) and zookeeper, keyed by name", idx.Entries)
	}
}

func TestIndexAccessAndEmpty(t *testing.T) {
	f := indexFake()
	h := newHandler(f, fakeAuth{access: catalog.NamespaceAccess("olm")}, nil)
	idx := parseIndex(t, serve(t, h, "GET", "/index.yaml", nil).body)
	if len(idx.Entries) != 2 || idx.Entries["etcd"] == nil || idx.Entries["weird"] == nil {
		t.Errorf("entries %v, want only olm's", idx.Entries)
	}
	res := serve(t, h, "GET", "/kudo/index.yaml", nil)
	if string(res.body) != "apiVersion: v1\nentries: {}\n" {
		t.Errorf("index of a namespace the caller may not pull: %q", res.body)
	}
	if idx := parseIndex(t, res.body); idx.Entries == nil || len(idx.Entries) != 0 {
		t.Errorf("empty index parsed as %+v", idx)
	}
}

// TestIndexDownloadBase checks the base URL of the download links: the
// forwarding headers are honoured only from a trusted proxy.
func TestIndexDownloadBase(t *testing.T) {
	proxies, err := forwarded.ParseProxies([]string{"10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	spoof := []string{"X-Forwarded-Proto", "https", "X-Forwarded-Host", "evil.example"}
	for _, tc := range []struct {
		registryURL string
		peer        string
		header      []string
		want        string
	}{
		{"", "192.0.2.1:1234", nil, "http://berth.example"},
		{"", "192.0.2.1:1234", spoof, "http://berth.example"},
		{"", "10.1.2.3:1234", []string{"X-Forwarded-Proto", "https", "X-Forwarded-Host", "registry.example.com:8443"}, "https://registry.example.com:8443"},
		{"", "10.1.2.3:1234", []string{"Forwarded", "for=192.0.2.1;proto=https;host=fwd.example"}, "https://fwd.example"},
		{"", "10.1.2.3:1234", []string{"X-Forwarded-Proto", "gopher", "X-Forwarded-Host", "evil/path"}, "http://berth.example"},
		{"https://registry.example.com/", "10.1.2.3:1234", spoof, "https://registry.example.com"},
	} {
		h := proxies.Handler(httpapi.New(httpapi.Options{Catalog: indexFake(), RegistryURL: tc.registryURL}))
		res := serve(t, h, "GET", "/kudo/index.yaml", nil, append([]string{"RemoteAddr", tc.peer}, tc.header...)...)
		idx := parseIndex(t, res.body)
		if got, want := idx.Entries["zookeeper"][0].URLs[0], tc.want+"/v2/kudo/zookeeper/blobs/"+digestOf('6'); got != want {
			t.Errorf("%v %s %v: url %s, want %s", tc.registryURL, tc.peer, tc.header, got, want)
		}
	}
}

func TestIndexETag(t *testing.T) {
	f := indexFake()
	h := newHandler(f, nil, nil)
	first := serve(t, h, "GET", "/index.yaml", nil)
	etag := first.header.Get("ETag")
	if !strings.HasPrefix(etag, `"`) || strings.HasPrefix(etag, "W/") {
		t.Fatalf("ETag %q is not a strong tag", etag)
	}
	if again := serve(t, h, "GET", "/index.yaml", nil); again.header.Get("ETag") != etag || string(again.body) != string(first.body) {
		t.Errorf("same state, different answer")
	}

	for _, inm := range []string{etag, "*", `"other", ` + etag, "W/" + etag} {
		f.calls = nil
		res := serve(t, h, "GET", "/index.yaml", nil, "If-None-Match", inm)
		if res.status != http.StatusNotModified || len(res.body) != 0 || res.header.Get("ETag") != etag {
			t.Errorf("If-None-Match %s: status %d, %d bytes, ETag %q", inm, res.status, len(res.body), res.header.Get("ETag"))
		}
		if got := f.called(); !slices.Equal(got, []string{"FeedHead"}) {
			t.Errorf("If-None-Match %s: calls %v, want only FeedHead", inm, got)
		}
	}
	if res := serve(t, h, "GET", "/index.yaml", nil, "If-None-Match", `"idx-6-0000"`); res.status != 200 {
		t.Errorf("stale tag: status %d, want 200", res.status)
	}

	other := map[string]string{}
	other["namespace"] = serve(t, h, "GET", "/kudo/index.yaml", nil).header.Get("ETag")
	other["host"] = serve(t, h, "GET", "/index.yaml", nil, "Host", "mirror.example").header.Get("ETag")
	other["access"] = serve(t, newHandler(f, fakeAuth{access: catalog.NamespaceAccess("kudo")}, nil), "GET", "/index.yaml", nil).header.Get("ETag")
	f.seq++
	other["change"] = serve(t, h, "GET", "/index.yaml", nil).header.Get("ETag")
	for what, tag := range other {
		if tag == etag || tag == "" {
			t.Errorf("another %s, same ETag %q", what, tag)
		}
	}
}

// TestIndexIsStreamed checks that the index reaches the client while the
// catalog is still being walked.
func TestIndexIsStreamed(t *testing.T) {
	f := newFake()
	const n = 2000
	for i := range n {
		e := kudoEntry("big", fmt.Sprintf("pkg%05d", i), "1.0.0", "0.1.0", 'a')
		e.Metadata.Description = strings.Repeat("d", 100)
		f.entries = append(f.entries, e)
	}
	rec := httptest.NewRecorder()
	var writtenBeforeEnd int
	f.onWalk = func(i int) error {
		if i == n-1 {
			writtenBeforeEnd = rec.Body.Len()
		}
		return nil
	}
	newHandler(f, nil, nil).ServeHTTP(rec, httptest.NewRequest("GET", "/big/index.yaml", nil))
	if writtenBeforeEnd == 0 || rec.Body.Len() <= writtenBeforeEnd {
		t.Errorf("%d of %d bytes written before the walk ended; want most of them", writtenBeforeEnd, rec.Body.Len())
	}
	if idx := parseIndex(t, rec.Body.Bytes()); len(idx.Entries) != n {
		t.Errorf("%d entries, want %d", len(idx.Entries), n)
	}
}

func TestIndexWalkFails(t *testing.T) {
	t.Run("before the response started", func(t *testing.T) {
		f := indexFake()
		f.onWalk = func(int) error { return errors.New("disk on fire") }
		res := serve(t, newHandler(f, nil, nil), "GET", "/kudo/index.yaml", nil)
		if res.status != 500 || res.header.Get("ETag") != "" || res.header.Get("Content-Type") != "application/json" {
			t.Errorf("status %d, headers %v", res.status, res.header)
		}
	})
	t.Run("after the response started", func(t *testing.T) {
		f := newFake()
		for i := range 2000 {
			f.entries = append(f.entries, kudoEntry("big", fmt.Sprintf("pkg%05d", i), "1.0.0", "0.1.0", 'a'))
		}
		f.onWalk = func(i int) error {
			if i == 1500 {
				return errors.New("disk on fire")
			}
			return nil
		}
		srv := httptest.NewServer(newHandler(f, nil, nil))
		defer srv.Close()
		res, err := http.Get(srv.URL + "/big/index.yaml")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err == nil {
			t.Errorf("a failed walk ended in a complete-looking response of %d bytes", len(body))
		}
	})
}

// growingCatalog adds a package between the two walks of /index.yaml.
type growingCatalog struct {
	*fakeCatalog
	walks int
}

func (g *growingCatalog) Walk(ctx context.Context, access catalog.Access, ns string, fn func(*catalog.Entry) error) error {
	if g.walks++; g.walks == 2 {
		g.entries = append(g.entries, olmEntry("zzz", "etcd", "1.0.0", '9'))
	}
	return g.fakeCatalog.Walk(ctx, access, ns, fn)
}

// TestIndexNameSharedDuringTheWalk checks that a name that becomes shared
// after the first walk still gets no duplicate key.
func TestIndexNameSharedDuringTheWalk(t *testing.T) {
	h := httpapi.New(httpapi.Options{Catalog: &growingCatalog{fakeCatalog: indexFake()}})
	idx := parseIndex(t, serve(t, h, "GET", "/index.yaml", nil).body)
	if len(idx.Entries["etcd"]) != 2 || len(idx.Entries["zzz/etcd"]) != 1 {
		t.Errorf("entries %v, want etcd (olm's, 2 versions) and zzz/etcd", idx.Entries)
	}
}
