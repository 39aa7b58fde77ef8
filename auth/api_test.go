package auth_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/catalog/apiv1"
)

// whoami answers with the subject API put in the context.
var whoami = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Write([]byte(auth.IdentityFrom(r.Context()).Subject))
})

func TestAPI(t *testing.T) {
	var audit bytes.Buffer
	h := auth.API(auth.APIOptions{Authenticator: fakeAuthenticator{}, Policy: testPolicy(t), Audit: auth.NewAuditor(&audit)})(whoami)
	for _, tc := range []struct {
		subject    string
		status     int
		body       string // the subject, or the error code
		header, is string
	}{
		{"", 200, "anonymous", "", ""},
		{"alice", 200, "user:alice", "", ""},
		{"bad", 401, "UNAUTHORIZED", "Www-Authenticate", `Basic realm="berth"`},
		{"flood", 429, "TOO_MANY_REQUESTS", "Retry-After", "2"},
		{"broken", 500, "INTERNAL", "", ""},
	} {
		res := do(h, "GET", "/api/v1/packages", tc.subject)
		if res.status != tc.status || tc.header != "" && res.header.Get(tc.header) != tc.is {
			t.Errorf("%q: %d %v, want %d and %s: %s", tc.subject, res.status, res.header, tc.status, tc.header, tc.is)
		}
		if tc.status == 200 {
			if res.body != tc.body {
				t.Errorf("%q: identity %q, want %q", tc.subject, res.body, tc.body)
			}
			continue
		}
		var errs apiv1.Errors
		if err := json.Unmarshal([]byte(res.body), &errs); err != nil || len(errs.Errors) != 1 || errs.Errors[0].Code != tc.body {
			t.Errorf("%q: body %s, want one error %s", tc.subject, res.body, tc.body)
		}
		if strings.Contains(res.body, "/etc/secret") || strings.Contains(res.body, "mallory") {
			t.Errorf("%q: the error tells the cause: %s", tc.subject, res.body)
		}
	}
	if n := strings.Count(audit.String(), `"action":"login","resource":"/api/v1/packages","result":"failed"`); n != 2 {
		t.Errorf("%d failed logins audited, want 2:\n%s", n, audit.String())
	}
	if res := do(auth.API(auth.APIOptions{})(whoami), "GET", "/", "bad"); res.status != 200 || res.body != "anonymous" {
		t.Error("with no policy, API authenticated")
	}
}

func TestMetricsGate(t *testing.T) {
	p := testPolicy(t)
	h := auth.API(auth.APIOptions{Authenticator: fakeAuthenticator{}, Policy: p})(auth.MetricsGate(p)(whoami))
	for _, tc := range []struct {
		subject string
		status  int
	}{
		{"", 401}, {"alice", 403}, {"root", 200},
	} {
		res := do(h, "GET", "/metrics", tc.subject)
		if res.status != tc.status {
			t.Errorf("%q: %d %s, want %d", tc.subject, res.status, res.body, tc.status)
		}
		if (tc.status == 401) != (res.header.Get("WWW-Authenticate") == auth.BasicChallenge) {
			t.Errorf("%q: challenge %q", tc.subject, res.header.Get("WWW-Authenticate"))
		}
	}
	if res := do(auth.MetricsGate(nil)(whoami), "GET", "/metrics", ""); res.status != 200 {
		t.Errorf("with no policy: %d", res.status)
	}
}
