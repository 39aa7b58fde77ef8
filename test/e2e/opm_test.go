package e2e

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	orasgo "oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/memory"
	"oras.land/oras-go/v2/registry/remote"
	"sigs.k8s.io/yaml"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/internal/testenv"
)

// The opm CLI of operator-registry, pinned in tools/opm/go.mod and built by
// `make tools` into bin/opm. It is not a tool directive of berth's go.mod:
// operator-registry's dependencies would move berth's own.

// requireOpm returns the path of the opm binary: $BERTH_OPM, else bin/opm of
// the repository. It skips the test (fails it in CI) when there is none.
func requireOpm(t *testing.T) string {
	t.Helper()
	path := os.Getenv("BERTH_OPM")
	if path == "" {
		path = filepath.Join("..", "..", "bin", "opm")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(abs); err != nil {
		msg := "the opm CLI is missing (" + err.Error() + "): run `make tools`, or set BERTH_OPM"
		if testenv.CI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return abs
}

// opmCLI runs opm offline and on its own: a home of its own holding the
// containers policy that accepts any image (opm refuses to pull without a
// policy), no registries.conf but an empty one, no credentials, and its
// image cache and unpacked images in a temporary directory.
type opmCLI struct {
	bin string
	env []string
	// https leaves --use-http out, for a berth that serves TLS.
	https bool
}

// newOpm returns the opm CLI for t, or skips t (fails it in CI) when opm
// has not been built.
func newOpm(t *testing.T) *opmCLI {
	t.Helper()
	bin := requireOpm(t)
	home := t.TempDir()
	dirs := map[string]string{}
	for _, d := range []string{".config/containers", "runtime", "cache", "tmp"} {
		dirs[d] = filepath.Join(home, d)
		if err := os.MkdirAll(dirs[d], 0o700); err != nil {
			t.Fatal(err)
		}
	}
	policy := filepath.Join(dirs[".config/containers"], "policy.json")
	registries := filepath.Join(dirs[".config/containers"], "registries.conf")
	for file, content := range map[string]string{
		policy:     `{"default":[{"type":"insecureAcceptAnything"}]}`,
		registries: "",
	} {
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return &opmCLI{bin: bin, env: []string{
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_RUNTIME_DIR=" + dirs["runtime"],
		"XDG_CACHE_HOME=" + dirs["cache"],
		"TMPDIR=" + dirs["tmp"],
		"CONTAINERS_POLICY_JSON=" + policy,
		"CONTAINERS_REGISTRIES_CONF=" + registries,
		"REGISTRY_AUTH_FILE=" + filepath.Join(home, "auth.json"),
		"DOCKER_CONFIG=" + filepath.Join(home, ".docker"),
		"OLM_CACHE_DIR=",
	}}
}

// run runs opm with args and --use-http (berth serves plain HTTP on
// 127.0.0.1, unless https is set) and returns its standard output; it
// fails the test unless opm succeeds.
func (o *opmCLI) run(t *testing.T, args ...string) string {
	t.Helper()
	if !o.https {
		args = append(args, "--use-http")
	}
	r := runWith(t, command{env: o.env}, o.bin, args...)
	if r.code != 0 {
		t.Fatalf("opm %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// fbcDoc is one document of a file-based catalog, decoded as it is.
type fbcDoc map[string]any

// str returns the string field key of d, or "".
func (d fbcDoc) str(key string) string {
	s, _ := d[key].(string)
	return s
}

// render runs opm render of refs and returns its documents.
func (o *opmCLI) render(t *testing.T, refs ...string) []fbcDoc {
	t.Helper()
	return decodeDocs(t, "opm render "+strings.Join(refs, " "), o.run(t, append([]string{"render", "-o", "json"}, refs...)...))
}

// decodeDocs decodes a stream of JSON documents, as opm render writes them
// and JSON Lines alike.
func decodeDocs(t *testing.T, what, stream string) []fbcDoc {
	t.Helper()
	var docs []fbcDoc
	dec := json.NewDecoder(strings.NewReader(stream))
	for {
		var d fbcDoc
		if err := dec.Decode(&d); err == io.EOF {
			return docs
		} else if err != nil {
			t.Fatalf("%s: document %d: %v", what, len(docs)+1, err)
		}
		docs = append(docs, d)
	}
}

// bundleProps are the olm.package property of an olm.bundle document.
type bundleProps struct {
	PackageName, Version string
}

// packageProp returns the value of d's olm.package property.
func packageProp(t *testing.T, d fbcDoc) bundleProps {
	t.Helper()
	props, _ := d["properties"].([]any)
	for _, p := range props {
		p, _ := p.(map[string]any)
		if p["type"] != "olm.package" {
			continue
		}
		v, _ := p["value"].(map[string]any)
		name, _ := v["packageName"].(string)
		version, _ := v["version"].(string)
		return bundleProps{name, version}
	}
	t.Fatalf("bundle %s has no olm.package property: %v", d.str("name"), d["properties"])
	return bundleProps{}
}

// csvOf is the part of a bundle's ClusterServiceVersion the tests compare.
type csvOf struct {
	Name, Version string
}

// readCSV reads the one *.clusterserviceversion.yaml of a version folder
// (in manifests/ for the bundle layout).
func readCSV(t *testing.T, dir string) csvOf {
	t.Helper()
	_, doc := csvFile(t, dir)
	md, _ := doc["metadata"].(map[string]any)
	spec, _ := doc["spec"].(map[string]any)
	name, _ := md["name"].(string)
	version, _ := spec["version"].(string)
	if name == "" || version == "" {
		t.Fatalf("CSV of %s: no metadata.name or spec.version", dir)
	}
	return csvOf{name, version}
}

// csvFile finds and decodes the CSV of a version folder.
func csvFile(t *testing.T, dir string) (string, map[string]any) {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(dir, "*.clusterserviceversion.yaml"))
	more, _ := filepath.Glob(filepath.Join(dir, "manifests", "*.clusterserviceversion.yaml"))
	matches = append(matches, more...)
	if len(matches) != 1 {
		t.Fatalf("%s: %d CSV files, want 1", dir, len(matches))
	}
	var doc map[string]any
	if err := yaml.Unmarshal(readFile(t, matches[0]), &doc); err != nil {
		t.Fatalf("%s: %v", matches[0], err)
	}
	return matches[0], doc
}

// pushBundleImage pushes the bundle-layout folder dir to ref as a
// registry+v1 bundle image made here (the labels of its
// metadata/annotations.yaml, one uncompressed layer of manifests/ and
// metadata/), the way operator-sdk's bundle.Dockerfile builds one.
func pushBundleImage(t *testing.T, dir, host, repo, tag string) string {
	t.Helper()
	return pushBundleImageLayer(t, dir, host, repo, tag, false)
}

// pushBundleImageLayer is pushBundleImage with its layer gzipped, as
// docker and podman push one, when gzipped is set.
func pushBundleImageLayer(t *testing.T, dir, host, repo, tag string, gzipped bool) string {
	t.Helper()
	var annotations struct{ Annotations map[string]string }
	if err := yaml.Unmarshal(readFile(t, filepath.Join(dir, "metadata", "annotations.yaml")), &annotations); err != nil {
		t.Fatal(err)
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	for _, top := range []string{"manifests", "metadata"} {
		err := fs.WalkDir(os.DirFS(dir), top, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			h := &tar.Header{Name: p + "/", Typeflag: tar.TypeDir, Mode: 0o755}
			var data []byte
			if !d.IsDir() {
				data = readFile(t, filepath.Join(dir, p))
				h = &tar.Header{Name: p, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))}
			}
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			_, err = tw.Write(data)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	layerDigest := digest.FromBytes(layer.Bytes())
	config, err := json.Marshal(ocispec.Image{
		Platform: ocispec.Platform{Architecture: "amd64", OS: "linux"},
		Config:   ocispec.ImageConfig{Labels: annotations.Annotations},
		RootFS:   ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{layerDigest}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	store := memory.New()
	push := func(mediaType string, b []byte) ocispec.Descriptor {
		desc := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(b), Size: int64(len(b))}
		if err := store.Push(ctx, desc, bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
		return desc
	}
	configDesc := push(ocispec.MediaTypeImageConfig, config)
	layerType, layerBytes := ocispec.MediaTypeImageLayer, layer.Bytes()
	if gzipped {
		var zipped bytes.Buffer
		zw := gzip.NewWriter(&zipped)
		if _, err := zw.Write(layerBytes); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		layerType, layerBytes = ocispec.MediaTypeImageLayerGzip, zipped.Bytes()
	}
	layerDesc := push(layerType, layerBytes)
	manifest, err := orasgo.PackManifest(ctx, store, orasgo.PackManifestVersion1_1, "", orasgo.PackManifestOptions{
		ConfigDescriptor: &configDesc,
		Layers:           []ocispec.Descriptor{layerDesc},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Tag(ctx, manifest, tag); err != nil {
		t.Fatal(err)
	}
	target, err := remote.NewRepository(host + "/" + repo)
	if err != nil {
		t.Fatal(err)
	}
	target.PlainHTTP = true
	if _, err := orasgo.Copy(ctx, store, tag, target, tag, orasgo.DefaultCopyOptions); err != nil {
		t.Fatalf("pushing the bundle image %s/%s:%s: %v", host, repo, tag, err)
	}
	return host + "/" + repo + "@" + manifest.Digest.String()
}

// TestOpmRendersABundleImageFromBerth checks the harness the OLM tests stand
// on: the pinned opm pulls an image from berth over plain HTTP with no
// containers configuration but the test's own, and reads a bundle image
// pushed there as it reads one on quay.io.
func TestOpmRendersABundleImageFromBerth(t *testing.T) {
	opm := newOpm(t)
	s := startServer(t, "")
	dir := filepath.Join(fixtures, "olm-community", "cockroachdb", "5.0.4")
	ref := pushBundleImage(t, dir, s.addr, "images/cockroachdb-bundle", "5.0.4")
	docs := opm.render(t, ref)
	if len(docs) != 1 || docs[0].str("schema") != "olm.bundle" {
		t.Fatalf("opm render %s: %d documents, want one olm.bundle: %v", ref, len(docs), docs)
	}
	csv := readCSV(t, dir)
	got, want := docs[0], bundleProps{"cockroachdb", csv.Version}
	if p := packageProp(t, got); got.str("name") != csv.Name || got.str("package") != "cockroachdb" || got.str("image") != ref || p != want {
		t.Errorf("opm render %s: name %q, package %q, image %q, olm.package %+v; want %q, cockroachdb, the reference, %+v",
			ref, got.str("name"), got.str("package"), got.str("image"), p, csv.Name, want)
	}
}

// opmTable parses a table `opm alpha list` prints: a header naming the
// columns, then one row per line with each cell at its column's offset in
// the header (text/tabwriter pads every cell of a column to one width, and
// cells may be empty).
func opmTable(t *testing.T, what, out string, columns ...string) []map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	header := []rune(lines[0])
	starts := make([]int, len(columns))
	from := 0
	for i, c := range columns {
		at := strings.Index(string(header[from:]), c)
		if at < 0 {
			t.Fatalf("%s: header %q has no column %s after offset %d", what, lines[0], c, from)
		}
		starts[i] = from + len([]rune(string(header[from:])[:at]))
		from = starts[i] + len([]rune(c))
	}
	if got, want := strings.Fields(lines[0]), strings.Fields(strings.Join(columns, " ")); !slices.Equal(got, want) {
		t.Fatalf("%s: header %q, want the columns %q", what, lines[0], columns)
	}
	var rows []map[string]string
	for _, line := range lines[1:] {
		r := []rune(line)
		row := map[string]string{}
		for i, c := range columns {
			end := len(r)
			if i+1 < len(starts) {
				end = min(starts[i+1], len(r))
			}
			if starts[i] < end {
				row[c] = strings.TrimSpace(string(r[starts[i]:end]))
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// opmEntry is a bundle in a channel, as `opm alpha list bundles` lists it.
type opmEntry struct {
	Replaces, SkipRange string
	Skips               []string
}

// listBundles runs `opm alpha list bundles` on a catalog and returns each
// package's channels' entries, by bundle (CSV) name.
func (o *opmCLI) listBundles(t *testing.T, catalog string) map[string]map[string]map[string]opmEntry {
	t.Helper()
	out := map[string]map[string]map[string]opmEntry{}
	rows := opmTable(t, "opm alpha list bundles", o.run(t, "alpha", "list", "bundles", catalog),
		"PACKAGE", "CHANNEL", "BUNDLE", "REPLACES", "SKIPS", "SKIP RANGE", "IMAGE")
	for _, r := range rows {
		e := opmEntry{Replaces: r["REPLACES"], SkipRange: r["SKIP RANGE"]}
		if r["SKIPS"] != "" {
			e.Skips = strings.Split(r["SKIPS"], ",")
		}
		if out[r["PACKAGE"]] == nil {
			out[r["PACKAGE"]] = map[string]map[string]opmEntry{}
		}
		if out[r["PACKAGE"]][r["CHANNEL"]] == nil {
			out[r["PACKAGE"]][r["CHANNEL"]] = map[string]opmEntry{}
		}
		out[r["PACKAGE"]][r["CHANNEL"]][r["BUNDLE"]] = e
	}
	return out
}

// listChannels runs `opm alpha list channels` on a catalog and returns each
// package's channels' heads (bundle names), as operator-registry's model
// finds them.
func (o *opmCLI) listChannels(t *testing.T, catalog string) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for _, r := range opmTable(t, "opm alpha list channels", o.run(t, "alpha", "list", "channels", catalog), "PACKAGE", "CHANNEL", "HEAD") {
		if out[r["PACKAGE"]] == nil {
			out[r["PACKAGE"]] = map[string]string{}
		}
		out[r["PACKAGE"]][r["CHANNEL"]] = r["HEAD"]
	}
	return out
}

// opmEdge is an edge `opm alpha render-graph` draws in a channel, between
// bundle names, with berth's name of its kind (apiv1.EdgeReplaces...).
type opmEdge struct{ From, To, Kind string }

// Lines of render-graph's mermaid output: the package and channel comments
// that open a subgraph, and the edges, `FROM-ID["from"]-- replace -->
// TO-ID["to"]` (or `-- skip -->`, `-- "skipRange(RANGE)" -->`).
var (
	mermaidPackage = regexp.MustCompile(`^\s*%% package (".*")$`)
	mermaidChannel = regexp.MustCompile(`^\s*%% channel (".*")$`)
	mermaidEdge    = regexp.MustCompile(`^\s*\S+\[("[^"]*")\]-- (replace|skip|"skipRange\(.*\)") --> \S+\[("[^"]*")\]$`)
)

// renderGraph runs `opm alpha render-graph` on a catalog and returns each
// package's channels' edges, as drawn: every skips name and replaces name,
// whether or not the channel holds it, and a skipRange edge from every entry
// of the channel whose version is in range, the entry itself included.
func (o *opmCLI) renderGraph(t *testing.T, catalog string) map[string]map[string][]opmEdge {
	t.Helper()
	out := map[string]map[string][]opmEdge{}
	unquote := func(line, q string) string {
		s, err := strconv.Unquote(q)
		if err != nil {
			t.Fatalf("opm alpha render-graph: line %q: %v", line, err)
		}
		return s
	}
	var pkg, channel string
	for _, line := range strings.Split(o.run(t, "alpha", "render-graph", catalog), "\n") {
		if m := mermaidPackage.FindStringSubmatch(line); m != nil {
			pkg, channel = unquote(line, m[1]), ""
			continue
		}
		if m := mermaidChannel.FindStringSubmatch(line); m != nil {
			channel = unquote(line, m[1])
			continue
		}
		m := mermaidEdge.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if pkg == "" || channel == "" {
			t.Fatalf("opm alpha render-graph: edge %q outside a package's channel", line)
		}
		kind := map[string]string{"replace": apiv1.EdgeReplaces, "skip": apiv1.EdgeSkips}[m[2]]
		if kind == "" {
			kind = apiv1.EdgeSkipRange
		}
		if out[pkg] == nil {
			out[pkg] = map[string][]opmEdge{}
		}
		out[pkg][channel] = append(out[pkg][channel], opmEdge{unquote(line, m[1]), unquote(line, m[3]), kind})
	}
	return out
}

// ofSchema returns the documents of docs of one schema.
func ofSchema(docs []fbcDoc, schema string) []fbcDoc {
	var out []fbcDoc
	for _, d := range docs {
		if d.str("schema") == schema {
			out = append(out, d)
		}
	}
	return out
}

// findDoc returns the document of docs of schema, package pkg and name, or
// nil.
func findDoc(docs []fbcDoc, schema, pkg, name string) fbcDoc {
	for _, d := range docs {
		if d.str("schema") == schema && d.str("package") == pkg && d.str("name") == name {
			return d
		}
	}
	return nil
}

// canonical is d as compact JSON with sorted keys, so that two documents
// are equal when their canonical forms are. The related images of a bundle
// are sorted, as opm render sorts them; with sortProperties, so are its
// properties.
func canonical(d fbcDoc, sortProperties bool) string {
	c := maps.Clone(d)
	sortBy := func(key string) {
		items, _ := c[key].([]any)
		keyed := make([]string, len(items))
		for i, item := range items {
			b, _ := json.Marshal(item)
			keyed[i] = string(b)
		}
		slices.Sort(keyed)
		sorted := make([]json.RawMessage, len(keyed))
		for i, k := range keyed {
			sorted[i] = json.RawMessage(k)
		}
		if items != nil {
			c[key] = sorted
		}
	}
	sortBy("relatedImages")
	if sortProperties {
		sortBy("properties")
	}
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return string(b)
}

// sameDocs fails the test unless got and want hold the same documents, each
// as many times. It names the documents that differ by schema, package and
// name, and shows where a document of both differs.
func sameDocs(t *testing.T, what string, got []fbcDoc, wantWhat string, want []fbcDoc) {
	t.Helper()
	count := map[string]int{}
	for _, d := range got {
		count[canonical(d, false)]++
	}
	for _, d := range want {
		count[canonical(d, false)]--
	}
	only := map[bool]map[string]string{true: {}, false: {}} // in got? -> identity -> document
	for doc, n := range count {
		if n != 0 {
			var d fbcDoc
			_ = json.Unmarshal([]byte(doc), &d)
			only[n > 0][d.str("schema")+" "+d.str("package")+"/"+d.str("name")] = doc
		}
	}
	var diffs []string
	for _, id := range slices.Sorted(maps.Keys(only[true])) {
		if other, ok := only[false][id]; ok {
			diffs = append(diffs, id+" differs: "+firstDifference(only[true][id], other))
		} else {
			diffs = append(diffs, id+" only in "+what+": "+abbreviate(only[true][id]))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(only[false])) {
		if _, ok := only[true][id]; !ok {
			diffs = append(diffs, id+" only in "+wantWhat+": "+abbreviate(only[false][id]))
		}
	}
	if len(diffs) > 0 {
		t.Errorf("%s (%d documents) differs from %s (%d documents):\n%s", what, len(got), wantWhat, len(want), strings.Join(diffs[:min(len(diffs), 20)], "\n"))
	}
}

// firstDifference shows where two documents first differ.
func firstDifference(a, b string) string {
	i := 0
	for i < min(len(a), len(b)) && a[i] == b[i] {
		i++
	}
	around := func(s string) string { return s[max(0, i-80):min(len(s), i+160)] }
	return fmt.Sprintf("at byte %d:\n  %s\n  %s", i, around(a), around(b))
}

// abbreviate shortens a document for a failure message.
func abbreviate(s string) string {
	if len(s) > 400 {
		return s[:400] + fmt.Sprintf("... (%d bytes)", len(s))
	}
	return s
}

// tagOf is the tag of a package version: its version with '+', which tags
// cannot hold, written '_'.
func tagOf(version string) string { return strings.ReplaceAll(version, "+", "_") }

// bundleTags maps the bundle names of one package to their versions' tags.
type bundleTags map[string]string

// bundleTagsOf reads the olm.bundle documents of package pkg in docs.
func bundleTagsOf(t *testing.T, docs []fbcDoc, pkg string) bundleTags {
	t.Helper()
	tags := bundleTags{}
	for _, b := range ofSchema(docs, "olm.bundle") {
		if b.str("package") == pkg {
			tags[b.str("name")] = tagOf(packageProp(t, b).Version)
		}
	}
	return tags
}

// of returns the tag of the bundle called name, or the name marked as
// unknown, which matches no version.
func (tags bundleTags) of(name string) string {
	if tag, ok := tags[name]; ok {
		return tag
	}
	return "(no bundle " + name + ")"
}

// csvOf returns the name of the bundle of the version tag, or "".
func (tags bundleTags) csvOf(tag string) string {
	for name, t := range tags {
		if t == tag {
			return name
		}
	}
	return ""
}

// sortedEdges returns edges sorted by from, to and kind.
func sortedEdges(edges []apiv1.GraphEdge) []apiv1.GraphEdge {
	return slices.SortedFunc(slices.Values(edges), func(a, b apiv1.GraphEdge) int {
		return cmp.Or(strings.Compare(a.From, b.From), strings.Compare(a.To, b.To), strings.Compare(a.Kind, b.Kind))
	})
}
