package main

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/catalog/apiv1"
)

// testSources are a tag-pattern git source that published, an http source
// whose last fetch failed, an image source never checked, and a source
// whose fields hold control characters.
func testSources() apiv1.Sources {
	t0 := time.Date(2026, 11, 27, 10, 30, 0, 0, time.UTC)
	return apiv1.Sources{Sources: []apiv1.Source{
		{Namespace: "a", Package: "etcd", Kind: "git", URL: "https://github.com/org/etcd", Ref: "v*", Interval: "5m0s", LastCheck: &t0,
			Revision: "0123456789abcdef0123", LastPublished: &apiv1.SourceVersion{Version: "1.2.0", Digest: "sha256:" + strings.Repeat("1", 64), Revision: "0123456789abcdef0123", Time: t0}},
		{Namespace: "a", Package: "tar", Kind: "http", URL: "https://example.com/op.tgz", Interval: "1h0m0s", LastCheck: &t0, Revision: `"5f2a-9"`,
			LastError: &apiv1.SourceError{Time: t0, Reason: apiv1.SourceReasonLimit, Message: "the tarball unpacks to more than 256MiB"}},
		{Namespace: "b", Package: "img", Kind: "image", URL: "quay.io/org/img:latest", Interval: "5m0s", Revision: "sha256:" + strings.Repeat("e", 64)},
		{Namespace: "b", Package: "evil", Kind: "git", URL: "https://x.example/\x1b[2Jr", Interval: "5m0s",
			LastError: &apiv1.SourceError{Time: t0, Reason: apiv1.SourceReasonInvalid, Message: "bad\nfile\u009b2J"}},
	}}
}

func TestSourcesCmd(t *testing.T) {
	all := testSources()
	f := serveCatalog(t, map[string]any{
		"/sources": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			res := apiv1.Sources{Sources: []apiv1.Source{}}
			for _, s := range all.Sources {
				if ns := r.URL.Query().Get("namespace"); ns == "" || s.Namespace == ns {
					res.Sources = append(res.Sources, s)
				}
			}
			writeDoc(w, http.StatusOK, res)
		}),
	})
	out := mustBerth(t, "sources", "--server", f.host)
	want := `NAMESPACE/PACKAGE   KIND    URL                           REF   LAST CHECK             REVISION              LAST VERSION   ERROR
a/etcd              git     https://github.com/org/etcd   v*    2026-11-27T10:30:00Z   0123456789ab          1.2.0          -
a/tar               http    https://example.com/op.tgz    -     2026-11-27T10:30:00Z   "5f2a-9"              -              limit: the tarball unpacks to more than 256MiB
b/img               image   quay.io/org/img:latest        -     -                      sha256:eeeeeeeeeeee   -              -
b/evil              git     https://x.example/ [2Jr       -     -                      -                     -              invalid: bad file 2J
`
	if out != want {
		t.Errorf("sources output:\n%s\nwant:\n%s", out, want)
	}
	var got apiv1.Sources
	decode(t, mustBerth(t, "sources", "a", "--server", f.host, "--format", "json"), &got)
	if want := (apiv1.Sources{Sources: all.Sources[:2]}); !reflect.DeepEqual(got, want) {
		t.Errorf("sources a --format json = %+v, want %+v", got, want)
	}
	wantReqs := []string{"/api/v1/sources", "/api/v1/sources?namespace=a"}
	if got := f.requests(); !reflect.DeepEqual(got, wantReqs) {
		t.Errorf("requests %q, want %q", got, wantReqs)
	}
	code, stdout, stderr := berth(t, "sources", "nobody", "--server", f.host)
	if code != 0 || stdout != "" || stderr != "no source of a package you may pull is followed\n" {
		t.Errorf("sources of an empty namespace: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}

func TestSourcesCheckCmd(t *testing.T) {
	f := serveCatalog(t, map[string]any{
		"/namespaces/a/sources/etcd/check": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost {
				writeAPIError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "POST only")
				return
			}
			writeDoc(w, http.StatusAccepted, apiv1.SourceCheck{Namespace: "a", Package: "etcd"})
		}),
		"/namespaces/a/sources/locked/check": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeAPIError(w, http.StatusForbidden, "DENIED", "push on a/locked is not allowed")
		}),
	})
	out := mustBerth(t, "sources", "check", "a/etcd", "--server", f.host)
	if out != "Asked for a check of the source of a/etcd; berth sources a shows its outcome.\n" {
		t.Errorf("sources check output: %q", out)
	}
	var got apiv1.SourceCheck
	decode(t, mustBerth(t, "sources", "check", "a/etcd", "--server", f.host, "--format", "json"), &got)
	if got != (apiv1.SourceCheck{Namespace: "a", Package: "etcd"}) {
		t.Errorf("sources check --format json = %+v", got)
	}
	for _, tc := range []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"a/nope"}, "not found: no such thing"},
		{[]string{"a/locked"}, "push on a/locked is not allowed"},
		{[]string{"a/etcd:1.0.0"}, "a version is not allowed here"},
		{[]string{"etcd"}, "missing namespace"},
		{[]string{"A/etcd"}, "must be lower case"},
		{[]string{}, "accepts 1 arg(s), received 0"},
	} {
		code, stdout, stderr := berth(t, append([]string{"sources", "check", "--server", f.host}, tc.args...)...)
		if code != 1 || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("sources check %q: exit %d\nstdout: %s\nstderr: %s\nwant 1 and %q", tc.args, code, stdout, stderr, tc.want)
		}
	}
}

func TestSourcesKeyCmd(t *testing.T) {
	const key = "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----\n"
	f := serveCatalog(t, map[string]any{
		"/sources/key": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/x-pem-file")
			w.Write([]byte(key))
		}),
	})
	if out := mustBerth(t, "sources", "key", "--server", f.host); out != key {
		t.Errorf("sources key output:\n%s\nwant:\n%s", out, key)
	}
	bad := serveCatalog(t, map[string]any{
		"/sources/key": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<html>\x1b[2J</html>"))
		}),
	})
	for _, tc := range []struct {
		host, want string
	}{
		{bad.host, "not a PEM public key"},
		{serveCatalog(t, map[string]any{}).host, "not found"},
	} {
		code, stdout, stderr := berth(t, "sources", "key", "--server", tc.host)
		if code != 1 || stdout != "" || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "\x1b") {
			t.Errorf("sources key: exit %d\nstdout: %s\nstderr: %q\nwant 1 and %q", code, stdout, stderr, tc.want)
		}
	}
}

// writeDoc writes v as a catalog API document with status.
func writeDoc(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", apiv1.MediaTypeJSON)
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
