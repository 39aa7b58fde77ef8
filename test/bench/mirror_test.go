package main

// Tests of the mirror benchmarks' pure parts: the table, the selection
// file, the tools' environment, the corpus and the verdict on a copy.
// Nothing here starts a server or runs a tool.

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/berth-registry/berth/mirror"
)

func TestPrintMirrorTable(t *testing.T) {
	rows := newMirrorRows()
	for name, seconds := range map[string][]float64{
		rowExportImport: {3, 2, 4}, rowExport: {1, 1, 1}, rowImport: {2, 1, 3},
		rowNoopSync: {0.4, 0.3, 0.5}, rowRegctl: {12, 10, 11}, rowOras: {20, 30, 25},
	} {
		rows.get(name).seconds = seconds
		rows.get(name).rssKiB = 20480
	}
	rows.get(rowSync).result, rows.get(rowSync).detail = "ERROR", "the destination lacks 3 things"
	rows.get(rowOras).note = "cosign .sig tags copied: 0 of 4"
	a := rows.get(rowArchive)
	a.value, a.result, a.detail = "1.010x", "met", "archive 1.0 MiB"

	var out bytes.Buffer
	if errs := printMirrorTable(&out, "mirror: test", rows); errs != 1 {
		t.Errorf("printMirrorTable counted %d ERROR rows, want 1", errs)
	}
	want := `mirror: test
row                                           median   vs fastest of regctl/oras  peak RSS  target     result  detail
berth mirror export + import                  3.00 s   3.67x                      20.0 MiB  >= 2.00x   met     
  of which export                             1.00 s   11.00x                     20.0 MiB  -          -       
  of which import                             2.00 s   5.50x                      20.0 MiB  -          -       
berth mirror sync (first, full)               -        -                          -         >= 2.00x   ERROR   the destination lacks 3 things
berth mirror sync again, nothing new          0.40 s   -                          20.0 MiB  <= 1.00 s  met     
regctl repo copy --referrers, per repository  11.00 s  1.00x                      20.0 MiB  -          -       
oras cp -r, per version                       25.00 s  0.44x                      20.0 MiB  -          -       cosign .sig tags copied: 0 of 4
archive size / unique source content          1.010x   -                          -         <= 1.02x   met     archive 1.0 MiB
0 of 4 rows with a target MISS, 1 ERROR
`
	if got := out.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

func TestMirrorVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name           string
		berth, regctl  float64
		oras           float64
		orasFailed     bool
		want, wantBase string
	}{
		{name: "twice as fast as the faster", berth: 5, regctl: 10, oras: 20, want: "met"},
		{name: "just short", berth: 5.1, regctl: 10, oras: 20, want: "MISS"},
		{name: "a failed baseline does not count", berth: 5, regctl: 10, oras: 1, orasFailed: true, want: "met"},
		{name: "the faster baseline counts", berth: 5, regctl: 10, oras: 9, want: "MISS"},
	} {
		rows := newMirrorRows()
		rows.get(rowExportImport).seconds = []float64{tc.berth}
		rows.get(rowRegctl).seconds = []float64{tc.regctl}
		rows.get(rowOras).seconds = []float64{tc.oras}
		if tc.orasFailed {
			rows.get(rowOras).result = "ERROR"
		}
		var out bytes.Buffer
		printMirrorTable(&out, "", rows)
		line := strings.Fields(strings.Split(out.String(), "\n")[2])
		if got := line[len(line)-1]; got != tc.want {
			t.Errorf("%s: export + import is %q, want %q:\n%s", tc.name, got, tc.want, out.String())
		}
	}
	if got := newMirrorRows().baseline(); got != 0 {
		t.Errorf("baseline with no times = %v, want 0", got)
	}
}

func TestSelectionYAML(t *testing.T) {
	var sel mirror.Selection
	if err := yaml.UnmarshalStrict([]byte(selectionYAML([]string{"data", "platform"})), &sel); err != nil {
		t.Fatal(err)
	}
	if len(sel.Packages) != 2 || sel.Packages[0].Namespace != "data" || sel.Packages[1].Namespace != "platform" {
		t.Errorf("selection = %+v, want every package of data and platform", sel)
	}
}

func TestToolEnv(t *testing.T) {
	got := toolEnv([]string{"PATH=/bin", "HOME=/root", "DOCKER_CONFIG=/root/.docker", "REGCTL_CONFIG=/root/r.json",
		"ORAS_CACHE=/root/oras", "XDG_CONFIG_HOME=/root/.config", "BERTH_LOG_LEVEL=debug"}, "/tmp/h")
	want := []string{"PATH=/bin", "OTEL_TRACES_EXPORTER=none", "HOME=/tmp/h", "XDG_CONFIG_HOME=/tmp/h/.config",
		"DOCKER_CONFIG=/tmp/h/.docker", "REGCTL_CONFIG=/tmp/h/regctl.json"}
	if !slices.Equal(got, want) {
		t.Errorf("toolEnv = %q, want %q", got, want)
	}
}

func TestMirrorCorpus(t *testing.T) {
	specs := mirrorCorpus(40)
	if len(specs) != 40 {
		t.Fatalf("%d packages, want 40", len(specs))
	}
	again := mirrorCorpus(40)
	namespaces := map[string]bool{}
	for i, p := range specs {
		if p.name != again[i].name || p.versions != again[i].versions {
			t.Errorf("package %d: %s (%d versions), then %s (%d)", i, p.name, p.versions, again[i].name, again[i].versions)
		}
		if p.versions < 1 {
			t.Errorf("%s has no versions", p.name)
		}
		namespaces[p.namespace] = true
	}
	if len(namespaces) < 2 {
		t.Errorf("the packages are in %d namespaces, want several", len(namespaces))
	}
}

func TestCopiedComplete(t *testing.T) {
	src := &sourceSet{versions: 2, digestTags: 1, nReferred: 1}
	withoutSig := copied{versions: 2, referrers: 1, missingDigestTags: []string{"a/b:sha256-1.sig"}}
	if err := withoutSig.complete(src, false); err != nil {
		t.Errorf("a copy that need not carry .sig tags failed: %v", err)
	}
	if err := withoutSig.complete(src, true); err == nil || !strings.Contains(err.Error(), "a/b:sha256-1.sig") {
		t.Errorf("a copy that lacks a .sig tag it must carry: %v", err)
	}
	noVersion := copied{versions: 1, digestTags: 1, referrers: 1, missing: []string{"a/b:1.0.0"}}
	if err := noVersion.complete(src, false); err == nil || !strings.Contains(err.Error(), "1 of 2 versions") {
		t.Errorf("a copy that lacks a version: %v", err)
	}
}

func TestFormatKiB(t *testing.T) {
	if got := formatKiB(int64(1.5 * 1024)); got != "1.5 MiB" {
		t.Errorf("formatKiB = %q", got)
	}
}
