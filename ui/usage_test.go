package ui_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-registry/berth/quota"
	"github.com/berth-registry/berth/ui"
)

// ledger is a quota ledger with fixed usages; a namespace it does not list
// stores nothing and has no quota. err fails every read.
type ledger struct {
	usages map[string]quota.Usage
	err    error
}

func (l ledger) Usage(_ context.Context, ns string) (quota.Usage, error) {
	u, ok := l.usages[ns]
	if !ok {
		u = quota.Usage{Namespace: ns}
	}
	return u, l.err
}

func (l ledger) Usages(context.Context) ([]quota.Usage, error) {
	return nil, errors.New("the namespace page reads one namespace")
}

func TestNamespacePageStorage(t *testing.T) {
	e := newEnv(t)
	l := ledger{usages: map[string]quota.Usage{
		"near": {Namespace: "near", UsedBytes: 990 << 20, LimitBytes: 1000 << 20, Blobs: 41, OpenUploads: 2},
		"full": {Namespace: "full", UsedBytes: 10 << 30, LimitBytes: 10 << 30, Blobs: 7},
		"free": {Namespace: "free", UsedBytes: 3 << 40, Blobs: 12345},
		"evil": {Namespace: "evil", UsedBytes: 1 << 20, LimitBytes: 2 << 20, Blobs: 1},
	}}
	h := newUI(e, ui.Options{Quota: l})
	for _, tc := range []struct {
		path    string
		want    []string // in the page
		notWant []string
	}{
		{"/ui/namespaces/near", []string{
			`<h2 id="storage-h">Storage</h2>`,
			`<label for="storage-meter">990.0 MiB used of 1000.0 MiB</label>`,
			`<meter id="storage-meter" min="0" max="1048576000" low="838860800" high="996147200" optimum="0" value="1038090240">99.0%</meter>`,
			`<span class="percent">99.0%</span>`,
			"<dt>Blobs</dt><dd>41</dd>", "<dt>Open uploads</dt><dd>2</dd>",
		}, []string{`class="alert"`, "no quota"}},
		{"/ui/namespaces/full", []string{`10.0 GiB used of 10.0 GiB`, `<span class="percent">100.0%</span>`, `<p class="alert">The namespace has used all of its quota`}, nil},
		{"/ui/namespaces/free", []string{"3.0 TiB used; no quota.", "<dd>12345</dd>"}, []string{"<meter", `class="alert"`}},
		{"/ui/namespaces/empty", []string{"0 B used; no quota.", "<dt>Blobs</dt><dd>0</dd>"}, []string{"<meter"}},
		// The search page is of no namespace.
		{"/?q=x", nil, []string{"storage-h"}},
	} {
		checkShows(t, h, tc.path, tc.want, tc.notWant)
	}

	// A viewer who may pull package by package sees the storage of a
	// namespace only when it holds a package they may pull: near's and not
	// evil's, though both store something.
	e.push("near", build(t, "hello", "0.1.0", map[string]string{"manifests/cm.yaml": "kind: ConfigMap\n"}))
	e.push("evil", build(t, "hello", "0.1.0", map[string]string{"manifests/cm.yaml": "kind: ConfigMap\n"}))
	h = newUI(e, ui.Options{Quota: l, Authorizer: denyEvil{}})
	if _, body := get(t, h, "/ui/namespaces/near"); !strings.Contains(body, "990.0 MiB used of 1000.0 MiB") {
		t.Errorf("near's page does not show its storage to a viewer who may pull its package:\n%s", body)
	}
	for _, path := range []string{"/ui/namespaces/evil", "/ui/namespaces/empty"} {
		if _, body := get(t, h, path); strings.Contains(body, "storage-h") {
			t.Errorf("%s: shows storage to a viewer who may pull nothing there", path)
		}
	}

	// Without a ledger (berth serve catalog) the page shows no storage.
	if _, body := get(t, newUI(e, ui.Options{}), "/ui/namespaces/near"); strings.Contains(body, "storage-h") {
		t.Error("a UI without a ledger shows storage")
	}
}

// checkShows gets the page at path from h and fails unless it is a page
// answered 200 that shows every string of want and none of notWant.
func checkShows(t *testing.T, h http.Handler, path string, want, notWant []string) {
	t.Helper()
	resp, body := get(t, h, path)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("%s: status %d", path, resp.StatusCode)
		return
	}
	checkPage(t, path, resp, body)
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("%s: no %q in\n%s", path, w, body)
		}
	}
	for _, w := range notWant {
		if strings.Contains(body, w) {
			t.Errorf("%s: shows %q", path, w)
		}
	}
}

func TestNamespacePageLedgerFails(t *testing.T) {
	var logs bytes.Buffer
	h := newUI(newEnv(t), ui.Options{
		Quota:  ledger{err: errors.New("connection refused by db.internal:5432")},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	resp, body := get(t, h, "/ui/namespaces/team-a")
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", resp.StatusCode)
	}
	if strings.Contains(body, "db.internal") {
		t.Error("the page shows the ledger's error")
	}
	if !strings.Contains(logs.String(), `read the usage of namespace \"team-a\": connection refused by db.internal:5432`) {
		t.Errorf("the log does not say what failed:\n%s", logs.String())
	}
}
