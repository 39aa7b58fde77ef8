package pkgformat

import (
	"archive/tar"
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func FuzzReadArchive(f *testing.F) {
	var good bytes.Buffer
	if err := WriteArchive(&good, []File{file("operator.yaml", goodOperator), file("templates/a.yaml", "a: b\n")}); err != nil {
		f.Fatal(err)
	}
	f.Add(good.Bytes())
	f.Add(tgz(f, reg("./a", "x"), tarEntry{name: "b", typ: tar.TypeSymlink, link: "a"}, tarEntry{name: "c", typ: tar.TypeLink, link: "a"}))
	f.Add(tgz(f, tarEntry{name: "d/", typ: tar.TypeDir}, reg("d/e", "x"), tarEntry{name: "l", typ: tar.TypeSymlink, link: "d"}))
	f.Add(tgz(f, reg("../x", "x")))
	f.Add(gz(f, []byte("not a tar")))
	f.Add([]byte{0x1f, 0x8b})
	f.Add([]byte{})
	limits := Limits{MaxFileSize: 1 << 16, MaxTotalSize: 1 << 18, MaxFiles: 64, MaxArchiveSize: 1 << 18, MaxPathLength: 256}
	f.Fuzz(func(t *testing.T, data []byte) {
		files, err := ReadArchive(bytes.NewReader(data), limits)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrLimit) {
				t.Fatalf("error wraps neither ErrInvalid nor ErrLimit: %v", err)
			}
			return
		}
		checked, err := checkFiles(files, limits)
		if err != nil {
			t.Fatalf("ReadArchive returned files that do not pass its own checks: %v", err)
		}
		if !reflect.DeepEqual(checked, files) {
			t.Fatal("files are not sorted or not in canonical form")
		}
		var out bytes.Buffer
		if err := WriteArchive(&out, files); err != nil {
			t.Fatal(err)
		}
		again, err := ReadArchive(bytes.NewReader(out.Bytes()), limits)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(again, files) {
			t.Fatal("files do not survive WriteArchive and ReadArchive")
		}
	})
}

func FuzzParseYAML(f *testing.F) {
	f.Add(goodOperator)
	f.Add(aliasBomb)
	f.Add("a: &a [*a]\n")
	f.Add("a: &a {b: *a}\n---\nc: [1, 2]\n")
	f.Add(goodCSV)
	f.Fuzz(func(t *testing.T, doc string) {
		err := eachYAMLDocument("fuzz.yaml", []byte(doc), newYAMLBudget(nil, Limits{}), func(d *yaml.Node) error {
			var v any
			_ = decodeNode("fuzz.yaml", d, &v)
			return nil
		})
		if err != nil && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrLimit) {
			t.Fatalf("error wraps neither ErrInvalid nor ErrLimit: %v", err)
		}
	})
}

// FuzzTemplateImages renders a fuzzed template as a Helm chart's and as a
// KUDO operator's: New either refuses the package (ErrInvalid, ErrLimit)
// or derives its images, sorted and each found somewhere, within a small
// budget.
func FuzzTemplateImages(f *testing.F) {
	f.Add("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n    - name: c\n      image: {{ .Values.image | default \"nginx\" }}\n")
	f.Add(`{{ range until 100000000 }}{{ end }}`)
	f.Add(`{{ define "x" }}{{ include "x" . }}{{ include "x" . }}{{ end }}{{ include "x" . }}`)
	f.Add(`{{ tpl "{{ repeat 1000000000 \"x\" }}" . }}`)
	f.Add(`{{ .Files.Get "../x" }}`)
	f.Add("kind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n        - image: quay.io/x@@sha256:abc\n")
	limits := Limits{MaxRenderSteps: 20000, RenderTimeout: 5 * time.Second, MaxFileSize: 1 << 16}
	f.Fuzz(func(t *testing.T, template string) {
		for _, files := range [][]File{
			{file("Chart.yaml", "apiVersion: v2\nname: fuzz\nversion: 1.0.0\n"), file("templates/a.yaml", template)},
			{file("operator.yaml", goodOperator), file("templates/a.yaml", template)},
		} {
			p, err := New(files, Options{Limits: limits})
			if err != nil {
				if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrLimit) {
					t.Fatalf("error wraps neither ErrInvalid nor ErrLimit: %v", err)
				}
				continue
			}
			for i, img := range p.Metadata.Images {
				if len(img.Found) == 0 || i > 0 && p.Metadata.Images[i-1].Reference >= img.Reference {
					t.Fatalf("images not sorted, unique and found: %+v", p.Metadata.Images)
				}
			}
		}
	})
}
