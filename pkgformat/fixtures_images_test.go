package pkgformat

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// checkImages checks what every package's Images must be: sorted by
// reference without repeats, each found somewhere, and every image its
// RelatedImages lists (as written) among them.
func checkImages(t *testing.T, md *Metadata) {
	t.Helper()
	if !slices.IsSortedFunc(md.Images, func(a, b Image) int { return strings.Compare(a.Reference, b.Reference) }) {
		t.Errorf("%s %s: images not sorted", md.Name, md.Version)
	}
	refs := map[string]bool{}
	for _, img := range md.Images {
		if refs[img.Reference] || len(img.Found) == 0 || !slices.IsSorted(img.Found) {
			t.Errorf("%s %s: image %+v repeated, found nowhere or not sorted", md.Name, md.Version, img)
		}
		refs[img.Reference] = true
	}
	for _, raw := range md.RelatedImages {
		if md.Format != KUDO && !refs[normalizeImage(raw).Reference] {
			t.Errorf("%s %s: related image %s is not among Images", md.Name, md.Version, raw)
		}
	}
}

// imageOf returns the image of md with reference ref, or nil.
func imageOf(md *Metadata, ref string) *Image {
	for i := range md.Images {
		if md.Images[i].Reference == ref {
			return &md.Images[i]
		}
	}
	return nil
}

func TestFixturesImages(t *testing.T) {
	olmRoot := filepath.Join(fixtures, "olm-community")
	byName := map[string]*Metadata{}
	var incomplete, withImages, total int
	for _, pkg := range subdirs(t, olmRoot) {
		pkgs, err := LoadRepository(filepath.Join(olmRoot, pkg), Options{})
		if err != nil {
			t.Fatalf("%s: %v", pkg, err)
		}
		for _, p := range pkgs {
			md := &p.Metadata
			checkImages(t, md)
			if md.ImagesIncomplete != "" {
				t.Errorf("%s %s: an OLM version has all its images, but: %s", md.Name, md.Version, md.ImagesIncomplete)
			}
			byName[md.Name+"@"+md.Version] = md
		}
	}
	kudoRoot := filepath.Join(fixtures, "kudo")
	for _, name := range subdirs(t, kudoRoot) {
		for _, folder := range subdirs(t, filepath.Join(kudoRoot, name)) {
			p, err := Load(filepath.Join(kudoRoot, name, folder), Options{})
			if err != nil {
				t.Fatalf("%s/%s: %v", name, folder, err)
			}
			md := &p.Metadata
			checkImages(t, md)
			total++
			if len(md.Images) > 0 {
				withImages++
			}
			if md.ImagesIncomplete != "" {
				incomplete++
				t.Logf("%s %s: %s", md.Name, md.Version, md.ImagesIncomplete)
			}
			byName[md.Name+"@"+md.Version] = md
		}
	}
	t.Logf("KUDO: %d versions, %d with images, %d incomplete", total, withImages, incomplete)
	if incomplete != 0 {
		t.Errorf("%d of %d KUDO versions do not render whole", incomplete, total)
	}
	if withImages != total {
		t.Errorf("%d of %d KUDO versions have no image", total-withImages, total)
	}
	tests := []struct {
		version, ref, found string
		mutable             bool
	}{
		{"apicurio-registry@0.0.4-v1.3.2.final", "docker.io/apicurio/apicurio-registry-mem@sha256:9e3e35e16a72c6c065b4be6c1fabcb2e9f7ed73b36600e05b1e46b4cc394413f", "CSV spec.relatedImages (apicurio-registry-mem)", false},
		{"enmasse@0.31.0", "quay.io/enmasse/address-space-controller:0.31.0", "CSV spec.relatedImages (address-space-controller)", true},
		{"etcd@0.9.4", "quay.io/coreos/etcd-operator@sha256:66a37fd61a06a43969854ee6d3e21087a98b93838e284a6086b13917f96b0d9b", "CSV deployment etcd-operator, container etcd-operator", false},
		{"kafka@2.5.1_1.3.2", "docker.io/mesosphere/kafka:2.5.1-1.3.1", "templates/statefulset.yaml: StatefulSet kafka-instance-kafka, container k8skafka", true},
		{"kafka@2.5.1_1.3.2", "quay.io/prometheus/node-exporter:v0.18.1", "templates/statefulset.yaml: StatefulSet kafka-instance-kafka, container kafka-node-exporter", true},
		{"spark@3.0.0_1.1.0", "docker.io/mesosphere/kudo-spark-operator:3.0.0-1.1.0-rc1", "templates/spark-operator-deployment.yaml: Deployment spark-instance, container sparkoperator", true},
	}
	for _, tt := range tests {
		md := byName[tt.version]
		if md == nil {
			t.Errorf("no version %s", tt.version)
			continue
		}
		img := imageOf(md, tt.ref)
		if img == nil || !slices.Contains(img.Found, tt.found) || img.Mutable != tt.mutable || img.Problem != "" {
			t.Errorf("%s: image %s is %+v, want found at %q, mutable %v", tt.version, tt.ref, img, tt.found, tt.mutable)
		}
	}
}

// TestBerthChartImages derives the images of berth's own Helm chart. The
// chart refuses to render without a public URL, from a template of its own
// (templates/validate.yaml), so its default values still render the
// Deployment and its image, and the images are incomplete naming that
// template.
func TestBerthChartImages(t *testing.T) {
	p, err := Load("../deploy/helm/berth", Options{})
	if err != nil {
		t.Fatal(err)
	}
	md := &p.Metadata
	want := []Image{{Reference: "ghcr.io/berth-registry/berth:" + md.AppVersion, Found: []string{"templates/deployment.yaml: Deployment release-name-berth, container berth"}, Mutable: true}}
	if !reflect.DeepEqual(md.Images, want) || !strings.HasPrefix(md.ImagesIncomplete, "templates/validate.yaml: ") || !strings.Contains(md.ImagesIncomplete, "config.catalog.publicURL is required") {
		t.Errorf("images %+v (incomplete %q), want %+v", md.Images, md.ImagesIncomplete, want)
	}
}
