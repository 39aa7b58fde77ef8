package main

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/berth-registry/berth/catalog/apiv1"
)

// testUsages are a namespace at 99.99% of its quota, one without a quota,
// one with a quota that stores nothing and one over its quota.
var testUsages = apiv1.Usages{Namespaces: []apiv1.NamespaceUsage{
	{Namespace: "a", UsedBytes: 9999, LimitBytes: 10000, Blobs: 3, OpenUploads: 1},
	{Namespace: "b", UsedBytes: 5 << 20, Blobs: 12},
	{Namespace: "c", LimitBytes: 10 << 30},
	{Namespace: "d\x1b[2J", UsedBytes: 3 << 30, LimitBytes: 2 << 30, Blobs: 1 << 20, OpenUploads: 32},
}}

func TestUsageCmd(t *testing.T) {
	f := serveCatalog(t, map[string]any{
		"/usage":              testUsages,
		"/namespaces/b/usage": testUsages.Namespaces[1],
		"/namespaces/split/usage": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeAPIError(w, http.StatusNotImplemented, "NOT_IMPLEMENTED", "this server keeps no storage usage or quotas")
		}),
		"/namespaces/nobody/usage": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeAPIError(w, http.StatusNotFound, "NOT_FOUND", `namespace "nobody" has no usage to show`)
		}),
	})

	out := mustBerth(t, "usage", "--server", f.host)
	want := `NAMESPACE   USED      LIMIT      USE%     BLOBS     UPLOADS
a           9.8 KiB   9.8 KiB    99.9%    3         1
b           5.0 MiB   -          -        12        0
c           0 B       10.0 GiB   0.0%     0         0
d [2J       3.0 GiB   2.0 GiB    150.0%   1048576   32
`
	if out != want {
		t.Errorf("usage output:\n%s\nwant:\n%s", out, want)
	}

	out = mustBerth(t, "usage", "b", "--server", f.host)
	want = `NAMESPACE   USED      LIMIT   USE%   BLOBS   UPLOADS
b           5.0 MiB   -       -      12      0
`
	if out != want {
		t.Errorf("usage b output:\n%s\nwant:\n%s", out, want)
	}

	var all apiv1.Usages
	decode(t, mustBerth(t, "usage", "--server", f.host, "--format", "json"), &all)
	if !reflect.DeepEqual(all, testUsages) {
		t.Errorf("usage --format json = %+v, want %+v", all, testUsages)
	}
	var one apiv1.NamespaceUsage
	decode(t, mustBerth(t, "usage", "b", "--server", f.host, "--format", "json"), &one)
	if one != testUsages.Namespaces[1] {
		t.Errorf("usage b --format json = %+v", one)
	}
	wantReqs := []string{"/api/v1/usage", "/api/v1/namespaces/b/usage", "/api/v1/usage", "/api/v1/namespaces/b/usage"}
	if got := f.requests(); !reflect.DeepEqual(got, wantReqs) {
		t.Errorf("requests %q, want %q", got, wantReqs)
	}

	for _, tc := range []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"nobody"}, `usage of nobody: not found: namespace "nobody" has no usage to show`},
		{[]string{"split"}, "this server keeps no storage usage or quotas"},
		{[]string{"Team-A"}, `namespace "Team-A" must be lower case`},
		{[]string{"a", "b"}, "accepts at most 1 arg(s), received 2"},
		{[]string{"--format", "yaml"}, `want json or text, not "yaml"`},
	} {
		code, stdout, stderr := berth(t, append([]string{"usage", "--server", f.host}, tc.args...)...)
		if code != 1 || stdout != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("usage %q: exit %d\nstdout: %s\nstderr: %s\nwant 1 and %q", tc.args, code, stdout, stderr, tc.want)
		}
	}
}

func TestUsageCmdNothing(t *testing.T) {
	f := serveCatalog(t, map[string]any{"/usage": apiv1.Usages{Namespaces: []apiv1.NamespaceUsage{}}})
	code, stdout, stderr := berth(t, "usage", "--server", f.host)
	if code != 0 || stdout != "" || stderr != "no namespace you may pull from stores anything or has a quota\n" {
		t.Errorf("usage without namespaces: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}
