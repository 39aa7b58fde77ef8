package auth_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/auth/robotdb"
	"github.com/berth-registry/berth/catalog/apiv1"
)

var now = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// robotsAPI serves the robots API of a fresh store under testPolicy, behind
// auth.API, with the clock at now; audit collects the audit events.
func robotsAPI(t *testing.T, audit *bytes.Buffer) (http.Handler, *robotdb.Store) {
	t.Helper()
	store, err := robotdb.Open(t.Context(), filepath.Join(t.TempDir(), "auth.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	p := testPolicy(t)
	h := auth.RobotsHandler(auth.RobotsOptions{
		Store: store, Policy: p, MaxExpiry: 90 * 24 * time.Hour, Audit: auth.NewAuditor(audit),
		Now: func() time.Time { return now },
	})
	return auth.API(auth.APIOptions{Authenticator: fakeAuthenticator{}, Policy: p})(h), store
}

func send(h http.Handler, method, target, subject, body string) exchange {
	req := httptest.NewRequest(method, "http://berth.example"+target, strings.NewReader(body))
	if subject != "" {
		req.Header.Set("Authorization", "Bearer "+subject)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return exchange{rec.Code, rec.Result().Header, rec.Body.String()}
}

const ciRobot = `{"namespace":"a","name":"ci","description":"CI","scopes":[{"repositories":["a/*"],"actions":["pull","push"]}],"expiresIn":"720h"}`

func TestRobotsLifecycle(t *testing.T) {
	var audit bytes.Buffer
	h, store := robotsAPI(t, &audit)
	res := send(h, "POST", "/api/v1/robots", "alice", ciRobot)
	if res.status != http.StatusCreated {
		t.Fatalf("create: %d %s", res.status, res.body)
	}
	var created auth.RobotCreated
	if err := json.Unmarshal([]byte(res.body), &created); err != nil {
		t.Fatal(err)
	}
	if created.Username != "robot+a+ci" || !strings.HasPrefix(created.Secret, "berth_") || len(created.Secret) != len("berth_")+43 {
		t.Errorf("created %+v", created)
	}
	if !created.Robot.ExpiresAt.Equal(now.Add(720*time.Hour)) || created.Robot.CreatedBy != "user:alice" {
		t.Errorf("robot %+v", created.Robot)
	}
	stored, err := store.Get(t.Context(), "a", "ci")
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256([]byte(created.Secret)); !bytes.Equal(stored.SecretHash, sum[:]) {
		t.Error("the store does not hold the secret's SHA-256")
	}
	if strings.Contains(send(h, "GET", "/api/v1/robots/a/ci", "alice", "").body, created.Secret) {
		t.Error("the secret is shown again")
	}
	if res := send(h, "POST", "/api/v1/robots", "alice", ciRobot); res.status != http.StatusConflict || !strings.Contains(res.body, `"field":"name"`) {
		t.Errorf("duplicate: %d %s", res.status, res.body)
	}
	expiring := strings.Replace(strings.Replace(ciRobot, `"ci"`, `"old"`, 1), `"expiresIn":"720h"`, `"expiresAt":"2030-01-02T04:00:00Z"`, 1)
	if res := send(h, "POST", "/api/v1/robots", "root", expiring); res.status != http.StatusCreated {
		t.Fatalf("create with expiresAt: %d %s", res.status, res.body)
	}
	if res := send(h, "DELETE", "/api/v1/robots/a/ci", "alice", ""); res.status != http.StatusNoContent {
		t.Errorf("revoke: %d %s", res.status, res.body)
	}
	var list auth.RobotList
	res = send(h, "GET", "/api/v1/robots?namespace=a", "alice", "")
	if err := json.Unmarshal([]byte(res.body), &list); err != nil || len(list.Robots) != 2 {
		t.Fatalf("list: %d %s", res.status, res.body)
	}
	if list.Robots[0].Name != "ci" || !list.Robots[0].RevokedAt.Equal(now) || list.Robots[1].Name != "old" || list.Robots[1].Active(now.Add(time.Hour)) == nil {
		t.Errorf("list %+v: want ci revoked and old (expired an hour later) listed", list.Robots)
	}
	for _, want := range []string{`"action":"robot.create","resource":"robot+a+ci","result":"ok"`, `"action":"robot.revoke","resource":"robot+a+ci","result":"ok"`} {
		if !strings.Contains(audit.String(), want) {
			t.Errorf("audit lacks %s:\n%s", want, audit.String())
		}
	}
}

func TestRobotsAccess(t *testing.T) {
	var audit bytes.Buffer
	h, _ := robotsAPI(t, &audit)
	for _, body := range []string{ciRobot, strings.NewReplacer(`"a"`, `"b"`, `a/*`, `b/*`).Replace(ciRobot)} {
		if res := send(h, "POST", "/api/v1/robots", "root", body); res.status != http.StatusCreated {
			t.Fatalf("create: %d %s", res.status, res.body)
		}
	}
	for _, tc := range []struct {
		method, target, subject string
		status                  int
		robots                  string // the robots a list shows
	}{
		{"GET", "/api/v1/robots", "root", 200, "a/ci b/ci"},
		{"GET", "/api/v1/robots", "alice", 200, "a/ci"},
		{"GET", "/api/v1/robots", "reader", 200, ""},
		{"GET", "/api/v1/robots", "", 200, ""},
		{"GET", "/api/v1/robots?namespace=b", "alice", 200, ""}, // alice may pull nothing in b: b looks empty
		{"GET", "/api/v1/robots?namespace=a", "reader", 403, ""},
		{"GET", "/api/v1/robots/b/ci", "alice", 404, ""},
		{"GET", "/api/v1/robots/a/ci", "reader", 403, ""},
		{"DELETE", "/api/v1/robots/b/ci", "alice", 404, ""},
		{"DELETE", "/api/v1/robots/a/ci", "reader", 403, ""},
		{"DELETE", "/api/v1/robots/a/ci", "", 404, ""},
		{"POST", "/api/v1/robots", "reader", 403, ""},
		{"POST", "/api/v1/robots", "bob", 403, ""},
		{"PUT", "/api/v1/robots/a/ci", "alice", 405, ""},
		{"GET", "/api/v1/robots/a/ci/x", "alice", 404, ""},
	} {
		res := send(h, tc.method, tc.target, tc.subject, ciRobot)
		if res.status != tc.status {
			t.Errorf("%s %s as %q: %d %s, want %d", tc.method, tc.target, tc.subject, res.status, res.body, tc.status)
			continue
		}
		if tc.status == 200 {
			var list auth.RobotList
			if err := json.Unmarshal([]byte(res.body), &list); err != nil || list.Robots == nil {
				t.Fatalf("%s: %s", tc.target, res.body)
			}
			var got []string
			for _, r := range list.Robots {
				got = append(got, r.Namespace+"/"+r.Name)
			}
			if strings.Join(got, " ") != tc.robots {
				t.Errorf("%s as %q: %v, want %s", tc.target, tc.subject, got, tc.robots)
			}
		}
	}
	// A robot of a namespace one may pull nothing in reads as one that does not exist.
	hidden, never := send(h, "GET", "/api/v1/robots/b/ci", "alice", ""), send(h, "GET", "/api/v1/robots/b/cj", "alice", "")
	if hidden.status != never.status || hidden.body != strings.ReplaceAll(never.body, "cj", "ci") {
		t.Errorf("hidden robot: %d %s; never created: %d %s", hidden.status, hidden.body, never.status, never.body)
	}
	if !strings.Contains(audit.String(), `"subject":"user:reader","action":"robot.create","resource":"a/*","result":"denied"`) {
		t.Errorf("denial not audited:\n%s", audit.String())
	}
}

func TestRobotsBadInput(t *testing.T) {
	h, _ := robotsAPI(t, &bytes.Buffer{})
	with := func(old, new string) string { return strings.Replace(ciRobot, old, new, 1) }
	for _, tc := range []struct {
		name, body string
		status     int
		field      string
	}{
		{"not JSON", `{`, 400, "body"},
		{"two values", ciRobot + ciRobot, 400, "body"},
		{"unknown field", with(`"name"`, `"nom":"x","name"`), 400, "nom"},
		{"wrong type", with(`"description":"CI"`, `"description":7`), 400, "description"},
		{"bad namespace", with(`"namespace":"a"`, `"namespace":"A/b"`), 400, "namespace"},
		{"bad name", with(`"name":"ci"`, `"name":"c i"`), 400, "name"},
		{"no name", with(`"name":"ci"`, `"name":""`), 400, "name"},
		{"no scopes", with(`"scopes":[{"repositories":["a/*"],"actions":["pull","push"]}]`, `"scopes":[]`), 400, "scopes"},
		{"glob outside the namespace", with(`["a/*"]`, `["a/*","b/*"]`), 400, "scopes[0].repositories[1]"},
		{"glob of every namespace", with(`["a/*"]`, `["*/*"]`), 400, "scopes[0].repositories[0]"},
		{"bad glob", with(`["a/*"]`, `["a/[x"]`), 400, "scopes[0].repositories[0]"},
		{"no actions", with(`["pull","push"]`, `[]`), 400, "scopes[0].actions"},
		{"admin", with(`["pull","push"]`, `["pull","admin"]`), 400, "scopes[0].actions[1]"},
		{"unknown action", with(`["pull","push"]`, `["fly"]`), 400, "scopes[0].actions[0]"},
		{"no expiry", with(`,"expiresIn":"720h"`, ``), 400, "expiresIn"},
		{"both expiries", with(`"expiresIn":"720h"`, `"expiresIn":"720h","expiresAt":"2030-02-01T00:00:00Z"`), 400, "expiresAt"},
		{"bad duration", with(`"720h"`, `"30 days"`), 400, "expiresIn"},
		{"too long", with(`"720h"`, `"2161h"`), 400, "expiresIn"},
		{"in the past", with(`"720h"`, `"-1h"`), 400, "expiresIn"},
		{"bad time", with(`"expiresIn":"720h"`, `"expiresAt":"tomorrow"`), 400, "expiresAt"},
		{"time too far", with(`"expiresIn":"720h"`, `"expiresAt":"2031-01-01T00:00:00Z"`), 400, "expiresAt"},
		{"too large", with(`"CI"`, `"`+strings.Repeat("x", 70<<10)+`"`), 413, "body"},
	} {
		res := send(h, "POST", "/api/v1/robots", "alice", tc.body)
		var errs apiv1.Errors
		if err := json.Unmarshal([]byte(res.body), &errs); err != nil || res.status != tc.status || len(errs.Errors) != 1 {
			t.Errorf("%s: %d %s, want %d", tc.name, res.status, res.body, tc.status)
			continue
		}
		if d, _ := errs.Errors[0].Detail.(map[string]any); d["field"] != tc.field {
			t.Errorf("%s: field %v, want %s (%s)", tc.name, d["field"], tc.field, errs.Errors[0].Message)
		}
	}
	for _, target := range []string{"/api/v1/robots?namespace=a&namespace=b", "/api/v1/robots?ns=a", "/api/v1/robots?namespace=A", "/api/v1/robots/a/ci?x=1", "/api/v1/robots/a/C"} {
		if res := send(h, "GET", target, "alice", ""); res.status != 400 {
			t.Errorf("GET %s: %d %s, want 400", target, res.status, res.body)
		}
	}
}
