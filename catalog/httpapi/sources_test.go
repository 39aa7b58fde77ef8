package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/httpapi"
)

// fakeTracker tracks fixed sources and records the checks asked.
type fakeTracker struct {
	sources []apiv1.Source
	checked []string
	err     error
}

const testPEM = "-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----\n"

func (f *fakeTracker) Status(context.Context) ([]apiv1.Source, error) { return f.sources, f.err }

func (f *fakeTracker) Check(_ context.Context, ns, pkg string) error {
	for _, s := range f.sources {
		if s.Namespace == ns && s.Package == pkg {
			f.checked = append(f.checked, ns+"/"+pkg)
			return f.err
		}
	}
	return fmt.Errorf("no source publishes %s/%s: %w", ns, pkg, fs.ErrNotExist)
}

func (f *fakeTracker) PublicKey() []byte { return []byte(testPEM) }

func newTracker() *fakeTracker {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	return &fakeTracker{sources: []apiv1.Source{
		{Namespace: "a", Package: "op", Kind: "git", URL: "https://github.com/org/op", Ref: "v*", Interval: "5m0s", LastCheck: &t0,
			Revision: "0123456789abcdef", Refs: []apiv1.SourceRef{{Ref: "v1.0.0", Revision: "0123456789abcdef", Version: "1.0.0", Digest: "sha256:" + strings.Repeat("1", 64)}},
			LastPublished: &apiv1.SourceVersion{Version: "1.0.0", Digest: "sha256:" + strings.Repeat("1", 64), Ref: "v1.0.0", Revision: "0123456789abcdef", Time: t0}},
		{Namespace: "a", Package: "tar", Kind: "http", URL: "https://example.com/op.tgz", Interval: "1h0m0s",
			LastError: &apiv1.SourceError{Time: t0, Reason: apiv1.SourceReasonLimit, Message: "more than 256MiB"}},
		{Namespace: "secret", Package: "op", Kind: "image", URL: "quay.io/org/op:latest", Interval: "5m0s"},
	}}
}

func newSourcesHandler(tr httpapi.Sources, auth catalog.Authorizer, webhook http.Handler) http.Handler {
	return httpapi.New(httpapi.Options{Catalog: newFake(), Authorizer: auth, Logger: slog.New(slog.DiscardHandler), Sources: tr, SourcesWebhook: webhook})
}

func TestListSources(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tr     httpapi.Sources
		auth   catalog.Authorizer
		target string
		want   []string
	}{
		{"everything", newTracker(), nil, "/api/v1/sources", []string{"a/op", "a/tar", "secret/op"}},
		{"one namespace", newTracker(), nil, "/api/v1/sources?namespace=secret", []string{"secret/op"}},
		{"what the caller may pull", newTracker(), fakeAuth{access: catalog.NamespaceAccess("a")}, "/api/v1/sources", []string{"a/op", "a/tar"}},
		{"a namespace hidden", newTracker(), fakeAuth{access: catalog.NamespaceAccess("a")}, "/api/v1/sources?namespace=secret", []string{}},
		{"one package", newTracker(), fakeAuth{access: catalog.Access{Pull: func(ns, name string) bool { return name == "tar" }}}, "/api/v1/sources", []string{"a/tar"}},
		{"no tracker", nil, nil, "/api/v1/sources", []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := serve(t, newSourcesHandler(tc.tr, tc.auth, nil), "GET", tc.target, nil)
			if res.status != http.StatusOK {
				t.Fatalf("status %d: %s", res.status, res.body)
			}
			var got apiv1.Sources
			res.decode(t, &got)
			names := []string{}
			for _, s := range got.Sources {
				names = append(names, s.Namespace+"/"+s.Package)
			}
			if !slices.Equal(names, tc.want) {
				t.Errorf("sources %v, want %v", names, tc.want)
			}
			if len(tc.want) == 0 && !strings.Contains(string(res.body), `"sources":[]`) {
				t.Errorf("no sources is not written []: %s", res.body)
			}
		})
	}
}

func TestSourcesErrors(t *testing.T) {
	failing := newTracker()
	failing.err = errors.New("database at 10.1.2.3 is down")
	hidden := fakeAuth{access: catalog.NamespaceAccess("a"), pushErr: fmt.Errorf("package secret/op: %w", catalog.ErrNotFound)}
	reader := fakeAuth{access: catalog.NamespaceAccess("a"), pushErr: fmt.Errorf("push on a/op is not allowed: %w", catalog.ErrDenied)}
	for _, tc := range []struct {
		name           string
		tr             httpapi.Sources
		auth           catalog.Authorizer
		method, target string
		status         int
		message        string
	}{
		{"bad namespace filter", newTracker(), nil, "GET", "/api/v1/sources?namespace=A!", 400, `"namespace"`},
		{"unknown parameter", newTracker(), nil, "GET", "/api/v1/sources?kind=git", 400, "unknown parameter"},
		{"status fails", failing, nil, "GET", "/api/v1/sources", 500, "internal error"},
		{"check an unknown source", newTracker(), nil, "POST", "/api/v1/namespaces/a/sources/nope/check", 404, "no source publishes a/nope"},
		{"check a hidden source", newTracker(), hidden, "POST", "/api/v1/namespaces/secret/sources/op/check", 404, "secret/op"},
		{"check without push", newTracker(), reader, "POST", "/api/v1/namespaces/a/sources/op/check", 403, "not allowed"},
		{"check fails", failing, nil, "POST", "/api/v1/namespaces/a/sources/op/check", 500, "internal error"},
		{"check a bad name", newTracker(), nil, "POST", "/api/v1/namespaces/a/sources/Op!/check", 400, `"name"`},
		{"check without a tracker", nil, nil, "POST", "/api/v1/namespaces/a/sources/op/check", 404, "tracks no package sources"},
		{"key without a tracker", nil, nil, "GET", "/api/v1/sources/key", 404, "tracks no package sources"},
		{"webhook without one", nil, nil, "POST", "/api/v1/sources/webhook", 404, "tracks no package sources"},
		{"list by POST", newTracker(), nil, "POST", "/api/v1/sources", 405, "allowed: GET"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := serve(t, newSourcesHandler(tc.tr, tc.auth, nil), tc.method, tc.target, nil)
			if res.status != tc.status {
				t.Fatalf("status %d, want %d: %s", res.status, tc.status, res.body)
			}
			if !strings.Contains(string(res.body), tc.message) {
				t.Errorf("body %s, want it to say %s", res.body, tc.message)
			}
			if strings.Contains(string(res.body), "10.1.2.3") {
				t.Errorf("the answer tells an internal error: %s", res.body)
			}
		})
	}
}

func TestCheckSource(t *testing.T) {
	tr := newTracker()
	res := serve(t, newSourcesHandler(tr, fakeAuth{access: catalog.NamespaceAccess("a")}, nil), "POST", "/api/v1/namespaces/a/sources/tar/check", nil)
	if res.status != http.StatusAccepted {
		t.Fatalf("status %d: %s", res.status, res.body)
	}
	var got apiv1.SourceCheck
	res.decode(t, &got)
	if got != (apiv1.SourceCheck{Namespace: "a", Package: "tar"}) || !slices.Equal(tr.checked, []string{"a/tar"}) {
		t.Errorf("answer %+v, checked %v", got, tr.checked)
	}
}

func TestSourcesKey(t *testing.T) {
	// The key is public: a caller who may pull nothing reads it.
	res := serve(t, newSourcesHandler(newTracker(), fakeAuth{}, nil), "GET", "/api/v1/sources/key", nil)
	if res.status != http.StatusOK || res.header.Get("Content-Type") != "application/x-pem-file" || string(res.body) != testPEM {
		t.Errorf("status %d, type %q: %s", res.status, res.header.Get("Content-Type"), res.body)
	}
}

func TestSourcesWebhookMounted(t *testing.T) {
	hook := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, `{"checked":1}`)
	})
	// The webhook is reached by a caller who may pull nothing.
	res := serve(t, newSourcesHandler(newTracker(), fakeAuth{}, hook), "POST", "/api/v1/sources/webhook", []byte(`{}`), "Content-Type", "application/json")
	if res.status != http.StatusAccepted || string(res.body) != `{"checked":1}` {
		t.Errorf("status %d: %s", res.status, res.body)
	}
}

// TestChangesWithSourceEvents: the feed writes source events with their
// reason, as the document describes them.
func TestChangesWithSourceEvents(t *testing.T) {
	f := newFake()
	f.changes = append(f.changes,
		apiv1.Change{Seq: 4, Action: apiv1.ActionSource, Namespace: "kudo", Name: "kafka", Version: "1.1.0", Digest: "sha256:" + strings.Repeat("3", 64), Status: apiv1.SourcePublished, Time: t0},
		apiv1.Change{Seq: 5, Action: apiv1.ActionSource, Namespace: "kudo", Name: "kafka", Status: apiv1.SourceFailed, Reason: apiv1.SourceReasonRefused, Time: t0})
	res := serve(t, newHandler(f, nil, nil), "GET", "/api/v1/changes?since=3", nil)
	var got apiv1.Changes
	res.decode(t, &got)
	if len(got.Changes) != 2 || got.Changes[1].Reason != apiv1.SourceReasonRefused || got.Changes[0].Action != apiv1.ActionSource {
		t.Errorf("changes %+v", got.Changes)
	}
}
