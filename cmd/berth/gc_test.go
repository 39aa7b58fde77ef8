package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/maintenance"
	"github.com/berth-registry/berth/registry"
)

func TestGCCmd(t *testing.T) {
	f := serveCatalog(t, map[string]any{
		"/admin/gc": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost {
				writeAPIError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", r.Method)
				return
			}
			json.NewEncoder(w).Encode(maintenance.Report{Versions: 2, GCReport: registry.GCReport{
				DryRun: r.URL.Query().Get("dryRun") == "true", Manifests: 3, Blobs: 5, Bytes: 3 << 20,
				Mark: 1500 * time.Millisecond, Sweep: 20 * time.Millisecond}})
		}),
	})
	out := mustBerth(t, "gc", "--server", f.host)
	want := `Versions untagged: 2
Deleted:           3 manifests, 5 blobs (3.0 MiB)
Took:              mark 1.5s, sweep 20ms
`
	if out != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}
	out = mustBerth(t, "gc", "--server", f.host, "--dry-run")
	if !strings.HasPrefix(out, "Dry run: nothing was deleted.\n") || !strings.Contains(out, "Would delete:      3 manifests") {
		t.Errorf("--dry-run output:\n%s", out)
	}
	mustBerth(t, "gc", "--server", f.host, "--dry-run=false")
	var rep maintenance.Report
	decode(t, mustBerth(t, "gc", "--server", f.host, "--format", "json"), &rep)
	if rep.Versions != 2 || rep.Bytes != 3<<20 || rep.Mark != 1500*time.Millisecond {
		t.Errorf("--format json: %+v", rep)
	}
	reqs := f.requests()
	if want := []string{"/api/v1/admin/gc", "/api/v1/admin/gc?dryRun=true", "/api/v1/admin/gc?dryRun=false", "/api/v1/admin/gc"}; strings.Join(reqs, " ") != strings.Join(want, " ") {
		t.Errorf("requests %q, want %q", reqs, want)
	}
}

func TestGCCmdErrors(t *testing.T) {
	var status int
	var code, message string
	f := serveCatalog(t, map[string]any{
		"/admin/gc": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeAPIError(w, status, code, message)
		}),
	})
	tests := []struct {
		name          string
		args          []string
		status        int
		code, message string
		want          string
	}{
		{"unknown flag", []string{"--dryrun"}, 0, "", "", "unknown flag: --dryrun"},
		{"dry-run not a bool", []string{"--dry-run=maybe"}, 0, "", "", `invalid argument "maybe" for "--dry-run" flag: strconv.ParseBool: parsing "maybe": invalid syntax`},
		{"argument", []string{"now"}, 0, "", "", `unknown command "now" for "berth gc"`},
		{"no permission", nil, http.StatusForbidden, "DENIED", "the admin API is for administrators: no rule allows user:bob admin on *",
			"gc: denied: the admin API is for administrators: no rule allows user:bob admin on * (log in as someone allowed to do this: berth login " + f.host + ")"},
		{"not logged in", nil, http.StatusUnauthorized, "UNAUTHORIZED", "authentication required: the admin API is for administrators",
			"gc: unauthorized: authentication required: the admin API is for administrators (run berth login " + f.host + ")"},
		{"run in progress", nil, http.StatusConflict, "CONFLICT", "a retention and garbage collection run is already in progress in this server; try again when it ends",
			"gc: conflict: a retention and garbage collection run is already in progress in this server; try again when it ends"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, code, message = tt.status, tt.code, tt.message
			exit, _, stderr := berth(t, append([]string{"gc", "--server", f.host}, tt.args...)...)
			if exit != 1 || stderr != "Error: "+tt.want+"\n" {
				t.Errorf("exit %d, stderr %q, want %q", exit, stderr, tt.want)
			}
		})
	}
}
