package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/distribution/distribution/v3/registry/api/errcode"

	"github.com/berth-registry/berth/client/registrytest"
	"github.com/berth-registry/berth/registry"
)

func TestDeleteCmd(t *testing.T) {
	dir := setup(t)
	host := registrytest.NewBerth(t, registry.Options{}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/v2/locked/") {
				w.Header().Set("Content-Type", "application/json")
				_ = errcode.ServeJSON(w, errcode.ErrorCodeDenied.WithMessage("user:bob may not delete locked/demo"))
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	pushed := pushChart(t, dir, host, "charts/demo", "1.0.0")
	pushChart(t, dir, host, "charts/demo", "2.0.0")
	pushChart(t, dir, host, "locked/demo", "1.0.0")

	if out := mustBerth(t, "delete", host+"/charts/demo:1.0.0"); out != "Deleted "+host+"/charts/demo:1.0.0 ("+pushed+")\n" {
		t.Errorf("delete output %q", out)
	}
	var res deleteResult
	decode(t, mustBerth(t, "delete", host+"/charts/demo:2.0.0", "--format", "json"), &res)
	if res.Reference != host+"/charts/demo:2.0.0" || !strings.HasPrefix(res.Digest, "sha256:") {
		t.Errorf("delete --format json: %+v", res)
	}

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"deleted already", []string{host + "/charts/demo:1.0.0"}, "delete " + host + "/charts/demo:1.0.0: not found: charts/demo has no version 1.0.0\n"},
		{"no such version", []string{host + "/charts/demo:9.9.9"}, "delete " + host + "/charts/demo:9.9.9: not found: charts/demo has no version 9.9.9\n"},
		{"no such digest", []string{host + "/charts/demo@sha256:" + strings.Repeat("0", 64)}, "delete " + host + "/charts/demo@sha256:" + strings.Repeat("0", 64) + ": not found: charts/demo has no manifest sha256:" + strings.Repeat("0", 64) + "\n"},
		{"no permission", []string{host + "/locked/demo:1.0.0"}, "delete " + host + "/locked/demo:1.0.0: denied: user:bob may not delete locked/demo (DENIED, HTTP 403) (deleting needs pull and delete on locked/demo: berth login " + host + " as someone who has them)\n"},
		{"no version", []string{host + "/charts/demo"}, `REF "` + host + `/charts/demo" has no version: want host[:port]/namespace/name:version or host[:port]/namespace/name@sha256:<hex>`},
		{"no host", []string{"charts/demo:1.0.0"}, `invalid reference "charts/demo:1.0.0": missing registry host`},
		{"two references", []string{host + "/charts/demo:1.0.0", host + "/charts/demo:2.0.0"}, "accepts 1 arg(s), received 2"},
		{"unknown flag", []string{host + "/charts/demo:1.0.0", "--force"}, "unknown flag: --force"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := berth(t, append([]string{"delete"}, tt.args...)...)
			if code != 1 || !strings.HasPrefix(stderr, "Error: "+tt.want) {
				t.Errorf("exit %d, stderr %q, want it to start %q", code, stderr, "Error: "+tt.want)
			}
		})
	}
	if code, _, _ := berth(t, "inspect", host+"/locked/demo:1.0.0"); code != 0 {
		t.Error("a refused delete deleted the version")
	}
}
