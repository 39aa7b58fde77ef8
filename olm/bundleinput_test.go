package olm

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/pkgformat"
)

// demoCSV is a CSV with a little of everything a bundle record takes.
const demoCSV = `apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: demo.v1.0.0
  annotations:
    olm.properties: '[{"type": "olm.maxOpenShiftVersion", "value": "4.8"}]'
    description: Short <b>
  labels:
    tier: "1"
spec:
  version: 1.0.0
  displayName: Demo
  description: Long & <desc>
  keywords: [zeta, alpha]
  provider: {name: Acme}
  maturity: alpha
  installModes: [{type: AllNamespaces, supported: true}]
  icon:
  - base64data: "aGVs\n  bG8="
    mediatype: image/png
  relatedImages:
  - {name: op, image: quay.io/demo/op:1}
  - {name: op, image: quay.io/demo/op:1}
  customresourcedefinitions:
    owned:
    - {name: widgets.demo.io, version: v1, kind: Widget, specDescriptors: [{path: size, value: 1.0}]}
    required:
    - {name: gadgets.other.io, version: v1, kind: Gadget}
  install:
    strategy: deployment
    spec:
      deployments:
      - name: demo
        spec:
          template:
            spec:
              containers: [{name: m, image: quay.io/demo/op:1}, {name: p, image: quay.io/demo/proxy:2}]
              initContainers: [{name: i, image: quay.io/demo/init:3}]
`

const demoCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.demo.io
spec:
  group: demo.io
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true}, {name: v2, served: true, storage: false}]
`

const demoAnnotations = `annotations:
  operators.operatorframework.io.bundle.mediatype.v1: registry+v1
  operators.operatorframework.io.bundle.manifests.v1: manifests/
  operators.operatorframework.io.bundle.metadata.v1: metadata/
  operators.operatorframework.io.bundle.package.v1: demo
  operators.operatorframework.io.bundle.channels.v1: stable,fast
  operators.operatorframework.io.bundle.channel.default.v1: stable
  operators.operatorframework.io.test.config.v1: tests/
`

const demoDependencies = `dependencies:
- type: olm.package
  value: {packageName: base, version: ">=1.0.0"}
- type: olm.gvk
  value: {group: g.io, kind: K, version: v1}
- type: olm.label
  value: {label: x}
`

// demoFiles is the demo bundle, with the files of replace in place of its
// own (a nil Data removes one).
func demoFiles(replace ...pkgformat.File) []pkgformat.File {
	files := []pkgformat.File{
		{Path: "manifests/demo.clusterserviceversion.yaml", Data: []byte(demoCSV)},
		{Path: "manifests/widgets.crd.yaml", Data: []byte(demoCRD)},
		{Path: "metadata/annotations.yaml", Data: []byte(demoAnnotations)},
		{Path: "metadata/dependencies.yaml", Data: []byte(demoDependencies)},
	}
	for _, r := range replace {
		i := 0
		for i < len(files) && files[i].Path != r.Path {
			i++
		}
		switch {
		case i == len(files):
			files = append(files, r)
		case r.Data == nil:
			files = append(files[:i], files[i+1:]...)
		default:
			files[i] = r
		}
	}
	for i := range files {
		files[i].Mode = 0o644
	}
	return files
}

// TestBundleRecordAsOPM checks the record of the demo bundle against what
// opm render (v1.69.0, bundle-object-to-csv-metadata) writes for its image.
func TestBundleRecordAsOPM(t *testing.T) {
	b := push(t, demoFiles(), pkgformat.Options{}).mustBuild(t)
	want := []string{
		`olm.gvk {"group":"demo.io","kind":"Widget","version":"v1"}`,
		`olm.gvk {"group":"demo.io","kind":"Widget","version":"v2"}`,
		`olm.gvk.required {"group":"g.io","kind":"K","version":"v1"}`,
		`olm.gvk.required {"group":"other.io","kind":"Gadget","version":"v1"}`,
		`olm.label {"label":"x"}`,
		`olm.maxOpenShiftVersion "4.8"`,
		`olm.package {"packageName":"demo","version":"1.0.0"}`,
		`olm.package.required {"packageName":"base","versionRange":">=1.0.0"}`,
		`olm.csv.metadata {"annotations":{"description":"Short <b>","olm.properties":"[{\"type\": \"olm.maxOpenShiftVersion\", \"value\": \"4.8\"}]"},` +
			`"apiServiceDefinitions":{},"crdDescriptions":{"owned":[{"name":"widgets.demo.io","version":"v1","kind":"Widget","specDescriptors":[{"path":"size","value":1}]}],` +
			`"required":[{"name":"gadgets.other.io","version":"v1","kind":"Gadget"}]},"description":"Long & <desc>","displayName":"Demo",` +
			`"installModes":[{"type":"AllNamespaces","supported":true}],"keywords":["zeta","alpha"],"labels":{"tier":"1"},"maturity":"alpha","provider":{"name":"Acme"}}`,
	}
	var got []string
	for _, p := range b.Record.Properties {
		got = append(got, p.Type+" "+string(p.Value))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("properties:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	images, _ := json.Marshal(b.Record.RelatedImages)
	if want := `[{"name":"","image":"quay.io/demo/init:3"},{"name":"op","image":"quay.io/demo/op:1"},{"name":"","image":"quay.io/demo/proxy:2"}]`; string(images) != want {
		t.Errorf("related images %s, want %s", images, want)
	}
	if b.Record.Icon == nil || string(b.Record.Icon.Data) != "hello" || b.Record.Icon.MediaType != "image/png" {
		t.Errorf("icon %+v", b.Record.Icon)
	}
	if b.Record.Name != "demo.v1.0.0" || b.Record.Description != "Long & <desc>" {
		t.Errorf("name %q description %q", b.Record.Name, b.Record.Description)
	}

	var inFolder []pkgformat.File
	for _, f := range demoFiles() {
		f.Path = "demo-1.0.0/" + f.Path
		inFolder = append(inFolder, f)
	}
	folded := push(t, inFolder, pkgformat.Options{})
	fb := folded.mustBuild(t)
	checkImage(t, folded, fb, false)
	sameRecord(t, b.Record, fb.Record)
	layer, err := pkgformat.ReadArchive(bytes.NewReader(fb.Blobs[1].Data), pkgformat.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range layer {
		paths = append(paths, f.Path)
	}
	if want := "manifests/demo.clusterserviceversion.yaml manifests/widgets.crd.yaml metadata/annotations.yaml metadata/dependencies.yaml"; strings.Join(paths, " ") != want {
		t.Errorf("generated layer holds %v, want %s", paths, want)
	}
}

// gzipped returns data gzipped.
func gzipped(data []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(data)
	_ = zw.Close()
	return buf.Bytes()
}

func TestBuildBundleRefuses(t *testing.T) {
	kudo := push(t, []pkgformat.File{
		{Path: "operator.yaml", Mode: 0o644, Data: []byte("name: demo\noperatorVersion: 1.0.0\nkubernetesVersion: 1.15.0\ntasks: []\nplans: {}\n")},
		{Path: "params.yaml", Mode: 0o644, Data: []byte("parameters: []\n")},
	}, pkgformat.Options{})
	other := push(t, demoFiles(pkgformat.File{Path: "manifests/extra.yaml", Data: []byte("kind: ConfigMap\napiVersion: v1\n")}), pkgformat.Options{})
	changed := push(t, demoFiles(pkgformat.File{Path: "manifests/widgets.crd.yaml", Data: []byte(demoCRD + "status: {}\n")}), pkgformat.Options{})
	bigList := strings.Repeat("- a\n", 60000)
	cases := []struct {
		name   string
		change func(v *pushed)
		target error
		text   string
	}{
		{"nil package", func(v *pushed) { v.p = nil }, pkgformat.ErrInvalid, "no package"},
		{"not OLM", func(v *pushed) { v.p = kudo.p }, pkgformat.ErrInvalid, "is a kudo package, not OLM"},
		{"content digest", func(v *pushed) { v.content.Digest = digest.FromString("other") }, pkgformat.ErrInvalid, "the bytes given have digest"},
		{"content size", func(v *pushed) { v.content.Size++ }, pkgformat.ErrInvalid, "the descriptor says"},
		{"content digest malformed", func(v *pushed) { v.content.Digest = "sha256:nothex" }, pkgformat.ErrInvalid, "content digest"},
		{"content media type", func(v *pushed) { v.content.MediaType = "application/vnd.oci.image.layer.v1.tar+zstd" }, pkgformat.ErrInvalid, "is not a gzipped tar"},
		{"content not gzip", func(v *pushed) { setContent(v, []byte("plain text, not gzip")) }, pkgformat.ErrInvalid, "not a gzip stream"},
		{"content not tar", func(v *pushed) { setContent(v, gzipped(bytes.Repeat([]byte("not a tar "), 100))) }, pkgformat.ErrInvalid, "corrupt or truncated layer"},
		{"data after gzip", func(v *pushed) { setContent(v, append(bytes.Clone(v.data), 0)) }, pkgformat.ErrInvalid, "data after the end of the gzip stream"},
		{"content of another package", func(v *pushed) { setContent(v, other.data) }, pkgformat.ErrInvalid, "manifests/extra.yaml is not a file of the package"},
		{"content with another file", func(v *pushed) { setContent(v, changed.data) }, pkgformat.ErrInvalid, "manifests/widgets.crd.yaml differs from the package's file"},
		{"subject media type", func(v *pushed) { v.subject.MediaType = ocispec.MediaTypeImageIndex }, pkgformat.ErrInvalid, "subject media type"},
		{"subject digest", func(v *pushed) { v.subject.Digest = "" }, pkgformat.ErrInvalid, "subject digest"},
		{"subject size", func(v *pushed) { v.subject.Size = 0 }, pkgformat.ErrInvalid, "has size 0"},
		{"CSV name", func(v *pushed) { v.p.Metadata.CSVName = "demo.v9" }, pkgformat.ErrInvalid, `named "demo.v1.0.0", not "demo.v9"`},
		{"package name", func(v *pushed) { v.p.Metadata.Name = "renamed" }, pkgformat.ErrInvalid, `names package "demo"`},
		{"owned CRD missing", func(v *pushed) {
			*v = push(t, demoFiles(pkgformat.File{Path: "manifests/widgets.crd.yaml"}), pkgformat.Options{})
		},
			pkgformat.ErrInvalid, "owned CRD widgets.demo.io v1 (kind Widget) has no CustomResourceDefinition"},
		{"CSV malformed", func(v *pushed) {
			*v = push(t, demoFiles(pkgformat.File{Path: "manifests/a.yaml", Data: []byte("kind: ClusterServiceVersion\nmetadata: {name: [x]}\n")}), pkgformat.Options{})
		}, pkgformat.ErrInvalid, "manifests/a.yaml"},
		{"dependency malformed", func(v *pushed) {
			*v = push(t, demoFiles(pkgformat.File{Path: "metadata/dependencies.yaml", Data: []byte("dependencies:\n- type: olm.gvk\n  value: {group: 1, kind: K, version: v1}\n")}), pkgformat.Options{})
		}, pkgformat.ErrInvalid, `metadata/dependencies.yaml: olm.gvk {"group":1,"kind":"K","version":"v1"}`},
		{"YAML too large", func(v *pushed) {
			*v = push(t, demoFiles(pkgformat.File{Path: "manifests/list.yaml", Data: []byte(bigList)}), pkgformat.Options{})
		}, pkgformat.ErrLimit, "manifests/list.yaml: YAML has more than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := push(t, demoFiles(), pkgformat.Options{})
			tc.change(&v)
			b, err := v.build()
			if !errors.Is(err, tc.target) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("got %v (bundle %v), want an error wrapping %v that mentions %q", err, b != nil, tc.target, tc.text)
			}
		})
	}
}

// setContent makes data the content of v, with a descriptor that matches.
func setContent(v *pushed, data []byte) {
	v.data = data
	v.content.Digest, v.content.Size = digest.FromBytes(data), int64(len(data))
}

func TestFirstYAMLDocument(t *testing.T) {
	cases := []struct{ in, want, err string }{
		{"a: 1\n", "a: 1\n", ""},
		{"---\na: 1\n---\nb: 2\n", "a: 1\n", ""},
		{"--- # first\n---\na: 1", "a: 1", ""},
		{"a: 1\n--- \nb: 2\n", "a: 1\n", ""},
		{"\n---\na: 1\n", "\n", ""},
		{"a: 1\n---b\n", "", "invalid YAML document separator"},
		{"", "", ""},
	}
	for _, tc := range cases {
		got, err := firstYAMLDocument([]byte(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("%q: got %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestManifestJSON(t *testing.T) {
	cases := []struct{ in, want string }{
		{"b: 1.0\na: [1.5, 2e3, yes, '<x>']\n", `{"a":[1.5,2000,true,"\u003cx\u003e"],"b":1}`},
		{`  {"z": 1.0, "y": {"x": 12345678901234567890}}` + "\n{}", `{"y":{"x":12345678901234567000},"z":1}`},
		{"kind: A\n---\nkind: B\n", `{"kind":"A"}`},
	}
	for _, tc := range cases {
		got, err := manifestJSON([]byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("%q: got %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

// tarOf returns a tar of one regular file named name holding data.
func tarOf(t *testing.T, name string, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestScanLayer(t *testing.T) {
	good := tarOf(t, "./manifests/a.yaml", []byte("kind: A\n"))
	cases := []struct {
		name   string
		gz     []byte
		budget int64
		target error
		text   string
	}{
		{"good", gzipped(good), 1 << 20, nil, ""},
		{"over budget", gzipped(good), 1024, pkgformat.ErrLimit, "uncompressed layer is larger than 1024 bytes"},
		{"escapes the root", gzipped(tarOf(t, "../a.yaml", nil)), 1 << 20, pkgformat.ErrInvalid, `tar entry "../a.yaml" is outside the layer root`},
		{"absolute", gzipped(tarOf(t, "/etc/a.yaml", nil)), 1 << 20, pkgformat.ErrInvalid, "outside the layer root"},
		{"truncated", gzipped(good)[:40], 1 << 20, pkgformat.ErrInvalid, "corrupt or truncated layer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files, diffID, err := scanLayer(tc.gz, tc.budget)
			if tc.target != nil {
				if !errors.Is(err, tc.target) || !strings.Contains(err.Error(), tc.text) {
					t.Fatalf("got %v, want an error wrapping %v that mentions %q", err, tc.target, tc.text)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diffID != digest.FromBytes(good) {
				t.Errorf("diff_id %s, want %s", diffID, digest.FromBytes(good))
			}
			if want := digest.FromString("kind: A\n"); len(files) != 1 || files["manifests/a.yaml"] != want {
				t.Errorf("files %v, want manifests/a.yaml %s", files, want)
			}
		})
	}
}
