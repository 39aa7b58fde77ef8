package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/mirror"
)

// TestMirrorBadInput: every refused command line names what is wrong, and
// writes nothing.
func TestMirrorBadInput(t *testing.T) {
	dir := setup(t)
	sel := filepath.Join(dir, "sel.yaml")
	if err := os.WriteFile(sel, []byte("packages:\n  - namespace: kudo\n    colour: blue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	notArchive := filepath.Join(dir, "empty")
	if err := os.Mkdir(notArchive, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.tar")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"export without source", []string{"mirror", "export", "--namespace", "kudo", "-o", out}, "--source"},
		{"export with a repository as source", []string{"mirror", "export", "--source", "localhost:5000/kudo", "--namespace", "kudo", "-o", out}, "want a registry"},
		{"export without output", []string{"mirror", "export", "--source", "localhost:5000", "--namespace", "kudo"}, "-o"},
		{"export without selection", []string{"mirror", "export", "--source", "localhost:5000", "-o", out}, "say what to export"},
		{"export with both selections", []string{"mirror", "export", "--source", "localhost:5000", "-o", out, "--selection", sel, "--namespace", "kudo"}, "not both"},
		{"export with a bad selection file", []string{"mirror", "export", "--source", "localhost:5000", "-o", out, "--selection", sel}, "colour"},
		{"export with a missing selection file", []string{"mirror", "export", "--source", "localhost:5000", "-o", out, "--selection", filepath.Join(dir, "nope.yaml")}, "nope.yaml"},
		{"export with a bad range", []string{"mirror", "export", "--source", "localhost:5000", "-o", out, "--namespace", "kudo", "--versions", ">>1"}, "versions"},
		{"export with from but no channel", []string{"mirror", "export", "--source", "localhost:5000", "-o", out, "--namespace", "kudo", "--from", "1.0.0"}, "channel"},
		{"export with an unknown format", []string{"mirror", "export", "--source", "localhost:5000", "-o", out, "--namespace", "kudo", "--type", "rpm"}, "rpm"},
		{"export with inventory and since", []string{"mirror", "export", "--source", "localhost:5000", "-o", out, "--namespace", "kudo", "--inventory", "a", "--since", "b"}, "not both"},
		{"export with a bad max size", []string{"mirror", "export", "--source", "localhost:5000", "-o", out, "--namespace", "kudo", "--max-size", "lots"}, "4GiB"},
		{"export with a missing inventory", []string{"mirror", "export", "--source", "localhost:5000", "-o", out, "--namespace", "kudo", "--inventory", filepath.Join(dir, "inv.json")}, "--inventory"},
		{"export with a bad registry map", []string{"mirror", "export", "--source", "localhost:5000", "-o", out, "--namespace", "kudo", "--registry-map", "quay.io"}, `--registry-map "quay.io": want FROM=TO`},
		{"export with a bad platform", []string{"mirror", "export", "--source", "localhost:5000", "-o", out, "--namespace", "kudo", "--platform", "amd64"}, `--platform "amd64"`},
		{"export of no images with a platform", []string{"mirror", "export", "--source", "localhost:5000", "-o", out, "--namespace", "kudo", "--images=false", "--platform", "linux/amd64"}, "--images=false"},
		{"import with a bad image prefix", []string{"mirror", "import", notArchive, "localhost:5000", "--image-prefix", "Up"}, `--image-prefix "Up"`},
		{"import with an image prefix of another registry", []string{"mirror", "import", notArchive, "localhost:5000", "--image-prefix", "other.io/up"}, "other.io names a registry"},
		{"import with one argument", []string{"mirror", "import", out}, "requires at least 2"},
		{"import into a repository", []string{"mirror", "import", out, "localhost:5000/kudo"}, "want a registry"},
		{"import of a missing archive", []string{"mirror", "import", filepath.Join(dir, "missing.tar"), "localhost:5000"}, "missing.tar"},
		{"import of a directory that is no archive", []string{"mirror", "import", notArchive, "localhost:5000"}, "empty"},
		{"import with a missing archive key", []string{"mirror", "import", notArchive, "localhost:5000", "--archive-key", filepath.Join(dir, "k.pub")}, "k.pub"},
		{"import with a bad chunk size", []string{"mirror", "import", notArchive, "localhost:5000", "--chunk-size", "0"}, "positive size"},
		{"inventory without output", []string{"mirror", "inventory", "localhost:5000"}, "-o"},
		{"sync without state", []string{"mirror", "sync", "localhost:5000", "localhost:5001"}, "--state"},
		{"sync with a narrowing flag alone", []string{"mirror", "sync", "localhost:5000", "localhost:5001", "--state", "s.json", "--latest", "2"}, "narrow a selection"},
		{"sync with a zero interval", []string{"mirror", "sync", "localhost:5000", "localhost:5001", "--state", "s.json", "--follow", "--interval", "0s"}, "--interval"},
		{"verify of a missing archive", []string{"mirror", "verify", filepath.Join(dir, "gone.tar")}, "gone.tar"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := berth(t, tc.args...)
			if code == 0 {
				t.Fatalf("exit 0, stdout %s", stdout)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr %q does not name %q", stderr, tc.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s was written", out)
			}
		})
	}
}

func TestSizeFlag(t *testing.T) {
	for in, want := range map[string]int64{"1": 1, "700MB": 700e6, "4GiB": 4 << 30, "512KiB": 512 << 10, "2 GB": 2e9, "10B": 10} {
		var s sizeFlag
		if err := s.Set(in); err != nil || int64(s) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, s, err, want)
		}
		// What String writes, Set reads back.
		var back sizeFlag
		if err := back.Set(s.String()); err != nil || back != s {
			t.Errorf("Set(%q) after String of %q = %d, %v", s.String(), in, back, err)
		}
	}
	for size, want := range map[sizeFlag]string{0: "0", 10: "10", 32 << 20: "32MiB", 4 << 30: "4GiB", 1536: "1536", 512 << 10: "512KiB"} {
		if got := size.String(); got != want {
			t.Errorf("sizeFlag(%d).String() = %q, want %q", int64(size), got, want)
		}
	}
	for _, in := range []string{"", "0", "-1GB", "1.5GB", "GB", "1XB", "99999999999TiB"} {
		var s sizeFlag
		if err := s.Set(in); err == nil {
			t.Errorf("Set(%q) = %d, want an error", in, s)
		}
	}
}

// TestMirrorVerifyJSON: berth mirror verify --format json prints one JSON
// document saying what it checked.
func TestMirrorVerifyJSON(t *testing.T) {
	dir := setup(t)
	archive := filepath.Join(dir, "site.tar")
	w, err := mirror.CreateArchive(archive, mirror.ArchiveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	if err := w.Finish(ocispec.Index{}, &mirror.Manifest{SchemaVersion: 1, MediaType: mirror.ManifestMediaType, Source: "berth.example:5000", Created: created}, nil); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := berth(t, "mirror", "verify", archive, "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got archiveCheck
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if got.Source != "berth.example:5000" || got.Created == nil || !got.Created.Equal(created) || len(got.Files) != 1 || got.Files[0] != archive {
		t.Errorf("verify --format json: %s", stdout)
	}
	if code, stdout, _ := berth(t, "mirror", "verify", archive); code != 0 || !strings.Contains(stdout, "Archive of 0 versions and 0 images from berth.example:5000") {
		t.Errorf("verify: exit %d, %s", code, stdout)
	}
}
