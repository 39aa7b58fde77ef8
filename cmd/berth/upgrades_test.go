package main

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/berth-registry/berth/catalog/apiv1"
)

func TestUpgradesCmd(t *testing.T) {
	answers := map[string]apiv1.Upgrades{
		"0.9.0": {From: "0.9.0", Channel: "alpha", Head: "0.9.4", Next: []string{"0.9.2", "0.9.1"}, Path: []string{"0.9.2", "0.9.4"}},
		"0.9.4": {From: "0.9.4", Channel: "alpha", Head: "0.9.4", Next: []string{}, Path: []string{}},
		"0.8.0": {From: "0.8.0", Channel: "alpha", Head: "0.9.4", Next: []string{}, Path: []string{}},
	}
	f := serveCatalog(t, map[string]any{"/packages/operators/etcd/upgrades": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		up, ok := answers[r.URL.Query().Get("from")]
		if !ok {
			writeAPIError(w, http.StatusNotFound, "NOT_FOUND", "operators/etcd has no version "+r.URL.Query().Get("from"))
			return
		}
		w.Header().Set("Content-Type", apiv1.MediaTypeJSON)
		json.NewEncoder(w).Encode(up)
	}), "/packages/operators/etcd/channels/alpha/graph": apiv1.Graph{
		Namespace: "operators", Name: "etcd", Channel: "alpha", Head: "0.9.4",
		Edges: []apiv1.GraphEdge{
			{From: "0.9.0", To: "0.9.2", Kind: apiv1.EdgeReplaces},
			{From: "0.9.0", To: "0.9.1", Kind: apiv1.EdgeSkips, WidensPermissions: true},
			{From: "0.9.2", To: "0.9.4", Kind: apiv1.EdgeReplaces, WidensPermissions: true},
		},
	}})

	out := mustBerth(t, "upgrades", "operators/etcd", "--from", "0.9.0", "--channel", "alpha", "--server", f.host)
	want := `Package: operators/etcd
Channel: alpha
From:    0.9.0
Head:    0.9.4
Next:    0.9.2, 0.9.1 (widens permissions)
Path:    0.9.0 → 0.9.2 → 0.9.4 (widens permissions) (head)
Review what an upgrade adds with: berth permissions operators/etcd:VERSION --from 0.9.0
`
	if out != want {
		t.Errorf("upgrades output:\n%s\nwant:\n%s", out, want)
	}
	out = mustBerth(t, "upgrades", "operators/etcd", "--from", "0.9.4", "--server", f.host)
	want = `Package: operators/etcd
Channel: alpha
From:    0.9.4
Head:    0.9.4
Next:    none
Path:    already at the head
`
	if out != want {
		t.Errorf("upgrades output at the head:\n%s\nwant:\n%s", out, want)
	}
	if out := mustBerth(t, "upgrades", "operators/etcd", "--from", "0.8.0", "--server", f.host); !strings.HasSuffix(out, "\nPath:    none: 0.8.0 does not lead to the head 0.9.4\n") {
		t.Errorf("upgrades output without a path:\n%s", out)
	}
	wantReqs := []string{
		"/api/v1/packages/operators/etcd/upgrades?channel=alpha&from=0.9.0",
		"/api/v1/packages/operators/etcd/channels/alpha/graph",
		"/api/v1/packages/operators/etcd/upgrades?from=0.9.4",
		"/api/v1/packages/operators/etcd/channels/alpha/graph",
		"/api/v1/packages/operators/etcd/upgrades?from=0.8.0",
		"/api/v1/packages/operators/etcd/channels/alpha/graph",
	}
	if got := f.requests(); !reflect.DeepEqual(got, wantReqs) {
		t.Errorf("requests %q, want %q", got, wantReqs)
	}

	var up apiv1.Upgrades
	decode(t, mustBerth(t, "upgrades", "operators/etcd", "--from", "0.9.0", "--server", f.host, "--format", "json"), &up)
	if !reflect.DeepEqual(up, answers["0.9.0"]) {
		t.Errorf("upgrades --format json = %+v, want %+v", up, answers["0.9.0"])
	}
	// The JSON marks the upgrades that widen permissions as the text does.
	var steps struct {
		NextSteps, PathSteps []upgradeStep
	}
	decode(t, mustBerth(t, "upgrades", "operators/etcd", "--from", "0.9.0", "--server", f.host, "--format", "json"), &steps)
	if want := []upgradeStep{{"0.9.0", "0.9.2", false}, {"0.9.0", "0.9.1", true}}; !reflect.DeepEqual(steps.NextSteps, want) {
		t.Errorf("upgrades --format json nextSteps = %+v, want %+v", steps.NextSteps, want)
	}
	if want := []upgradeStep{{"0.9.0", "0.9.2", false}, {"0.9.2", "0.9.4", true}}; !reflect.DeepEqual(steps.PathSteps, want) {
		t.Errorf("upgrades --format json pathSteps = %+v, want %+v", steps.PathSteps, want)
	}
	if out := mustBerth(t, "upgrades", "operators/etcd", "--from", "0.9.4", "--server", f.host, "--format", "json"); !strings.Contains(out, `"nextSteps": [],`) || !strings.Contains(out, `"pathSteps": []`) {
		t.Errorf("upgrades --format json at the head:\n%s", out)
	}

	code, stdout, stderr := berth(t, "upgrades", "operators/etcd", "--from", "0.1.0", "--server", f.host)
	if want := "Error: operators/etcd: not found: operators/etcd has no version 0.1.0\n"; code != 1 || stdout != "" || stderr != want {
		t.Errorf("upgrades from a missing version: exit %d\nstdout: %s\nstderr: %s\nwant: %s", code, stdout, stderr, want)
	}
}
