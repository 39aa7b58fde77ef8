package httpapi_test

import (
	"context"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/httpapi"
	"github.com/berth-registry/berth/internal/helmindex"
	"github.com/berth-registry/berth/pkgformat"
)

// chartEntry is a Helm chart pushed by `helm push`, with every field the
// catalog reads from a Chart.yaml and more that Helm's index has no place for.
func chartEntry(ns, name, version string, c byte) *catalog.Entry {
	return &catalog.Entry{
		Namespace: ns, Name: name, Tag: pkgformat.Tag(version), Digest: digestOf('m'), Status: apiv1.StatusIndexed, Indexed: t0,
		Metadata: &pkgformat.Metadata{
			SchemaVersion: 1, Name: name, Version: version, Format: pkgformat.Helm, AppVersion: "2.0",
			Description: "A web app: " + trickyDescription, Keywords: []string{"demo", "web"},
			Maintainers: []pkgformat.Maintainer{{Name: "Jane", Email: "jane@example.com", URL: "https://jane.example"}, {Name: "Team"}},
			Links: []pkgformat.Link{
				{Name: "Home", URL: "https://webapp.example"},
				{Name: "Source", URL: "https://git.example/a"}, {Name: "Source", URL: "https://git.example/b"},
				{Name: "Docs", URL: "https://docs.example"},
			},
			Icon:             &pkgformat.Icon{URL: "https://webapp.example/icon.png"},
			License:          "Apache-2.0",
			MinKubeVersion:   "1.25.0",
			RequiredPackages: []pkgformat.PackageRequirement{{Name: "redis", VersionRange: "^17"}},
			ProvidedAPIs:     []pkgformat.API{{Group: "web.example", Version: "v1", Kind: "App"}},
			Readme:           "# webapp",
			Created:          &tMeta,
			Files:            []pkgformat.FileInfo{{Path: "Chart.yaml", Size: 10}},
		},
		Content: apiv1.Content{Digest: digestOf(c), Size: 100, MediaType: pkgformat.HelmChartContentMediaType},
	}
}

// helmFake holds Helm charts beside every other kind of package: webapp in
// two namespaces, and the name redis taken by a chart and a KUDO package.
func helmFake() *fakeCatalog {
	packed := chartEntry("charts", "packed", "1.0.0", '9') // `berth push` of a chart folder
	packed.Content.MediaType = pkgformat.ContentMediaType
	plain := olmEntry("charts", "manifests", "1.0.0", '8')
	plain.Metadata.Format = pkgformat.Plain
	olm := olmEntry("charts", "etcd", "0.9.4", '7')
	notHelm := chartEntry("charts", "operator", "1.0.0", '6') // a chart layer that holds a KUDO operator
	notHelm.Metadata.Format = pkgformat.KUDO
	minimal := chartEntry("stable", "redis", "17.0.0", '5')
	minimal.Metadata = &pkgformat.Metadata{SchemaVersion: 1, Name: "redis", Version: "17.0.0", Format: pkgformat.Helm}
	f := newFake()
	f.entries = []*catalog.Entry{ // as Walk delivers them: by namespace, then name
		olm, plain, notHelm, packed,
		chartEntry("charts", "webapp", "0.9.0", '1'),
		chartEntry("charts", "webapp", "0.10.0+build.1", '2'),
		kudoEntry("kudo", "redis", "", "0.1.0", '4'),
		minimal,
		chartEntry("stable", "webapp", "1.0.0", '3'),
	}
	return f
}

// parseHelmIndex decodes an index as Helm does (sigs.k8s.io/yaml's
// UnmarshalStrict into Helm's types), which refuses any field Helm does not
// know.
func parseHelmIndex(t *testing.T, body []byte) *helmindex.IndexFile {
	t.Helper()
	var idx helmindex.IndexFile
	if err := yaml.UnmarshalStrict(body, &idx); err != nil {
		t.Fatalf("Helm cannot parse the index: %v\n%s", err, body)
	}
	if idx.APIVersion != "v1" {
		t.Errorf("apiVersion %q", idx.APIVersion)
	}
	return &idx
}

func TestHelmIndex(t *testing.T) {
	f := helmFake()
	h := newHandler(f, nil, nil)
	res := serve(t, h, "GET", "/api/helm/index.yaml", nil)
	if res.status != 200 || res.header.Get("Content-Type") != "application/yaml" || res.header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("status %d, headers %v", res.status, res.header)
	}
	if got, want := f.called(), []string{"FeedHead", "Walk", "Walk"}; !slices.Equal(got, want) {
		t.Errorf("catalog calls %v, want %v", got, want)
	}
	idx := parseHelmIndex(t, res.body)

	// Which packages are listed, under which keys: only charts count when
	// telling whether a name is shared.
	for _, tc := range []struct {
		what, key string
		versions  []string // nil: not listed
	}{
		{"a chart in two namespaces", "charts/webapp", []string{"0.10.0+build.1", "0.9.0"}},
		{"the same name's other namespace", "stable/webapp", []string{"1.0.0"}},
		{"a chart whose name a KUDO package shares", "redis", []string{"17.0.0"}},
		{"a berth package of format helm", "packed", nil},
		{"a chart layer holding another format", "operator", nil},
		{"an OLM bundle", "etcd", nil},
		{"plain manifests", "manifests", nil},
		{"a KUDO package", "kudo/redis", nil},
	} {
		var got []string
		for _, v := range idx.Entries[tc.key] {
			got = append(got, v.Version)
		}
		if !slices.Equal(got, tc.versions) {
			t.Errorf("%s: %s lists %v, want %v", tc.what, tc.key, got, tc.versions)
		}
	}
	if len(idx.Entries) != 3 {
		t.Errorf("%d entries, want 3: %v", len(idx.Entries), idx.Entries)
	}

	want := helmindex.ChartVersion{
		Metadata: &helmindex.Metadata{
			Name: "webapp", Version: "0.10.0+build.1", AppVersion: "2.0",
			Description: strings.ToValidUTF8("A web app: "+trickyDescription, "\uFFFD"),
			Keywords:    []string{"demo", "web"},
			Home:        "https://webapp.example",
			Sources:     []string{"https://git.example/a", "https://git.example/b"},
			Maintainers: []*helmindex.Maintainer{{Name: "Jane", Email: "jane@example.com", URL: "https://jane.example"}, {Name: "Team"}},
			Icon:        "https://webapp.example/icon.png",
		},
		URLs:    []string{"charts/webapp/webapp-0.10.0+build.1.tgz"},
		Created: tMeta,
		Digest:  strings.Repeat("2", 64),
	}
	if got := idx.Entries["charts/webapp"][0]; !reflect.DeepEqual(*got, want) {
		t.Errorf("entry\n got %+v %+v\nwant %+v %+v", *got, *got.Metadata, want, *want.Metadata)
	}
	redis := idx.Entries["redis"][0]
	if redis.Created != t0 || redis.Home != "" || redis.Maintainers != nil || redis.Digest != strings.Repeat("5", 64) {
		t.Errorf("minimal chart %+v %+v: created when indexed, nothing made up", *redis, *redis.Metadata)
	}

	// Exactly these fields, the ones Helm's own index of such a chart has
	// (save apiVersion, which the catalog does not keep).
	var raw struct {
		Entries map[string][]map[string]any `json:"entries"`
	}
	if err := yaml.Unmarshal(res.body, &raw); err != nil {
		t.Fatal(err)
	}
	var fields []string
	for k := range raw.Entries["charts/webapp"][0] {
		fields = append(fields, k)
	}
	slices.Sort(fields)
	if want := []string{"appVersion", "created", "description", "digest", "home", "icon", "keywords", "maintainers", "name", "sources", "urls", "version"}; !slices.Equal(fields, want) {
		t.Errorf("fields %v, want %v", fields, want)
	}
}

func TestHelmNamespaceIndex(t *testing.T) {
	f := helmFake()
	h := newHandler(f, nil, nil)
	res := serve(t, h, "GET", "/api/helm/stable/index.yaml", nil)
	if got, want := f.called(), []string{"FeedHead", "Walk"}; !slices.Equal(got, want) {
		t.Errorf("catalog calls %v, want %v", got, want)
	}
	idx := parseHelmIndex(t, res.body)
	if len(idx.Entries) != 2 || len(idx.Entries["webapp"]) != 1 || len(idx.Entries["redis"]) != 1 {
		t.Fatalf("entries %v, want webapp and redis, keyed by name", idx.Entries)
	}
	if got, want := idx.Entries["webapp"][0].URLs, []string{"webapp/webapp-1.0.0.tgz"}; !slices.Equal(got, want) {
		t.Errorf("urls %v, want %v (relative to /api/helm/stable/)", got, want)
	}
	for _, ns := range []string{"kudo", "empty"} {
		res := serve(t, h, "GET", "/api/helm/"+ns+"/index.yaml", nil)
		if string(res.body) != "apiVersion: v1\nentries: {}\n" {
			t.Errorf("namespace without charts: %q", res.body)
		}
		parseHelmIndex(t, res.body)
	}
	if res := serve(t, h, "GET", "/api/helm/Bad_NS/index.yaml", nil); res.status != http.StatusBadRequest {
		t.Errorf("bad namespace: status %d", res.status)
	}
	h = newHandler(f, fakeAuth{access: catalog.NamespaceAccess("stable")}, nil)
	if idx := parseHelmIndex(t, serve(t, h, "GET", "/api/helm/index.yaml", nil).body); len(idx.Entries) != 2 || idx.Entries["webapp"] == nil {
		t.Errorf("entries %v, want only stable's, webapp keyed by name", idx.Entries)
	}
}

func TestHelmIndexETag(t *testing.T) {
	f := helmFake()
	h := newHandler(f, nil, nil)
	etag := serve(t, h, "GET", "/api/helm/index.yaml", nil).header.Get("ETag")
	if etag == "" || etag == serve(t, h, "GET", "/index.yaml", nil).header.Get("ETag") {
		t.Errorf("ETag %q: empty, or the same as KUDO's index", etag)
	}
	f.calls = nil
	if res := serve(t, h, "GET", "/api/helm/index.yaml", nil, "If-None-Match", etag); res.status != http.StatusNotModified || len(res.body) != 0 {
		t.Errorf("If-None-Match: status %d, %d bytes", res.status, len(res.body))
	}
	if got := f.called(); !slices.Equal(got, []string{"FeedHead"}) {
		t.Errorf("If-None-Match: calls %v, want only FeedHead", got)
	}
}

// chartCatalog answers Version from the entries of a fakeCatalog.
type chartCatalog struct{ *fakeCatalog }

func (c chartCatalog) Version(_ context.Context, access catalog.Access, ns, name, version string) (*apiv1.Version, error) {
	for _, e := range c.entries {
		if access.Allows(ns, name) && e.Namespace == ns && e.Name == name && e.Tag == pkgformat.Tag(version) {
			return &apiv1.Version{
				Namespace: ns, Name: name, Version: e.Metadata.Version, Digest: e.Digest, Format: e.Metadata.Format,
				PullReference: ns + "/" + name + "@" + e.Digest, Content: e.Content, Metadata: *e.Metadata, Indexed: e.Indexed,
			}, nil
		}
	}
	return nil, notFound("version %s/%s %s", ns, name, version)
}

func TestHelmChartDownload(t *testing.T) {
	cat := chartCatalog{helmFake()}
	for _, tc := range []struct {
		what, path  string
		registryURL string
		status      int
		location    string
	}{
		{"a chart", "/api/helm/charts/webapp/webapp-0.10.0+build.1.tgz", "", http.StatusTemporaryRedirect,
			"http://berth.example/v2/charts/webapp/blobs/" + digestOf('2')},
		{"a chart, registry elsewhere", "/api/helm/stable/webapp/webapp-1.0.0.tgz", "https://registry.example", http.StatusTemporaryRedirect,
			"https://registry.example/v2/stable/webapp/blobs/" + digestOf('3')},
		{"a berth package of format helm", "/api/helm/charts/packed/packed-1.0.0.tgz", "", http.StatusNotFound, ""},
		{"a chart layer holding another format", "/api/helm/charts/operator/operator-1.0.0.tgz", "", http.StatusNotFound, ""},
		{"an OLM bundle", "/api/helm/charts/etcd/etcd-0.9.4.tgz", "", http.StatusNotFound, ""},
		{"no such version", "/api/helm/charts/webapp/webapp-9.9.9.tgz", "", http.StatusNotFound, ""},
		{"another name's file", "/api/helm/charts/webapp/redis-0.9.0.tgz", "", http.StatusBadRequest, ""},
		{"not a .tgz", "/api/helm/charts/webapp/webapp-0.9.0.tar", "", http.StatusBadRequest, ""},
		{"no version", "/api/helm/charts/webapp/webapp-.tgz", "", http.StatusBadRequest, ""},
		{"a bad name", "/api/helm/charts/Web/Web-0.9.0.tgz", "", http.StatusBadRequest, ""},
	} {
		h := httpapi.New(httpapi.Options{Catalog: cat, RegistryURL: tc.registryURL})
		res := serve(t, h, "GET", tc.path, nil)
		if res.status != tc.status || res.header.Get("Location") != tc.location {
			t.Errorf("%s: %d, Location %q; want %d, %q", tc.what, res.status, res.header.Get("Location"), tc.status, tc.location)
		}
	}
	h := httpapi.New(httpapi.Options{Catalog: cat, Authorizer: fakeAuth{access: catalog.NamespaceAccess("stable")}})
	if res := serve(t, h, "GET", "/api/helm/charts/webapp/webapp-0.9.0.tgz", nil); res.status != http.StatusNotFound {
		t.Errorf("a namespace the caller may not pull: %d", res.status)
	}
}
