package e2e

import (
	"bytes"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-registry/berth/internal/rawhttp"
)

// exchange sends one request to s over a connection of its own.
func exchange(t *testing.T, s *server, method, target string) (resp *http.Response, body, after []byte) {
	t.Helper()
	resp, body, after, err := rawhttp.Exchange(s.addr, method, target)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body, after
}

// namesNoServerPath fails the test when body names the server's data
// directory or the temporary directory it lies in.
func namesNoServerPath(t *testing.T, s *server, what string, body []byte) {
	t.Helper()
	for _, p := range []string{s.data, filepath.Dir(s.data)} {
		if bytes.Contains(body, []byte(p)) {
			t.Errorf("%s names the server's path %s: %s", what, p, body)
		}
	}
}

// TestHeadAnswersLikeGetOnEveryRoute sends GET and then HEAD to every GET
// route of a real berth serve: HEAD answers the same status and headers
// (Content-Type, ETag, Content-Length...) and sends no body.
func TestHeadAnswersLikeGetOnEveryRoute(t *testing.T) {
	s := startServer(t, "")
	pushFixtures(t, s)
	const kafka = "/api/v1/packages/kudo/kafka"
	for _, target := range []string{
		"/healthz",
		"/readyz",
		"/metrics",
		"/index.yaml",
		"/kudo/index.yaml",
		"/api/v1/openapi.yaml",
		"/api/v1/packages?q=kafka",
		kafka,
		kafka + "/versions/2.5.1_1.3.2",
		kafka + "/versions/2.5.1_1.3.2/files/operator.yaml",
		"/api/v1/packages/community/etcd/channels/alpha/graph",
		"/api/v1/packages/community/etcd/upgrades?from=0.9.2",
		"/api/v1/changes?since=0",
		"/api/v1/artifacts",
		"/api/v1/status",
		kafka + "/versions/9.9.9",
		"/api/v1/packages?limit=0",
	} {
		t.Run(target, func(t *testing.T) {
			get, getBody, _ := exchange(t, s, http.MethodGet, target)
			head, headBody, after := exchange(t, s, http.MethodHead, target)
			if head.StatusCode != get.StatusCode || get.StatusCode == http.StatusMethodNotAllowed {
				t.Fatalf("HEAD %d, GET %d", head.StatusCode, get.StatusCode)
			}
			if len(getBody) == 0 {
				t.Fatal("GET has no body to leave out")
			}
			if len(headBody) != 0 || len(after) != 0 {
				t.Errorf("HEAD sent a body: %q", append(headBody, after...))
			}
			g, h := get.Header.Clone(), head.Header.Clone()
			for _, k := range []string{"Date", "X-Request-Id"} {
				g.Del(k)
				h.Del(k)
			}
			if !maps.EqualFunc(g, h, slices.Equal) {
				t.Errorf("headers differ\n GET %v\nHEAD %v", g, h)
			}
		})
	}
}

// TestErrorsNameNoServerPath sends malformed requests to the registry and the
// catalog API of a server with packages: each is a client error, and no
// answer names a path of the server's filesystem. distribution answered
// last=%00 with a 500 whose detail held the data directory.
func TestErrorsNameNoServerPath(t *testing.T) {
	s := startServer(t, "")
	pushFixtures(t, s)
	const tags = "/v2/kudo/kafka/tags/list"
	for _, tc := range []struct {
		method, target string
		status         int
		code           string // contained in the body
	}{
		{"GET", "/v2/_catalog?last=%00", 400, `"PAGINATION_LAST_INVALID"`},
		{"GET", tags + "?last=%00", 400, `"PAGINATION_LAST_INVALID"`},
		{"GET", "/v2/_catalog?last=..", 400, `"PAGINATION_LAST_INVALID"`},
		{"GET", tags + "?last=../../../etc", 400, `"PAGINATION_LAST_INVALID"`},
		{"GET", tags + "?last=%1B%5B2J", 400, `"PAGINATION_LAST_INVALID"`},
		{"GET", "/v2/_catalog?last=" + strings.Repeat("a", 300), 400, `"PAGINATION_LAST_INVALID"`},
		{"GET", "/v2/_catalog?n=-1", 400, `"PAGINATION_NUMBER_INVALID"`},
		{"GET", tags + "?n=abc", 400, `"PAGINATION_NUMBER_INVALID"`},
		{"GET", tags + "?n=99999999999999999999", 400, `"PAGINATION_NUMBER_INVALID"`},
		{"GET", "/v2/kudo/kafka/manifests/..%2F..%2Fetc", 301, ""}, // distribution's router cleans the path
		{"GET", "/v2/kudo/kafka/manifests/sha256:abc", 400, `"DIGEST_INVALID"`},
		{"GET", "/v2/kudo/kafka/blobs/sha256:" + strings.Repeat("0", 64), 404, `"BLOB_UNKNOWN"`},
		{"GET", "/v2/kudo/kafka/blobs/uploads/not-an-upload", 404, `"BLOB_UPLOAD_UNKNOWN"`},
		{"GET", "/v2/kudo/kafka/referrers/sha256:nothex", 400, `"DIGEST_INVALID"`},
		{"GET", "/v2/kudo/Kafka/referrers/sha256:" + strings.Repeat("0", 64), 400, `"NAME_INVALID"`},
		{"GET", "/v2/no/such/tags/list", 404, `"NAME_UNKNOWN"`},
		{"PUT", "/v2/kudo/kafka/manifests/x", 400, `"MANIFEST_INVALID"`},
		{"GET", "/api/v1/packages?q=a%00b", 400, `"INVALID"`},
		{"GET", "/api/v1/packages?namespace=../../etc", 400, `"INVALID"`},
		{"GET", "/api/v1/packages/kudo/kafka/versions/2.5.1_1.3.2/files/..%2F..%2Fetc%2Fpasswd", 400, `"INVALID"`},
		{"GET", "/api/v1/packages/kudo/kafka/versions/2.5.1_1.3.2/files/no/such.yaml", 404, `"NOT_FOUND"`},
		{"GET", "/%00/index.yaml", 400, `"INVALID"`},
		{"PUT", "/metrics", 405, `"METHOD_NOT_ALLOWED"`},
	} {
		t.Run(tc.method+" "+tc.target, func(t *testing.T) {
			resp, body, _ := exchange(t, s, tc.method, tc.target)
			namesNoServerPath(t, s, "the answer", body)
			if resp.StatusCode != tc.status || !bytes.Contains(body, []byte(tc.code)) {
				t.Errorf("%d %s, want %d with %s", resp.StatusCode, body, tc.status, tc.code)
			}
		})
	}
}
