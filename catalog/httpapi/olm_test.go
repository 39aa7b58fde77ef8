package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/httpapi"
	"github.com/berth-registry/berth/olm"
)

// fakeOLM holds, per namespace, its packages' FBC documents as
// [package, schema, line] in package order, as the publisher streams them.
type fakeOLM map[string][][3]string

func (f fakeOLM) WriteFBC(_ context.Context, w io.Writer, ns string, allow func(string) bool, keep func(schema, pkg string) bool) error {
	docs, ok := f[ns]
	if !ok {
		return fmt.Errorf("namespace %s: %w", ns, olm.ErrNoCatalog)
	}
	for _, d := range docs {
		if allow(d[0]) && (keep == nil || keep(d[1], d[0])) {
			if _, err := io.WriteString(w, d[2]+"\n"); err != nil {
				return err
			}
		}
	}
	return nil
}

func newFakeOLM() fakeOLM {
	doc := func(pkg, schema, name string) [3]string {
		return [3]string{pkg, schema, fmt.Sprintf(`{"schema":%q,"name":%q}`, schema, name)}
	}
	return fakeOLM{"community": {
		doc("etcd", "olm.package", "etcd"), doc("etcd", "olm.channel", "alpha"), doc("etcd", "olm.bundle", "etcd.v1"),
		doc("secret", "olm.package", "secret"), doc("secret", "olm.bundle", "secret.v1"),
	}}
}

func olmHandler(o httpapi.OLM, auth catalog.Authorizer) http.Handler {
	return httpapi.New(httpapi.Options{Catalog: newFake(), Authorizer: auth, OLM: o, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

func TestOLMEndpoints(t *testing.T) {
	onlyEtcd := fakeAuth{access: catalog.Access{Pull: func(ns, name string) bool { return ns == "community" && name == "etcd" }}}
	for _, tc := range []struct {
		name, path string
		auth       catalog.Authorizer
		want       []string // the documents' names, in order
	}{
		{"all", "/api/v1/olm/community/all", nil, []string{"etcd", "alpha", "etcd.v1", "secret", "secret.v1"}},
		{"only the packages the caller may pull", "/api/v1/olm/community/all", onlyEtcd, []string{"etcd", "alpha", "etcd.v1"}},
		{"metas by schema", "/api/v1/olm/community/metas?schema=olm.bundle", nil, []string{"etcd.v1", "secret.v1"}},
		{"metas by package", "/api/v1/olm/community/metas?package=secret", nil, []string{"secret", "secret.v1"}},
		{"metas by both", "/api/v1/olm/community/metas?schema=olm.package&package=etcd", nil, []string{"etcd"}},
		{"metas of a package the caller may not pull", "/api/v1/olm/community/metas?package=secret", onlyEtcd, nil},
		{"metas with no filter", "/api/v1/olm/community/metas", nil, []string{"etcd", "alpha", "etcd.v1", "secret", "secret.v1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := serve(t, olmHandler(newFakeOLM(), tc.auth), "GET", tc.path, nil)
			if res.status != 200 || res.header.Get("Content-Type") != "application/jsonl" {
				t.Fatalf("%d %s: %s", res.status, res.header.Get("Content-Type"), res.body)
			}
			var got []string
			for _, line := range strings.Split(strings.TrimSuffix(string(res.body), "\n"), "\n") {
				if line == "" {
					continue
				}
				_, name, _ := strings.Cut(line, `"name":"`)
				got = append(got, strings.TrimSuffix(name, `"}`))
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("documents %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOLMEndpointErrors(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		olm        httpapi.OLM
		auth       catalog.Authorizer
		status     int
		code, says string
	}{
		{"namespace with no catalog", "/api/v1/olm/kudo/all", newFakeOLM(), nil, 404, "NOT_FOUND", `namespace "kudo" has no OLM catalog`},
		{"namespace the caller may pull nothing of", "/api/v1/olm/community/all", newFakeOLM(), fakeAuth{access: catalog.NamespaceAccess("kudo")}, 404, "NOT_FOUND", `namespace "community" has no OLM catalog`},
		{"bad namespace", "/api/v1/olm/Community!/all", newFakeOLM(), nil, 400, "INVALID", "namespace"},
		{"parameter on all", "/api/v1/olm/community/all?schema=olm.bundle", newFakeOLM(), nil, 400, "INVALID", "schema"},
		{"unknown parameter on metas", "/api/v1/olm/community/metas?name=etcd", newFakeOLM(), nil, 400, "INVALID", "name"},
		{"repeated parameter", "/api/v1/olm/community/metas?schema=a&schema=b", newFakeOLM(), nil, 400, "INVALID", "given 2 times"},
		{"refused", "/api/v1/olm/community/all", newFakeOLM(), fakeAuth{pullErr: fmt.Errorf("token expired: %w", catalog.ErrDenied)}, 403, "DENIED", "token expired"},
		{"split mode", "/api/v1/olm/community/all", nil, nil, 501, "NOT_IMPLEMENTED", "berth serve catalog"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := serve(t, olmHandler(tc.olm, tc.auth), "GET", tc.path, nil)
			e := res.apiError(t)
			if res.status != tc.status || e.Code != tc.code || !strings.Contains(e.Message+fmt.Sprint(e.Detail), tc.says) {
				t.Errorf("%d %s, want %d %s saying %q", res.status, res.body, tc.status, tc.code, tc.says)
			}
			if strings.Contains(string(res.body), "secret") {
				t.Errorf("the error names a package: %s", res.body)
			}
		})
	}
}
