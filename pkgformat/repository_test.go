package pkgformat

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// testCSV is a minimal CSV with the given name, version, replaces and skips.
func testCSV(name, version, replaces string, skips ...string) string {
	csv := fmt.Sprintf("apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata:\n  name: %s\nspec:\n  version: %s\n", name, version)
	if replaces != "" {
		csv += "  replaces: " + replaces + "\n"
	}
	if len(skips) > 0 {
		csv += "  skips: [" + strings.Join(skips, ", ") + "]\n"
	}
	return csv
}

// testAnnotations is a bundle's metadata/annotations.yaml.
func testAnnotations(pkg, channels, def string) string {
	return fmt.Sprintf("annotations:\n  %s: %s\n  %s: %s\n  %s: %s\n", annotationPackage, pkg, annotationChannels, channels, annotationDefaultChannel, def)
}

func TestLoadRepositoryPackageManifest(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"demo.package.yaml": `packageName: demo
defaultChannel: stable
channels:
  - name: stable
    currentCSV: demo.v1.2.0
  - name: fast
    currentCSV: demo.v1.1.0
  - name: beta
    currentCSV: demo.v2.0.0-beta
`,
		"ci.yaml":                          "reviewers: []\n",
		"0.5.0/demo.v0.5.0" + csvSuffix:    testCSV("demo.v0.5.0", "0.5.0", ""),
		"1.0.0/demo.v1.0.0" + csvSuffix:    testCSV("demo.v1.0.0", "1.0.0", "demo.v0.9.0"),
		"1.0.0/demos.crd.yaml":             "kind: CustomResourceDefinition\n",
		"1.1.0/demo.v1.1.0" + csvSuffix:    testCSV("demo.v1.1.0", "1.1.0", "demo.v1.0.0"),
		"1.1.1/demo.v1.1.1" + csvSuffix:    testCSV("demo.v1.1.1", "1.1.1", "demo.v1.0.0"),
		"1.2.0/manifests/demo" + csvSuffix: testCSV("demo.v1.2.0", "1.2.0", "demo.v1.1.0", "demo.v1.1.1"),
		"1.2.0/metadata/annotations.yaml":  testAnnotations("demo", "candidate", "candidate"),
		".git/HEAD":                        "ref: refs/heads/main\n",
	})
	if !IsRepository(dir) {
		t.Fatal("IsRepository is false")
	}
	pkgs, err := LoadRepository(dir, Options{Version: "ignored"})
	must(t, err)
	want := map[string][]Channel{
		"0.5.0": nil,
		"1.0.0": {{Name: "fast", Replaces: "demo.v0.9.0"}, {Name: "stable", Replaces: "demo.v0.9.0"}},
		"1.1.0": {{Name: "fast", Replaces: "demo.v1.0.0"}, {Name: "stable", Replaces: "demo.v1.0.0"}},
		"1.1.1": {{Name: "stable", Replaces: "demo.v1.0.0"}},
		"1.2.0": {{Name: "candidate", Replaces: "demo.v1.1.0", Skips: []string{"demo.v1.1.1"}}, {Name: "stable", Replaces: "demo.v1.1.0", Skips: []string{"demo.v1.1.1"}}},
	}
	var versions []string
	for _, p := range pkgs {
		md := p.Metadata
		versions = append(versions, md.Version)
		if md.Name != "demo" || md.DefaultChannel != "stable" || !reflect.DeepEqual(md.Channels, want[md.Version]) {
			t.Errorf("%s %s: channels %+v default %q, want %+v default stable", md.Name, md.Version, md.Channels, md.DefaultChannel, want[md.Version])
		}
	}
	if !reflect.DeepEqual(versions, []string{"0.5.0", "1.0.0", "1.1.0", "1.1.1", "1.2.0"}) {
		t.Errorf("versions %v", versions)
	}
	checkCarriesItsMetadata(t, pkgs)
	var paths []string
	for _, f := range pkgs[1].Files {
		paths = append(paths, f.Path)
	}
	if want := []string{"manifests/demo.v1.0.0" + csvSuffix, "manifests/demos.crd.yaml", bundleAnnotations}; !reflect.DeepEqual(paths, want) {
		t.Errorf("version folder 1.0.0 packaged as %v, want the bundle %v", paths, want)
	}
}

// checkCarriesItsMetadata requires the content of every package to give its
// metadata, channels included, as the catalog reads a pushed package.
func checkCarriesItsMetadata(t *testing.T, pkgs []*Package) {
	t.Helper()
	for _, p := range pkgs {
		again, err := New(p.Files, Options{})
		if err != nil {
			t.Errorf("%s: the content does not read as a package: %v", p.Metadata.Version, err)
			continue
		}
		if !reflect.DeepEqual(again.Metadata, p.Metadata) {
			t.Errorf("%s: the content gives\n%+v\nnot the metadata loaded\n%+v", p.Metadata.Version, again.Metadata, p.Metadata)
		}
	}
}

// TestFixturePackageManifestVersionsCarryTheirChannels: every version of the
// package-manifest fixtures with several channels or skips is pushed as a
// bundle whose content says all its metadata.
func TestFixturePackageManifestVersionsCarryTheirChannels(t *testing.T) {
	for _, pkg := range []string{"etcd", "couchbase-enterprise", "argocd-operator", "cockroachdb"} {
		t.Run(pkg, func(t *testing.T) {
			pkgs, err := LoadRepository(filepath.Join(fixtures, "olm-community", pkg), Options{})
			must(t, err)
			if len(pkgs) < 2 {
				t.Fatalf("%d versions", len(pkgs))
			}
			checkCarriesItsMetadata(t, pkgs)
		})
	}
}

func TestLoadRepositoryBundles(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"v1/manifests/demo" + csvSuffix:  testCSV("demo.v1.0.0", "1.0.0", ""),
		"v1/metadata/annotations.yaml":   testAnnotations("demo", "alpha", "alpha"),
		"v10/manifests/demo" + csvSuffix: testCSV("demo.v10.0.0", "10.0.0", "demo.v2.0.0"),
		"v10/metadata/annotations.yaml":  testAnnotations("demo", "alpha,stable", "stable"),
		"v2/manifests/demo" + csvSuffix:  testCSV("demo.v2.0.0", "2.0.0", "demo.v1.0.0"),
		"v2/metadata/annotations.yaml":   testAnnotations("demo", "alpha", "alpha"),
	})
	if !IsRepository(dir) {
		t.Fatal("IsRepository is false")
	}
	pkgs, err := LoadRepository(dir, Options{})
	must(t, err)
	var got []string
	for _, p := range pkgs {
		got = append(got, fmt.Sprintf("%s:%s:%d:%s", p.Metadata.Version, p.Metadata.Channels[0].Name, len(p.Metadata.Channels), p.Metadata.DefaultChannel))
	}
	if want := []string{"1.0.0:alpha:1:alpha", "2.0.0:alpha:1:alpha", "10.0.0:alpha:2:stable"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestLoadRepositoryRefuses(t *testing.T) {
	pkgFile := "packageName: demo\nchannels: [{name: stable, currentCSV: demo.v1.0.0}]\ndefaultChannel: stable\n"
	version := map[string]string{"demo.package.yaml": pkgFile, "1.0.0/demo.v1.0.0" + csvSuffix: testCSV("demo.v1.0.0", "1.0.0", "")}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range version {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	tests := []struct {
		name string
		tree map[string]string
		opts Options
		file string
		rule string
	}{
		{"folder without a package", with(map[string]string{"docs/README.md": "# docs\n"}), Options{}, "docs", "no package format recognised"},
		{"two folders, one version", with(map[string]string{"copy/demo.v1.0.0" + csvSuffix: testCSV("demo.v1.0.0", "1.0.0", "")}), Options{}, "copy", "version 1.0.0 is also in folder 1.0.0"},
		{"folder holding another format", with(map[string]string{"helm/Chart.yaml": "name: demo\nversion: 1.0.0\n"}), Options{}, "helm", "not an OLM version"},
		{"bad package name", with(map[string]string{"demo.package.yaml": "packageName: Demo\n"}), Options{}, "demo.package.yaml", "lowercase"},
		{"no package name", with(map[string]string{"demo.package.yaml": "channels: []\n"}), Options{}, "demo.package.yaml", "packageName"},
		{"other expected name", version, Options{Name: "other"}, "demo.package.yaml", "does not match"},
		{"bundle of another package", with(map[string]string{
			"2.0.0/manifests/demo" + csvSuffix: testCSV("demo.v2.0.0", "2.0.0", ""),
			"2.0.0/metadata/annotations.yaml":  testAnnotations("other", "stable", "stable"),
		}), Options{}, "2.0.0: metadata/annotations.yaml", `package name "other" does not match the expected name "demo"`},
		{"broken version", with(map[string]string{"2.0.0/demo.v2.0.0" + csvSuffix: csvNoVersion}), Options{}, "2.0.0", "spec.version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tt.tree)
			pkgs, err := LoadRepository(dir, tt.opts)
			assertError(t, err, ErrInvalid, tt.file, tt.rule)
			if pkgs != nil {
				t.Error("packages returned with the error")
			}
		})
	}
}

func TestIsRepository(t *testing.T) {
	for _, dir := range []string{"testdata/hello-chart", "testdata/plain-bundle", "testdata/missing", filepath.Join(fixtures, "kudo/kafka/2.5.1-1.3.2"), filepath.Join(fixtures, "olm-community/kogito-operator/1.6.0")} {
		if IsRepository(dir) {
			t.Errorf("%s is a repository", dir)
		}
	}
}

func TestLoadVersionFolderOfPackageManifestLayout(t *testing.T) {
	dir := filepath.Join(fixtures, "olm-community", "etcd", "0.9.4")
	p, err := Load(dir, Options{})
	if err != nil {
		t.Fatalf("Load(%s): %v", dir, err)
	}
	md := p.Metadata
	if md.Name != "etcd" || md.Version != "0.9.4" || md.DefaultChannel != "singlenamespace-alpha" ||
		len(md.Channels) != 1 || md.Channels[0].Name != "singlenamespace-alpha" {
		t.Fatalf("etcd 0.9.4 loaded alone: name %q version %q default %q channels %+v", md.Name, md.Version, md.DefaultChannel, md.Channels)
	}
	repo, err := LoadRepository(filepath.Dir(dir), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, rp := range repo {
		if rp.Metadata.Version == "0.9.4" && !reflect.DeepEqual(rp.Metadata, md) {
			t.Fatal("a version folder loaded alone differs from the same version loaded with its repository")
		}
	}
	if _, err := Load(dir, Options{Version: "1.0.0"}); err == nil || !strings.Contains(err.Error(), `"1.0.0"`) {
		t.Fatalf("a contradicting version: %v", err)
	}
	if _, err := Load(dir, Options{Name: "other"}); err == nil || !strings.Contains(err.Error(), `"other"`) {
		t.Fatalf("a contradicting name: %v", err)
	}
}
