package httpapi_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/httpapi"
	"github.com/berth-registry/berth/quota"
)

// fakeQuota is a ledger with fixed usages, listed by name; a namespace it
// does not list has a zero Usage. err fails every read.
type fakeQuota struct {
	usages []quota.Usage
	err    error
}

func (q fakeQuota) Usage(_ context.Context, ns string) (quota.Usage, error) {
	for _, u := range q.usages {
		if u.Namespace == ns {
			return u, q.err
		}
	}
	return quota.Usage{Namespace: ns}, q.err
}

func (q fakeQuota) Usages(context.Context) ([]quota.Usage, error) { return q.usages, q.err }

// testUsages are a namespace at 99% of its quota, one without a quota and
// one with a quota that stores nothing.
var testUsages = fakeQuota{usages: []quota.Usage{
	{Namespace: "a", UsedBytes: 990, LimitBytes: 1000, Blobs: 3, OpenUploads: 1},
	{Namespace: "b", UsedBytes: 5 << 20, Blobs: 12},
	{Namespace: "c", LimitBytes: 10 << 30},
}}

// newUsageHandler is the API over a fake catalog with q as its ledger.
func newUsageHandler(q quota.Reader, auth catalog.Authorizer) http.Handler {
	return httpapi.New(httpapi.Options{Catalog: newFake(), Authorizer: auth, Quota: q, Logger: slog.New(slog.DiscardHandler)})
}

func TestUsages(t *testing.T) {
	for _, tc := range []struct {
		name string
		auth catalog.Authorizer
		want []string
	}{
		{"everything", nil, []string{"a", "b", "c"}},
		{"some namespaces", fakeAuth{access: catalog.NamespaceAccess("a", "c", "z")}, []string{"a", "c"}},
		{"nothing", fakeAuth{access: catalog.Access{}}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := serve(t, newUsageHandler(testUsages, tc.auth), "GET", "/api/v1/usage", nil)
			if res.status != http.StatusOK {
				t.Fatalf("status %d: %s", res.status, res.body)
			}
			var got apiv1.Usages
			res.decode(t, &got)
			names := []string{}
			for _, u := range got.Namespaces {
				names = append(names, u.Namespace)
			}
			if !reflect.DeepEqual(names, tc.want) {
				t.Errorf("namespaces %v, want %v", names, tc.want)
			}
			if len(tc.want) == 0 && !strings.Contains(string(res.body), `"namespaces":[]`) {
				t.Errorf("no namespaces is not written []: %s", res.body)
			}
			if len(got.Namespaces) > 0 {
				want := apiv1.NamespaceUsage{Namespace: "a", UsedBytes: 990, LimitBytes: 1000, Blobs: 3, OpenUploads: 1}
				if got.Namespaces[0] != want {
					t.Errorf("a's usage %+v, want %+v", got.Namespaces[0], want)
				}
			}
		})
	}
}

func TestNamespaceUsage(t *testing.T) {
	h := newUsageHandler(testUsages, fakeAuth{access: catalog.NamespaceAccess("a", "c", "d")})
	for _, ns := range []string{"a", "c"} {
		res := serve(t, h, "GET", "/api/v1/namespaces/"+ns+"/usage", nil)
		if res.status != http.StatusOK {
			t.Fatalf("%s: status %d: %s", ns, res.status, res.body)
		}
		var got apiv1.NamespaceUsage
		res.decode(t, &got)
		u, _ := testUsages.Usage(context.Background(), ns)
		want := apiv1.NamespaceUsage{Namespace: u.Namespace, UsedBytes: u.UsedBytes, LimitBytes: u.LimitBytes, Blobs: u.Blobs, OpenUploads: u.OpenUploads}
		if got != want {
			t.Errorf("%s: %+v, want %+v", ns, got, want)
		}
	}

	// b is hidden from the caller, d stores nothing and has no quota, e
	// neither and is hidden: the same 404, which tells none from another.
	var messages []string
	for _, ns := range []string{"b", "d", "e"} {
		res := serve(t, h, "GET", "/api/v1/namespaces/"+ns+"/usage", nil)
		if res.status != http.StatusNotFound {
			t.Fatalf("%s: status %d, want 404: %s", ns, res.status, res.body)
		}
		e := res.apiError(t)
		if e.Code != "NOT_FOUND" {
			t.Errorf("%s: code %s", ns, e.Code)
		}
		messages = append(messages, strings.ReplaceAll(e.Message, `"`+ns+`"`, "NS"))
	}
	if messages[0] != messages[1] || messages[1] != messages[2] {
		t.Errorf("the 404s differ: %q", messages)
	}
}

func TestUsageBadRequests(t *testing.T) {
	h := newUsageHandler(testUsages, nil)
	for _, tc := range []struct {
		target, param string
	}{
		{"/api/v1/namespaces/Team_A/usage", "namespace"},
		{"/api/v1/namespaces/a..b/usage", "namespace"},
		{"/api/v1/namespaces/" + strings.Repeat("a", 300) + "/usage", "namespace"},
		{"/api/v1/namespaces/a/usage?limit=5", "limit"},
		{"/api/v1/usage?namespace=a", "namespace"},
	} {
		res := serve(t, h, "GET", tc.target, nil)
		if res.status != http.StatusBadRequest {
			t.Errorf("%.60s: status %d, want 400: %s", tc.target, res.status, res.body)
			continue
		}
		e := res.apiError(t)
		if d, _ := e.Detail.(map[string]any); e.Code != "INVALID" || d["parameter"] != tc.param {
			t.Errorf("%.60s: %+v, want INVALID naming %s", tc.target, e, tc.param)
		}
	}
}

func TestUsageWithoutLedger(t *testing.T) {
	h := newUsageHandler(nil, nil)
	for _, target := range []string{"/api/v1/usage", "/api/v1/namespaces/a/usage"} {
		res := serve(t, h, "GET", target, nil)
		if res.status != http.StatusNotImplemented {
			t.Fatalf("%s: status %d, want 501: %s", target, res.status, res.body)
		}
		if e := res.apiError(t); e.Code != "NOT_IMPLEMENTED" || !strings.Contains(e.Message, "keeps no storage usage or quotas") {
			t.Errorf("%s: %+v", target, e)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	ledgerDown := fakeQuota{usages: testUsages.usages, err: errors.New("database is locked")}
	for _, tc := range []struct {
		name   string
		q      quota.Reader
		auth   catalog.Authorizer
		status int
	}{
		{"ledger fails", ledgerDown, nil, http.StatusInternalServerError},
		{"authorizer denies", testUsages, fakeAuth{pullErr: catalog.ErrDenied}, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newUsageHandler(tc.q, tc.auth)
			for _, target := range []string{"/api/v1/usage", "/api/v1/namespaces/a/usage"} {
				res := serve(t, h, "GET", target, nil)
				if res.status != tc.status {
					t.Errorf("%s: status %d, want %d: %s", target, res.status, tc.status, res.body)
				}
				if strings.Contains(string(res.body), "database is locked") {
					t.Errorf("%s: the ledger's error reaches the client: %s", target, res.body)
				}
			}
		})
	}
}

// TestUsagePackageByPackage checks a caller whose rules decide package by
// package: they see the usage of a namespace where the catalog holds a
// package they may pull (olm/etcd), not of one where it holds none they may.
func TestUsagePackageByPackage(t *testing.T) {
	q := fakeQuota{usages: append([]quota.Usage{{Namespace: "olm", UsedBytes: 10, Blobs: 3}}, testUsages.usages...)}
	pullOLMAndA := fakeAuth{access: catalog.Access{Pull: func(ns, _ string) bool { return ns == "olm" || ns == "a" }}}
	h := httpapi.New(httpapi.Options{Catalog: realCatalog(t), Authorizer: pullOLMAndA, Quota: q, Logger: slog.New(slog.DiscardHandler)})

	var got apiv1.Usages
	res := serve(t, h, "GET", "/api/v1/usage", nil)
	res.decode(t, &got)
	if len(got.Namespaces) != 1 || got.Namespaces[0].Namespace != "olm" {
		t.Errorf("usage: %s, want olm's alone", res.body)
	}
	for ns, status := range map[string]int{"olm": http.StatusOK, "a": http.StatusNotFound, "b": http.StatusNotFound} {
		if res := serve(t, h, "GET", "/api/v1/namespaces/"+ns+"/usage", nil); res.status != status {
			t.Errorf("%s: status %d, want %d: %s", ns, res.status, status, res.body)
		}
	}
}
