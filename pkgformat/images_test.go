package pkgformat

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

const someDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

const imagesCSV = `apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: etcd.v0.9.4
spec:
  version: 0.9.4
  install:
    strategy: deployment
    spec:
      deployments:
        - name: etcd-operator
          spec:
            template:
              spec:
                initContainers:
                  - name: migrate
                    image: quay.io/coreos/etcd-migrate:v1
                containers:
                  - name: etcd
                    image: quay.io/coreos/etcd-operator@` + someDigest + `
                  - name: backup
                    image: quay.io/coreos/etcd-operator@` + someDigest + `
  relatedImages:
    - name: etcd-operator
      image: quay.io/coreos/etcd-operator@` + someDigest + `
    - image: busybox
    - name: broken
      image: quay.io/x@@sha256:abc
`

const imagesManifests = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      initContainers:
        - name: wait
          image: busybox:1.36
      containers:
        - name: app
          image: nginx:1.25
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: nightly
spec:
  jobTemplate:
    spec:
      template:
        spec:
          containers:
            - name: job
              image: ghcr.io/example/job:2@` + someDigest + `
---
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Pod
    metadata:
      name: debug
    spec:
      containers:
        - image: nginx:1.25
  - apiVersion: example.com/v1
    kind: Widget
    metadata:
      name: w
    spec:
      template:
        spec:
          containers:
            - name: widget
              image: "{{ .Values.widget }}"
`

const imagesOperator = `apiVersion: kudo.dev/v1beta1
name: demo
operatorVersion: 0.1.0
appVersion: 1.0.0
tasks:
  - name: app
    kind: Apply
    spec:
      resources: [deployment.yaml]
`

const imagesParams = `apiVersion: kudo.dev/v1beta1
parameters:
  - name: IMAGE
    default: quay.io/example/demo
  - name: EXPORTER
    default: "true"
  - name: SIDECARS
    type: array
    default: '["busybox:1.36", "alpine:3"]'
  - name: NO_DEFAULT
`

const imagesKUDOTemplate = `apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {{ .Name }}
spec:
  template:
    spec:
      containers:
        - name: {{ .OperatorName }}
          image: {{ .Params.IMAGE }}:{{ .AppVersion }}
        {{- if eq .Params.EXPORTER "true" }}
        - name: exporter
          image: quay.io/prometheus/node-exporter:v1
        {{- end }}
        {{- range $i, $s := .Params.SIDECARS }}
        - name: sidecar-{{ $i }}
          image: {{ $s }}
        {{- end }}
        {{- if .Params.NO_DEFAULT }}
        - name: never
          image: never:1
        {{- end }}
`

func TestImages(t *testing.T) {
	bundle := func(csv string) []File {
		return []File{file(bundleAnnotations, "annotations:\n  "+annotationPackage+": etcd\n"), file("manifests/etcd"+csvSuffix, csv)}
	}
	tests := []struct {
		name       string
		files      []File
		opts       Options
		want       []Image
		incomplete string
	}{
		{name: "OLM", files: bundle(imagesCSV), want: []Image{
			{Reference: "docker.io/library/busybox:latest", Found: []string{"CSV spec.relatedImages"}, Mutable: true},
			{Reference: "quay.io/coreos/etcd-migrate:v1", Found: []string{"CSV deployment etcd-operator, init container migrate"}, Mutable: true},
			{Reference: "quay.io/coreos/etcd-operator@" + someDigest, Found: []string{
				"CSV deployment etcd-operator, container backup",
				"CSV deployment etcd-operator, container etcd",
				"CSV spec.relatedImages (etcd-operator)",
			}},
			{Reference: "quay.io/x@@sha256:abc", Found: []string{"CSV spec.relatedImages (broken)"}, Problem: "not an image reference: invalid reference format"},
		}},
		{name: "plain", files: []File{file("manifests/all.yaml", imagesManifests)}, opts: Options{Name: "web", Version: "1.0.0"}, want: []Image{
			{Reference: "docker.io/library/busybox:1.36", Found: []string{"manifests/all.yaml: Deployment web, init container wait"}, Mutable: true},
			{Reference: "docker.io/library/nginx:1.25", Found: []string{"manifests/all.yaml: Deployment web, container app", "manifests/all.yaml: Pod debug, container (unnamed)"}, Mutable: true},
			{Reference: "ghcr.io/example/job:2@" + someDigest, Found: []string{"manifests/all.yaml: CronJob nightly, container job"}},
			{Reference: "{{ .Values.widget }}", Found: []string{"manifests/all.yaml: Widget w, container widget"}, Problem: "a template expression, not an image reference: the template was not rendered"},
		}},
		{name: "KUDO", files: []File{file("operator.yaml", imagesOperator), file("params.yaml", imagesParams), file("templates/deployment.yaml", imagesKUDOTemplate),
			file("templates/broken.yaml", "{{ .Params.UNDECLARED }}")}, want: []Image{
			{Reference: "docker.io/library/alpine:3", Found: []string{"templates/deployment.yaml: StatefulSet demo-instance, container sidecar-1"}, Mutable: true},
			{Reference: "docker.io/library/busybox:1.36", Found: []string{"templates/deployment.yaml: StatefulSet demo-instance, container sidecar-0"}, Mutable: true},
			{Reference: "quay.io/example/demo:1.0.0", Found: []string{"templates/deployment.yaml: StatefulSet demo-instance, container demo"}, Mutable: true},
			{Reference: "quay.io/prometheus/node-exporter:v1", Found: []string{"templates/deployment.yaml: StatefulSet demo-instance, container exporter"}, Mutable: true},
		}, incomplete: `templates/broken.yaml: does not render with the default values: templates/broken.yaml:1:10: executing "templates/broken.yaml" at <.Params.UNDECLARED>: map has no entry for key "UNDECLARED"`},
		{name: "Helm", files: []File{
			file("Chart.yaml", "apiVersion: v2\nname: web\nversion: 1.0.0\nappVersion: \"1.25\"\n"),
			file("values.yaml", "image:\n  repository: nginx\nworker:\n  image: ghcr.io/example/worker:3\n"),
			file("templates/_helpers.tpl", `{{ define "web.image" }}{{ .Values.image.repository }}:{{ .Chart.AppVersion }}{{ end }}`),
			file("templates/deployment.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}-web\nspec:\n  template:\n    spec:\n      containers:\n        - name: web\n          image: {{ include \"web.image\" . }}\n"),
			file("templates/worker.yaml", "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: worker\nspec:\n  template:\n    spec:\n      containers:\n        - name: worker\n          image: {{ .Values.worker.image }}\n"),
			file("templates/license.yaml", `{{ required "licenseKey is required" .Values.licenseKey }}`),
			file("templates/NOTES.txt", `{{ fail "notes are not manifests" }}`),
		}, want: []Image{
			{Reference: "docker.io/library/nginx:1.25", Found: []string{"templates/deployment.yaml: Deployment release-name-web, container web"}, Mutable: true},
			{Reference: "ghcr.io/example/worker:3", Found: []string{"templates/worker.yaml: Job worker, container worker"}, Mutable: true},
		}, incomplete: `templates/license.yaml: does not render with the default values: web/templates/license.yaml:1:3: executing "web/templates/license.yaml" at <required "licenseKey is required" .Values.licenseKey>: error calling required: licenseKey is required`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.files, tt.opts)
			must(t, err)
			if md := p.Metadata; !reflect.DeepEqual(md.Images, tt.want) || md.ImagesIncomplete != tt.incomplete {
				t.Errorf("images %+v\nwant   %+v\nincomplete %q\nwant       %q", md.Images, tt.want, md.ImagesIncomplete, tt.incomplete)
			}
		})
	}
}

func TestImagesHostile(t *testing.T) {
	chart := func(template string) []File {
		return []File{file("Chart.yaml", "apiVersion: v2\nname: evil\nversion: 1.0.0\n"), file("templates/a.yaml", template)}
	}
	kudo := func(template string) []File {
		return []File{file("operator.yaml", goodOperator), file("templates/a.yaml", template)}
	}
	tests := []struct {
		name  string
		files []File
		is    error
		want  string
	}{
		{"Helm loop", chart(`{{ range until 100000000 }}{{ end }}`), ErrLimit, "templates/a.yaml: until would build more than"},
		{"Helm recursion", chart(`{{ define "x" }}{{ include "x" . }}{{ include "x" . }}{{ end }}{{ include "x" . }}`), ErrLimit, "templates/a.yaml: templates call each other more than 200 deep"},
		{"Helm file outside", chart(`{{ .Files.Get "../secret" }}`), ErrInvalid, `reads the file "../secret", outside the chart`},
		{"Helm rendered YAML bomb", chart(`{{ range until 60000 }}- [a, b, c, d, e, f, g, h, i, j, k, l, m, n]{{ "\n" }}{{ end }}`), ErrLimit, "templates/a.yaml as rendered"},
		{"KUDO loop", kudo(`{{ range 100000000 }}{{ end }}`), ErrLimit, "templates/a.yaml: rendering takes more than 1000000 steps"},
		{"KUDO repeat", kudo(`{{ repeat 100000000 "x" }}`), ErrLimit, "templates/a.yaml: repeat would build more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			_, err := New(tt.files, Options{Limits: Limits{MaxYAMLDocumentNodes: 100000}})
			if took := time.Since(start); took > time.Minute {
				t.Errorf("took %s", took)
			}
			if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %v saying %q", err, tt.is, tt.want)
			}
		})
	}
}

func TestRenderCost(t *testing.T) {
	limits := Limits{MaxFileSize: 1 << 20, MaxRenderSteps: 1000, MaxYAMLDocumentNodes: 10000}
	rendering := 1000*64 + 1<<20 + 10000*bytesPerNode
	tests := []struct {
		name  string
		files []File
		want  int64
	}{
		{"chart", []File{file("Chart.yaml", "name: a\n")}, int64(rendering)},
		{"chart in a folder", []File{file("a/Chart.yaml", "name: a\n"), file("a/values.yaml", "")}, int64(rendering)},
		{"operator", []File{file("operator.yaml", goodOperator)}, int64(rendering)},
		{"bundle", []File{file("manifests/a.yaml", "kind: Pod\n")}, 0},
	}
	for _, tt := range tests {
		if got := RenderCost(tt.files, limits); got != tt.want {
			t.Errorf("%s: RenderCost %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestImagesHelmSubchartArchive(t *testing.T) {
	var sub bytes.Buffer
	if err := WriteArchive(&sub, []File{
		file("db/Chart.yaml", "apiVersion: v2\nname: db\nversion: 1.0.0\n"),
		file("db/values.yaml", "image: postgres:16\n"),
		file("db/templates/sts.yaml", "kind: StatefulSet\nmetadata:\n  name: {{ .Release.Name }}-db\nspec:\n  template:\n    spec:\n      containers:\n        - name: db\n          image: {{ .Values.image }}\n"),
	}); err != nil {
		t.Fatal(err)
	}
	files := []File{
		file("Chart.yaml", "apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n  - name: db\n    version: 1.0.0\n"),
		file("values.yaml", "db:\n  image: postgres:17\n"),
		{Path: "charts/db-1.0.0.tgz", Mode: 0o644, Data: sub.Bytes()},
	}
	p, err := New(files, Options{})
	must(t, err)
	want := []Image{{Reference: "docker.io/library/postgres:17", Found: []string{"charts/db/templates/sts.yaml: StatefulSet release-name-db, container db"}, Mutable: true}}
	if !reflect.DeepEqual(p.Metadata.Images, want) || p.Metadata.ImagesIncomplete != "" {
		t.Errorf("images %+v (incomplete %q), want %+v", p.Metadata.Images, p.Metadata.ImagesIncomplete, want)
	}
	// A bomb in the archive stops at the package's limits.
	_, err = New(files, Options{Limits: Limits{MaxTotalSize: int64(len(sub.Bytes())) + 300}})
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "charts/db-1.0.0.tgz") {
		t.Errorf("got %v, want a limit naming the archive", err)
	}
}
