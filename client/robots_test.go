package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"oras.land/oras-go/v2/registry/remote/auth"

	berthauth "github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/catalog/apiv1"
)

var testRobot = berthauth.Robot{
	Namespace: "a", Name: "ci", Description: "CI pushes",
	Scopes:    []berthauth.RobotScope{{Repositories: []string{"a/*"}, Actions: []berthauth.Action{berthauth.Pull, berthauth.Push}}},
	CreatedBy: "user:alice",
	CreatedAt: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC),
	ExpiresAt: time.Date(2025, 3, 31, 12, 0, 0, 0, time.UTC),
}

func TestRobots(t *testing.T) {
	ctx := context.Background()
	var (
		mu   sync.Mutex
		reqs []string
	)
	host := catalogServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		reqs = append(reqs, strings.TrimSpace(r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Authorization")+" "+string(body)))
		mu.Unlock()
		switch r.Method + " " + r.URL.Path {
		case "POST /api/v1/robots":
			writeDoc(w, http.StatusCreated, NewRobot{Robot: testRobot, Username: "robot+a+ci", Secret: "berth_s3cret"})
		case "GET /api/v1/robots":
			writeDoc(w, http.StatusOK, robotList{Robots: []berthauth.Robot{testRobot}})
		case "GET /api/v1/robots/a/ci":
			writeDoc(w, http.StatusOK, testRobot)
		case "DELETE /api/v1/robots/a/ci":
			w.WriteHeader(http.StatusNoContent)
		default:
			writeDoc(w, http.StatusNotFound, apiv1.Errors{Errors: []apiv1.Error{{Code: "NOT_FOUND", Message: "no robot a/gone"}}})
		}
	})
	c := newTestCatalog(t, host, Options{Credentials: memoryStore(t, host, auth.Credential{Username: "alice", Password: "secret"})})

	created, err := c.CreateRobot(ctx, RobotRequest{
		Namespace: "a", Name: "ci", Description: "CI pushes", Scopes: testRobot.Scopes, ExpiresIn: 720 * time.Hour,
	})
	if err != nil {
		t.Fatalf("CreateRobot: %v", err)
	}
	if created.Username != "robot+a+ci" || created.Secret != "berth_s3cret" || !reflect.DeepEqual(created.Robot, testRobot) {
		t.Errorf("CreateRobot: %+v", created)
	}
	list, err := c.Robots(ctx, "a")
	if err != nil || !reflect.DeepEqual(list, []berthauth.Robot{testRobot}) {
		t.Errorf("Robots: %+v, %v", list, err)
	}
	if _, err := c.Robots(ctx, ""); err != nil {
		t.Errorf("Robots of every namespace: %v", err)
	}
	robot, err := c.Robot(ctx, "a", "ci")
	if err != nil || !reflect.DeepEqual(*robot, testRobot) {
		t.Errorf("Robot: %+v, %v", robot, err)
	}
	if err := c.RevokeRobot(ctx, "a", "ci"); err != nil {
		t.Errorf("RevokeRobot: %v", err)
	}
	err = c.RevokeRobot(ctx, "a", "gone")
	if want := "revoke robot a/gone: not found: no robot a/gone"; !errors.Is(err, ErrNotFound) || err == nil || err.Error() != want {
		t.Errorf("RevokeRobot of a missing robot: %v, want %s", err, want)
	}

	basic := "Basic YWxpY2U6c2VjcmV0"
	want := []string{
		`POST /api/v1/robots ` + basic + ` {"namespace":"a","name":"ci","description":"CI pushes","scopes":[{"repositories":["a/*"],"actions":["pull","push"]}],"expiresIn":"720h0m0s"}`,
		"GET /api/v1/robots?namespace=a " + basic,
		"GET /api/v1/robots " + basic,
		"GET /api/v1/robots/a/ci " + basic,
		"DELETE /api/v1/robots/a/ci " + basic,
		"DELETE /api/v1/robots/a/gone " + basic,
	}
	if !reflect.DeepEqual(reqs, want) {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(reqs, "\n"), strings.Join(want, "\n"))
	}
}

func TestCreateRobotInvalid(t *testing.T) {
	c := newTestCatalog(t, catalogServer(t, func(w http.ResponseWriter, _ *http.Request) {
		t.Error("an invalid request was sent")
	}), Options{})
	scopes := []berthauth.RobotScope{{Repositories: []string{"a/*"}, Actions: []berthauth.Action{berthauth.Pull}}}
	for _, tt := range []struct {
		name string
		req  RobotRequest
		msg  string
	}{
		{"no expiry", RobotRequest{Namespace: "a", Name: "ci", Scopes: scopes}, "robots always expire"},
		{"negative expiry", RobotRequest{Namespace: "a", Name: "ci", Scopes: scopes, ExpiresIn: -time.Hour}, "robots always expire"},
		{"no scopes", RobotRequest{Namespace: "a", Name: "ci", ExpiresIn: time.Hour}, "at least one scope"},
		{"scope outside the namespace", RobotRequest{Namespace: "a", Name: "ci", ExpiresIn: time.Hour,
			Scopes: []berthauth.RobotScope{{Repositories: []string{"b/*"}, Actions: []berthauth.Action{berthauth.Pull}}}}, `namespace "a"`},
		{"admin", RobotRequest{Namespace: "a", Name: "ci", ExpiresIn: time.Hour,
			Scopes: []berthauth.RobotScope{{Repositories: []string{"a/*"}, Actions: []berthauth.Action{berthauth.Admin}}}}, "pull, push, delete or sign"},
		{"bad name", RobotRequest{Namespace: "a", Name: "CI", Scopes: scopes, ExpiresIn: time.Hour}, "name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.CreateRobot(context.Background(), tt.req)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("CreateRobot: %v, want ErrInvalid with %q", err, tt.msg)
			}
		})
	}
	for _, bad := range [][2]string{{"A", "ci"}, {"a", ""}, {"a/b", "ci"}} {
		if _, err := c.Robot(context.Background(), bad[0], bad[1]); !errors.Is(err, ErrInvalid) {
			t.Errorf("Robot(%q, %q): %v, want ErrInvalid", bad[0], bad[1], err)
		}
	}
}
