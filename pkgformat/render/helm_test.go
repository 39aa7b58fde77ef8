package render

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	helmengine "helm.sh/helm/v3/pkg/engine"
)

// sampleChart is a chart that uses what real charts use: helpers in a
// partial, include and tpl, sprig and Helm's functions, .Files, a subchart
// with its own values and helpers, a library chart, a disabled subchart
// and a template that renders nothing.
var sampleChart = []File{
	{Path: "Chart.yaml", Data: []byte(`apiVersion: v2
name: shop
version: 1.0.0
appVersion: "2.1"
dependencies:
  - name: db
    version: 1.0.0
  - name: common
    version: 1.0.0
  - name: cache
    version: 1.0.0
    condition: cache.enabled
`)},
	{Path: "values.yaml", Data: []byte(`image:
  registry: quay.io
  repository: shop/web
  tag: ""
sidecars:
  - name: log
    image: busybox:1.36
  - name: proxy
    image: "{{ .Values.image.registry }}/shop/proxy:1.0"
annotation: "{{ .Release.Name }}-{{ .Chart.Name }}"
db:
  image: postgres:16
cache:
  enabled: false
`)},
	{Path: "config/app.properties", Data: []byte("a=1\nb=2\n")},
	{Path: "templates/_helpers.tpl", Data: []byte(`{{- define "shop.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- define "shop.image" -}}
{{ .Values.image.registry }}/{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}`)},
	{Path: "templates/deployment.yaml", Data: []byte(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "shop.fullname" . }}
  labels: {{- include "common.labels" . | nindent 4 }}
  annotations:
    note: {{ tpl .Values.annotation . | quote }}
spec:
  template:
    spec:
      initContainers:
        - name: init
          image: {{ include "shop.image" . }}
      containers:
        - name: web
          image: {{ include "shop.image" . | quote }}
        {{- range .Values.sidecars }}
        - name: {{ .name }}
          image: {{ tpl .image $ }}
        {{- end }}
`)},
	{Path: "templates/configmap.yaml", Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "shop.fullname" . }}
data:
{{ (.Files.Glob "config/*").AsConfig | indent 2 }}
  lines: {{ .Files.Lines "config/app.properties" | len | quote }}
  yaml: {{ toYaml .Values.sidecars | b64enc }}
  json: {{ toJson .Values.db | quote }}
  kube: {{ .Capabilities.KubeVersion.Version }}
  ns: {{ .Release.Namespace }}
  {{- with lookup "v1" "Secret" "default" "x" }}
  found: yes
  {{- end }}
`)},
	{Path: "templates/empty.yaml", Data: []byte(`{{- if .Values.missing }}never{{ end }}`)},
	{Path: "templates/NOTES.txt", Data: []byte(`Visit {{ include "shop.fullname" . }}`)},
	{Path: "charts/db/Chart.yaml", Data: []byte("apiVersion: v2\nname: db\nversion: 1.0.0\n")},
	{Path: "charts/db/values.yaml", Data: []byte("image: postgres:15\nreplicas: 1\n")},
	{Path: "charts/db/templates/_h.tpl", Data: []byte(`{{ define "db.name" }}{{ .Release.Name }}-db{{ end }}`)},
	{Path: "charts/db/templates/statefulset.yaml", Data: []byte(`apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {{ include "db.name" . }}
spec:
  replicas: {{ .Values.replicas }}
  template:
    spec:
      containers:
        - name: db
          image: {{ .Values.image }}
`)},
	{Path: "charts/common/Chart.yaml", Data: []byte("apiVersion: v2\nname: common\nversion: 1.0.0\ntype: library\n")},
	{Path: "charts/common/templates/_labels.tpl", Data: []byte(`{{- define "common.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}`)},
	{Path: "charts/cache/Chart.yaml", Data: []byte("apiVersion: v2\nname: cache\nversion: 1.0.0\n")},
	{Path: "charts/cache/templates/pod.yaml", Data: []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: cache\nspec:\n  containers:\n    - name: c\n      image: redis:7\n")},
}

// TestHelmAsHelm renders sampleChart with Helm's own engine and with
// render.Helm: every template must render the same.
func TestHelmAsHelm(t *testing.T) {
	res, err := Helm(sampleChart, Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failures) != 0 {
		t.Fatalf("failures: %v", res.Failures)
	}
	got := map[string]string{}
	for _, o := range res.Outputs {
		got[o.Name] = o.Text
	}

	rendered := renderWithHelm(t, loadFiles(t, sampleChart))
	want := map[string]string{}
	for name, text := range rendered {
		if !strings.HasPrefix(name[strings.LastIndex(name, "/")+1:], "_") {
			want[strings.TrimPrefix(name, "shop/")] = text
		}
	}
	if !reflect.DeepEqual(got, want) {
		for name := range want {
			if got[name] != want[name] {
				t.Errorf("%s:\ngot  %q\nwant %q", name, got[name], want[name])
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				t.Errorf("%s rendered, not by Helm", name)
			}
		}
	}
	if !strings.Contains(got["templates/deployment.yaml"], "image: quay.io/shop/proxy:1.0") || !strings.Contains(got["charts/db/templates/statefulset.yaml"], "image: postgres:16") {
		t.Errorf("the sample does not render what it is meant to:\n%s", got["templates/deployment.yaml"]+got["charts/db/templates/statefulset.yaml"])
	}
}

func TestHelmFailures(t *testing.T) {
	files := hostileChart("image: nginx\n", map[string]string{
		"ok.yaml":       `image: {{ .Values.image }}`,
		"required.yaml": `image: {{ required "set image.tag" .Values.tag }}`,
		"fail.yaml":     `{{ fail "this chart needs a license key" }}`,
		"nil.yaml":      `{{ .Values.a.b.c }}`,
		"parse.yaml":    `{{ if }}`,
	})
	res, err := Helm(files, Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Outputs) != 1 || res.Outputs[0] != (Output{Name: "templates/ok.yaml", Text: "image: nginx"}) {
		t.Errorf("outputs %v", res.Outputs)
	}
	want := map[string]string{
		"templates/required.yaml": "set image.tag",
		"templates/fail.yaml":     "this chart needs a license key",
		"templates/nil.yaml":      "nil pointer evaluating interface {}.b",
		"templates/parse.yaml":    "does not parse: template: hostile/templates/parse.yaml:1: missing value for if",
	}
	if len(res.Failures) != len(want) {
		t.Errorf("failures %v", res.Failures)
	}
	for _, f := range res.Failures {
		if !strings.Contains(f.Reason, want[f.Name]) || strings.Contains(f.Reason, warnStart) {
			t.Errorf("%s: reason %q does not say %q", f.Name, f.Reason, want[f.Name])
		}
	}
}

// BenchmarkHelm measures rendering sampleChart, with its subcharts and
// helpers, against Helm's own engine on the same loaded chart.
func BenchmarkHelm(b *testing.B) {
	b.Run("render.Helm", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Helm(sampleChart, Budget{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("helm engine", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			renderWithHelm(b, loadFiles(b, sampleChart))
		}
	})
}

// loadFiles loads files with Helm's loader.
func loadFiles(tb testing.TB, files []File) *chart.Chart {
	tb.Helper()
	buffered := make([]*loader.BufferedFile, len(files))
	for i, f := range files {
		buffered[i] = &loader.BufferedFile{Name: f.Path, Data: f.Data}
	}
	c, err := loader.LoadFiles(buffered)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// renderWithHelm renders c as `helm template` does, with Helm's own engine.
func renderWithHelm(tb testing.TB, c *chart.Chart) map[string]string {
	tb.Helper()
	if err := chartutil.ProcessDependenciesWithMerge(c, chartutil.Values{}); err != nil {
		tb.Fatal(err)
	}
	vals, err := chartutil.ToRenderValuesWithSchemaValidation(c, chartutil.Values{},
		chartutil.ReleaseOptions{Name: ReleaseName, Namespace: ReleaseNamespace, Revision: 1, IsInstall: true}, nil, true)
	if err != nil {
		tb.Fatal(err)
	}
	rendered, err := helmengine.Render(c, vals)
	if err != nil {
		tb.Fatalf("Helm's engine: %v", err)
	}
	return rendered
}

// readChart reads the chart in dir as Helm's loader takes it.
func readChart(t *testing.T, dir string) []File {
	t.Helper()
	var files []File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files = append(files, File{Path: filepath.ToSlash(rel), Data: data})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// berthPublicURL is the line of berth's values.yaml that the chart refuses
// to render without, and what TestHelmAsHelmOnRealCharts sets it to, as
// whoever installs the chart must.
var berthPublicURL = [2]string{`    publicURL: ""`, `    publicURL: "` + berthURL + `"`}

// berthURL is the public URL berth's chart is rendered with.
const berthURL = "https://berth.example.com"

// TestHelmAsHelmOnRealCharts renders berth's own chart (with the public URL
// it requires) and Helm's test charts (subcharts, archives, aliases,
// import-values) with Helm's engine and with render.Helm: every template
// must render the same, but those that use random values (render gives
// placeholders).
func TestHelmAsHelmOnRealCharts(t *testing.T) {
	dirs := []string{"../../deploy/helm/berth"}
	helmCharts := filepath.Join(helmModuleDir(t), "pkg/chartutil/testdata")
	for _, name := range []string{"subpop", "frobnitz", "dependent-chart-alias", "import-values-from-enabled-subchart/parent-chart"} {
		dirs = append(dirs, filepath.Join(helmCharts, name))
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			files := readChart(t, dir)
			if filepath.Base(dir) == "berth" {
				i := slices.IndexFunc(files, func(f File) bool { return f.Path == "values.yaml" })
				if i < 0 || !bytes.Contains(files[i].Data, []byte(berthPublicURL[0])) {
					t.Fatalf("berth's values.yaml has no line %q", berthPublicURL[0])
				}
				files[i].Data = bytes.Replace(files[i].Data, []byte(berthPublicURL[0]), []byte(berthPublicURL[1]), 1)
			}
			res, err := Helm(files, Budget{})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, o := range res.Outputs {
				got[o.Name] = o.Text
			}
			c, err := loader.LoadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if filepath.Base(dir) == "berth" {
				catalog, _ := c.Values["config"].(map[string]any)["catalog"].(map[string]any)
				if catalog == nil {
					t.Fatal("berth's values have no config.catalog")
				}
				catalog["publicURL"] = berthURL
			}
			rendered := renderWithHelm(t, c)
			if len(res.Failures) != 0 {
				t.Errorf("failures %v", res.Failures)
			}
			n := 0
			for name, text := range rendered {
				if strings.HasPrefix(path.Base(name), "_") {
					continue
				}
				n++
				if slices.ContainsFunc(c.Templates, func(f *chart.File) bool {
					return name == c.Name()+"/"+f.Name && bytes.Contains(f.Data, []byte("rand"))
				}) {
					continue
				}
				if short := strings.TrimPrefix(name, c.Name()+"/"); got[short] != text {
					t.Errorf("%s:\ngot  %q\nwant %q", short, got[short], text)
				}
			}
			if n != len(got) || n == 0 {
				t.Errorf("%d templates rendered, Helm rendered %d", len(got), n)
			}
		})
	}
}

// helmModuleDir is where the Go module cache holds the Helm module this
// build uses.
func helmModuleDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "helm.sh/helm/v3").Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		t.Fatalf("go list -m helm.sh/helm/v3: %v", err)
	}
	return string(bytes.TrimSpace(out))
}
