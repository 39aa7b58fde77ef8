package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-registry/berth/pkgformat"
)

// TestOrasPullsWhatBerthPushed: oras pull writes <name>-<version>.tgz,
// byte-identical to what berth package wrote.
func TestOrasPullsWhatBerthPushed(t *testing.T) {
	requireOras(t)
	s := startServer(t, "")
	work := t.TempDir()
	src := kudoFixture(t, "zookeeper", "3.4.14-0.3.0")
	berth(t, work, "package", src, "-o", "zk.tgz")
	berth(t, work, "push", src, s.addr+"/kudo/zookeeper")

	oras(t, work, "pull", "--plain-http", s.addr+"/kudo/zookeeper:3.4.14_0.3.0", "-o", "oras-out")
	got := readFile(t, filepath.Join(work, "oras-out", "zookeeper-3.4.14_0.3.0.tgz"))
	if string(got) != string(readFile(t, filepath.Join(work, "zk.tgz"))) {
		t.Fatal("oras pulled a tarball that differs from berth package's")
	}
	entries, _ := os.ReadDir(filepath.Join(work, "oras-out"))
	if len(entries) != 1 {
		t.Fatalf("oras pull wrote %d files, want the one tarball", len(entries))
	}

	// oras sees berth's artifact type and annotations.
	var manifest struct {
		ArtifactType string
		Annotations  map[string]string
		Layers       []struct {
			MediaType   string
			Annotations map[string]string
		}
	}
	r := oras(t, work, "manifest", "fetch", "--plain-http", s.addr+"/kudo/zookeeper:3.4.14_0.3.0")
	if err := json.Unmarshal([]byte(r.stdout), &manifest); err != nil {
		t.Fatal(err)
	}
	if manifest.ArtifactType != pkgformat.ArtifactType || manifest.Annotations[pkgformat.AnnotationFormat] != "kudo" ||
		len(manifest.Layers) != 1 || manifest.Layers[0].MediaType != pkgformat.ContentMediaType {
		t.Fatalf("manifest %+v", manifest)
	}
}

// TestBerthReadsWhatOrasPushed: a package pushed by plain oras push with the
// documented media types and an empty config can be inspected and pulled by
// berth, which derives the metadata from the content.
func TestBerthReadsWhatOrasPushed(t *testing.T) {
	requireOras(t)
	s := startServer(t, "")
	work := t.TempDir()
	src := kudoFixture(t, "kafka", "2.4.0-1.2.0")
	berth(t, work, "package", src, "-o", "kafka-2.4.0_1.2.0.tgz")
	ref := s.addr + "/kudo/kafka:2.4.0_1.2.0"
	oras(t, work, "push", "--plain-http", "--artifact-type", pkgformat.ArtifactType, ref,
		"kafka-2.4.0_1.2.0.tgz:"+pkgformat.ContentMediaType)

	info := berth(t, work, "inspect", ref, "--format", "json")
	var md struct {
		Name, Version, Format string
		Config                struct{ MediaType string }
		Metadata              struct{ AppVersion, OperatorVersion string }
	}
	if err := json.Unmarshal([]byte(info.stdout), &md); err != nil {
		t.Fatal(err)
	}
	if md.Name != "kafka" || md.Version != "2.4.0_1.2.0" || md.Format != "kudo" ||
		md.Metadata.AppVersion != "2.4.0" || md.Metadata.OperatorVersion != "1.2.0" {
		t.Fatalf("metadata derived from oras-pushed content: %+v", md)
	}
	if md.Config.MediaType != "application/vnd.oci.empty.v1+json" {
		t.Fatalf("config media type %q, want oras's empty config", md.Config.MediaType)
	}

	berth(t, work, "pull", ref, "-o", "extracted")
	compareTrees(t, src, filepath.Join(work, "extracted"))
	berth(t, work, "pull", ref, "--tarball", "-o", "tarball")
	if string(readFile(t, filepath.Join(work, "tarball", "kafka-2.4.0_1.2.0.tgz"))) != string(readFile(t, filepath.Join(work, "kafka-2.4.0_1.2.0.tgz"))) {
		t.Fatal("berth pull --tarball of an oras push differs from the pushed file")
	}
}

// TestBerthRefusesNonPackageArtifacts: berth refuses, with a clear
// message, to pull an artifact that is not a package.
func TestBerthRefusesNonPackageArtifacts(t *testing.T) {
	requireOras(t)
	s := startServer(t, "")
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "notes.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	oras(t, work, "push", "--plain-http", s.addr+"/misc/notes:1", "notes.txt")
	r := run(t, work, berthBin, "pull", s.addr+"/misc/notes:1", "-o", "out")
	if r.code != 1 || !strings.Contains(r.stderr, "not a berth package") {
		t.Fatalf("pull of a non-package: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestOrasOverwriteOfPackageVersionIsDenied: immutability holds for any client.
func TestOrasOverwriteOfPackageVersionIsDenied(t *testing.T) {
	requireOras(t)
	s := startServer(t, "")
	work := t.TempDir()
	berth(t, work, "push", kudoFixture(t, "cowsay", "0.2.0"), s.addr+"/kudo/cowsay")
	if err := os.WriteFile(filepath.Join(work, "other.txt"), []byte("other"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, work, orasBin, "push", "--plain-http", s.addr+"/kudo/cowsay:0.2.0", "other.txt")
	if r.code == 0 || !strings.Contains(r.stderr, "denied") || !strings.Contains(r.stderr, "kudo/cowsay:0.2.0 already exists") {
		t.Fatalf("oras overwrite: exit %d, stderr %q", r.code, r.stderr)
	}
}
