package webhook_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/sources/webhook"
)

const (
	secretA = "s3cret-of-a"
	secretB = "other-secret"
)

// fixture is a configuration of sources and the checks its webhook asked.
type fixture struct {
	h    http.Handler
	logs *bytes.Buffer
	mu   sync.Mutex
	got  []string
}

func (f *fixture) checked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got)
}

// newFixture configures: a/op (git, github.com/org/op, secretA), b/op (the
// same repository, secretB), a/nosecret (git, no secret file), a/tar (http,
// secretA), and a/missing (a secret file that does not exist).
func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := write("a", secretA+"\n"), write("b", secretB)
	cfg := &config.Config{Namespaces: []config.Namespace{
		{Name: "a", Sources: []config.Source{
			{Package: "op", Kind: "git", URL: "https://GitHub.com/org/op.git", WebhookSecretFile: a},
			{Package: "nosecret", Kind: "git", URL: "https://github.com/org/op"},
			{Package: "tar", Kind: "http", URL: "https://example.com/op.tgz", WebhookSecretFile: a},
			{Package: "missing", Kind: "git", URL: "https://gitlab.example/group/op", WebhookSecretFile: filepath.Join(dir, "none")},
		}},
		{Name: "b", Sources: []config.Source{
			{Package: "op", Kind: "git", URL: "https://github.com/org/op/", WebhookSecretFile: b},
		}},
	}}
	f := &fixture{logs: &bytes.Buffer{}}
	check := func(_ context.Context, ns, pkg string) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.got = append(f.got, ns+"/"+pkg)
		return nil
	}
	f.h = webhook.New(cfg, check, slog.New(slog.NewTextHandler(f.logs, nil)))
	return f
}

func sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func githubPush(repo string) []byte {
	b, _ := json.Marshal(map[string]any{"ref": "refs/tags/v1.0.0", "repository": map[string]string{
		"clone_url": repo + ".git", "html_url": repo}})
	return b
}

func gitlabPush(repo string) []byte {
	b, _ := json.Marshal(map[string]any{"object_kind": "tag_push", "project": map[string]string{
		"git_http_url": repo + ".git", "web_url": repo}})
	return b
}

func deliver(t *testing.T, h http.Handler, method, target string, hdr map[string]string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, bytes.NewReader(body))
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestDeliveries(t *testing.T) {
	push := githubPush("https://github.com/org/op")
	form := []byte(url.Values{"payload": {string(push)}}.Encode())
	for _, tc := range []struct {
		name    string
		target  string
		hdr     map[string]string
		body    []byte
		status  int
		checked []string
	}{
		{"github push", "/", map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": sign(secretA, push)}, push,
			http.StatusAccepted, []string{"a/op"}},
		{"the other secret", "/", map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": sign(secretB, push)}, push,
			http.StatusAccepted, []string{"b/op"}},
		{"form-encoded", "/", map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": sign(secretA, form),
			"Content-Type": "application/x-www-form-urlencoded"}, form, http.StatusAccepted, []string{"a/op"}},
		{"gitlab token", "/", map[string]string{"X-Gitlab-Event": "Tag Push Hook", "X-Gitlab-Token": secretA},
			gitlabPush("https://github.com/org/op"), http.StatusAccepted, []string{"a/op"}},
		{"source of any kind", "/?source=a/tar", map[string]string{"X-Hub-Signature-256": sign(secretA, []byte("{}"))}, []byte("{}"),
			http.StatusAccepted, []string{"a/tar"}},
		{"ping", "/", map[string]string{"X-GitHub-Event": "ping"}, []byte(`{"zen":"x"}`), http.StatusOK, nil},
		{"github tag created", "/", map[string]string{"X-GitHub-Event": "create", "X-Hub-Signature-256": sign(secretA, push)}, push,
			http.StatusAccepted, []string{"a/op"}},
		{"an event that moves no ref", "/", map[string]string{"X-GitHub-Event": "issues", "X-Hub-Signature-256": sign(secretA, push)}, push,
			http.StatusOK, nil},
		{"gitlab ping-like event", "/", map[string]string{"X-Gitlab-Event": "Note Hook", "X-Gitlab-Token": secretA}, []byte("not json"), http.StatusOK, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			w := deliver(t, f.h, http.MethodPost, tc.target, tc.hdr, tc.body)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			var res webhook.Result
			if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil || res.Checked != len(tc.checked) {
				t.Errorf("answer %s (%v), want checked %d", w.Body, err, len(tc.checked))
			}
			if got := f.checked(); !slices.Equal(got, tc.checked) {
				t.Errorf("checked %v, want %v", got, tc.checked)
			}
			if strings.Contains(f.logs.String(), secretA) {
				t.Errorf("the log holds a secret: %s", f.logs)
			}
		})
	}
}

func TestBadDeliveries(t *testing.T) {
	push := githubPush("https://github.com/org/op")
	big := bytes.Repeat([]byte(" "), webhook.MaxBody+1)
	lab := gitlabPush("https://gitlab.example/group/op")
	for _, tc := range []struct {
		name    string
		method  string
		target  string
		hdr     map[string]string
		body    []byte
		status  int
		message string
	}{
		{"not a post", http.MethodGet, "/", nil, nil, http.StatusMethodNotAllowed, "POST only"},
		{"too large", http.MethodPost, "/", map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": sign(secretA, big)}, big,
			http.StatusRequestEntityTooLarge, "over 1048576 bytes"},
		{"not json", http.MethodPost, "/", map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": sign(secretA, []byte("{"))}, []byte("{"),
			http.StatusBadRequest, "not a JSON object"},
		{"no repository", http.MethodPost, "/", map[string]string{"X-GitHub-Event": "push"}, []byte(`{"ref":"refs/heads/main"}`),
			http.StatusBadRequest, "names no repository"},
		{"form without payload", http.MethodPost, "/", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, []byte("a=b"),
			http.StatusBadRequest, "no payload field"},
		{"bad source parameter", http.MethodPost, "/?source=op", nil, []byte("{}"), http.StatusBadRequest, "want NAMESPACE/PACKAGE"},
		{"unknown parameter", http.MethodPost, "/?repo=x", nil, []byte("{}"), http.StatusBadRequest, `unknown query parameter "repo"`},
		{"unsigned", http.MethodPost, "/", map[string]string{"X-GitHub-Event": "push"}, push, http.StatusUnauthorized, "no source verifies"},
		{"wrong signature", http.MethodPost, "/", map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": sign("guess", push)}, push,
			http.StatusUnauthorized, "no source verifies"},
		{"signature of another body", http.MethodPost, "/", map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": sign(secretA, []byte("{}"))}, push,
			http.StatusUnauthorized, "no source verifies"},
		{"malformed signature", http.MethodPost, "/", map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha1=abc"}, push,
			http.StatusUnauthorized, "no source verifies"},
		{"wrong token", http.MethodPost, "/", map[string]string{"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": secretA + "x"},
			gitlabPush("https://github.com/org/op"), http.StatusUnauthorized, "no source verifies"},
		{"unknown repository", http.MethodPost, "/", map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": sign(secretA, githubPush("https://github.com/org/other"))},
			githubPush("https://github.com/org/other"), http.StatusUnauthorized, "no source verifies"},
		{"unknown source", http.MethodPost, "/?source=a/nope", map[string]string{"X-Hub-Signature-256": sign(secretA, []byte("{}"))}, []byte("{}"),
			http.StatusUnauthorized, "no source verifies"},
		{"source without secret", http.MethodPost, "/?source=a/nosecret", map[string]string{"X-Gitlab-Token": ""}, []byte("{}"),
			http.StatusUnauthorized, "no source verifies"},
		{"secret file missing", http.MethodPost, "/", map[string]string{"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": secretA}, lab,
			http.StatusUnauthorized, "no source verifies"},
		{"an http source by its URL", http.MethodPost, "/", map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": sign(secretA, githubPush("https://example.com/op.tgz"))},
			githubPush("https://example.com/op.tgz"), http.StatusUnauthorized, "no source verifies"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			w := deliver(t, f.h, tc.method, tc.target, tc.hdr, tc.body)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			var errs apiv1.Errors
			if err := json.Unmarshal(w.Body.Bytes(), &errs); err != nil || len(errs.Errors) != 1 {
				t.Fatalf("answer %s (%v), want one error", w.Body, err)
			}
			if msg := errs.Errors[0].Message; !strings.Contains(msg, tc.message) {
				t.Errorf("message %q, want it to say %q", msg, tc.message)
			}
			if got := f.checked(); len(got) != 0 {
				t.Errorf("a bad delivery asked checks of %v", got)
			}
			for _, s := range []string{"a/op", "b/op", "nosecret", "tar"} {
				if strings.Contains(w.Body.String(), s) {
					t.Errorf("the answer names the source %s: %s", s, w.Body)
				}
			}
			if strings.Contains(f.logs.String(), secretA) || strings.Contains(f.logs.String(), secretB) {
				t.Errorf("the log holds a secret: %s", f.logs)
			}
		})
	}
}

// TestSecretReadEachDelivery changes a source's secret file between two
// deliveries: the second is verified by the new secret only.
func TestSecretReadEachDelivery(t *testing.T) {
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Namespaces: []config.Namespace{{Name: "a", Sources: []config.Source{
		{Package: "op", Kind: "git", URL: "https://github.com/org/op", WebhookSecretFile: file}}}}}
	h := webhook.New(cfg, func(context.Context, string, string) error { return nil }, slog.New(slog.DiscardHandler))
	push := githubPush("https://github.com/org/op")
	if w := deliver(t, h, http.MethodPost, "/", map[string]string{"X-Hub-Signature-256": sign("old", push)}, push); w.Code != http.StatusAccepted {
		t.Fatalf("old secret: %d %s", w.Code, w.Body)
	}
	if err := os.WriteFile(file, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if w := deliver(t, h, http.MethodPost, "/", map[string]string{"X-Hub-Signature-256": sign("old", push)}, push); w.Code != http.StatusUnauthorized {
		t.Errorf("old secret after the rotation: %d %s", w.Code, w.Body)
	}
	if w := deliver(t, h, http.MethodPost, "/", map[string]string{"X-Hub-Signature-256": sign("new", push)}, push); w.Code != http.StatusAccepted {
		t.Errorf("new secret: %d %s", w.Code, w.Body)
	}
}

// TestCheckFails answers 500, without the tracker's words, when no check
// could be asked.
func TestCheckFails(t *testing.T) {
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte(secretA), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Namespaces: []config.Namespace{{Name: "a", Sources: []config.Source{
		{Package: "op", Kind: "git", URL: "https://github.com/org/op", WebhookSecretFile: file}}}}}
	h := webhook.New(cfg, func(context.Context, string, string) error { return errors.New("db at 10.0.0.7 down") }, slog.New(slog.DiscardHandler))
	push := githubPush("https://github.com/org/op")
	w := deliver(t, h, http.MethodPost, "/", map[string]string{"X-Hub-Signature-256": sign(secretA, push)}, push)
	if w.Code != http.StatusInternalServerError || strings.Contains(w.Body.String(), "10.0.0.7") {
		t.Errorf("status %d: %s", w.Code, w.Body)
	}
}

func TestNormalizeURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://GitHub.com/Org/Op.git":          "https://github.com/Org/Op",
		"https://github.com/org/op/":             "https://github.com/org/op",
		"HTTPS://user:pw@github.com/org/op.git/": "https://github.com/org/op",
		"https://gitlab.example/g/op?x=1#f":      "https://gitlab.example/g/op",
	} {
		if got := webhook.NormalizeURL(in); got != want {
			t.Errorf("NormalizeURL(%q) = %q, want %q", in, got, want)
		}
	}
}
