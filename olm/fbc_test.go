package olm

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/berth-registry/berth/pkgformat"
)

const testHost = "berth.example:5000"

// fakeDigest is a digest made up from s.
func fakeDigest(s string) string { return fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(s))) }

// ch is a channel entry of a version's metadata.
func ch(name, replaces string) pkgformat.Channel {
	return pkgformat.Channel{Name: name, Replaces: replaces}
}

// olmVersion is version of OLM package pkg, CSV pkg.v<version>, in channels,
// with a bundle record.
func olmVersion(pkg, version string, channels ...pkgformat.Channel) Version {
	csv := pkg + ".v" + version
	pv, _ := json.Marshal(map[string]string{"packageName": pkg, "version": version})
	return Version{
		Version: version,
		Digest:  fakeDigest(pkg + "@" + version),
		Metadata: &pkgformat.Metadata{
			Name: pkg, Version: version, Format: pkgformat.OLM, CSVName: csv, Channels: channels,
		},
		Bundle: &BundleRecord{
			Digest:        fakeDigest("bundle " + pkg + "@" + version),
			Name:          csv,
			Properties:    []Property{{Type: "olm.package", Value: pv}},
			RelatedImages: []RelatedImage{{Name: "operator", Image: "quay.io/example/" + pkg + ":" + version}},
			Icon:          &Icon{Data: []byte("icon of " + version), MediaType: "image/png"},
			Description:   "<b>" + pkg + "</b> & " + version,
		},
	}
}

// withDefault sets v's default channel.
func withDefault(v Version, channel string) Version {
	v.Metadata.DefaultChannel = channel
	return v
}

// render renders versions of package pkg in namespace ns.
func render(t *testing.T, pkg string, versions []Version) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := RenderPackage(&buf, testHost, "ns", pkg, versions); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// doc is one parsed FBC document with its keys in order.
type doc struct {
	keys   []string
	fields map[string]any
}

// parseFBC parses JSON Lines, checking that each line is one compact object.
func parseFBC(t *testing.T, data []byte) []doc {
	t.Helper()
	var docs []doc
	for i, line := range bytes.SplitAfter(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, line); err != nil || !bytes.HasSuffix(line, []byte("}\n")) || compact.Len() != len(line)-1 {
			t.Fatalf("line %d is not one compact JSON object: %q", i+1, line)
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		d := doc{fields: map[string]any{}}
		if _, err := dec.Token(); err != nil {
			t.Fatal(err)
		}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				t.Fatal(err)
			}
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
			d.keys = append(d.keys, k.(string))
			d.fields[k.(string)] = v
		}
		docs = append(docs, d)
	}
	return docs
}

// summary lists the documents as "schema name".
func summary(docs []doc) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = fmt.Sprint(d.fields["schema"], " ", d.fields["name"])
	}
	return out
}

func TestRenderPackageShapes(t *testing.T) {
	versions := []Version{
		olmVersion("etcd", "0.9.0", ch("alpha", ""), ch("stable", "")),
		olmVersion("etcd", "0.9.2", ch("alpha", "etcd.v0.9.0"), ch("stable", "etcd.v0.9.0")),
		withDefault(olmVersion("etcd", "0.9.4", pkgformat.Channel{Name: "alpha", Replaces: "etcd.v0.9.2", Skips: []string{"etcd.v0.9.1"}, SkipRange: "<0.9.4"}), "stable"),
	}
	// The bundle image is already among 0.9.0's related images: not added twice.
	versions[0].Bundle.RelatedImages = append(versions[0].Bundle.RelatedImages,
		RelatedImage{Name: "self", Image: testHost + "/ns/etcd@" + versions[0].Bundle.Digest})
	docs := parseFBC(t, render(t, "etcd", versions))

	want := []string{"olm.package etcd", "olm.channel alpha", "olm.channel stable", "olm.bundle etcd.v0.9.0", "olm.bundle etcd.v0.9.2", "olm.bundle etcd.v0.9.4"}
	if got := summary(docs); !slices.Equal(got, want) {
		t.Fatalf("documents %q, want %q", got, want)
	}
	wantKeys := [][]string{
		{"schema", "name", "defaultChannel", "icon", "description"},
		{"schema", "name", "package", "entries"},
		{"schema", "name", "package", "entries"},
		{"schema", "name", "package", "image", "properties", "relatedImages"},
	}
	for i, keys := range wantKeys {
		if !slices.Equal(docs[i].keys, keys) {
			t.Errorf("%s: keys %q, want %q (declcfg's order)", summary(docs)[i], docs[i].keys, keys)
		}
	}
	pkg := docs[0].fields
	// The head of the default channel, stable, is 0.9.2: its icon and
	// description, not those of 0.9.4 (the latest, in alpha only).
	if pkg["defaultChannel"] != "stable" || pkg["description"] != "<b>etcd</b> & 0.9.2" {
		t.Errorf("olm.package = %v, want default channel stable and 0.9.2's description", pkg)
	}
	if icon := pkg["icon"].(map[string]any); icon["base64data"] != "aWNvbiBvZiAwLjkuMg==" || icon["mediatype"] != "image/png" {
		t.Errorf("icon = %v, want 0.9.2's, base64", icon)
	}
	alpha := docs[1].fields
	wantAlpha := []any{
		map[string]any{"name": "etcd.v0.9.4", "replaces": "etcd.v0.9.2", "skips": []any{"etcd.v0.9.1"}, "skipRange": "<0.9.4"},
		map[string]any{"name": "etcd.v0.9.2", "replaces": "etcd.v0.9.0"},
		map[string]any{"name": "etcd.v0.9.0"},
	}
	if alpha["package"] != "etcd" || !reflect.DeepEqual(alpha["entries"], wantAlpha) {
		t.Errorf("alpha = %v, want entries %v", alpha, wantAlpha)
	}
	b := docs[5].fields
	image := testHost + "/ns/etcd@" + versions[2].Bundle.Digest
	wantRelated := []any{
		map[string]any{"name": "", "image": image},
		map[string]any{"name": "operator", "image": "quay.io/example/etcd:0.9.4"},
	}
	if b["package"] != "etcd" || b["image"] != image || !reflect.DeepEqual(b["relatedImages"], wantRelated) {
		t.Errorf("bundle 0.9.4 = %v, want image %s and related images %v", b, image, wantRelated)
	}
	wantProps := []any{map[string]any{"type": "olm.package", "value": map[string]any{"packageName": "etcd", "version": "0.9.4"}}}
	if !reflect.DeepEqual(b["properties"], wantProps) {
		t.Errorf("bundle 0.9.4 properties = %v, want %v", b["properties"], wantProps)
	}
	if related := docs[3].fields["relatedImages"].([]any); len(related) != 2 {
		t.Errorf("bundle 0.9.0 related images = %v, want its own image once", related)
	}
}

func TestRenderPackageLeavesOut(t *testing.T) {
	noBundle := olmVersion("etcd", "0.9.2", ch("stable", "etcd.v0.9.0"))
	noBundle.Bundle = nil
	noMetadata := olmVersion("etcd", "0.9.3", ch("stable", "etcd.v0.9.0"))
	noMetadata.Metadata = nil
	tests := []struct {
		name     string
		versions []Version
		want     []string // documents; none: nothing written
	}{
		{"no versions", nil, nil},
		{"no channels", []Version{olmVersion("etcd", "0.9.0"), olmVersion("etcd", "0.9.2")}, nil},
		{"no bundle records", []Version{noBundle}, nil},
		{
			"a version without a bundle record or metadata",
			[]Version{olmVersion("etcd", "0.9.0", ch("stable", "")), noBundle, noMetadata},
			[]string{"olm.package etcd", "olm.channel stable", "olm.bundle etcd.v0.9.0"},
		},
		{
			"a version in no channel",
			[]Version{olmVersion("etcd", "0.9.0", ch("stable", "")), olmVersion("etcd", "0.9.2")},
			[]string{"olm.package etcd", "olm.channel stable", "olm.bundle etcd.v0.9.0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := render(t, "etcd", tt.versions)
			if got := summary(parseFBC(t, data)); !slices.Equal(got, tt.want) {
				t.Errorf("documents %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRenderPackageDefaultChannel(t *testing.T) {
	tests := []struct {
		name     string
		versions []Version
		want     string
	}{
		{"the latest version's", []Version{withDefault(olmVersion("p", "1.0.0", ch("a", ""), ch("b", "")), "b")}, "b"},
		{"the only channel", []Version{olmVersion("p", "1.0.0", ch("b", ""))}, "b"},
		{"else the first by name", []Version{olmVersion("p", "1.0.0", ch("c", ""), ch("b", ""))}, "b"},
		{"a missing default", []Version{withDefault(olmVersion("p", "1.0.0", ch("c", ""), ch("b", "")), "z")}, "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs := parseFBC(t, render(t, "p", tt.versions))
			if got := docs[0].fields["defaultChannel"]; got != tt.want {
				t.Errorf("defaultChannel %v, want %s", got, tt.want)
			}
		})
	}
}

func TestRenderPackageSharedCSVName(t *testing.T) {
	a := olmVersion("p", "1.0.0", ch("stable", ""))
	b := olmVersion("p", "1.0.1", ch("stable", ""))
	b.Metadata.CSVName, b.Bundle.Name = a.Bundle.Name, a.Bundle.Name
	docs := parseFBC(t, render(t, "p", []Version{a, b}))
	want := []string{"olm.package p", "olm.channel stable", "olm.bundle p.v1.0.0"}
	if got := summary(docs); !slices.Equal(got, want) {
		t.Fatalf("documents %q, want %q: one bundle per name", got, want)
	}
	if entries := docs[1].fields["entries"].([]any); len(entries) != 1 {
		t.Errorf("entries %v, want one", entries)
	}
	if image := docs[2].fields["image"]; image != testHost+"/ns/p@"+b.Bundle.Digest {
		t.Errorf("image %v, want the newest version's bundle", image)
	}
}

func TestRenderPackageDeterministic(t *testing.T) {
	versions := []Version{
		olmVersion("p", "1.0.0", ch("stable", ""), ch("fast", "")),
		olmVersion("p", "1.1.0", ch("stable", "p.v1.0.0"), ch("fast", "p.v1.0.0")),
		olmVersion("p", "1.2.0", ch("fast", "p.v1.1.0")),
		olmVersion("p", "2.0.0-rc.1", pkgformat.Channel{Name: "fast", Replaces: "p.v1.2.0", SkipRange: ">=1.0.0 <2.0.0-rc.1"}),
	}
	versions[1].Bundle.RelatedImages = []RelatedImage{{Name: "b", Image: "z"}, {Name: "a", Image: "z"}, {Image: "a"}}
	want := render(t, "p", versions)
	if len(want) == 0 {
		t.Fatal("nothing rendered")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		shuffled := slices.Clone(versions)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if got := render(t, "p", shuffled); !bytes.Equal(got, want) {
			t.Fatalf("versions in another order render\n%s\nwant\n%s", got, want)
		}
	}
	bundle := testHost + "/ns/p@" + versions[1].Bundle.Digest
	if related := `"relatedImages":[{"name":"","image":"a"},{"name":"","image":"` + bundle + `"},{"name":"a","image":"z"},{"name":"b","image":"z"}]`; !strings.Contains(string(want), related) {
		t.Errorf("related images of 1.1.0 not sorted by image, then name (want %s):\n%s", related, want)
	}
	if !strings.Contains(string(want), `"description":"<b>p</b> & 2.0.0-rc.1"`) {
		t.Errorf("HTML escaped, which opm does not do:\n%s", want)
	}
}

// failWriter fails every write.
type failWriter struct{}

var errWrite = errors.New("disk full")

func (failWriter) Write([]byte) (int, error) { return 0, errWrite }

func TestRenderPackageWriteError(t *testing.T) {
	err := RenderPackage(failWriter{}, testHost, "ns", "p", []Version{olmVersion("p", "1.0.0", ch("stable", ""))})
	if !errors.Is(err, errWrite) {
		t.Errorf("error %v, want the writer's", err)
	}
}
