package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/client/registrytest"
	"github.com/berth-registry/berth/mirror"
	"github.com/berth-registry/berth/mirror/mirrortest"
	"github.com/berth-registry/berth/pkgformat"
)

// checkFar starts a fake far berth with olm/etcd 0.9.4, which can install,
// and 0.9.2, whose image is missing (its problem carries an escape
// sequence, which the table must not print).
func checkFar(t *testing.T) string {
	t.Helper()
	img := "quay.io/coreos/etcd@sha256:" + strings.Repeat("a", 64)
	url := mirrortest.NewBerth(t, []*apiv1.Package{mirrortest.Package("olm", "etcd", pkgformat.OLM, "0.9.4", "0.9.2")},
		map[string]*apiv1.Installable{
			"olm/etcd@0.9.4": {Installable: true, Images: []apiv1.ImageCheck{{Reference: img, Present: true}}},
			"olm/etcd@0.9.2": {Images: []apiv1.ImageCheck{{Reference: img}}, Problems: []string{"image " + img + ": missing\x1b[2J"}},
		})
	return strings.TrimPrefix(url, "http://")
}

func TestMirrorCheck(t *testing.T) {
	setup(t)
	far := checkFar(t)
	img := "quay.io/coreos/etcd@sha256:" + strings.Repeat("a", 64)

	code, stdout, stderr := berth(t, "mirror", "check", "--registry", far, "--namespace", "olm")
	want := "VERSION          INSTALLABLE\n" +
		"olm/etcd 0.9.4   yes\n" +
		"olm/etcd 0.9.2   no\n" +
		"  image " + img + ": missing [2J\n" +
		"2 versions: 1 can install, 1 cannot\n"
	if code != 1 || stdout != want || !strings.Contains(stderr, "1 of 2 versions cannot install at "+far) {
		t.Errorf("exit %d\nstdout:\n%s\nwant:\n%s\nstderr: %s", code, stdout, want, stderr)
	}

	code, stdout, _ = berth(t, "mirror", "check", "--registry", far, "--namespace", "olm", "--format", "json")
	var rep mirror.CheckReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if code != 1 || rep.Installable != 1 || rep.NotInstallable != 1 || len(rep.Versions) != 2 ||
		rep.Versions[0].Version != "0.9.4" || !rep.Versions[0].Installable || rep.Versions[1].Installable ||
		len(rep.Versions[1].Problems) != 1 || len(rep.Versions[1].Images) != 1 {
		t.Errorf("exit %d, report %+v", code, rep)
	}

	sel := filepath.Join(t.TempDir(), "sel.yaml")
	if err := os.WriteFile(sel, []byte("packages:\n  - repository: olm/etcd\n    versions: \">=0.9.4\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := mustBerth(t, "mirror", "check", "--registry", far, "--selection", sel)
	if !strings.Contains(out, "olm/etcd 0.9.4   yes\n") || !strings.HasSuffix(out, "1 versions: 1 can install, 0 cannot\n") {
		t.Errorf("a selection that can install:\n%s", out)
	}
}

// TestMirrorCheckBadInput: every refused command line names what is wrong.
func TestMirrorCheckBadInput(t *testing.T) {
	dir := setup(t)
	far := checkFar(t)
	notBerth := registrytest.New(t, nil)
	badPolicy := filepath.Join(dir, "trust.yaml")
	if err := os.WriteFile(badPolicy, []byte("policies: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"without registry", []string{"--namespace", "olm"}, "--registry"},
		{"with a repository as registry", []string{"--registry", "localhost:5000/olm", "--namespace", "olm"}, "want a registry"},
		{"without selection", []string{"--registry", far}, "say what to check"},
		{"with both selections", []string{"--registry", far, "--selection", "s.yaml", "--namespace", "olm"}, "not both"},
		{"with a narrowing flag alone", []string{"--registry", far, "--latest", "1"}, "narrow a selection"},
		{"with a missing policy", []string{"--registry", far, "--namespace", "olm", "--policy", filepath.Join(dir, "nope.yaml")}, "nope.yaml"},
		{"with an empty policy", []string{"--registry", far, "--namespace", "olm", "--trust-policy", badPolicy}, "no policies"},
		{"against a registry that is not a berth", []string{"--registry", notBerth, "--namespace", "olm"}, "FAR does not answer berth's catalog API; mirror check needs a berth"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := berth(t, append([]string{"mirror", "check"}, tc.args...)...)
			if code == 0 || !strings.Contains(stderr, tc.want) || stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want an error saying %q", code, stdout, stderr, tc.want)
			}
		})
	}
}
