package pkgformat

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// fixtures holds the real third-party packages (see its README).
const fixtures = "../../shared/fixtures"

// subdirs lists the names of the folders in dir.
func subdirs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// countFiles counts the regular files under dir.
func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestFixturesKUDO(t *testing.T) {
	hasAppVersion := regexp.MustCompile(`(?m)^appVersion:`)
	versions := map[string]bool{}
	for _, name := range subdirs(t, filepath.Join(fixtures, "kudo")) {
		for _, folder := range subdirs(t, filepath.Join(fixtures, "kudo", name)) {
			dir := filepath.Join(fixtures, "kudo", name, folder)
			// Folders are <appVersion>-<operatorVersion>, or <operatorVersion>
			// alone when operator.yaml has no appVersion.
			app, op, withApp := strings.Cut(folder, "-")
			want := Metadata{Name: name, Format: KUDO, Version: folder, OperatorVersion: folder}
			if withApp {
				want.Version, want.AppVersion, want.OperatorVersion = app+"_"+op, app, op
			}
			t.Run(name+"/"+folder, func(t *testing.T) {
				opYAML, err := os.ReadFile(filepath.Join(dir, "operator.yaml"))
				if err != nil {
					t.Fatal(err)
				}
				if withApp != hasAppVersion.Match(opYAML) {
					t.Fatalf("folder name and operator.yaml disagree on appVersion")
				}
				p, err := Load(dir, Options{})
				if err != nil {
					t.Fatal(err)
				}
				got := p.Metadata
				if got.Name != want.Name || got.Version != want.Version || got.Format != want.Format ||
					got.AppVersion != want.AppVersion || got.OperatorVersion != want.OperatorVersion {
					t.Errorf("got %s %s (%s, app %q, operator %q), want %s %s (%s, app %q, operator %q)",
						got.Name, got.Version, got.Format, got.AppVersion, got.OperatorVersion,
						want.Name, want.Version, want.Format, want.AppVersion, want.OperatorVersion)
				}
				if n := countFiles(t, dir); len(p.Files) != n || len(got.Files) != n {
					t.Errorf("%d files, %d in metadata; the folder has %d", len(p.Files), len(got.Files), n)
				}
				if got.MinKubeVersion == "" {
					t.Error("kubernetesVersion not read")
				}
			})
			versions[name+"@"+want.Version] = true
		}
	}
	if len(versions) != 38 {
		t.Errorf("%d KUDO versions, want 38", len(versions))
	}
	for _, v := range []string{"kafka@2.4.0_1.2.1", "kafka@2.4.1_1.2.1", "spark@2.4.3_beta1", "cowsay@0.2.0"} {
		if !versions[v] {
			t.Errorf("missing %s", v)
		}
	}
}

func TestFixturesKUDOExtraction(t *testing.T) {
	p, err := Load(filepath.Join(fixtures, "kudo/kafka/2.5.1-1.3.2"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	md := p.Metadata
	if md.Permissions == nil || len(md.Permissions.Namespaced) == 0 || len(md.Permissions.Cluster) == 0 {
		t.Errorf("RBAC rules of the templates not read: %+v", md.Permissions)
	}
	if !slices.Contains(md.RelatedImages, "mesosphere/kafka:2.5.1-1.3.1") {
		t.Errorf("images %v lack mesosphere/kafka:2.5.1-1.3.1", md.RelatedImages)
	}
	for _, img := range md.RelatedImages {
		if isTemplated(img) {
			t.Errorf("templated image %q", img)
		}
	}
	if len(md.Maintainers) != 2 || md.Source != "https://kafka.apache.org/" {
		t.Errorf("maintainers %v, source %q", md.Maintainers, md.Source)
	}
}

// olmFixture is what the fixture files say about one OLM package, read with
// plain YAML decoding and regular expressions.
type olmFixture struct {
	name           string
	defaultChannel string
	heads          map[string]string // channel -> currentCSV (package-manifest layout)
	versions       []string          // folder names
	csvs           map[string]string // folder -> CSV file
}

func readOLMFixture(t *testing.T, dir string) olmFixture {
	t.Helper()
	fx := olmFixture{heads: map[string]string{}, csvs: map[string]string{}}
	pkgFiles, _ := filepath.Glob(filepath.Join(dir, "*.package.yaml"))
	if len(pkgFiles) == 1 {
		var pm struct {
			PackageName    string `yaml:"packageName"`
			DefaultChannel string `yaml:"defaultChannel"`
			Channels       []struct {
				Name       string `yaml:"name"`
				CurrentCSV string `yaml:"currentCSV"`
			} `yaml:"channels"`
		}
		data, err := os.ReadFile(pkgFiles[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, &pm); err != nil {
			t.Fatal(err)
		}
		fx.name, fx.defaultChannel = pm.PackageName, pm.DefaultChannel
		for _, c := range pm.Channels {
			fx.heads[c.Name] = c.CurrentCSV
		}
		if fx.defaultChannel == "" && len(pm.Channels) == 1 {
			fx.defaultChannel = pm.Channels[0].Name // OLM's rule: the only channel is the default
		}
	}
	for _, v := range subdirs(t, dir) {
		fx.versions = append(fx.versions, v)
		csvs, _ := filepath.Glob(filepath.Join(dir, v, "*"+csvSuffix))
		more, _ := filepath.Glob(filepath.Join(dir, v, "manifests", "*"+csvSuffix))
		csvs = append(csvs, more...)
		if len(csvs) != 1 {
			t.Fatalf("%s: %d CSVs", v, len(csvs))
		}
		fx.csvs[v] = csvs[0]
	}
	return fx
}

// bundleAnnotation reads one annotation of a bundle's metadata/annotations.yaml.
func bundleAnnotation(t *testing.T, bundleDir, key string) (string, bool) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(bundleDir, "metadata", "annotations.yaml"))
	if err != nil {
		return "", false
	}
	var a struct {
		Annotations map[string]string `yaml:"annotations"`
	}
	if err := yaml.Unmarshal(data, &a); err != nil {
		t.Fatal(err)
	}
	return a.Annotations[key], true
}

var (
	csvVersion = regexp.MustCompile(`(?m)^  version:\s*['"]?([^'"\s]+)`)
	ownsAPIs   = regexp.MustCompile(`(?m)^\s+owned:\s*\r?\n\s*- `)
)

func TestFixturesOLM(t *testing.T) {
	root := filepath.Join(fixtures, "olm-community")
	total := 0
	for _, pkg := range subdirs(t, root) {
		dir := filepath.Join(root, pkg)
		t.Run(pkg, func(t *testing.T) {
			fx := readOLMFixture(t, dir)
			if !IsRepository(dir) {
				t.Error("IsRepository is false")
			}
			pkgs, err := LoadRepository(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			byVersion := map[string]*Package{}
			for _, p := range pkgs {
				byVersion[p.Metadata.Version] = p
			}
			if len(pkgs) != len(fx.versions) || len(byVersion) != len(pkgs) {
				t.Fatalf("%d packages (%d versions), want %d", len(pkgs), len(byVersion), len(fx.versions))
			}
			for _, folder := range fx.versions {
				csvData, err := os.ReadFile(fx.csvs[folder])
				if err != nil {
					t.Fatal(err)
				}
				if m := csvVersion.FindSubmatch(csvData); m == nil || string(m[1]) != folder {
					t.Fatalf("%s: the fixture's folder name is not its spec.version (%q)", folder, m)
				}
				p := byVersion[folder]
				if p == nil {
					t.Fatalf("version %s missing", folder)
				}
				md := p.Metadata
				wantName := fx.name
				annotated, isBundle := bundleAnnotation(t, filepath.Join(dir, folder), annotationPackage)
				if wantName == "" {
					wantName = annotated
				}
				if md.Name != wantName || md.Format != OLM || md.CSVName == "" {
					t.Errorf("%s: got %s (%s, CSV %q), want %s (olm)", folder, md.Name, md.Format, md.CSVName, wantName)
				}
				if isBundle && fx.name == "" {
					def, _ := bundleAnnotation(t, filepath.Join(dir, folder), annotationDefaultChannel)
					if def != "" && md.DefaultChannel != def {
						t.Errorf("%s: default channel %q, want %q from its annotations", folder, md.DefaultChannel, def)
					}
				}
				if isBundle {
					channels, _ := bundleAnnotation(t, filepath.Join(dir, folder), annotationChannels)
					for _, ch := range strings.Split(channels, ",") {
						if !hasChannel(md, strings.TrimSpace(ch)) {
							t.Errorf("%s: not in channel %q of its annotations (%v)", folder, ch, md.Channels)
						}
					}
				}
				if md.DefaultChannel == "" {
					t.Errorf("%s: no default channel", folder)
				}
				if fx.defaultChannel != "" && md.DefaultChannel != fx.defaultChannel {
					t.Errorf("%s: default channel %q, want %q", folder, md.DefaultChannel, fx.defaultChannel)
				}
				if ownsAPIs.Match(csvData) && len(md.ProvidedAPIs) == 0 {
					t.Errorf("%s: the CSV owns APIs but ProvidedAPIs is empty", folder)
				}
				if want, _ := iconDigest(t, csvData); digestOf(md.Icon) != want {
					t.Errorf("%s: icon %+v, want digest %q", folder, md.Icon, want)
				}
			}
			for channel, head := range fx.heads {
				for _, p := range pkgs {
					if p.Metadata.CSVName == head && !hasChannel(p.Metadata, channel) {
						t.Errorf("head %s of channel %s is not in it: %v", head, channel, p.Metadata.Channels)
					}
				}
			}
			total += len(pkgs)
		})
	}
	if total != 489 {
		t.Errorf("%d OLM versions, want 489", total)
	}
}

// iconDigest is the digest and size of a CSV's first icon, or "" when it has
// none or its base64 data does not decode (chaosblade-operator 0.5.1 has "**" in it).
func iconDigest(t *testing.T, csvData []byte) (string, int64) {
	t.Helper()
	var csv struct {
		Spec struct {
			Icon []struct {
				Data string `yaml:"base64data"`
			} `yaml:"icon"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(csvData, &csv); err != nil {
		t.Fatal(err)
	}
	if len(csv.Spec.Icon) == 0 {
		return "", 0
	}
	raw, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(csv.Spec.Icon[0].Data), ""))
	if err != nil || len(raw) == 0 {
		return "", 0
	}
	sum := sha256.Sum256(raw)
	return "sha256:" + hex.EncodeToString(sum[:]), int64(len(raw))
}

// digestOf is the digest of icon, or "" for no icon.
func digestOf(icon *Icon) string {
	if icon == nil {
		return ""
	}
	return icon.Digest
}

func hasChannel(md Metadata, name string) bool {
	return slices.ContainsFunc(md.Channels, func(c Channel) bool { return c.Name == name })
}

func TestFixturesOLMChannels(t *testing.T) {
	root := filepath.Join(fixtures, "olm-community")
	load := func(pkg string) map[string]Metadata {
		t.Helper()
		pkgs, err := LoadRepository(filepath.Join(root, pkg), Options{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]Metadata{}
		for _, p := range pkgs {
			out[p.Metadata.Version] = p.Metadata
		}
		return out
	}
	etcd, hpa, skydive := load("etcd"), load("hpa-operator"), load("skydive-operator")
	kogito := load("kogito-operator")
	tests := []struct {
		md       Metadata
		channels []string
		def      string
	}{
		{etcd["0.9.4"], []string{"singlenamespace-alpha"}, "singlenamespace-alpha"},
		{etcd["0.9.4-clusterwide"], []string{"clusterwide-alpha"}, "singlenamespace-alpha"},
		{etcd["0.9.0"], []string{"clusterwide-alpha", "singlenamespace-alpha"}, "singlenamespace-alpha"},
		{etcd["0.6.1"], []string{"alpha"}, "singlenamespace-alpha"},
		{kogito["1.6.0"], []string{"1.x", "alpha"}, "1.x"},
		{hpa["0.1.6"], []string{"beta"}, "beta"},        // no defaultChannel in the package file, one channel
		{skydive["0.0.49"], []string{"alpha"}, "alpha"}, // an empty default channel annotation, one channel
	}
	for _, tt := range tests {
		var got []string
		for _, c := range tt.md.Channels {
			got = append(got, c.Name)
		}
		if !slices.Equal(got, tt.channels) || tt.md.DefaultChannel != tt.def {
			t.Errorf("%s %s: channels %v default %q, want %v default %q", tt.md.Name, tt.md.Version, got, tt.md.DefaultChannel, tt.channels, tt.def)
		}
	}
	if c := etcd["0.9.4"].Channels[0]; c.Replaces != "etcdoperator.v0.9.2" {
		t.Errorf("etcd 0.9.4 replaces %q, want etcdoperator.v0.9.2", c.Replaces)
	}
}

func TestFixturesOLMIcon(t *testing.T) {
	dir := filepath.Join(fixtures, "olm-community/redis-operator/0.3.0")
	p, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	csvPath := "manifests/redis-operator.v0.3.0" + csvSuffix
	data, err := os.ReadFile(filepath.Join(dir, csvPath))
	if err != nil {
		t.Fatal(err)
	}
	digest, size := iconDigest(t, data)
	icon := p.Metadata.Icon
	if icon == nil || digest == "" || icon.Digest != digest || icon.Size != size || icon.Path != csvPath || icon.MediaType == "" {
		t.Fatalf("icon %+v, want %d bytes, digest %s of the decoded data, path %s", icon, size, digest, csvPath)
	}
	if size < 500_000 {
		t.Errorf("the fixture icon is only %d bytes", size)
	}
}
