package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-registry/berth/client/registrytest"
)

func TestClientCmdErrors(t *testing.T) {
	dir := setup(t)
	host := registrytest.New(t, nil)
	chart := writeChart(t, dir, "demo", "1.0.0")
	mustBerth(t, "push", chart, host+"/charts/demo")

	tests := []struct {
		args []string
		want string
	}{
		{[]string{"push", chart, "localhost:5000/kafka"}, `Error: invalid reference "localhost:5000/kafka": missing namespace: want host[:port]/namespace/name[:version]`},
		{[]string{"push", chart, host + "/Charts/demo"}, `namespace "Charts" must be lower case`},
		{[]string{"push", chart, host + "/charts"}, "missing namespace: want host[:port]/namespace/name[:version] (host[:port]/namespace alone is for a directory with one folder per version"},
		{[]string{"push", chart, host + "/charts/other"}, `is named "demo" but REF`},
		{[]string{"push", chart, host + "/charts/demo:2.0.0"}, `has version "1.0.0" but REF`},
		{[]string{"push", chart, host + "/charts/demo", "--version", "2.0.0"}, `version "1.0.0" does not match the expected version "2.0.0"`},
		{[]string{"push", chart, host + "/charts/demo:1.0.0", "--version", "2.0.0"}, `--version "2.0.0" contradicts`},
		{[]string{"push", chart, host + "/charts/demo@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}, "has a digest"},
		{[]string{"push", filepath.Join(dir, "missing"), host + "/charts/demo"}, "no such file or directory"},
		{[]string{"pull", host + "/charts/demo"}, "has no version"},
		{[]string{"pull", host + "/charts/demo:9.9.9"}, "pull " + host + "/charts/demo:9.9.9: not found"},
		{[]string{"pull", host + "/charts/demo:1.0.0", "--format", "yaml"}, `want json or text, not "yaml"`},
		{[]string{"inspect", "kafka"}, "missing registry host, namespace and name"},
		{[]string{"inspect", host + "/charts/demo:1.0.0", "--plain-http=false"}, "HTTP response to HTTPS client"},
		{[]string{"package", filepath.Join(dir, "nothing")}, "no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := berth(t, tt.args...)
			if code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			if stdout != "" {
				t.Errorf("stdout not empty: %s", stdout)
			}
			if !strings.HasPrefix(stderr, "Error: ") || !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr %q does not contain %q", stderr, tt.want)
			}
		})
	}
}

// writeFiles writes files (slash paths relative to root) under root.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, data := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// csv is a minimal OLM ClusterServiceVersion.
func csv(version, replaces string) string {
	s := "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata:\n  name: etcdoperator.v" + version +
		"\nspec:\n  displayName: etcd\n  version: " + version + "\n"
	if replaces != "" {
		s += "  replaces: etcdoperator.v" + replaces + "\n"
	}
	return s
}

// writeBundles writes a folder of two OLM bundles of package etcd.
func writeBundles(t *testing.T, root string) {
	t.Helper()
	annotations := "annotations:\n  operators.operatorframework.io.bundle.package.v1: etcd\n" +
		"  operators.operatorframework.io.bundle.channels.v1: stable\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n"
	writeFiles(t, root, map[string]string{
		"0.9.2/manifests/etcdoperator.v0.9.2.clusterserviceversion.yaml": csv("0.9.2", ""),
		"0.9.2/metadata/annotations.yaml":                                annotations,
		"0.9.4/manifests/etcdoperator.v0.9.4.clusterserviceversion.yaml": csv("0.9.4", "0.9.2"),
		"0.9.4/metadata/annotations.yaml":                                annotations,
	})
}

func TestPushRepository(t *testing.T) {
	dir := setup(t)
	// The registry refuses version 0.9.4 of operators/broken.
	host := registrytest.New(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPut && r.URL.Path == "/v2/broken/etcd/manifests/0.9.4" {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusForbidden)
				w.Write([]byte(`{"errors":[{"code":"DENIED","message":"version 0.9.4 is frozen"}]}`))
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	bundles := filepath.Join(dir, "bundles")
	writeBundles(t, bundles)
	manifests := filepath.Join(dir, "package-manifests")
	writeFiles(t, manifests, map[string]string{
		"etcd.package.yaml": "packageName: etcd\ndefaultChannel: alpha\nchannels:\n- name: alpha\n  currentCSV: etcdoperator.v0.9.4\n",
		"0.9.2/etcdoperator.v0.9.2.clusterserviceversion.yaml": csv("0.9.2", ""),
		"0.9.4/etcdoperator.v0.9.4.clusterserviceversion.yaml": csv("0.9.4", "0.9.2"),
	})

	out := mustBerth(t, "push", bundles, host+"/operators")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "Pushed "+host+"/operators/etcd:0.9.2 sha256:") ||
		!strings.HasPrefix(lines[1], "Pushed "+host+"/operators/etcd:0.9.4 sha256:") {
		t.Errorf("push of a folder of bundles:\n%s", out)
	}

	var res struct {
		Packages []struct{ Name, Version, Digest, Reference, Error string }
	}
	decode(t, mustBerth(t, "push", manifests, host+"/mirror/etcd", "--format", "json"), &res)
	if len(res.Packages) != 2 {
		t.Fatalf("json output: %+v", res)
	}
	for i, v := range []string{"0.9.2", "0.9.4"} {
		p := res.Packages[i]
		if p.Name != "etcd" || p.Version != v || !strings.HasPrefix(p.Digest, "sha256:") || p.Reference != host+"/mirror/etcd:"+v || p.Error != "" {
			t.Errorf("package %d: %+v", i, p)
		}
	}
	// Each version carries its channels.
	var inspected struct {
		Metadata struct {
			Channels []struct{ Name, Replaces string }
		}
	}
	decode(t, mustBerth(t, "inspect", host+"/mirror/etcd:0.9.4", "--format", "json"), &inspected)
	if ch := inspected.Metadata.Channels; len(ch) != 1 || ch[0].Name != "alpha" || ch[0].Replaces != "etcdoperator.v0.9.2" {
		t.Errorf("channels of 0.9.4: %+v", ch)
	}

	// One version fails: the other is still pushed and reported, and the exit code is 1.
	code, stdout, stderr := berth(t, "push", bundles, host+"/broken")
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if !strings.Contains(stdout, "Pushed "+host+"/broken/etcd:0.9.2 sha256:") || strings.Contains(stdout, "0.9.4") {
		t.Errorf("stdout:\n%s", stdout)
	}
	for _, want := range []string{"Error: push " + host + "/broken/etcd:0.9.4: denied: version 0.9.4 is frozen (DENIED, HTTP 403)",
		"Error: 1 of 2 versions failed to push: etcd 0.9.4"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not contain %q:\n%s", want, stderr)
		}
	}
	code, stdout, _ = berth(t, "push", bundles, host+"/broken", "--format", "json")
	var failed struct {
		Packages []struct{ Version, Digest, Error string }
	}
	if err := json.Unmarshal([]byte(stdout), &failed); code != 1 || err != nil || len(failed.Packages) != 2 ||
		failed.Packages[0].Digest == "" || failed.Packages[1].Error == "" {
		t.Errorf("json output of a partly failed push (exit %d, %v):\n%s", code, err, stdout)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"push", bundles, host + "/operators/etcd:0.9.2"}, "names one version, but PATH holds one folder per version"},
		{[]string{"push", bundles, host + "/operators/other"}, `package name "etcd" does not match the expected name "other"`},
		{[]string{"push", manifests, host + "/operators/other"}, `does not match the expected name "other"`},
		{[]string{"push", bundles, host + "/operators", "--version", "1.0.0"}, "--version cannot be used"},
		{[]string{"push", bundles, host}, "missing namespace: want host[:port]/namespace"},
	} {
		code, _, stderr := berth(t, tt.args...)
		if code != 1 || !strings.Contains(stderr, tt.want) {
			t.Errorf("berth %s: exit %d, stderr %q, want it to contain %q", strings.Join(tt.args, " "), code, stderr, tt.want)
		}
	}
}
