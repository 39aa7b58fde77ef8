package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kudoFixture returns the folder of a KUDO fixture version.
func kudoFixture(t *testing.T, name, folder string) string {
	t.Helper()
	p := filepath.Join(fixtures, "kudo", name, folder)
	if _, err := os.Stat(filepath.Join(p, "operator.yaml")); err != nil {
		t.Fatalf("fixture %s: %v", p, err)
	}
	return p
}

// digestOf reads the "digest" field of a --format json document.
func digestOf(t *testing.T, doc string) string {
	t.Helper()
	var v struct{ Digest string }
	if err := json.Unmarshal([]byte(doc), &v); err != nil || v.Digest == "" {
		t.Fatalf("no digest in %q: %v", doc, err)
	}
	return v.Digest
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func runEnv(t *testing.T, env []string, bin string, args ...string) result {
	t.Helper()
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return run(t, "", bin, args...)
}

func TestPushPullInspectRoundTrip(t *testing.T) {
	s := startServer(t, "")
	work := t.TempDir()
	src := kudoFixture(t, "kafka", "2.5.1-1.3.2")

	packaged := berth(t, work, "package", src, "-o", "kafka.tgz", "--format", "json")
	var pkg struct {
		Name, Version, AppVersion, OperatorVersion, Format, Path, Digest string
	}
	if err := json.Unmarshal([]byte(packaged.stdout), &pkg); err != nil {
		t.Fatalf("package --format json: %v\n%s", err, packaged.stdout)
	}
	if pkg.Name != "kafka" || pkg.Version != "2.5.1_1.3.2" || pkg.AppVersion != "2.5.1" || pkg.OperatorVersion != "1.3.2" || pkg.Format != "kudo" {
		t.Fatalf("package metadata %+v", pkg)
	}
	tarball := readFile(t, filepath.Join(work, "kafka.tgz"))

	pushed := berth(t, work, "push", src, s.addr+"/kudo/kafka", "--format", "json")
	ref := s.addr + "/kudo/kafka:2.5.1_1.3.2"
	var push struct {
		Digest, Reference string
	}
	if err := json.Unmarshal([]byte(pushed.stdout), &push); err != nil || push.Reference != ref {
		t.Fatalf("push --format json = %s (%v), want reference %s", pushed.stdout, err, ref)
	}

	// The pulled tarball is byte-identical to the one berth package wrote.
	berth(t, work, "pull", ref, "--tarball", "-o", "pulled")
	if got := readFile(t, filepath.Join(work, "pulled", "kafka-2.5.1_1.3.2.tgz")); string(got) != string(tarball) {
		t.Fatal("pulled tarball differs from the packaged one")
	}

	// Extracted, it holds exactly the files of the source folder.
	berth(t, work, "pull", ref, "-o", "extracted")
	compareTrees(t, src, filepath.Join(work, "extracted"))

	// Pulled by digest, it is the same package.
	byDigest := berth(t, work, "inspect", s.addr+"/kudo/kafka@"+push.Digest, "--format", "json")
	var info struct {
		Name, Version, Format, Digest string
		Metadata                      struct{ AppVersion string }
	}
	if err := json.Unmarshal([]byte(byDigest.stdout), &info); err != nil {
		t.Fatal(err)
	}
	if info.Name != "kafka" || info.Version != "2.5.1_1.3.2" || info.Format != "kudo" || info.Digest != push.Digest || info.Metadata.AppVersion != "2.5.1" {
		t.Fatalf("inspect by digest: %+v", info)
	}
}

// compareTrees fails unless dirs a and b hold the same files with the same bytes.
func compareTrees(t *testing.T, a, b string) {
	t.Helper()
	files := func(root string) map[string]string {
		out := map[string]string{}
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			out[filepath.ToSlash(rel)] = string(readFile(t, p))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	fa, fb := files(a), files(b)
	if len(fa) != len(fb) {
		t.Fatalf("%s has %d files, %s has %d", a, len(fa), b, len(fb))
	}
	for p, content := range fa {
		if fb[p] != content {
			t.Errorf("%s differs", p)
		}
	}
}

func TestRepushIsIdempotentAndOverwriteIsRefused(t *testing.T) {
	s := startServer(t, "")
	src := kudoFixture(t, "cowsay", "0.2.0")
	first := digestOf(t, berth(t, "", "push", src, s.addr+"/kudo/cowsay", "--format", "json").stdout)
	again := digestOf(t, berth(t, "", "push", src, s.addr+"/kudo/cowsay", "--format", "json").stdout)
	if first != again {
		t.Fatalf("re-push gave digest %s, first push %s", again, first)
	}

	// Same version, different content.
	changed := filepath.Join(t.TempDir(), "cowsay")
	if err := os.CopyFS(changed, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(changed, "README.md"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, "", berthBin, "push", changed, s.addr+"/kudo/cowsay")
	if r.code != 1 {
		t.Fatalf("pushing different content to an existing version: exit %d, want 1", r.code)
	}
	for _, want := range []string{"kudo/cowsay:0.2.0 already exists with digest " + first, "immutable"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q lacks %q", r.stderr, want)
		}
	}
	info := berth(t, "", "inspect", s.addr+"/kudo/cowsay:0.2.0", "--format", "json")
	if got := digestOf(t, info.stdout); got != first {
		t.Fatalf("version now points at %s, want the original %s", got, first)
	}
}

func TestBadReferencesAreRefused(t *testing.T) {
	s := startServer(t, "")
	src := kudoFixture(t, "cowsay", "0.2.0")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"push without namespace", []string{"push", src, s.addr + "/cowsay"}, "namespace"},
		{"push with upper case", []string{"push", src, s.addr + "/Kudo/cowsay"}, "Kudo"},
		{"push with bad tag", []string{"push", src, s.addr + "/kudo/cowsay:bad/tag"}, "bad/tag"},
		{"push to another name", []string{"push", src, s.addr + "/kudo/other:0.2.0"}, "cowsay"},
		{"push to another version", []string{"push", src, s.addr + "/kudo/cowsay:9.9.9"}, "9.9.9"},
		{"push a missing path", []string{"push", filepath.Join(t.TempDir(), "nope"), s.addr + "/kudo/cowsay"}, "nope"},
		{"pull of a missing version", []string{"pull", s.addr + "/kudo/cowsay:0.0.1", "-o", t.TempDir()}, "0.0.1"},
		{"pull with a bad digest", []string{"pull", s.addr + "/kudo/cowsay@sha256:abc", "-o", t.TempDir()}, "sha256:abc"},
		{"inspect without a host", []string{"inspect", "kudo/cowsay:0.2.0"}, "kudo/cowsay:0.2.0"},
		{"empty reference", []string{"inspect", ""}, "reference"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, "", berthBin, tc.args...)
			if r.code != 1 {
				t.Fatalf("berth %s: exit %d, want 1:\n%s", strings.Join(tc.args, " "), r.code, r.stdout)
			}
			if !strings.HasPrefix(r.stderr, "Error: ") || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("stderr %q does not name %q", r.stderr, tc.want)
			}
		})
	}
}

func TestPushOLMPackageManifestDirectory(t *testing.T) {
	s := startServer(t, "")
	src := filepath.Join(fixtures, "olm-community", "etcd")
	r := berth(t, "", "push", src, s.addr+"/olm", "--format", "json")
	var pushed struct {
		Packages []struct{ Name, Version, Digest, Reference, Error string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &pushed); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	versions := map[string]bool{}
	for _, p := range pushed.Packages {
		if p.Name != "etcd" || p.Digest == "" || p.Error != "" {
			t.Errorf("pushed %+v", p)
		}
		versions[p.Version] = true
	}
	for _, v := range []string{"0.6.1", "0.9.0", "0.9.2", "0.9.2-clusterwide", "0.9.4", "0.9.4-clusterwide"} {
		if !versions[v] {
			t.Errorf("version %s not pushed", v)
		}
	}

	info := berth(t, "", "inspect", s.addr+"/olm/etcd:0.9.4", "--format", "json")
	var md struct {
		Format   string
		Metadata struct {
			DefaultChannel string
			Channels       []struct{ Name, Replaces string }
		}
	}
	if err := json.Unmarshal([]byte(info.stdout), &md); err != nil {
		t.Fatal(err)
	}
	if md.Format != "olm" || md.Metadata.DefaultChannel != "singlenamespace-alpha" ||
		len(md.Metadata.Channels) != 1 || md.Metadata.Channels[0].Name != "singlenamespace-alpha" || md.Metadata.Channels[0].Replaces != "etcdoperator.v0.9.2" {
		t.Fatalf("etcd 0.9.4 metadata: %+v", md)
	}
}

func TestPushOLMBundleFolder(t *testing.T) {
	s := startServer(t, "")
	src := filepath.Join(fixtures, "olm-community", "kogito-operator")
	berth(t, "", "push", src, s.addr+"/olm")
	info := berth(t, "", "inspect", s.addr+"/olm/kogito-operator:1.6.0", "--format", "json")
	var md struct {
		Metadata struct {
			DefaultChannel string
			Channels       []struct{ Name string }
		}
	}
	if err := json.Unmarshal([]byte(info.stdout), &md); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range md.Metadata.Channels {
		names = append(names, c.Name)
	}
	if md.Metadata.DefaultChannel != "1.x" || strings.Join(names, ",") != "1.x,alpha" && strings.Join(names, ",") != "alpha,1.x" {
		t.Fatalf("kogito-operator 1.6.0 channels %v default %q", names, md.Metadata.DefaultChannel)
	}
}

// TestPushLoneOLMVersionFolder: a version folder of the package-manifest
// layout pushed on its own carries the name and channels of the package file
// beside it, and is the very artifact the whole-folder push makes of it.
func TestPushLoneOLMVersionFolder(t *testing.T) {
	s := startServer(t, "")
	dir := filepath.Join(fixtures, "olm-community", "etcd")
	alone := digestOf(t, berth(t, "", "push", filepath.Join(dir, "0.9.4"), s.addr+"/single/etcd", "--format", "json").stdout)
	berth(t, "", "push", dir, s.addr+"/whole")
	whole := digestOf(t, berth(t, "", "inspect", s.addr+"/whole/etcd:0.9.4", "--format", "json").stdout)
	if alone != whole {
		t.Fatalf("etcd 0.9.4 pushed alone is %s, pushed with its folder %s", alone, whole)
	}
	packaged := berth(t, t.TempDir(), "package", filepath.Join(dir, "0.9.4"), "--format", "json")
	var md struct{ Channels []struct{ Name string } }
	if err := json.Unmarshal([]byte(packaged.stdout), &md); err != nil || len(md.Channels) != 1 || md.Channels[0].Name != "singlenamespace-alpha" {
		t.Fatalf("berth package of the lone folder: channels %+v (%v)", md.Channels, err)
	}
}
