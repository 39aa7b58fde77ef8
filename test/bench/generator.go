package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/berth-registry/berth/pkgformat"
)

// The catalog corpus: a deterministic set of realistic package versions,
// each a real berth package that pkgformat reads and validates, so that the
// catalog indexes it like any push.
//
// A corpus is planned in one pass (names, namespaces, formats, descriptions,
// keywords, maintainers, CRDs, version counts: everything search sees) and
// every package is then built on its own, from the seed and its index only,
// so that packages can be built in parallel and in any order and still come
// out byte for byte the same.

// fixtureNamespaces hold the real packages of the fixtures directory; no
// generated package goes there.
const (
	kudoFixtureNamespace = "kudo"
	olmFixtureNamespace  = "community"
)

// pkgSpec is one generated package: everything shared by its versions.
type pkgSpec struct {
	seed  uint64 // the corpus seed; with index, all the package is built from
	index int

	namespace, name string
	format          pkgformat.Format
	versions        int // how many versions

	tech        string // the tech of the name, the subject of the description
	company     string
	displayName string
	description string // one to three sentences
	keywords    []string
	maintainers []pkgformat.Maintainer
	crds        []crdSpec
	channels    []string // OLM only, default first
	// minKube and maxKube are Kubernetes versions; empty for none.
	minKube, maxKube string
	readme           bool
}

// crdSpec is a CustomResourceDefinition a package provides.
type crdSpec struct {
	group, kind, plural, version string
}

// corpus is a planned set of packages.
type corpus struct {
	seed     uint64
	packages []pkgSpec
	versions int // total over packages
}

// versionWeights[i] is the weight of a package having i+1 versions; the
// mean is about 5.
var versionWeights = []float64{10, 10, 12, 13, 15, 12, 10, 8, 6, 4}

// formatWeights says how often each format appears.
var formatWeights = []struct {
	format pkgformat.Format
	weight float64
}{{pkgformat.OLM, 35}, {pkgformat.Helm, 30}, {pkgformat.KUDO, 20}, {pkgformat.Plain, 15}}

// newCorpus plans packages in generatedNamespaces holding versions versions
// in all, about five per package.
func newCorpus(seed uint64, versions int) *corpus {
	r := rand.New(rand.NewPCG(seed, 0))
	c := &corpus{seed: seed}
	names := newNamer()
	for c.versions < versions {
		n := min(1+pickWeighted(r, versionWeights), versions-c.versions)
		p := planPackage(r, seed, len(c.packages), names.next(r))
		p.namespace = zipfPick(r, generatedNamespaces, 0.8)
		p.versions = n
		c.packages = append(c.packages, p)
		c.versions += n
	}
	return c
}

// freshPackages plans count one-version packages in namespace whose names
// are unique among themselves and against any corpus (they end in digits,
// which no generated name does).
func freshPackages(seed uint64, count int, namespace string) []pkgSpec {
	r := rand.New(rand.NewPCG(seed, math.MaxUint64))
	names := newNamer()
	out := make([]pkgSpec, count)
	for i := range out {
		base := names.next(r)
		p := planPackage(r, seed^0x5eed, i, name{text: fmt.Sprintf("%s-%04d", base.text, i), tech: base.tech})
		p.namespace, p.versions = namespace, 1
		out[i] = p
	}
	return out
}

// name is a generated package name and the tech it is about.
type name struct{ text, tech string }

// namer makes unique package names from the vocabulary.
type namer struct{ used map[string]bool }

func newNamer() *namer { return &namer{used: map[string]bool{}} }

// next returns a name not returned before: tech-modifier, prefix-tech,
// prefix-tech-modifier, tech-modifier-modifier or a tech alone, with the
// popular techs and modifiers most often.
func (n *namer) next(r *rand.Rand) name {
	for attempt := 0; ; attempt++ {
		tech := zipfPick(r, techs, 1.0)
		mod := zipfPick(r, modifiers, 0.9)
		var s string
		switch form := pickWeighted(r, []float64{45, 15, 25, 10, 5}); {
		case attempt > 20 || form == 2:
			s = zipfPick(r, prefixes, 0.7) + "-" + tech + "-" + mod
		case form == 0:
			s = tech + "-" + mod
		case form == 1:
			s = zipfPick(r, prefixes, 0.7) + "-" + tech
		case form == 3:
			mod2 := zipfPick(r, modifiers, 0.9)
			if mod2 == mod {
				continue
			}
			s = tech + "-" + mod + "-" + mod2
		default:
			s = tech
		}
		if !n.used[s] {
			n.used[s] = true
			return name{text: s, tech: tech}
		}
	}
}

// planPackage draws everything a package's versions share but its namespace
// and version count.
func planPackage(r *rand.Rand, seed uint64, index int, n name) pkgSpec {
	p := pkgSpec{seed: seed, index: index, name: n.text, tech: n.tech}
	p.format = formatWeights[pickWeighted(r, []float64{
		formatWeights[0].weight, formatWeights[1].weight, formatWeights[2].weight, formatWeights[3].weight,
	})].format
	p.company = zipfPick(r, companies, 0.7)
	p.displayName = displayName(n.text)
	p.description = description(r, p.displayName, n.tech)

	p.keywords = []string{n.tech}
	for range 1 + r.IntN(4) {
		if k := zipfPick(r, keywordList, 1.0); !slices.Contains(p.keywords, k) {
			p.keywords = append(p.keywords, k)
		}
	}
	for range 1 + pickWeighted(r, []float64{60, 30, 10}) {
		p.maintainers = append(p.maintainers, maintainer(r, p.company))
	}

	techCamel := camel(n.tech)
	for range 1 + pickWeighted(r, []float64{55, 30, 15}) {
		kind := techCamel + zipfPick(r, kindSuffixes, 0.8)
		if slices.ContainsFunc(p.crds, func(c crdSpec) bool { return c.kind == kind }) {
			continue
		}
		var group string
		if r.IntN(2) == 0 {
			group = alnum(n.tech) + "." + p.company + ".io"
		} else {
			group = alnum(zipfPick(r, modifiers, 0.9)) + "." + alnum(n.tech) + ".io"
		}
		p.crds = append(p.crds, crdSpec{
			group:   group,
			kind:    kind,
			plural:  strings.ToLower(kind) + "s",
			version: []string{"v1alpha1", "v1beta1", "v1", "v2"}[pickWeighted(r, []float64{30, 35, 30, 5})],
		})
	}
	if p.format == pkgformat.OLM {
		p.channels = channelSets[pickWeighted(r, []float64{35, 20, 10, 10, 8, 5, 7, 5})]
	}
	if r.IntN(100) < 40 {
		p.minKube = fmt.Sprintf("1.%d.0", 16+r.IntN(12))
		if r.IntN(100) < 25 {
			p.maxKube = fmt.Sprintf("1.%d.0", 29+r.IntN(4))
		}
	}
	p.readme = r.IntN(100) < 30
	return p
}

// description is one to three sentences: what the package does to which
// objects, then maybe its features and where it fits.
func description(r *rand.Rand, display, tech string) string {
	verb := func() [2]string { return zipfPickPair(r, verbs, 0.9) }
	adj := func() string { return zipfPick(r, adjectives, 1.0) }
	noun := func() string { return zipfPick(r, nouns, 1.0) }
	feature := func() string { return zipfPick(r, features, 1.0) }
	// features draws n different features.
	featuresN := func(n int) []string {
		var out []string
		for len(out) < n {
			if f := feature(); !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
		return out
	}
	var s []string
	if r.IntN(2) == 0 {
		s = append(s, fmt.Sprintf("%s %s %s %s %s on Kubernetes.", display, verb()[0], adj(), camel(tech), noun()))
	} else {
		s = append(s, fmt.Sprintf("%s %s %s %s.", capitalize(verb()[0]), adj(), camel(tech), noun()))
	}
	for range pickWeighted(r, []float64{30, 45, 25}) {
		switch r.IntN(6) {
		case 0:
			f := featuresN(3)
			s = append(s, fmt.Sprintf("Supports %s, %s and %s.", f[0], f[1], f[2]))
		case 1:
			f := featuresN(2)
			s = append(s, fmt.Sprintf("Provides %s and %s for %s %s.", f[0], f[1], adj(), noun()))
		case 2:
			s = append(s, fmt.Sprintf("Designed for %s environments that need %s.", zipfPick(r, environments, 0.8), feature()))
		case 3:
			s = append(s, fmt.Sprintf("The operator %s %s and %s %s with %s.", verb()[0], noun(), verb()[0], noun(), feature()))
		case 4:
			s = append(s, fmt.Sprintf("Integrates with %s to %s %s.", camel(zipfPick(r, techs, 1.0)), verb()[1], noun()))
		default:
			s = append(s, fmt.Sprintf("Uses custom resources to %s %s %s declaratively.", verb()[1], adj(), noun()))
		}
	}
	return strings.Join(s, " ")
}

func maintainer(r *rand.Rand, company string) pkgformat.Maintainer {
	if r.IntN(5) == 0 {
		return pkgformat.Maintainer{Name: capitalize(company) + " Platform Team", Email: "platform@" + company + ".io"}
	}
	first, last := zipfPick(r, firstNames, 0.5), zipfPick(r, lastNames, 0.5)
	return pkgformat.Maintainer{Name: first + " " + last, Email: strings.ToLower(first+"."+last) + "@" + company + ".io"}
}

// genVersion is one version of a generated package.
type genVersion struct {
	version    string // the package version (KUDO: <app>_<operator> or <operator>)
	semver     string // the version proper (KUDO: operatorVersion)
	appVersion string
	csvName    string // OLM
	replaces   string // OLM: the CSV of the version before
	skipRange  string // OLM
	channels   []string
	created    time.Time
	minKube    string
}

// versionsOf draws the versions of p, oldest first.
func versionsOf(r *rand.Rand, p *pkgSpec) []genVersion {
	major := pickWeighted(r, []float64{40, 40, 12, 8})
	minor, patch := r.IntN(10), r.IntN(6)
	appMajor, appMinor, appPatch := 1+r.IntN(15), r.IntN(20), r.IntN(10)
	withApp := p.format != pkgformat.Plain && (p.format != pkgformat.KUDO || r.IntN(2) == 0)
	created := time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, r.IntN(1500)).Add(time.Duration(r.IntN(86400)) * time.Second)
	minKube := p.minKube
	out := make([]genVersion, p.versions)
	for i := range out {
		if i > 0 {
			switch pickWeighted(r, []float64{60, 30, 10}) {
			case 0:
				patch++
			case 1:
				minor, patch = minor+1, 0
			default:
				major, minor, patch = major+1, 0, 0
			}
			switch r.IntN(3) {
			case 0:
				appPatch++
			case 1:
				appMinor, appPatch = appMinor+1, 0
			}
			created = created.AddDate(0, 0, 7+r.IntN(120))
			if minKube != "" && r.IntN(5) == 0 {
				minKube = bumpMinor(minKube)
			}
		}
		v := genVersion{semver: fmt.Sprintf("%d.%d.%d", major, minor, patch), created: created, minKube: minKube}
		v.version = v.semver
		if withApp {
			v.appVersion = fmt.Sprintf("%d.%d.%d", appMajor, appMinor, appPatch)
			if p.format == pkgformat.KUDO {
				v.version = v.appVersion + "_" + v.semver
			}
		}
		if p.format == pkgformat.OLM {
			v.csvName = p.name + ".v" + v.semver
			if i > 0 {
				v.replaces = out[i-1].csvName
				if r.IntN(4) == 0 {
					v.skipRange = ">=" + out[0].semver + " <" + v.semver
				}
			}
			v.channels = []string{p.channels[0]}
			for _, ch := range p.channels[1:] {
				if i == len(out)-1 || r.IntN(2) == 0 {
					v.channels = append(v.channels, ch)
				}
			}
		}
		out[i] = v
	}
	return out
}

// build makes every version of p, oldest first, as pkgformat reads it.
func (p *pkgSpec) build() ([]*pkgformat.Package, error) {
	r := rand.New(rand.NewPCG(p.seed, uint64(p.index)+1))
	versions := versionsOf(r, p)
	out := make([]*pkgformat.Package, 0, len(versions))
	for _, v := range versions {
		var files []pkgformat.File
		switch p.format {
		case pkgformat.OLM:
			files = p.olmFiles(r, v)
		case pkgformat.Helm:
			files = p.helmFiles(r, v)
		case pkgformat.KUDO:
			files = p.kudoFiles(r, v)
		default:
			files = p.plainFiles(r, v)
		}
		if p.readme {
			files = append(files, file("README.md", p.readmeText(v)))
		}
		pkg, err := pkgformat.New(files, pkgformat.Options{Name: p.name, Version: v.version})
		if err != nil {
			return nil, fmt.Errorf("generated package %s/%s %s: %w", p.namespace, p.name, v.version, err)
		}
		out = append(out, pkg)
	}
	return out, nil
}

func file(path, data string) pkgformat.File {
	return pkgformat.File{Path: path, Mode: 0o644, Data: []byte(data)}
}

func (p *pkgSpec) image(v genVersion) string {
	tag := v.appVersion
	if tag == "" {
		tag = v.semver
	}
	return "ghcr.io/" + p.company + "/" + p.name + ":" + tag
}

func (p *pkgSpec) crdYAML(c crdSpec) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[3]s.%[1]s
spec:
  group: %[1]s
  names:
    kind: %[2]s
    listKind: %[2]sList
    plural: %[3]s
    singular: %[4]s
  scope: Namespaced
  versions:
  - name: %[5]s
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`, c.group, c.kind, c.plural, strings.ToLower(c.kind), c.version)
}

func (p *pkgSpec) deploymentYAML(image, replicas string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  labels:
    app.kubernetes.io/name: %[1]s
spec:
  replicas: %[3]s
  selector:
    matchLabels:
      app.kubernetes.io/name: %[1]s
  template:
    metadata:
      labels:
        app.kubernetes.io/name: %[1]s
    spec:
      serviceAccountName: %[1]s
      containers:
      - name: manager
        image: %[2]s
        args: ["--leader-elect", "--metrics-bind-address=:8080"]
        resources:
          requests: {cpu: 100m, memory: 128Mi}
`, p.name, image, replicas)
}

func (p *pkgSpec) rulesYAML(indent string) string {
	var groups, plurals []string
	for _, c := range p.crds {
		if !slices.Contains(groups, c.group) {
			groups = append(groups, c.group)
		}
		plurals = append(plurals, c.plural)
	}
	return fmt.Sprintf(`%[1]s- apiGroups: [%[2]s]
%[1]s  resources: [%[3]s]
%[1]s  verbs: [get, list, watch, create, update, patch, delete]
%[1]s- apiGroups: [""]
%[1]s  resources: [pods, services, configmaps, secrets, persistentvolumeclaims]
%[1]s  verbs: [get, list, watch, create, update, delete]
`, indent, strings.Join(groups, ", "), strings.Join(plurals, ", "))
}

func (p *pkgSpec) olmFiles(r *rand.Rand, v genVersion) []pkgformat.File {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: %s
  annotations:
    capabilities: %s
    categories: %s
    containerImage: %s
    createdAt: %s
    repository: https://github.com/%s/%s
`, v.csvName, q(zipfPick(r, capabilities, 0.8)), q(zipfPick(r, categories, 0.8)), p.image(v),
		q(v.created.Format(time.RFC3339)), p.company, p.name)
	if v.skipRange != "" {
		fmt.Fprintf(&b, "    olm.skipRange: %s\n", q(v.skipRange))
	}
	fmt.Fprintf(&b, `spec:
  displayName: %s
  description: %s
  version: %s
`, q(p.displayName), q(p.description+"\n\n"+p.featureList()), v.semver)
	if v.replaces != "" {
		fmt.Fprintf(&b, "  replaces: %s\n", v.replaces)
	}
	if v.minKube != "" {
		fmt.Fprintf(&b, "  minKubeVersion: %s\n", v.minKube)
	}
	fmt.Fprintf(&b, "  keywords: [%s]\n  maintainers:\n", strings.Join(p.keywords, ", "))
	for _, m := range p.maintainers {
		fmt.Fprintf(&b, "  - name: %s\n    email: %s\n", q(m.Name), m.Email)
	}
	fmt.Fprintf(&b, `  provider:
    name: %s
  links:
  - name: Documentation
    url: https://docs.%s.io/%s
  installModes:
  - {type: OwnNamespace, supported: true}
  - {type: AllNamespaces, supported: true}
  customresourcedefinitions:
    owned:
`, q(capitalize(p.company)), p.company, p.name)
	for _, c := range p.crds {
		fmt.Fprintf(&b, "    - name: %s.%s\n      version: %s\n      kind: %s\n      displayName: %s\n",
			c.plural, c.group, c.version, c.kind, q(c.kind))
	}
	fmt.Fprintf(&b, `  install:
    strategy: deployment
    spec:
      clusterPermissions:
      - serviceAccountName: %[1]s
        rules:
%[2]s      deployments:
      - name: %[1]s
        spec:
          replicas: 1
          selector:
            matchLabels: {app: %[1]s}
          template:
            metadata:
              labels: {app: %[1]s}
            spec:
              serviceAccountName: %[1]s
              containers:
              - name: manager
                image: %[3]s
`, p.name, p.rulesYAML("        "), p.image(v))

	files := []pkgformat.File{
		file("manifests/"+p.name+".clusterserviceversion.yaml", b.String()),
		file("metadata/annotations.yaml", fmt.Sprintf(`annotations:
  operators.operatorframework.io.bundle.mediatype.v1: registry+v1
  operators.operatorframework.io.bundle.manifests.v1: manifests/
  operators.operatorframework.io.bundle.metadata.v1: metadata/
  operators.operatorframework.io.bundle.package.v1: %s
  operators.operatorframework.io.bundle.channels.v1: %s
  operators.operatorframework.io.bundle.channel.default.v1: %s
`, p.name, strings.Join(v.channels, ","), p.channels[0])),
	}
	for _, c := range p.crds {
		files = append(files, file("manifests/"+c.plural+"."+c.group+".crd.yaml", p.crdYAML(c)))
	}
	return files
}

func (p *pkgSpec) helmFiles(r *rand.Rand, v genVersion) []pkgformat.File {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: v2
name: %s
version: %s
appVersion: %s
description: %s
type: application
home: https://%s.io/%s
sources:
- https://github.com/%s/%s
keywords: [%s]
maintainers:
`, p.name, v.version, q(v.appVersion), q(p.description), p.company, p.name, p.company, p.name, strings.Join(p.keywords, ", "))
	for _, m := range p.maintainers {
		fmt.Fprintf(&b, "- name: %s\n  email: %s\n", q(m.Name), m.Email)
	}
	switch {
	case v.minKube != "" && p.maxKube != "":
		fmt.Fprintf(&b, "kubeVersion: %s\n", q(">="+v.minKube+"-0 <="+p.maxKube))
	case v.minKube != "":
		fmt.Fprintf(&b, "kubeVersion: %s\n", q(">="+v.minKube+"-0"))
	}
	fmt.Fprintf(&b, "annotations:\n  artifacthub.io/license: %s\n", zipfPick(r, licenses, 1.0))
	repo, tag, _ := strings.Cut(p.image(v), ":")
	files := []pkgformat.File{
		file("Chart.yaml", b.String()),
		file("values.yaml", fmt.Sprintf("replicaCount: 1\nimage:\n  repository: %s\n  tag: %q\n  pullPolicy: IfNotPresent\nresources: {}\n", repo, tag)),
		file("templates/deployment.yaml", p.deploymentYAML("{{ .Values.image.repository }}:{{ .Values.image.tag }}", "{{ .Values.replicaCount }}")),
	}
	for _, c := range p.crds {
		files = append(files, file("crds/"+c.plural+".yaml", p.crdYAML(c)))
	}
	return files
}

func (p *pkgSpec) kudoFiles(r *rand.Rand, v genVersion) []pkgformat.File {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: kudo.dev/v1beta1\nname: %s\noperatorVersion: %s\n", q(p.name), q(v.semver))
	if v.appVersion != "" {
		fmt.Fprintf(&b, "appVersion: %s\n", q(v.appVersion))
	}
	if v.minKube != "" {
		fmt.Fprintf(&b, "kubernetesVersion: %s\n", v.minKube)
	}
	fmt.Fprintf(&b, "description: %s\nurl: https://%s.io/%s\nmaintainers:\n", q(p.description), p.company, p.name)
	for _, m := range p.maintainers {
		fmt.Fprintf(&b, "- name: %s\n  email: %s\n", q(m.Name), m.Email)
	}
	resources := []string{"deployment.yaml"}
	for _, c := range p.crds {
		resources = append(resources, strings.ToLower(c.kind)+"-crd.yaml")
	}
	fmt.Fprintf(&b, `tasks:
- name: deploy
  kind: Apply
  spec:
    resources: [%s]
plans:
  deploy:
    strategy: serial
    phases:
    - name: deploy
      strategy: parallel
      steps:
      - name: deploy
        tasks: [deploy]
`, strings.Join(resources, ", "))
	files := []pkgformat.File{
		file("operator.yaml", b.String()),
		file("params.yaml", fmt.Sprintf(`apiVersion: kudo.dev/v1beta1
parameters:
- name: REPLICAS
  description: Number of replicas.
  default: "%d"
- name: IMAGE
  description: Container image of the operator.
  default: %s
`, 1+r.IntN(5), q(p.image(v)))),
		file("templates/deployment.yaml", p.deploymentYAML("{{ .Params.IMAGE }}", "{{ .Params.REPLICAS }}")),
	}
	for _, c := range p.crds {
		files = append(files, file("templates/"+strings.ToLower(c.kind)+"-crd.yaml", p.crdYAML(c)))
	}
	return files
}

func (p *pkgSpec) plainFiles(_ *rand.Rand, v genVersion) []pkgformat.File {
	var crds []string
	for _, c := range p.crds {
		crds = append(crds, p.crdYAML(c))
	}
	return []pkgformat.File{
		file("manifests/00-crds.yaml", strings.Join(crds, "---\n")),
		file("manifests/01-rbac.yaml", fmt.Sprintf("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: %s\nrules:\n%s",
			p.name, p.rulesYAML(""))),
		file("manifests/02-deployment.yaml", p.deploymentYAML(p.image(v), "1")),
	}
}

func (p *pkgSpec) featureList() string {
	r := rand.New(rand.NewPCG(p.seed, uint64(p.index)+1<<32))
	var b strings.Builder
	b.WriteString("## Features\n")
	for range 2 + r.IntN(3) {
		fmt.Fprintf(&b, "\n- %s", capitalize(zipfPick(r, features, 1.0)))
	}
	return b.String()
}

func (p *pkgSpec) readmeText(v genVersion) string {
	return fmt.Sprintf("# %s\n\n%s\n\n%s\n\n## Install\n\n```\nberth pull %s/%s:%s\n```\n",
		p.displayName, p.description, p.featureList(), p.namespace, p.name, pkgformat.Tag(v.version))
}

// subdirs lists the folders in dir, sorted.
func subdirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// Search terms, chosen from the corpus so that every query matches a known
// share of it.

// termFrequencies counts, for every word of the descriptions, how many
// packages' descriptions hold it. Words are lowercased runs of letters of at
// least five letters. Plain packages are left out: the format carries no
// description.
func (c *corpus) termFrequencies() map[string]int {
	df := map[string]int{}
	for i := range c.packages {
		if c.packages[i].format == pkgformat.Plain {
			continue
		}
		seen := map[string]bool{}
		for _, w := range strings.FieldsFunc(strings.ToLower(c.packages[i].description), func(r rune) bool { return !unicode.IsLetter(r) }) {
			if len(w) >= 5 && !seen[w] {
				seen[w] = true
				df[w]++
			}
		}
	}
	return df
}

// midFrequencyTerm is the description word held by the share of packages
// closest to share (ties: the word first in order), and how many packages'
// descriptions hold it.
func (c *corpus) midFrequencyTerm(share float64) (string, int) {
	df := c.termFrequencies()
	words := make([]string, 0, len(df))
	for w := range df {
		words = append(words, w)
	}
	sort.Strings(words)
	want := share * float64(len(c.packages))
	best, bestN := "", 0
	for _, w := range words {
		if best == "" || math.Abs(float64(df[w])-want) < math.Abs(float64(bestN)-want) {
			best, bestN = w, df[w]
		}
	}
	return best, bestN
}

// commonTech is the tech found in most package names.
func (c *corpus) commonTech() string {
	return c.mostCommon(func(p *pkgSpec) string { return p.tech })
}

// largestNamespace is the namespace with the most packages.
func (c *corpus) largestNamespace() string {
	return c.mostCommon(func(p *pkgSpec) string { return p.namespace })
}

// largestPackage is the package with the most versions, the first such.
func (c *corpus) largestPackage() *pkgSpec {
	best := &c.packages[0]
	for i := range c.packages {
		if c.packages[i].versions > best.versions {
			best = &c.packages[i]
		}
	}
	return best
}

// mostCommon is the value of key held by the most packages, the least such
// value on a tie.
func (c *corpus) mostCommon(key func(*pkgSpec) string) string {
	count := map[string]int{}
	for i := range c.packages {
		count[key(&c.packages[i])]++
	}
	best := ""
	for v, n := range count {
		if n > count[best] || n == count[best] && v < best {
			best = v
		}
	}
	return best
}

// Drawing from word lists.

// zipfPick draws from list with weight 1/(rank+1)^s: the first entries most often.
func zipfPick(r *rand.Rand, list []string, s float64) string {
	return list[zipfIndex(r, len(list), s)]
}

func zipfPickPair(r *rand.Rand, list [][2]string, s float64) [2]string {
	return list[zipfIndex(r, len(list), s)]
}

// zipfTables caches the cumulative weights of zipfIndex by list length and exponent.
var zipfTables = map[[2]float64][]float64{}

func zipfIndex(r *rand.Rand, n int, s float64) int {
	key := [2]float64{float64(n), s}
	cdf, ok := zipfTables[key]
	if !ok {
		panic(fmt.Sprintf("zipf table for %d entries, exponent %v, not prepared", n, s))
	}
	x := r.Float64() * cdf[n-1]
	return sort.SearchFloat64s(cdf, x)
}

// init fills zipfTables for every list and exponent the generator uses, so
// that drawing needs no lock.
func init() {
	for _, l := range []struct {
		n int
		s []float64
	}{
		{len(techs), []float64{1.0}}, {len(modifiers), []float64{0.9}}, {len(prefixes), []float64{0.7}},
		{len(verbs), []float64{0.9}}, {len(adjectives), []float64{1.0}}, {len(nouns), []float64{1.0}},
		{len(features), []float64{1.0}}, {len(environments), []float64{0.8}}, {len(keywordList), []float64{1.0}},
		{len(categories), []float64{0.8}}, {len(capabilities), []float64{0.8}}, {len(companies), []float64{0.7}},
		{len(firstNames), []float64{0.5}}, {len(lastNames), []float64{0.5}}, {len(kindSuffixes), []float64{0.8}},
		{len(generatedNamespaces), []float64{0.8}}, {len(licenses), []float64{1.0}},
	} {
		for _, s := range l.s {
			cdf := make([]float64, l.n)
			total := 0.0
			for i := range cdf {
				total += 1 / math.Pow(float64(i+1), s)
				cdf[i] = total
			}
			zipfTables[[2]float64{float64(l.n), s}] = cdf
		}
	}
}

// pickWeighted draws an index of weights with probability proportional to its weight.
func pickWeighted(r *rand.Rand, weights []float64) int {
	total := 0.0
	for _, w := range weights {
		total += w
	}
	x := r.Float64() * total
	for i, w := range weights {
		if x < w {
			return i
		}
		x -= w
	}
	return len(weights) - 1
}

// Text helpers.

// displayName turns postgres-operator into "Postgres Operator".
func displayName(name string) string {
	parts := strings.Split(name, "-")
	for i, p := range parts {
		parts[i] = capitalize(p)
	}
	return strings.Join(parts, " ")
}

// camel turns external-dns into ExternalDns.
func camel(s string) string {
	return strings.ReplaceAll(displayName(s), " ", "")
}

// alnum keeps the letters and digits of s, for DNS labels of API groups.
func alnum(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, s)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// bumpMinor turns 1.21.0 into 1.22.0.
func bumpMinor(v string) string {
	var major, minor, patch int
	fmt.Sscanf(v, "%d.%d.%d", &major, &minor, &patch)
	return fmt.Sprintf("%d.%d.0", major, minor+1)
}

// q quotes s as a YAML double-quoted scalar (JSON's escapes are YAML's).
func q(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
