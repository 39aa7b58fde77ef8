package pkgformat

import (
	"bytes"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestHelm(t *testing.T) {
	p, err := Load("testdata/hello-chart", Options{})
	must(t, err)
	md := p.Metadata
	want := Metadata{
		SchemaVersion:    MetadataSchemaVersion,
		Name:             "hello",
		Version:          "1.2.3+build.5",
		Format:           Helm,
		AppVersion:       "2.0",
		Description:      "A tiny chart for berth's tests.",
		Keywords:         []string{"example", "greeting"},
		Maintainers:      []Maintainer{{Name: "Jo Doe", Email: "jo@example.com"}},
		Links:            []Link{{Name: "Home", URL: "https://example.com/hello"}, {Name: "Source", URL: "https://github.com/example/hello"}},
		License:          "Apache-2.0",
		Icon:             &Icon{URL: "https://example.com/hello.png"},
		ProvidedAPIs:     []API{{Group: "hello.example.com", Version: "v1", Kind: "Greeting", Plural: "greetings"}, {Group: "hello.example.com", Version: "v1alpha1", Kind: "Greeting", Plural: "greetings"}},
		RequiredPackages: []PackageRequirement{{Name: "redis", VersionRange: ">=17.0.0"}},
		MinKubeVersion:   "1.21.0",
		MaxKubeVersion:   "1.30.0",
		Images:           []Image{{Reference: "docker.io/library/nginx:1.25", Found: []string{"templates/deployment.yaml: Deployment release-name, container hello"}, Mutable: true}},
		ImagesIncomplete: "Chart.yaml: dependency redis is not in charts/, so its templates are not rendered",
		Source:           "https://github.com/example/hello",
		Readme:           "# hello\n\nSays hello.\n",
		Files:            md.Files,
	}
	if !reflect.DeepEqual(md, want) {
		t.Errorf("got  %+v\nwant %+v", md, want)
	}
	if len(md.Files) != 5 || md.Files[0] != (FileInfo{Path: "Chart.yaml", Size: int64(len(p.Files[0].Data))}) {
		t.Errorf("files %v", md.Files)
	}
	if Tag(md.Version) != "1.2.3_build.5" || ContentTitle(md.Name, md.Version) != "hello-1.2.3+build.5.tgz" {
		t.Errorf("tag %s, title %s", Tag(md.Version), ContentTitle(md.Name, md.Version))
	}
}

func TestHelmPackageFolder(t *testing.T) {
	// `helm package` puts the chart in a folder named after it.
	files, err := ReadDir("testdata/hello-chart", Limits{})
	must(t, err)
	var archive []tarEntry
	for _, f := range files {
		archive = append(archive, reg("hello/"+f.Path, string(f.Data)))
	}
	inFolder, err := ReadArchive(bytes.NewReader(tgz(t, archive...)), Limits{})
	must(t, err)
	p, err := New(inFolder, Options{})
	must(t, err)
	if !reflect.DeepEqual(p.Files, files) || p.Metadata.Name != "hello" {
		t.Errorf("the chart folder did not become the package root: %v", p.Metadata.Files)
	}
}

func TestPlain(t *testing.T) {
	p, err := Load("testdata/plain-bundle", Options{Name: "widgets", Version: "0.1.0"})
	must(t, err)
	md := p.Metadata
	wantPerms := &Permissions{
		Cluster:    []PolicyRule{{APIGroups: []string{"example.com"}, Resources: []string{"widgets", "widgets/status"}, Verbs: []string{"get", "list", "update", "watch"}}},
		Namespaced: []PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "get"}}},
	}
	if md.Format != Plain || md.Name != "widgets" || md.Version != "0.1.0" ||
		!reflect.DeepEqual(md.ProvidedAPIs, []API{{Group: "example.com", Version: "v1", Kind: "Widget", Plural: "widgets"}}) ||
		!reflect.DeepEqual(md.Permissions, wantPerms) ||
		!reflect.DeepEqual(md.RelatedImages, []string{"busybox:1.36", "quay.io/example/widget-operator:v0.1.0"}) {
		t.Errorf("got %+v", md)
	}
}

func TestPlainList(t *testing.T) {
	list := `{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]},
  {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": "a", "image": "alpine:3"}]}}
]}`
	p, err := New([]File{file("manifests/list.json", list)}, Options{Name: "demo", Version: "1.0.0"})
	must(t, err)
	md := p.Metadata
	if md.Permissions == nil || len(md.Permissions.Cluster) != 1 || !reflect.DeepEqual(md.RelatedImages, []string{"alpine:3"}) {
		t.Errorf("got %+v", md)
	}
}

func TestKUDO(t *testing.T) {
	operator := `apiVersion: kudo.dev/v1beta1
name: demo
description: Demo operator
operatorVersion: "0.2.0"
appVersion: 5.7
kubernetesVersion: 1.20.0
url: https://example.com/demo
maintainers:
  - name: Jo Doe
    email: jo@example.com
tasks:
  - name: child
    kind: KudoOperator
    spec:
      package: ./packages/zookeeper
      appVersion: 3.6.2
      operatorVersion: 0.3.3
  - name: app
    kind: Apply
    spec:
      resources: [deploy.yaml]
`
	role := `{{ if .Params.RBAC }}
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ .Name }}-role
rules:
  - apiGroups: [""]
    resources: ["pods"]
    verbs: ["get"]
{{ end }}
`
	deploy := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Name }}
spec:
  template:
    spec:
      containers:
        - name: app
          image: mysql:5.7
        - name: sidecar
          image: {{ .Params.SIDECAR_IMAGE }}
`
	broken := "{{ range .Params.X }}\n  - {{ . }: x\n"
	p, err := New([]File{file("operator.yaml", operator), file("templates/role.yaml", role), file("templates/deploy.yaml", deploy), file("templates/broken.yaml", broken)}, Options{})
	must(t, err)
	md := p.Metadata
	if md.Version != "5.7_0.2.0" || md.AppVersion != "5.7" || md.OperatorVersion != "0.2.0" || md.Description != "Demo operator" ||
		md.MinKubeVersion != "1.20.0" || md.Source != "https://example.com/demo" {
		t.Errorf("identity %+v", md)
	}
	if !reflect.DeepEqual(md.RequiredPackages, []PackageRequirement{{Name: "zookeeper", VersionRange: "3.6.2_0.3.3"}}) {
		t.Errorf("required packages %v", md.RequiredPackages)
	}
	if md.Permissions == nil || !reflect.DeepEqual(md.Permissions.Namespaced, []PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}) {
		t.Errorf("permissions %+v", md.Permissions)
	}
	if !reflect.DeepEqual(md.RelatedImages, []string{"mysql:5.7"}) {
		t.Errorf("images %v", md.RelatedImages)
	}
}

func TestOLMBundle(t *testing.T) {
	csv := `apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: demo.v1.1.0
  annotations:
    createdAt: "2021-06-01T10:00:00+02:00"
    repository: https://github.com/example/demo
    olm.skipRange: ">=1.0.0 <1.1.0"
spec:
  version: 1.1.0
  replaces: demo.v1.0.0
  skips: [demo.v1.0.1, demo.v1.0.1]
  displayName: Demo Operator
  description: |
    Demo manages demos.

    More words.
  provider:
    name: Example Inc.
  icon:
    - base64data: aGVsbG8=
      mediatype: image/png
  customresourcedefinitions:
    owned:
      - name: demos.example.com
        version: v1
        kind: Demo
    required:
      - name: certificates.cert-manager.io
        version: v1
        kind: Certificate
  install:
    strategy: deployment
    spec:
      clusterPermissions:
        - serviceAccountName: demo
          rules:
            - apiGroups: [example.com]
              resources: [demos]
              verbs: ["*"]
      deployments:
        - name: demo
          spec:
            template:
              spec:
                containers:
                  - name: manager
                    image: quay.io/example/demo:1.1.0
  relatedImages:
    - name: operand
      image: quay.io/example/operand:2.0
`
	deps := `dependencies:
  - type: olm.package
    value:
      packageName: cert-manager
      version: ">=1.0.0"
  - type: olm.gvk
    value:
      group: monitoring.coreos.com
      kind: Prometheus
      version: v1
`
	annotations := "annotations:\n  operators.operatorframework.io.bundle.package.v1: demo\n  operators.operatorframework.io.bundle.channels.v1: stable, fast\n  operators.operatorframework.io.bundle.channel.default.v1: stable\n"
	p, err := New([]File{file(bundleAnnotations, annotations), file(bundleDependencies, deps), file("manifests/demo"+csvSuffix, csv)}, Options{})
	must(t, err)
	md := p.Metadata
	edges := Channel{Replaces: "demo.v1.0.0", Skips: []string{"demo.v1.0.1"}, SkipRange: ">=1.0.0 <1.1.0"}
	fast, stable := edges, edges
	fast.Name, stable.Name = "fast", "stable"
	created := time.Date(2021, 6, 1, 8, 0, 0, 0, time.UTC)
	want := Metadata{
		SchemaVersion: MetadataSchemaVersion, Name: "demo", Version: "1.1.0", Format: OLM, CSVName: "demo.v1.1.0",
		DisplayName: "Demo Operator", Description: "Demo manages demos.", Vendor: "Example Inc.",
		Icon:             &Icon{MediaType: "image/png", Digest: "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824", Size: 5, Path: "manifests/demo" + csvSuffix},
		Channels:         []Channel{fast, stable},
		DefaultChannel:   "stable",
		ProvidedAPIs:     []API{{Group: "example.com", Version: "v1", Kind: "Demo", Plural: "demos"}},
		RequiredAPIs:     []API{{Group: "cert-manager.io", Version: "v1", Kind: "Certificate", Plural: "certificates"}, {Group: "monitoring.coreos.com", Version: "v1", Kind: "Prometheus"}},
		RequiredPackages: []PackageRequirement{{Name: "cert-manager", VersionRange: ">=1.0.0"}},
		Permissions:      &Permissions{Cluster: []PolicyRule{{APIGroups: []string{"example.com"}, Resources: []string{"demos"}, Verbs: []string{"*"}}}},
		RelatedImages:    []string{"quay.io/example/demo:1.1.0", "quay.io/example/operand:2.0"},
		Images: []Image{
			{Reference: "quay.io/example/demo:1.1.0", Found: []string{"CSV deployment demo, container manager"}, Mutable: true},
			{Reference: "quay.io/example/operand:2.0", Found: []string{"CSV spec.relatedImages (operand)"}, Mutable: true},
		},
		Created: &created,
		Source:  "https://github.com/example/demo",
		Readme:  "Demo manages demos.\n\nMore words.",
		Files:   md.Files,
	}
	if !reflect.DeepEqual(md, want) {
		t.Errorf("got  %+v\nwant %+v", md, want)
	}
}

func TestKubeVersionBounds(t *testing.T) {
	tests := []struct{ constraint, min, max string }{
		{">=1.19.0-0", "1.19.0", ""},
		{">= 1.19.0-0 <= 1.25.0", "1.19.0", "1.25.0"},
		{">=1.16.0, <=1.22", "1.16.0", "1.22"},
		{"^1.20", "1.20", ""},
		{"~1.21.0", "1.21.0", ""},
		{"1.24.3", "1.24.3", "1.24.3"},
		{">1.18 <1.25", "", ""},
		{">=1.18 || >=2.0", "", ""},
		{"1.20.x", "", ""},
		{"", "", ""},
	}
	for _, tt := range tests {
		if lo, hi := kubeVersionBounds(tt.constraint); lo != tt.min || hi != tt.max {
			t.Errorf("%q: got [%q, %q], want [%q, %q]", tt.constraint, lo, hi, tt.min, tt.max)
		}
	}
}

func TestParseCreated(t *testing.T) {
	utc := func(y int, mo time.Month, d, h, mi, s int) *time.Time {
		t := time.Date(y, mo, d, h, mi, s, 0, time.UTC)
		return &t
	}
	tests := []struct {
		in   string
		want *time.Time
	}{
		{"2019-02-28T01:03:00Z", utc(2019, 2, 28, 1, 3, 0)},
		{"2019-02-28 01:03:00", utc(2019, 2, 28, 1, 3, 0)},
		{"2020-10-02T08:00:00+02:00", utc(2020, 10, 2, 6, 0, 0)},
		{"2020-10-02T08:00:00+0200", utc(2020, 10, 2, 6, 0, 0)},
		{"2019-12-31 19:40Z", utc(2019, 12, 31, 19, 40, 0)},
		{"2019-01-24T15-33-43Z", utc(2019, 1, 24, 15, 33, 43)},
		{"2020-11-12-T12:59:59Z", utc(2020, 11, 12, 12, 59, 59)},
		{"2020-05-07:10:00:00", utc(2020, 5, 7, 10, 0, 0)},
		{"2021-06-23", utc(2021, 6, 23, 0, 0, 0)},
		{"2020/01/09", utc(2020, 1, 9, 0, 0, 0)},
		{"Wed Dec  4 06:41:31 EST 2019", utc(2019, 12, 4, 11, 41, 31)},
		{"Thu Feb 11 18:14:05 IST 2021", utc(2021, 2, 11, 12, 44, 5)},
		{"10/29/2019", utc(2019, 10, 29, 0, 0, 0)},
		{"15-06-2021", utc(2021, 6, 15, 0, 0, 0)},
		{"03-01-2021", nil},
		{"2020-006-28 22:25:53", nil},
		{"Tue Jun  9 11:18:01 XYZ 2020", nil},
		{"", nil},
	}
	for _, tt := range tests {
		got := parseCreated(tt.in)
		if (got == nil) != (tt.want == nil) || (got != nil && !got.Equal(*tt.want)) {
			t.Errorf("%q: got %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestNames(t *testing.T) {
	for _, name := range []string{"kafka", "etcd", "a", "ibm-block-csi-operator-community", "my_chart", "a.b-c_d"} {
		if err := ValidName(name); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
	for _, name := range []string{"", "Kafka", "-a", "a-", "a--b", "a/b", "a b", string(bytes.Repeat([]byte("a"), 129))} {
		if err := ValidName(name); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: %v", name, err)
		}
	}
	if Tag("1.0.0+abc") != "1.0.0_abc" || Tag("2.5.1_1.3.2") != "2.5.1_1.3.2" {
		t.Error("Tag")
	}
	if ContentTitle("kafka", "2.5.1_1.3.2") != "kafka-2.5.1_1.3.2.tgz" {
		t.Error("ContentTitle")
	}
	if d := DefaultLimits(); d != (Limits{}).withDefaults() || d.MaxFileSize != 16<<20 || d.MaxTotalSize != 128<<20 ||
		d.MaxFiles != 10000 || d.MaxArchiveSize != 128<<20 || d.MaxPathLength != 1024 {
		t.Errorf("DefaultLimits %+v", d)
	}
}

func TestArtifactRefusesInvalidPackage(t *testing.T) {
	for _, p := range []*Package{
		{Metadata: Metadata{Name: "", Version: "1.0.0"}},
		{Metadata: Metadata{Name: "demo", Version: "1.0 beta"}},
		{Metadata: Metadata{Name: "demo", Version: "1.0.0"}, Files: []File{file("../x", "")}},
	} {
		if _, err := p.Artifact(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v", p.Metadata, err)
		}
	}
	// The repository <ns>/olm would hold <ns>/olm/catalog, the namespace's
	// OLM catalog image, in its path.
	reserved := &Package{Metadata: Metadata{Name: ReservedName, Version: "1.0.0"}}
	if _, err := reserved.Artifact(); !errors.Is(err, ErrInvalid) || !errors.Is(err, ErrReservedName) ||
		!strings.Contains(err.Error(), `package name "olm" is reserved`) {
		t.Errorf("a package named %s: %v, want refused as reserved", ReservedName, err)
	}
}

func TestLoadTarball(t *testing.T) {
	p, err := Load("testdata/hello-chart", Options{})
	must(t, err)
	content, err := p.Archive()
	must(t, err)
	path := filepath.Join(t.TempDir(), ContentTitle(p.Metadata.Name, p.Metadata.Version))
	must(t, WriteFiles(filepath.Dir(path), []File{{Path: filepath.Base(path), Mode: 0o644, Data: content}}))
	again, err := Load(path, Options{})
	must(t, err)
	if !reflect.DeepEqual(again, p) {
		t.Error("the tarball does not load as the directory")
	}
}

func TestHelmTemplatePermissions(t *testing.T) {
	chart := "apiVersion: v2\nname: demo\nversion: 1.0.0\n"
	role := `{{- if .Values.rbac.create }}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ include "demo.fullname" . }}
  labels:
    {{- include "demo.labels" . | nindent 4 }}
rules:
  - apiGroups: [""]
    resources: ["secrets"]
    verbs: ["get", "list"]
{{- end }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ .Release.Name }}
rules:
{{- toYaml .Values.extraRules | nindent 2 }}
  - apiGroups: ["apps"]
    resources: ["deployments"]
    verbs: ["patch"]
`
	p, err := New([]File{file("Chart.yaml", chart), file("templates/rbac.yaml", role), file("templates/NOTES.txt", "{{ .Release.Name }}")}, Options{})
	must(t, err)
	want := &Permissions{
		Cluster:    []PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}}},
		Namespaced: []PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"patch"}}},
	}
	if !reflect.DeepEqual(p.Metadata.Permissions, want) {
		t.Errorf("permissions %+v, want %+v", p.Metadata.Permissions, want)
	}
}

func TestBindingsOfClusterAdmin(t *testing.T) {
	binding := func(kind, role string) string {
		return "apiVersion: rbac.authorization.k8s.io/v1\nkind: " + kind + "\nmetadata: {name: b}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: " + role + "}\nsubjects: [{kind: ServiceAccount, name: op, namespace: x}]\n"
	}
	everything := PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}
	urls := PolicyRule{NonResourceURLs: []string{"*"}, Verbs: []string{"*"}}
	for _, tc := range []struct {
		name  string
		files []File
		want  *Permissions
	}{
		{"cluster-wide, twice", []File{file("manifests/a.yaml", binding("ClusterRoleBinding", "cluster-admin")), file("manifests/b.yaml", binding("ClusterRoleBinding", "cluster-admin"))},
			&Permissions{Cluster: []PolicyRule{urls, everything}}}, // normalised order
		{"in a namespace", []File{file("manifests/a.yaml", binding("RoleBinding", "cluster-admin"))}, &Permissions{Namespaced: []PolicyRule{everything}}},
		{"a role of the package's own", []File{file("manifests/a.yaml", binding("ClusterRoleBinding", "widgets-reader"))}, nil},
		{"view", []File{file("manifests/a.yaml", binding("ClusterRoleBinding", "view"))}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.files, Options{Name: "demo", Version: "1.0.0"})
			must(t, err)
			if !reflect.DeepEqual(p.Metadata.Permissions, tc.want) {
				t.Errorf("permissions %+v, want %+v", p.Metadata.Permissions, tc.want)
			}
		})
	}
}
