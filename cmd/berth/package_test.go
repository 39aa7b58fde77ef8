package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
)

func TestPackageCmd(t *testing.T) {
	dir := setup(t)
	chart := writeChart(t, dir, "demo", "1.2.3")

	out := mustBerth(t, "package", chart)
	data, err := os.ReadFile("demo-1.2.3.tgz")
	if err != nil {
		t.Fatalf("default output file: %v", err)
	}
	dgst := digest.FromBytes(data).String()
	for _, want := range []string{"Packaged demo-1.2.3.tgz", "Name:", "demo", "1.2.3", "helm", "Files:", dgst} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not contain %q:\n%s", want, out)
		}
	}

	var res struct {
		Name, Version, Format, Path, Digest string
		Size                                int64
		Files                               []struct{ Path string }
	}
	decode(t, mustBerth(t, "package", chart, "-o", "out/x.tgz", "--format", "json"), &res)
	again, err := os.ReadFile("out/x.tgz")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, data) {
		t.Error("packaging the same directory twice gave different bytes")
	}
	if res.Name != "demo" || res.Version != "1.2.3" || res.Format != "helm" || res.Path != "out/x.tgz" ||
		res.Digest != dgst || res.Size != int64(len(data)) || len(res.Files) != 3 {
		t.Errorf("json output: %+v", res)
	}

	// -o naming an existing directory writes the conventional name into it.
	mustBerth(t, "package", chart, "-o", "out")
	if _, err := os.Stat("out/demo-1.2.3.tgz"); err != nil {
		t.Error(err)
	}
}
