package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/signing"
)

// berth runs the berth command line in-process and returns its exit code,
// stdout and stderr.
func berth(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// mustBerth runs berth and fails the test unless it exits 0.
func mustBerth(t *testing.T, args ...string) string {
	t.Helper()
	code, stdout, stderr := berth(t, args...)
	if code != 0 {
		t.Fatalf("berth %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, stdout, stderr)
	}
	return stdout
}

// setup isolates a test: an empty Docker config, an empty user config
// directory (no default trust policy), no BERTH_TRUST_POLICY or
// COSIGN_PASSWORD, and a fresh working directory.
func setup(t *testing.T) string {
	t.Helper()
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	for _, env := range []string{trustPolicyEnv, signing.PasswordEnv} {
		t.Setenv(env, "")
		os.Unsetenv(env)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	return dir
}

// writeChart writes a tiny Helm chart into dir/name and returns its path.
func writeChart(t *testing.T, dir, name, version string) string {
	t.Helper()
	root := filepath.Join(dir, name)
	files := map[string]string{
		"Chart.yaml":               "apiVersion: v2\nname: " + name + "\nversion: " + version + "\ndescription: A test chart\n",
		"values.yaml":              "replicas: 1\n",
		"templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n",
	}
	for p, data := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// decode parses out as exactly one JSON document.
func decode(t *testing.T, out string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if dec.More() {
		t.Fatalf("output has more than one JSON document:\n%s", out)
	}
}

// compareTrees fails unless the regular files under got are those under want.
func compareTrees(t *testing.T, want, got string) {
	t.Helper()
	read := func(root string) map[string]string {
		files := map[string]string{}
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(p)
			rel, _ := filepath.Rel(root, p)
			files[filepath.ToSlash(rel)] = string(data)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	w, g := read(want), read(got)
	if len(w) != len(g) {
		t.Errorf("%s has %d files, want %d", got, len(g), len(w))
	}
	for p, data := range w {
		if g[p] != data {
			t.Errorf("%s/%s differs from %s/%s", got, p, want, p)
		}
	}
}

func TestOutputHelpers(t *testing.T) {
	sizes := []struct {
		n           int64
		human, full string
	}{
		{0, "0 B", "0 B"},
		{1023, "1023 B", "1023 B"},
		{1536, "1.5 KiB", "1.5 KiB (1536 bytes)"},
		{5 << 20, "5.0 MiB", "5.0 MiB (5242880 bytes)"},
		{3 << 30, "3.0 GiB", "3.0 GiB (3221225472 bytes)"},
	}
	for _, s := range sizes {
		if got := humanSize(s.n); got != s.human {
			t.Errorf("humanSize(%d) = %q, want %q", s.n, got, s.human)
		}
		if got := exactSize(s.n); got != s.full {
			t.Errorf("exactSize(%d) = %q, want %q", s.n, got, s.full)
		}
	}

	channels := []pkgformat.Channel{
		{Name: "alpha"},
		{Name: "stable", Replaces: "etcd.v0.9.2", Skips: []string{"etcd.v0.9.1", "etcd.v0.9.0"}, SkipRange: "<0.9.2"},
	}
	if got, want := channelList(channels, "stable"), "alpha, stable (default, replaces etcd.v0.9.2, skips etcd.v0.9.1 etcd.v0.9.0, skipRange <0.9.2)"; got != want {
		t.Errorf("channelList = %q, want %q", got, want)
	}
	apis := []pkgformat.API{{Group: "kafka.kudo.dev", Version: "v1", Kind: "Kafka"}, {Version: "v1", Kind: "ConfigMap"}}
	if got, want := apiList(apis), "kafka.kudo.dev/v1 Kafka, v1 ConfigMap"; got != want {
		t.Errorf("apiList = %q, want %q", got, want)
	}

	var buf bytes.Buffer
	tab := newTable(&buf)
	tab.row("Name", "demo")
	tab.row("Description", "")
	tab.row("Long key", "two\nlines")
	if err := tab.flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), "Name:     demo\nLong key: two lines\n"; got != want {
		t.Errorf("table:\n%q, want\n%q", got, want)
	}

	var f outputFormat
	for _, ok := range []string{"json", "text"} {
		if err := f.Set(ok); err != nil || string(f) != ok {
			t.Errorf("Set(%q) = %v", ok, err)
		}
	}
	if err := f.Set("yaml"); err == nil {
		t.Error(`Set("yaml") succeeded`)
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "x.tgz")
	for _, data := range []string{"first", "second"} {
		if err := writeFileAtomic(path, []byte(data)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != data {
			t.Fatalf("read back %q, %v; want %q", got, err, data)
		}
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil || len(entries) != 1 {
		t.Errorf("leftover files: %v %v", entries, err)
	}
}

func TestVersionNamesDistribution(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"--version"}, &out, &out); code != 0 {
		t.Fatalf("berth --version exited %d: %s", code, out.String())
	}
	if !strings.Contains(out.String(), "berth version dev (distribution v3.") {
		t.Fatalf("berth --version printed %q", out.String())
	}
}
