package httpapi_test

import (
	"encoding/base64"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/pkgformat"
)

func cursorOf(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func TestMalformedParameters(t *testing.T) {
	const (
		pkgs = "/api/v1/packages"
		pkg  = "/api/v1/packages/kudo/kafka"
		ver  = pkg + "/versions/2.5.1_1.3.2"
	)
	for _, tc := range []struct {
		target, param, in string
	}{
		{pkgs + "?format=rpm", "format", "query"},
		{pkgs + "?format=KUDO", "format", "query"},
		{pkgs + "?sort=random", "sort", "query"},
		{pkgs + "?limit=abc", "limit", "query"},
		{pkgs + "?limit=0", "limit", "query"},
		{pkgs + "?limit=-1", "limit", "query"},
		{pkgs + "?limit=501", "limit", "query"},
		{pkgs + "?limit=1.5", "limit", "query"},
		{pkgs + "?limit=1&limit=2", "limit", "query"},
		{pkgs + "?cursor=!!!", "cursor", "query"},
		{pkgs + "?cursor=" + cursorOf("v1:-5"), "cursor", "query"},
		{pkgs + "?cursor=" + cursorOf("v1:007"), "cursor", "query"},
		{pkgs + "?cursor=" + cursorOf("v1:99999999999"), "cursor", "query"},
		{pkgs + "?cursor=" + cursorOf("v2:20"), "cursor", "query"},
		{pkgs + "?cursor=" + cursorOf("20"), "cursor", "query"},
		{pkgs + "?cursor=" + base64.URLEncoding.EncodeToString([]byte("v1:20")), "cursor", "query"}, // padded
		{pkgs + "?kubeVersion=banana", "kubeVersion", "query"},
		{pkgs + "?kubeVersion=1.x", "kubeVersion", "query"},
		{pkgs + "?verified=yes", "verified", "query"},
		{pkgs + "?verified=1", "verified", "query"},
		{pkgs + "?verified=TRUE", "verified", "query"},
		{pkgs + "?provides=/Kafka", "provides", "query"},
		{pkgs + "?provides=kafka.kudo.dev/", "provides", "query"},
		{pkgs + "?provides=kafka.kudo.dev/Kafka/v1", "provides", "query"},
		{pkgs + "?provides=Kafka_Cluster", "provides", "query"},
		{pkgs + "?provides=-bad.group", "provides", "query"},
		{pkgs + "?provides=kafka..dev", "provides", "query"},
		{pkgs + "?q=" + strings.Repeat("k", 257), "q", "query"},
		{pkgs + "?q=%FF%FE", "q", "query"},
		{pkgs + "?q=a%00b", "q", "query"},
		{pkgs + "?namespace=Bad_NS", "namespace", "query"},
		{pkgs + "?channel=%01", "channel", "query"},
		{pkgs + "?bogus=1", "bogus", "query"},
		{pkgs + "?Q=kafka", "Q", "query"},
		{"/api/v1/changes?since=-1", "since", "query"},
		{"/api/v1/changes?since=x", "since", "query"},
		{"/api/v1/changes?since=1e3", "since", "query"},
		{"/api/v1/changes?limit=100000", "limit", "query"},
		{"/api/v1/changes?cursor=abc", "cursor", "query"},
		{"/api/v1/artifacts?cursor=zz", "cursor", "query"},
		{"/api/v1/artifacts?limit=x", "limit", "query"},
		{"/api/v1/status?verbose=1", "verbose", "query"},
		{pkgs + "?limit=%zz", "", ""},
		{pkgs + "?limit=1;cursor=2", "", ""},
		{"/api/v1/openapi.yaml?format=json", "format", "query"},
		{pkg + "?versions=all", "versions", "query"},
		{pkg + "/upgrades", "from", "query"},
		{pkg + "/upgrades?channel=stable", "from", "query"},
		{pkg + "/upgrades?from=-1.0", "from", "query"},
		{pkg + "/upgrades?from=1.0.0&channel=%7F", "channel", "query"},
		{pkg + "/upgrades?from=1.0.0&to=2.0.0", "to", "query"},
		{ver + "?download=1", "download", "query"},
		{"/index.yaml?q=kafka", "q", "query"},
		{"/api/v1/packages/Kudo/kafka", "namespace", "path"},
		{"/api/v1/packages/kudo/Kafka", "name", "path"},
		{"/api/v1/packages/kudo/ka--fka", "name", "path"},
		{"/api/v1/packages/kudo/" + strings.Repeat("k", 129), "name", "path"},
		{pkg + "/versions/.1.0", "version", "path"},
		{pkg + "/versions/1.0.0%21", "version", "path"},
		{pkg + "/versions/" + strings.Repeat("1", 129), "version", "path"},
		{pkg + "/channels/%01/graph", "channel", "path"},
		{ver + "/files/a/../b.yaml", "path", "path"},
		{ver + "/files/a//b.yaml", "path", "path"},
		{ver + "/files/a/b/", "path", "path"},
		{ver + "/files/%2Fetc%2Fpasswd", "path", "path"},
		{"/UPPER/index.yaml", "namespace", "path"},
	} {
		t.Run(tc.target, func(t *testing.T) {
			f := newFake()
			res := serve(t, newHandler(f, nil, nil), "GET", tc.target, nil)
			if res.status != 400 {
				t.Fatalf("status %d, want 400: %s", res.status, res.body)
			}
			e := res.apiError(t)
			if e.Code != "INVALID" {
				t.Errorf("code %s, want INVALID", e.Code)
			}
			if tc.param == "" { // a malformed query string: no parameter to name
				return
			}
			if !strings.Contains(e.Message, `"`+tc.param+`"`) {
				t.Errorf("error %+v does not name %q", e, tc.param)
			}
			detail, _ := e.Detail.(map[string]any)
			if detail["parameter"] != tc.param || detail["in"] != tc.in {
				t.Errorf("detail %v, want parameter %q in %s", e.Detail, tc.param, tc.in)
			}
			if calls := f.called(); len(calls) != 0 {
				t.Errorf("the catalog was asked %v", calls)
			}
		})
	}
}

func TestSearchQuery(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		query string
		want  catalog.Query
	}{
		{"", catalog.Query{Sort: catalog.SortRelevance, Limit: catalog.DefaultLimit}},
		{"q=&format=&sort=&limit=&cursor=&verified=", catalog.Query{Sort: catalog.SortRelevance, Limit: catalog.DefaultLimit}},
		{"q=kafka+operator&namespace=kudo&format=kudo&channel=stable&sort=updated&limit=500&cursor=" + cursorOf("v1:40"),
			catalog.Query{Text: "kafka operator", Namespace: "kudo", Format: pkgformat.KUDO, Channel: "stable", Sort: catalog.SortUpdated, Limit: 500, Offset: 40}},
		{"provides=kafka.kudo.dev/Kafka", catalog.Query{Provides: catalog.APIFilter{Group: "kafka.kudo.dev", Kind: "Kafka"}, Sort: catalog.SortRelevance, Limit: 20}},
		{"provides=kafka.kudo.dev", catalog.Query{Provides: catalog.APIFilter{Group: "kafka.kudo.dev"}, Sort: catalog.SortRelevance, Limit: 20}},
		{"provides=Kafka", catalog.Query{Provides: catalog.APIFilter{Kind: "Kafka"}, Sort: catalog.SortRelevance, Limit: 20}},
		{"provides=apps/Deployment", catalog.Query{Provides: catalog.APIFilter{Group: "apps", Kind: "Deployment"}, Sort: catalog.SortRelevance, Limit: 20}},
		{"kubeVersion=v1.29.3", catalog.Query{KubeVersion: mustKubeKey(t, "1.29.3"), Sort: catalog.SortRelevance, Limit: 20}},
		{"kubeVersion=1.29", catalog.Query{KubeVersion: mustKubeKey(t, "1.29.0"), Sort: catalog.SortRelevance, Limit: 20}},
		{"verified=true&sort=name", catalog.Query{Verified: &yes, Sort: catalog.SortName, Limit: 20}},
		{"verified=false&format=olm", catalog.Query{Verified: &no, Format: pkgformat.OLM, Sort: catalog.SortRelevance, Limit: 20}},
		{"q=" + url.QueryEscape(strings.Repeat("é", 128)), catalog.Query{Text: strings.Repeat("é", 128), Sort: catalog.SortRelevance, Limit: 20}},
	} {
		t.Run(tc.query, func(t *testing.T) {
			f := newFake()
			res := serve(t, newHandler(f, nil, nil), "GET", "/api/v1/packages?"+tc.query, nil)
			if res.status != 200 || len(f.queries) != 1 {
				t.Fatalf("status %d, queries %v: %s", res.status, f.queries, res.body)
			}
			got := f.queries[0]
			tc.want.Access = catalog.Access{All: true}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("query\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func mustKubeKey(t *testing.T, v string) string {
	t.Helper()
	k, ok := catalog.KubeVersionKey(v)
	if !ok {
		t.Fatalf("KubeVersionKey(%q) failed", v)
	}
	return k
}

// TestParameterErrorsNameTheParameter: a bad namespace or name is reported
// as what it is, by the parameter it came in, with code INVALID and status 400.
func TestParameterErrorsNameTheParameter(t *testing.T) {
	const rule = `must be lowercase letters and digits separated by single '.', '_' or '-'`
	long := strings.Repeat("k", 129)
	for _, tc := range []struct {
		target, message string
	}{
		{"/api/v1/packages?namespace=../../etc", `query parameter "namespace": namespace "../../etc" ` + rule},
		{"/api/v1/packages?namespace=Kudo", `query parameter "namespace": namespace "Kudo" ` + rule},
		{"/api/v1/packages?namespace=" + long, `query parameter "namespace": namespace "` + long + `" is longer than 128 bytes`},
		{"/api/v1/packages/..%2F..%2Fetc/kafka", `path parameter "namespace": namespace "../../etc" ` + rule},
		{"/api/v1/packages/Kudo/kafka/upgrades?from=1.0.0", `path parameter "namespace": namespace "Kudo" ` + rule},
		{"/api/v1/packages/kudo/..%2Fetc", `path parameter "name": package name "../etc" ` + rule},
		{"/api/v1/packages/kudo/Kafka/versions/1.0.0", `path parameter "name": package name "Kafka" ` + rule},
		{"/UPPER/index.yaml", `path parameter "namespace": namespace "UPPER" ` + rule},
	} {
		t.Run(tc.target, func(t *testing.T) {
			res := serve(t, newHandler(newFake(), nil, nil), "GET", tc.target, nil)
			e := res.apiError(t)
			if res.status != 400 || e.Code != "INVALID" || e.Message != tc.message {
				t.Errorf("%d %s %q\nwant 400 INVALID %q", res.status, e.Code, e.Message, tc.message)
			}
		})
	}
}
