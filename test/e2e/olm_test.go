package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"sigs.k8s.io/yaml"

	"github.com/berth-registry/berth/catalog/apiv1"
)

// olmNamespace is where TestOLMCatalogWithOpm pushes every OLM fixture package.
const olmNamespace = "community"

// TestOLMCatalogWithOpm pushes every OLM fixture package to one berth and
// reads what berth generates from them — the bundle images and the
// namespace's catalog image — with the real opm, and compares what opm
// makes of them with berth's own API.
func TestOLMCatalogWithOpm(t *testing.T) {
	opm := newOpm(t)
	s := startServer(t, "")
	pushOLMFixtures(t, s, olmNamespace)
	members := channelMembers(t, s, olmNamespace)
	waitUntilSlow(t, s, fmt.Sprintf("an olm.bundle for each of the %d versions in a channel in GET /api/v1/olm/%s/all", members, olmNamespace), func() bool {
		return len(ofSchema(olmAll(t, s, olmNamespace), "olm.bundle")) == members
	})
	digest := steadyCatalog(t, s, olmNamespace)
	ref := catalogRef(s, olmNamespace, digest)
	docs := opm.render(t, ref)
	api := olmAll(t, s, olmNamespace)

	t.Run("BundleImages", func(t *testing.T) { testBundleImages(t, s, opm, docs, api) })
	t.Run("CatalogImage", func(t *testing.T) { testCatalogImage(t, s, opm, digest, docs, api) })
	t.Run("ChannelGraphs", func(t *testing.T) { testChannelGraphs(t, s, opm, ref, docs) })
	t.Run("PushAndDelete", func(t *testing.T) { testPushAndDelete(t, s, opm, digest, docs) })
	t.Run("ReplacesAcrossChannels", func(t *testing.T) { testReplacesAcrossChannels(t, s, opm) })
}

// testBundleImages renders the bundle image of a bundle-layout version and of
// a package-manifest-layout version with opm, and checks that every version
// in the catalog names its version's bundle image.
func testBundleImages(t *testing.T, s *server, opm *opmCLI, docs, api []fbcDoc) {
	for _, tc := range []struct{ layout, name, folder string }{
		{"bundle", "cockroachdb", "5.0.4"},
		{"package manifest", "etcd", "0.9.4"},
	} {
		t.Run(tc.layout, func(t *testing.T) {
			csv := readCSV(t, filepath.Join(fixtures, "olm-community", tc.name, tc.folder))
			tag := tagOf(csv.Version)
			ref := bundleRef(t, s, olmNamespace, tc.name, tag)
			show := berth(t, "", "show", olmNamespace+"/"+tc.name+":"+tag, "--server", s.addr).stdout
			if m := regexp.MustCompile(`(?mi)^bundle:\s+(\S+)\s*$`).FindStringSubmatch(show); m == nil || m[1] != ref {
				t.Errorf("berth show %s/%s:%s has no line `bundle: %s`:\n%s", olmNamespace, tc.name, tag, ref, show)
			}
			var v struct{ Digest string }
			getJSON(t, s, "/api/v1/packages/"+olmNamespace+"/"+tc.name+"/versions/"+tag, &v)
			var referrers ocispec.Index
			getJSON(t, s, "/v2/"+olmNamespace+"/"+tc.name+"/referrers/"+v.Digest, &referrers)
			_, bundle, _ := strings.Cut(ref, "@")
			if !slices.ContainsFunc(referrers.Manifests, func(d ocispec.Descriptor) bool { return d.Digest.String() == bundle }) {
				t.Errorf("the bundle %s is not among the referrers of the version %s: %+v", bundle, v.Digest, referrers.Manifests)
			}
			rendered := opm.render(t, ref)
			if len(rendered) != 1 || rendered[0].str("schema") != "olm.bundle" {
				t.Fatalf("opm render %s: %d documents, want one olm.bundle", ref, len(rendered))
			}
			b, want := rendered[0], bundleProps{tc.name, csv.Version}
			if p := packageProp(t, b); b.str("name") != csv.Name || b.str("package") != tc.name || b.str("image") != ref || p != want {
				t.Errorf("opm render %s: name %q, package %q, image %q, olm.package %+v; want %q, %q, the reference, %+v",
					ref, b.str("name"), b.str("package"), b.str("image"), p, csv.Name, tc.name, want)
			}
			// The catalog's document of the bundle is what opm makes of
			// the image with its olm.bundle.object properties migrated to
			// the one olm.csv.metadata catalogs carry (opm sorts the
			// properties, berth writes them in its own order: compared as
			// sets).
			migrated := opm.render(t, "--migrate-level", "bundle-object-to-csv-metadata", ref)
			if len(migrated) != 1 {
				t.Fatalf("opm render --migrate-level bundle-object-to-csv-metadata %s: %d documents, want 1", ref, len(migrated))
			}
			inCatalog := findDoc(api, "olm.bundle", tc.name, csv.Name)
			if canonical(migrated[0], true) != canonical(inCatalog, true) {
				t.Errorf("the catalog's olm.bundle %s (first) is not what opm renders of its image (second), %s",
					csv.Name, firstDifference(canonical(inCatalog, true), canonical(migrated[0], true)))
			}
		})
	}
	// Every bundle in the catalog is its version's bundle image.
	for _, b := range ofSchema(docs, "olm.bundle") {
		p := packageProp(t, b)
		if want := bundleRef(t, s, olmNamespace, p.PackageName, tagOf(p.Version)); b.str("image") != want {
			t.Errorf("the catalog's bundle %s has image %q; GET the version %s:%s says %q", b.str("name"), b.str("image"), p.PackageName, p.Version, want)
		}
	}
}

// testCatalogImage validates the rendered catalog with opm, and checks that
// it is the FBC the JSON Lines API serves, and that the image is shaped as
// OLM's catalog images are.
func testCatalogImage(t *testing.T, s *server, opm *opmCLI, digest string, docs, api []fbcDoc) {
	validate(t, opm, docs)
	sameDocs(t, "opm render of the catalog image", docs, "GET /api/v1/olm/"+olmNamespace+"/all", api)
	for _, q := range []url.Values{
		{"schema": {"olm.package"}},
		{"schema": {"olm.channel"}, "package": {"etcd"}},
		{"schema": {"olm.bundle"}, "package": {"cockroachdb"}},
	} {
		var want []fbcDoc
		for _, d := range api {
			if d.str("schema") == q.Get("schema") && (q.Get("package") == "" || d.str("package") == q.Get("package")) {
				want = append(want, d)
			}
		}
		path := "/api/v1/olm/" + olmNamespace + "/metas?" + q.Encode()
		code, body := s.get(t, path)
		if code != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, code, abbreviate(body))
			continue
		}
		sameDocs(t, "GET "+path, decodeDocs(t, path, body), "its documents in /all", want)
	}
	var manifest ocispec.Manifest
	var config ocispec.Image
	repo := "/v2/" + olmNamespace + "/olm/catalog"
	registryJSON(t, s, repo+"/manifests/"+digest, &manifest)
	registryJSON(t, s, repo+"/blobs/"+manifest.Config.Digest.String(), &config)
	if got := config.Config.Labels["operators.operatorframework.io.index.configs.v1"]; got != "/configs" {
		t.Errorf("catalog label operators.operatorframework.io.index.configs.v1 = %q, want /configs", got)
	}
	if packages := len(ofSchema(docs, "olm.package")); len(manifest.Layers) == 0 || len(manifest.Layers) > packages {
		t.Errorf("the catalog image has %d layers for %d packages, want one per shard holding a package", len(manifest.Layers), packages)
	}
}

// testChannelGraphs compares, for every fixture package and every channel,
// the channels, heads, entries and edges opm reads in the catalog image with
// berth's package, graph and upgrades APIs. opm names bundles (CSV names),
// berth versions (tags): the catalog's olm.bundle documents map one to the
// other.
func testChannelGraphs(t *testing.T, s *server, opm *opmCLI, ref string, docs []fbcDoc) {
	heads := opm.listChannels(t, ref)
	entries := opm.listBundles(t, ref)
	drawn := opm.renderGraph(t, ref)
	for _, name := range fixturePackages(t) {
		t.Run(name, func(t *testing.T) {
			tags := bundleTagsOf(t, docs, name)
			var pkg apiv1.Package
			if code := getJSON(t, s, "/api/v1/packages/"+olmNamespace+"/"+name, &pkg); code != http.StatusOK {
				t.Fatalf("GET the package: %d", code)
			}
			if p := findDoc(docs, "olm.package", "", name); p == nil || p.str("defaultChannel") != pkg.DefaultChannel {
				t.Errorf("default channel: the catalog's olm.package %v, the API %q", p["defaultChannel"], pkg.DefaultChannel)
			}
			apiChannels := map[string]apiv1.Channel{}
			for _, c := range pkg.Channels {
				apiChannels[c.Name] = c
			}
			if got, want := slices.Sorted(maps.Keys(heads[name])), slices.Sorted(maps.Keys(apiChannels)); !slices.Equal(got, want) {
				t.Fatalf("channels: opm %q, the API %q", got, want)
			}
			for _, channel := range slices.Sorted(maps.Keys(heads[name])) {
				members := entries[name][channel]
				want := channelGraph{head: tags.of(heads[name][channel]), edges: map[[2]string]string{}}
				for member := range members {
					want.versions = append(want.versions, tags.of(member))
				}
				for _, e := range drawn[name][channel] {
					if _, in := members[e.From]; in && e.From != e.To {
						want.add(tags.of(e.From), tags.of(e.To), e.Kind)
					}
				}
				compareChannel(t, s, name, apiChannels[channel], want)
			}
		})
	}
}

// channelGraph is a channel as opm reads it, in berth's terms.
type channelGraph struct {
	head     string
	versions []string
	edges    map[[2]string]string // (from, to) -> kind
}

// add adds an edge, keeping the kind berth prefers when several derive it:
// replaces, then skips, then skipRange.
func (g *channelGraph) add(from, to, kind string) {
	rank := []string{apiv1.EdgeReplaces, apiv1.EdgeSkips, apiv1.EdgeSkipRange}
	e := [2]string{from, to}
	if old, ok := g.edges[e]; !ok || slices.Index(rank, kind) < slices.Index(rank, old) {
		g.edges[e] = kind
	}
}

// compareChannel checks berth's package, graph and upgrades APIs for one
// channel of package name against what opm read.
func compareChannel(t *testing.T, s *server, name string, c apiv1.Channel, want channelGraph) {
	t.Helper()
	path := "/api/v1/packages/" + olmNamespace + "/" + name + "/channels/" + url.PathEscape(c.Name) + "/graph"
	var g apiv1.Graph
	if code := getJSON(t, s, path, &g); code != http.StatusOK {
		t.Errorf("GET %s: %d", path, code)
		return
	}
	slices.Sort(want.versions)
	var nodes []string
	for _, n := range g.Nodes {
		nodes = append(nodes, n.Version)
	}
	if c.Head != want.head || g.Head != want.head {
		t.Errorf("channel %s: head: opm %s, the package API %s, the graph API %s", c.Name, want.head, c.Head, g.Head)
	}
	if slices.Sort(nodes); !slices.Equal(nodes, want.versions) || !slices.Equal(slices.Sorted(slices.Values(c.Versions)), want.versions) {
		t.Errorf("channel %s: versions: opm %q, the package API %q, the graph API %q", c.Name, want.versions, c.Versions, nodes)
	}
	got := map[[2]string]string{}
	for _, e := range g.Edges {
		got[[2]string{e.From, e.To}] = e.Kind
	}
	for e, kind := range want.edges {
		if got[e] != kind {
			t.Errorf("channel %s: edge %s -> %s: opm %s, the graph API %q", c.Name, e[0], e[1], kind, got[e])
		}
	}
	for e, kind := range got {
		if _, ok := want.edges[e]; !ok {
			t.Errorf("channel %s: edge %s -> %s (%s) in the graph API, not in opm's graph", c.Name, e[0], e[1], kind)
		}
	}
	for _, from := range want.versions {
		var next []string
		for e := range want.edges {
			if e[0] == from {
				next = append(next, e[1])
			}
		}
		var u apiv1.Upgrades
		path := "/api/v1/packages/" + olmNamespace + "/" + name + "/upgrades?" + url.Values{"channel": {c.Name}, "from": {from}}.Encode()
		if code := getJSON(t, s, path, &u); code != http.StatusOK {
			t.Errorf("GET %s: %d", path, code)
			continue
		}
		if slices.Sort(next); u.Head != want.head || !slices.Equal(slices.Sorted(slices.Values(u.Next)), next) {
			t.Errorf("upgrades of %s in %s: head %s, next %q; opm's graph: head %s, next %q", from, c.Name, u.Head, u.Next, want.head, next)
		}
	}
}

// testPushAndDelete pushes a new version of a package and deletes it again:
// each republishes the catalog image, with the version and then without it,
// and an idempotent push publishes nothing.
func testPushAndDelete(t *testing.T, s *server, opm *opmCLI, before string, docs []fbcDoc) {
	const name, channel = "cockroachdb", "stable-5.x"
	src := filepath.Join(fixtures, "olm-community", name, "5.0.4")
	var pkg apiv1.Package
	getJSON(t, s, "/api/v1/packages/"+olmNamespace+"/"+name, &pkg)
	i := slices.IndexFunc(pkg.Channels, func(c apiv1.Channel) bool { return c.Name == channel })
	if i < 0 {
		t.Fatalf("%s has no channel %s: %+v", name, channel, pkg.Channels)
	}
	head := bundleTagsOf(t, docs, name).csvOf(pkg.Channels[i].Head)
	if head == "" {
		t.Fatalf("the head %s of %s is not in the catalog", pkg.Channels[i].Head, channel)
	}
	dir := makeBundle(t, src, bundleSpec{pkg: name, csv: "cockroachdb.v5.0.5", version: "5.0.5", replaces: head, channels: []string{channel}})
	pushed := digestOf(t, berth(t, "", "push", dir, s.addr+"/"+olmNamespace+"/"+name, "--format", "json").stdout)

	after := nextCatalog(t, s, olmNamespace, before)
	ref := catalogRef(s, olmNamespace, after)
	if b := findDoc(opm.render(t, ref), "olm.bundle", name, "cockroachdb.v5.0.5"); b == nil {
		t.Errorf("the catalog after pushing %s 5.0.5 has no bundle cockroachdb.v5.0.5", name)
	} else if want := bundleRef(t, s, olmNamespace, name, "5.0.5"); b.str("image") != want {
		t.Errorf("the new bundle's image is %q, the version's bundle %q", b.str("image"), want)
	}
	if got := opm.listBundles(t, ref)[name][channel]["cockroachdb.v5.0.5"]; got.Replaces != head {
		t.Errorf("opm lists cockroachdb.v5.0.5 in %s replacing %q, want %q", channel, got.Replaces, head)
	}
	if got := opm.listChannels(t, ref)[name][channel]; got != "cockroachdb.v5.0.5" {
		t.Errorf("the head of %s is %q after the push, want cockroachdb.v5.0.5", channel, got)
	}

	req, _ := http.NewRequest(http.MethodDelete, s.url()+"/v2/"+olmNamespace+"/"+name+"/manifests/"+pushed, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("DELETE the version %s: %d", pushed, resp.StatusCode)
	}
	gone := nextCatalog(t, s, olmNamespace, after)
	sameDocs(t, "the catalog after the delete", opm.render(t, catalogRef(s, olmNamespace, gone)), "the catalog before the push", docs)
	if gone != before {
		t.Errorf("the catalog after the delete is %s, before the push %s: the same packages must make the same image", gone, before)
	}

	// Pushing a version that is already there changes nothing.
	berth(t, "", "push", src, s.addr+"/"+olmNamespace+"/"+name)
	time.Sleep(2 * time.Second)
	if now := catalogDigest(t, s, olmNamespace); now != gone {
		t.Errorf("the catalog moved from %s to %s with nothing pushed but an existing version", gone, now)
	}
}

// testReplacesAcrossChannels builds a replaces chain whose versions list
// different channels: a channel holds its head and every version reachable
// from it through replaces, whatever channels that version lists.
func testReplacesAcrossChannels(t *testing.T, s *server, opm *opmCLI) {
	const ns, name = "chain", "cockroachdb"
	src := filepath.Join(fixtures, "olm-community", name, "5.0.4")
	for _, b := range []bundleSpec{
		{pkg: name, csv: "cockroachdb.v1.0.0", version: "1.0.0", channels: []string{"alpha"}},
		{pkg: name, csv: "cockroachdb.v1.1.0", version: "1.1.0", replaces: "cockroachdb.v1.0.0", channels: []string{"stable", "alpha"}},
		{pkg: name, csv: "cockroachdb.v1.2.0", version: "1.2.0", replaces: "cockroachdb.v1.1.0", channels: []string{"stable"}},
	} {
		berth(t, "", "push", makeBundle(t, src, b), s.addr+"/"+ns+"/"+name)
	}
	waitUntil(t, s, "three bundles in GET /api/v1/olm/"+ns+"/all", func() bool {
		return len(ofSchema(olmAll(t, s, ns), "olm.bundle")) == 3
	})
	ref := catalogRef(s, ns, steadyCatalog(t, s, ns))
	docs := opm.render(t, ref)
	validate(t, opm, docs)

	want := map[string]map[string]string{ // channel -> entry -> replaces
		"alpha":  {"cockroachdb.v1.1.0": "cockroachdb.v1.0.0", "cockroachdb.v1.0.0": ""},
		"stable": {"cockroachdb.v1.2.0": "cockroachdb.v1.1.0", "cockroachdb.v1.1.0": "cockroachdb.v1.0.0", "cockroachdb.v1.0.0": ""},
	}
	fbc := map[string]map[string]string{}
	for _, c := range ofSchema(docs, "olm.channel") {
		var ch struct {
			Entries []struct{ Name, Replaces string }
		}
		if err := json.Unmarshal([]byte(canonical(c, false)), &ch); err != nil {
			t.Fatal(err)
		}
		fbc[c.str("name")] = map[string]string{}
		for _, e := range ch.Entries {
			fbc[c.str("name")][e.Name] = e.Replaces
		}
	}
	listed := map[string]map[string]string{}
	for channel, entries := range opm.listBundles(t, ref)[name] {
		listed[channel] = map[string]string{}
		for bundle, e := range entries {
			listed[channel][bundle] = e.Replaces
		}
	}
	for what, got := range map[string]map[string]map[string]string{"the catalog's olm.channel documents": fbc, "opm alpha list bundles": listed} {
		if !maps.EqualFunc(got, want, maps.Equal) {
			t.Errorf("%s: entries (bundle: replaces) %v, want %v", what, got, want)
		}
	}
	if got := opm.listChannels(t, ref)[name]; got["alpha"] != "cockroachdb.v1.1.0" || got["stable"] != "cockroachdb.v1.2.0" {
		t.Errorf("opm's heads %v, want alpha cockroachdb.v1.1.0 and stable cockroachdb.v1.2.0", got)
	}

	var pkg apiv1.Package
	getJSON(t, s, "/api/v1/packages/"+ns+"/"+name, &pkg)
	wantChannels := []apiv1.Channel{
		{Name: "alpha", Head: "1.1.0", Versions: []string{"1.1.0", "1.0.0"}},
		{Name: "stable", Head: "1.2.0", Versions: []string{"1.2.0", "1.1.0", "1.0.0"}},
	}
	if !slices.EqualFunc(pkg.Channels, wantChannels, func(a, b apiv1.Channel) bool {
		return a.Name == b.Name && a.Head == b.Head && slices.Equal(a.Versions, b.Versions)
	}) || pkg.DefaultChannel != "stable" {
		t.Errorf("the package API: channels %+v, default %q; want %+v, default stable", pkg.Channels, pkg.DefaultChannel, wantChannels)
	}
	var g apiv1.Graph
	getJSON(t, s, "/api/v1/packages/"+ns+"/"+name+"/channels/stable/graph", &g)
	wantEdges := []apiv1.GraphEdge{{From: "1.1.0", To: "1.2.0", Kind: apiv1.EdgeReplaces}, {From: "1.0.0", To: "1.1.0", Kind: apiv1.EdgeReplaces}}
	if !slices.Equal(sortedEdges(g.Edges), sortedEdges(wantEdges)) || g.Head != "1.2.0" {
		t.Errorf("the graph of stable: head %s, edges %+v; want head 1.2.0, edges %+v", g.Head, g.Edges, wantEdges)
	}
}

// pushOLMFixtures pushes every OLM fixture package to namespace ns, four at
// a time, and waits until the catalog has indexed every version.
func pushOLMFixtures(t *testing.T, s *server, ns string) {
	t.Helper()
	names := fixturePackages(t)
	errs := make(chan error, len(names))
	sem := make(chan struct{}, 4)
	for _, name := range names {
		go func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out, err := exec.Command(berthBin, "push", filepath.Join(fixtures, "olm-community", name), s.addr+"/"+ns).CombinedOutput()
			if err != nil {
				err = fmt.Errorf("berth push %s: %v\n%s", name, err, out)
			}
			errs <- err
		}()
	}
	for range names {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	versions := 0
	for _, name := range names {
		versions += len(subdirs(t, filepath.Join(fixtures, "olm-community", name)))
	}
	waitUntil(t, s, fmt.Sprintf("%d versions indexed", versions), func() bool {
		var st apiv1.Status
		return getJSON(t, s, "/api/v1/status", &st) == http.StatusOK && st.Versions == versions
	})
}

// channelMembers counts the versions of namespace ns that berth's package
// API puts in some channel: those the FBC has an olm.bundle for, since opm
// has no place for a bundle in no channel (a version no channel head
// reaches through replaces, "stranded").
func channelMembers(t *testing.T, s *server, ns string) int {
	t.Helper()
	n := 0
	for _, name := range fixturePackages(t) {
		var p apiv1.Package
		if code := getJSON(t, s, "/api/v1/packages/"+ns+"/"+name, &p); code != http.StatusOK {
			t.Fatalf("GET package %s/%s: %d", ns, name, code)
		}
		in := map[string]bool{}
		for _, c := range p.Channels {
			for _, v := range c.Versions {
				in[v] = true
			}
		}
		n += len(in)
	}
	return n
}

// fixturePackages lists the OLM fixture packages (their folder names are
// their package names).
func fixturePackages(t *testing.T) []string {
	t.Helper()
	return subdirs(t, filepath.Join(fixtures, "olm-community"))
}

// subdirs lists the folders in dir.
func subdirs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}

// bundleSpec is a bundle a test makes from a fixture bundle: its CSV renamed
// and re-versioned, replacing the given CSV and skipping none, in the given
// channels (the first the default).
type bundleSpec struct {
	pkg, csv, version, replaces string
	channels                    []string
}

// makeBundle writes the bundle b, made from the bundle-layout fixture src,
// to a new folder and returns it.
func makeBundle(t *testing.T, src string, b bundleSpec) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), b.version)
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	path, csv := csvFile(t, dir)
	md, _ := csv["metadata"].(map[string]any)
	spec, _ := csv["spec"].(map[string]any)
	if md == nil || spec == nil {
		t.Fatalf("%s: no metadata or spec", path)
	}
	md["name"], spec["version"] = b.csv, b.version
	if annotations, ok := md["annotations"].(map[string]any); ok {
		delete(annotations, "olm.skipRange")
	}
	delete(spec, "skips")
	delete(spec, "replaces")
	if b.replaces != "" {
		spec["replaces"] = b.replaces
	}
	annotationsFile := filepath.Join(dir, "metadata", "annotations.yaml")
	var annotations struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.Unmarshal(readFile(t, annotationsFile), &annotations); err != nil {
		t.Fatal(err)
	}
	annotations.Annotations["operators.operatorframework.io.bundle.package.v1"] = b.pkg
	annotations.Annotations["operators.operatorframework.io.bundle.channels.v1"] = strings.Join(b.channels, ",")
	annotations.Annotations["operators.operatorframework.io.bundle.channel.default.v1"] = b.channels[0]
	for file, doc := range map[string]any{path: csv, annotationsFile: annotations} {
		out, err := yaml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// olmAll returns the documents of GET /api/v1/olm/{ns}/all, none while the
// namespace has no catalog.
func olmAll(t *testing.T, s *server, ns string) []fbcDoc {
	t.Helper()
	code, body := s.get(t, "/api/v1/olm/"+ns+"/all")
	if code != http.StatusOK {
		return nil
	}
	return decodeDocs(t, "GET /api/v1/olm/"+ns+"/all", body)
}

// bundleRef returns the bundle reference GET .../versions/{tag} gives, and
// checks it names the bundle's digest in the version's repository.
func bundleRef(t *testing.T, s *server, ns, name, tag string) string {
	t.Helper()
	var v struct {
		Bundle *struct{ Digest, Reference string }
	}
	path := "/api/v1/packages/" + ns + "/" + name + "/versions/" + tag
	if code := getJSON(t, s, path, &v); code != http.StatusOK {
		t.Fatalf("GET %s: %d", path, code)
	}
	if v.Bundle == nil || !strings.HasPrefix(v.Bundle.Digest, "sha256:") || v.Bundle.Reference != s.addr+"/"+ns+"/"+name+"@"+v.Bundle.Digest {
		t.Fatalf("GET %s: bundle %+v, want a digest and the reference %s/%s/%s@<digest>", path, v.Bundle, s.addr, ns, name)
	}
	return v.Bundle.Reference
}

// registryJSON decodes the manifest or blob at path of s's registry API into v.
func registryJSON(t *testing.T, s *server, path string, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.url()+path, nil)
	req.Header.Set("Accept", ocispec.MediaTypeImageManifest)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// catalogRef is the reference of ns's catalog image by digest.
func catalogRef(s *server, ns, digest string) string {
	return s.addr + "/" + ns + "/olm/catalog@" + digest
}

// catalogDigest returns the digest of ns's catalog image, "" while there is none.
func catalogDigest(t *testing.T, s *server, ns string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodHead, s.url()+"/v2/"+ns+"/olm/catalog/manifests/latest", nil)
	req.Header.Set("Accept", ocispec.MediaTypeImageManifest)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return resp.Header.Get("Docker-Content-Digest")
	case http.StatusNotFound:
		return ""
	}
	t.Fatalf("HEAD the catalog of %s: %d", ns, resp.StatusCode)
	return ""
}

// nextCatalog waits up to 10 s for ns's catalog image to change from old,
// and returns the new digest.
func nextCatalog(t *testing.T, s *server, ns, old string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if d := catalogDigest(t, s, ns); d != "" && d != old {
			return d
		}
	}
	t.Fatalf("the catalog of %s is still %q 10 s later\n%s", ns, old, s.logs())
	return ""
}

// steadyCatalog waits until ns's catalog image exists and has not changed for
// 2 s (berth publishes within about a second of a change), and returns its
// digest.
func steadyCatalog(t *testing.T, s *server, ns string) string {
	t.Helper()
	last, since := "", time.Now()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		d := catalogDigest(t, s, ns)
		if d != last {
			last, since = d, time.Now()
		}
		if d != "" && time.Since(since) >= 2*time.Second {
			return d
		}
	}
	t.Fatalf("the catalog of %s did not settle in 2 minutes (last %q)\n%s", ns, last, s.logs())
	return ""
}

// waitUntilSlow polls cond for up to 2 minutes: the bundle images of
// hundreds of versions take longer than what waitUntil allows.
func waitUntilSlow(t *testing.T, s *server, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); !cond(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s\n%s", what, s.logs())
		}
	}
}

// validate runs opm validate on docs written as a catalog directory.
func validate(t *testing.T, opm *opmCLI, docs []fbcDoc) {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	for _, d := range docs {
		b.WriteString(canonical(d, false) + "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "catalog.json"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	opm.run(t, "validate", dir)
}
