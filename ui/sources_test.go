package ui_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/ui"
)

// tracker is a tracker of package sources with a fixed status.
type tracker struct {
	sources []apiv1.Source
	err     error
}

func (tr tracker) Status(context.Context) ([]apiv1.Source, error) { return tr.sources, tr.err }

func (tr tracker) Check(context.Context, string, string) error {
	return errors.New("the page asks no check")
}

func (tr tracker) PublicKey() []byte { return nil }

// testTracker follows a git source that published 1.2.0, an http source
// that failed, one in a namespace the viewer of denyEvil may not see, and
// one whose fields hold markup.
func testTracker() tracker {
	t0 := time.Date(2026, 11, 27, 10, 30, 0, 0, time.UTC)
	return tracker{sources: []apiv1.Source{
		{Namespace: "team-a", Package: "etcd", Kind: "git", URL: "https://github.com/org/etcd", Ref: "v*", Dir: "deploy", Interval: "5m0s",
			LastCheck: &t0, Revision: "0123456789abcdef0123",
			LastPublished: &apiv1.SourceVersion{Version: "1.2.0", Digest: "sha256:" + strings.Repeat("1", 64), Revision: "0123456789abcdef0123", Time: t0}},
		{Namespace: "team-a", Package: "tar", Kind: "http", URL: "https://example.com/op.tgz", Interval: "1h0m0s", LastCheck: &t0,
			LastError: &apiv1.SourceError{Time: t0, Reason: apiv1.SourceReasonRefused, Message: "version 1.0.0 is already published from abc; bump the version"}},
		{Namespace: "evil", Package: "op", Kind: "image", URL: "quay.io/evil/op:latest", Interval: "5m0s"},
		{Namespace: "team-b", Package: "x", Kind: "git", URL: "https://x.example/<script>alert(1)</script>", Interval: "5m0s",
			LastError: &apiv1.SourceError{Time: t0, Reason: apiv1.SourceReasonInvalid, Message: "<b>bad</b>"}},
	}}
}

func TestSourcesPage(t *testing.T) {
	e := newEnv(t)
	h := newUI(e, ui.Options{Sources: testTracker(), Authorizer: denyEvil{}})
	for _, tc := range []struct {
		path    string
		want    []string
		notWant []string
	}{
		{"/ui/sources", []string{
			"<title>Package sources · berth</title>",
			`<a href="/ui/packages/team-a/etcd">team-a/etcd</a>`,
			`<span class="badge">git</span> <span class="digest">https://github.com/org/etcd</span> <span class="digest">v*</span> in deploy`,
			`<time datetime="2026-11-27T10:30:00Z">2026-11-27 10:30</time>`,
			`<td class="digest" title="0123456789abcdef0123">0123456789ab</td>`,
			`<a href="/ui/packages/team-a/etcd/versions/1.2.0">1.2.0</a>`,
			`<span class="badge ok">ok</span>`,
			`<span class="rating-high">refused</span>: version 1.0.0 is already published from abc; bump the version`,
			`&lt;script&gt;alert(1)&lt;/script&gt;`, `&lt;b&gt;bad&lt;/b&gt;`,
			`<a href="/ui/sources">Sources</a>`,
		}, []string{"evil", "<script>alert", "<b>bad"}},
		{"/ui/sources?namespace=team-b", []string{"<title>Sources of team-b · berth</title>", "team-b/x", `<a href="/ui/namespaces/team-b">Packages of team-b</a>`}, []string{"team-a/etcd"}},
		{"/ui/sources?namespace=evil", []string{"No source of a package you may see is followed in evil."}, []string{"quay.io/evil"}},
		{"/ui/namespaces/team-a", []string{`<a href="/ui/sources?namespace=team-a">Sources of team-a</a>`}, nil},
	} {
		checkShows(t, h, tc.path, tc.want, tc.notWant)
	}

	// Without a tracker the page says so, and nothing links to it.
	plain := newUI(e, ui.Options{})
	if _, body := get(t, plain, "/ui/sources"); !strings.Contains(body, "This server follows no package sources.") {
		t.Errorf("the page of a server without sources:\n%s", body)
	}
	for _, path := range []string{"/", "/ui/namespaces/team-a"} {
		if _, body := get(t, plain, path); strings.Contains(body, "/ui/sources") {
			t.Errorf("%s links to the sources of a server that follows none", path)
		}
	}
}

func TestSourcesPageErrors(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		path   string
		tr     tracker
		status int
	}{
		{"/ui/sources?namespace=Team!", testTracker(), http.StatusBadRequest},
		{"/ui/sources?kind=git", testTracker(), http.StatusBadRequest},
		{"/ui/sources", tracker{err: errors.New("database at db.internal down")}, http.StatusInternalServerError},
	} {
		resp, body := get(t, newUI(e, ui.Options{Sources: tc.tr}), tc.path)
		if resp.StatusCode != tc.status || strings.Contains(body, "db.internal") {
			t.Errorf("%s: status %d, want %d:\n%s", tc.path, resp.StatusCode, tc.status, body)
		}
	}
}
