package main

import (
	"encoding/json"
	"net/http"
	"reflect"
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
