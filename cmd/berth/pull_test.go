package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/berth-registry/berth/client/registrytest"
	"github.com/berth-registry/berth/pkgformat"
)

func TestPushPullInspectCmd(t *testing.T) {
	dir := setup(t)
	host := registrytest.New(t, nil)
	chart := writeChart(t, dir, "demo", "1.0.0")
	mustBerth(t, "package", chart, "-o", "demo.tgz")
	tarball, err := os.ReadFile("demo.tgz")
	if err != nil {
		t.Fatal(err)
	}

	out := mustBerth(t, "push", chart, host+"/charts/demo")
	if !strings.Contains(out, "Pushed "+host+"/charts/demo:1.0.0\nDigest: sha256:") {
		t.Errorf("push output:\n%s", out)
	}
	var pushed struct {
		Digest, Reference string
		Size              int64
	}
	decode(t, mustBerth(t, "push", "demo.tgz", host+"/charts/demo:1.0.0", "--format", "json"), &pushed)
	if !strings.HasPrefix(pushed.Digest, "sha256:") || pushed.Reference != host+"/charts/demo:1.0.0" || pushed.Size <= 0 {
		t.Errorf("push json: %+v", pushed)
	}
	if !strings.Contains(out, pushed.Digest) {
		t.Errorf("pushing the directory and its tarball gave different digests:\n%s\n%s", out, pushed.Digest)
	}

	// Extract into the default folder and into -o.
	if out := mustBerth(t, "pull", host+"/charts/demo:1.0.0"); !strings.HasSuffix(out, "\nExtracted 3 files into demo-1.0.0/\n") {
		t.Errorf("pull output:\n%s", out)
	}
	compareTrees(t, chart, "demo-1.0.0")
	if out := mustBerth(t, "pull", host+"/charts/demo:1.0.0", "-o", "slash/"); !strings.HasSuffix(out, "\nExtracted 3 files into slash/\n") {
		t.Errorf("pull -o slash/ output:\n%s", out)
	}
	var pulled struct {
		Reference, Digest, Name, Version, Path string
		Files                                  int
	}
	decode(t, mustBerth(t, "pull", host+"/charts/demo@"+pushed.Digest, "-o", "x", "--format", "json"), &pulled)
	compareTrees(t, chart, "x")
	if pulled.Digest != pushed.Digest || pulled.Name != "demo" || pulled.Version != "1.0.0" || pulled.Path != "x" || pulled.Files != 3 {
		t.Errorf("pull json: %+v", pulled)
	}

	// --tarball writes the pushed layer byte for byte.
	out = mustBerth(t, "pull", host+"/charts/demo:1.0.0", "--tarball", "-o", "dl")
	got, err := os.ReadFile(filepath.Join("dl", "demo-1.0.0.tgz"))
	if err != nil {
		t.Fatalf("pull --tarball: %v\n%s", err, out)
	}
	if !bytes.Equal(got, tarball) {
		t.Error("pull --tarball: bytes differ from berth package's tarball")
	}
	mustBerth(t, "pull", host+"/charts/demo:1.0.0", "--tarball")
	if _, err := os.Stat("demo-1.0.0.tgz"); err != nil {
		t.Errorf("pull --tarball without -o: %v", err)
	}

	out = mustBerth(t, "inspect", host+"/charts/demo:1.0.0")
	for _, want := range []string{"Name:", "demo", "Format:", "helm", pushed.Digest, "application/vnd.berth.package.content.v1.tar+gzip"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output does not contain %q:\n%s", want, out)
		}
	}
	var inspected struct {
		Reference, Name, Version, Format, Digest, MediaType, ArtifactType string
		Size                                                              int64
		Config, Content                                                   struct{ MediaType, Digest string }
		Metadata                                                          struct{ Name string }
	}
	decode(t, mustBerth(t, "inspect", host+"/charts/demo:1.0.0", "--format", "json"), &inspected)
	if inspected.Digest != pushed.Digest || inspected.Size != pushed.Size || inspected.Name != "demo" ||
		inspected.ArtifactType != "application/vnd.berth.package.v1" || inspected.Metadata.Name != "demo" ||
		inspected.Content.Digest != digest.FromBytes(tarball).String() {
		t.Errorf("inspect json: %+v", inspected)
	}
}

func TestLocalName(t *testing.T) {
	tests := []struct {
		name, version, want string
	}{
		{"kafka", "2.5.1_1.3.2", "kafka-2.5.1_1.3.2"},
		{"demo", "1.0.0+build.1", "demo-1.0.0+build.1"},
		{"../etc", "1.0.0", ""},
		{"demo", "../../x", ""},
		{"demo", `1\2`, ""},
		{"demo", "", ""},
		{"", "1.0.0", ""},
	}
	for _, tt := range tests {
		got, err := localName(&pkgformat.Metadata{Name: tt.name, Version: tt.version})
		if got != tt.want || (err == nil) != (tt.want != "") {
			t.Errorf("localName(%q, %q) = %q, %v; want %q", tt.name, tt.version, got, err, tt.want)
		}
	}
}
