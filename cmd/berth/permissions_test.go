package main

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/permissions"
	"github.com/berth-registry/berth/pkgformat"
)

func TestPermissionsCmd(t *testing.T) {
	secrets := pkgformat.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}
	review := permissions.Of(&pkgformat.Permissions{Cluster: []pkgformat.PolicyRule{secrets}})
	f := serveCatalog(t, map[string]any{
		"/packages/operators/etcd/versions/0.9.4/permissions": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := apiv1.Permissions{Namespace: "operators", Name: "etcd", Version: "0.9.4", Review: review}
			if from := r.URL.Query().Get("from"); from != "" {
				p.From = from
				p.Change = &permissions.Change{From: permissions.Low, To: permissions.High, Widens: true, RatingWidens: true,
					Added:   []permissions.Grant{{Scope: permissions.Cluster, Resource: "secrets", Verb: "get"}},
					Removed: []permissions.Grant{{Scope: permissions.Namespace, Resource: "pods", Verb: "list"}}}
			}
			w.Header().Set("Content-Type", apiv1.MediaTypeJSON)
			json.NewEncoder(w).Encode(p)
		}),
	})
	out := mustBerth(t, "permissions", "operators/etcd:0.9.4", "--server", f.host)
	want := `Package: operators/etcd
Version: 0.9.4
Rating:  high

Rules:
  get secrets, across the cluster
HIGH: may read Secrets across the cluster
`
	if out != want {
		t.Errorf("permissions output:\n%s\nwant:\n%s", out, want)
	}
	out = mustBerth(t, "permissions", "operators/etcd:0.9.4", "--from", "0.9.2", "--server", f.host)
	want += `
From 0.9.2: the upgrade WIDENS the permissions (rating low -> high).
Added (1):
  get secrets (cluster)
Removed (1):
  list pods (namespace)
`
	if out != want {
		t.Errorf("permissions --from output:\n%s\nwant:\n%s", out, want)
	}
	var p apiv1.Permissions
	decode(t, mustBerth(t, "permissions", "operators/etcd:0.9.4", "--from", "0.9.2", "--server", f.host, "--format", "json"), &p)
	if p.Change == nil || !p.Change.Widens || !reflect.DeepEqual(p.Review, review) {
		t.Errorf("permissions --format json = %+v", p)
	}
	for _, bad := range []struct{ arg, stderr string }{
		{"operators/etcd", "Error: invalid package \"operators/etcd\": missing version: want NS/NAME:VERSION, e.g. operators/etcd:0.9.4\n"},
		{"etcd:0.9.4", "Error: invalid package \"etcd:0.9.4\": missing namespace: want NS/NAME[:VERSION], e.g. kudo/kafka or kudo/kafka:1.0.0\n"},
	} {
		code, stdout, stderr := berth(t, "permissions", bad.arg, "--server", f.host)
		if code != 1 || stdout != "" || stderr != bad.stderr {
			t.Errorf("permissions %s: exit %d\nstdout: %s\nstderr: %s\nwant: %s", bad.arg, code, stdout, stderr, bad.stderr)
		}
	}
}

func TestApproveCmd(t *testing.T) {
	fp := "sha256:" + strings.Repeat("ab", 32)
	var got map[string]string
	f := serveCatalog(t, map[string]any{
		"/packages/operators/etcd/versions/0.9.4_b1/approval": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&got) != nil {
				writeAPIError(w, http.StatusBadRequest, "INVALID", "want a POST of JSON")
				return
			}
			w.Header().Set("Content-Type", apiv1.MediaTypeJSON)
			w.WriteHeader(http.StatusCreated)
			json.NewEncoder(w).Encode(apiv1.Approval{Namespace: "operators", Name: "etcd", Version: "0.9.4_b1", Permissions: got["permissions"], By: "alice"})
		}),
	})
	out := mustBerth(t, "approve", "operators/etcd:0.9.4+b1", "--permissions", fp, "--server", f.host)
	if want := "Approved operators/etcd:0.9.4_b1 with permissions " + fp + " (by alice); push it again.\n"; out != want {
		t.Errorf("approve output %q, want %q", out, want)
	}
	if got["permissions"] != fp {
		t.Errorf("the server got %v", got)
	}
	for _, bad := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"operators/etcd", "--permissions", fp}, "missing version"},
		{[]string{"operators/etcd:0.9.4", "--permissions", "sha256:AB"}, `permissions "sha256:AB": want sha256: and 64 lower-case hex digits`},
		{[]string{"operators/etcd:0.9.4"}, `required flag(s) "permissions" not set`},
	} {
		code, stdout, stderr := berth(t, append([]string{"approve", "--server", f.host}, bad.args...)...)
		if code != 1 || stdout != "" || !strings.Contains(stderr, bad.stderr) {
			t.Errorf("approve %v: exit %d\nstdout: %s\nstderr: %s\nwant it to say %s", bad.args, code, stdout, stderr, bad.stderr)
		}
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("%d requests, want 1: bad input must not reach the server", n)
	}
}
