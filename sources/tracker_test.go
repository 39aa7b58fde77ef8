package sources

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/internal/gittest"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/storage"
)

func isNotFound(err error) bool {
	var resp *errcode.ErrorResponse
	return errors.Is(err, errdef.ErrNotFound) || errors.As(err, &resp) && resp.StatusCode == http.StatusNotFound
}

func builds(tr *Tracker, result string) float64 {
	return testutil.ToFloat64(tr.metrics.builds.WithLabelValues(result))
}

func TestBranchPublishesOnce(t *testing.T) {
	repo := newGitRepo(t, chart("demo", "1.0.0", "replicas: 1\n"))
	e := newEnv(t, nil, config.Source{Package: "demo", Kind: "git", URL: repo.url, Ref: "main", Dir: "chart"})

	st := e.check("demo")
	if st.LastError != nil {
		t.Fatalf("first check failed: %+v", st.LastError)
	}
	if st.LastPublished == nil || st.LastPublished.Version != "1.0.0" || st.LastPublished.Ref != "refs/heads/main" {
		t.Fatalf("LastPublished = %+v, want 1.0.0 from refs/heads/main", st.LastPublished)
	}
	if got := e.tags("demo"); !reflect.DeepEqual(got, []string{"1.0.0"}) {
		t.Fatalf("tags %v, want [1.0.0]", got)
	}
	if !e.verified("demo", "1.0.0") {
		t.Error("1.0.0 has no signature berth's key verifies")
	}
	if ev := e.takeEvents(); len(ev) != 1 || ev[0].Status != apiv1.SourcePublished || ev[0].Version != "1.0.0" || ev[0].Digest != st.LastPublished.Digest || ev[0].Action != apiv1.ActionSource {
		t.Errorf("events %+v, want one published 1.0.0", ev)
	}
	if st.LastCheck == nil || st.NextCheck == nil || !st.NextCheck.After(*st.LastCheck) || st.Revision == "" {
		t.Errorf("status %+v: want the check's times and revision", st)
	}

	// Unchanged: nothing is built.
	e.check("demo")
	if n := builds(e.tr, buildPublished) + builds(e.tr, buildUnchanged) + builds(e.tr, buildFailed); n != 1 {
		t.Errorf("%v builds after an unchanged check, want 1 (the first)", n)
	}

	// A commit outside the package's directory: built, same content, not published again.
	rev := repo.commit(map[string]string{"README.md": "docs\n"})
	st = e.check("demo")
	if st.Revision != rev || st.LastError != nil || st.LastPublished.Revision == rev || builds(e.tr, buildUnchanged) != 1 {
		t.Errorf("after a commit that keeps the content: %+v (unchanged builds %v)", st, builds(e.tr, buildUnchanged))
	}
	if ev := e.takeEvents(); len(ev) != 0 {
		t.Errorf("events %+v after a commit that keeps the content, want none", ev)
	}

	// New content under the same version: refused, once.
	repo.commit(map[string]string{"chart/values.yaml": "replicas: 2\n"})
	st = e.check("demo")
	if st.LastError == nil || st.LastError.Reason != apiv1.SourceReasonRefused || !strings.Contains(st.LastError.Message, "version 1.0.0 is already published from") {
		t.Fatalf("LastError = %+v, want refused: version 1.0.0 is already published", st.LastError)
	}
	e.check("demo")
	if ev := e.takeEvents(); len(ev) != 1 || ev[0].Status != apiv1.SourceFailed || ev[0].Reason != apiv1.SourceReasonRefused {
		t.Errorf("events %+v, want one failure, refused", ev)
	}
	if n := builds(e.tr, buildFailed); n != 1 {
		t.Errorf("%v failed builds, want 1: a refused revision is not built again", n)
	}

	// A version bump publishes.
	repo.commit(chart("demo", "1.1.0", "replicas: 2\n"))
	st = e.check("demo")
	if st.LastError != nil || st.LastPublished.Version != "1.1.0" {
		t.Errorf("after a bump: %+v", st)
	}
	if got := e.tags("demo"); !reflect.DeepEqual(got, []string{"1.0.0", "1.1.0"}) {
		t.Errorf("tags %v, want [1.0.0 1.1.0]", got)
	}
}

func TestTagPattern(t *testing.T) {
	plain := func(replicas string) map[string]string {
		return map[string]string{"deploy/manifests/deploy.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: op\nspec:\n  replicas: " + replicas + "\n"}
	}
	repo := newGitRepo(t, plain("1"))
	repo.git("tag", "v1.0.0")
	repo.commit(plain("2"))
	repo.git("tag", "-a", "-m", "release", "v1.1.0")
	repo.git("tag", "release-7")
	e := newEnv(t, nil, config.Source{Package: "op", Kind: "git", URL: repo.authURL, Ref: "v*", Dir: "deploy", Format: "plain",
		Credentials: credentialFiles(t, gittest.User, repo.password)})

	st := e.check("op")
	if st.LastError != nil {
		t.Fatalf("check failed: %+v", st.LastError)
	}
	if got := e.tags("op"); !reflect.DeepEqual(got, []string{"1.0.0", "1.1.0"}) {
		t.Fatalf("tags %v, want exactly [1.0.0 1.1.0]", got)
	}
	if len(st.Refs) != 2 || st.Refs[0].Ref != "refs/tags/v1.0.0" || st.Refs[0].Version != "1.0.0" || st.Refs[1].Version != "1.1.0" {
		t.Errorf("refs %+v", st.Refs)
	}
	published := st.Refs[0].Digest

	// v1.0.0 moves to a commit of other content: refused, nothing changes.
	repo.commit(plain("3"))
	repo.git("tag", "-f", "v1.0.0")
	st = e.check("op")
	if st.LastError == nil || st.LastError.Reason != apiv1.SourceReasonRefused || !strings.Contains(st.Refs[0].Error, "tag v1.0.0 moved") {
		t.Fatalf("after moving v1.0.0: %+v", st)
	}
	if st.Refs[0].Digest != published || st.Refs[1].Error != "" {
		t.Errorf("refs %+v: want 1.0.0 as published and 1.1.0 unharmed", st.Refs)
	}
	if got := e.tags("op"); !reflect.DeepEqual(got, []string{"1.0.0", "1.1.0"}) {
		t.Errorf("tags %v after the move", got)
	}

	// A new tag becomes a version.
	repo.git("tag", "v1.2.0")
	st = e.check("op")
	if got := e.tags("op"); !reflect.DeepEqual(got, []string{"1.0.0", "1.1.0", "1.2.0"}) || st.LastPublished.Version != "1.2.0" {
		t.Errorf("tags %v, last published %+v; want 1.2.0 too", got, st.LastPublished)
	}
}

// credentialFiles writes a user name and a password into files.
func credentialFiles(t testing.TB, user, password string) config.SourceCredentials {
	dir := t.TempDir()
	c := config.SourceCredentials{UsernameFile: filepath.Join(dir, "username"), PasswordFile: filepath.Join(dir, "password")}
	if err := os.WriteFile(c.UsernameFile, []byte(user+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.PasswordFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// tarballServer serves body at /chart.tgz with an ETag, and counts the
// full answers (200) it sent.
func tarballServer(t testing.TB, body *atomic.Value, full *atomic.Int64) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := body.Load().([]byte)
		etag := `"` + string(rune('a'+len(b)%26)) + strings.Repeat("x", len(b)%7) + `"`
		w.Header().Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		full.Add(1)
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/chart.tgz"
}

func TestHTTPConditional(t *testing.T) {
	var body atomic.Value
	var full atomic.Int64
	body.Store(tarball(t, chart("web", "2.0.0", "a: 1\n")))
	url := tarballServer(t, &body, &full)
	e := newEnv(t, nil, config.Source{Package: "web", Kind: "http", URL: url, Dir: "chart", Format: "helm"})

	st := e.check("web")
	if st.LastError != nil || st.LastPublished == nil || st.LastPublished.Version != "2.0.0" || !strings.HasPrefix(st.Revision, `"`) {
		t.Fatalf("status %+v", st)
	}
	before := full.Load()
	e.check("web")
	if full.Load() != before {
		t.Errorf("an unchanged check downloaded the tarball again (%d full answers, want %d)", full.Load(), before)
	}
	body.Store(tarball(t, chart("web", "2.1.0", "a: 2\n")))
	if st = e.check("web"); st.LastPublished.Version != "2.1.0" {
		t.Errorf("after a new tarball: %+v", st)
	}
}

func TestHostileSources(t *testing.T) {
	bomb := tarball(t, map[string]string{"chart/Chart.yaml": "apiVersion: v2\nname: x\nversion: 1.0.0\n", "chart/zeros.yaml": strings.Repeat("\x00", 4<<20)})
	many := map[string]string{"chart/Chart.yaml": "apiVersion: v2\nname: x\nversion: 1.0.0\n"}
	for i := range 20 {
		many["chart/templates/"+string(rune('a'+i))+".yaml"] = "kind: ConfigMap\n"
	}
	for _, tc := range []struct {
		name   string
		body   []byte
		edit   func(*config.Config)
		reason string
	}{
		{"bomb", bomb, func(c *config.Config) { c.Sources.MaxBytes = 1 << 20 }, apiv1.SourceReasonLimit},
		{"too many files", tarball(t, many), func(c *config.Config) { c.Sources.MaxFiles = 5 }, apiv1.SourceReasonLimit},
		{"private address", tarball(t, chart("x", "1.0.0", "")), func(c *config.Config) { c.Sources.AllowPrivate = false }, apiv1.SourceReasonDenied},
		{"not a package", tarball(t, map[string]string{"chart/README": "hi\n"}), nil, apiv1.SourceReasonInvalid},
		{"other format", tarball(t, chart("x", "1.0.0", "")), func(c *config.Config) { c.Namespaces[0].Sources[0].Format = "olm" }, apiv1.SourceReasonInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body atomic.Value
			var full atomic.Int64
			body.Store(tc.body)
			url := tarballServer(t, &body, &full)
			e := newEnv(t, tc.edit, config.Source{Package: "x", Kind: "http", URL: url, Dir: "chart"})
			st := e.check("x")
			if st.LastError == nil || st.LastError.Reason != tc.reason {
				t.Fatalf("LastError = %+v, want reason %s", st.LastError, tc.reason)
			}
			if tags := e.tags("x"); len(tags) != 0 {
				t.Errorf("tags %v, want none", tags)
			}
			if ev := e.takeEvents(); len(ev) != 1 || ev[0].Reason != tc.reason {
				t.Errorf("events %+v", ev)
			}
		})
	}
}

func TestFollowerCheckReachesLeader(t *testing.T) {
	repo := newGitRepo(t, chart("demo", "1.0.0", ""))
	e := newEnv(t, func(c *config.Config) { c.Sources.Interval = time.Hour },
		config.Source{Package: "demo", Kind: "git", URL: repo.url, Ref: "main", Dir: "chart"})
	followerStore, err := OpenSQLite(context.Background(), filepath.Join(e.cfg.Data, "sources.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer followerStore.Close()
	follower := e.tracker(followerStore)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.tr.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	first := waitFor(t, follower, func(s apiv1.Source) bool { return s.LastPublished != nil })
	repo.commit(chart("demo", "1.0.1", ""))
	if err := follower.Check(context.Background(), "team", "demo"); err != nil {
		t.Fatal(err)
	}
	asked := time.Now()
	st := waitFor(t, follower, func(s apiv1.Source) bool { return s.LastCheck.After(*first.LastCheck) })
	if st.LastPublished == nil || st.LastPublished.Version != "1.0.1" {
		t.Errorf("after the follower's check: %+v", st)
	}
	t.Logf("the leader checked %s after the follower asked", st.LastCheck.Sub(asked))

	// Asked in the leader's own process, the check starts at once.
	if err := e.tr.Check(context.Background(), "team", "demo"); err != nil {
		t.Fatal(err)
	}
	asked = time.Now()
	again := waitFor(t, follower, func(s apiv1.Source) bool { return s.LastCheck.After(*st.LastCheck) })
	t.Logf("the leader checked %s after it was asked itself", again.LastCheck.Sub(asked))
	if again.LastPublished.Version != "1.0.1" || again.LastError != nil {
		t.Errorf("after an unchanged check: %+v", again)
	}
	if err := follower.Check(context.Background(), "team", "nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Check(unknown) = %v, want fs.ErrNotExist", err)
	}
}

// waitFor polls tr's status of team/demo until ok.
func waitFor(t *testing.T, tr *Tracker, ok func(apiv1.Source) bool) apiv1.Source {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		all, err := tr.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(all) == 1 && all[0].LastCheck != nil && ok(all[0]) {
			return all[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("status %+v never came", all)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func checksOf(tr *Tracker, result string) float64 {
	return testutil.ToFloat64(tr.metrics.checks.WithLabelValues(result))
}

// TestRegistryRefuses: the registry's rules apply to what the tracker
// publishes; a tag the trust admission refuses is a failure, refused, and
// the version is not tagged.
func TestRegistryRefuses(t *testing.T) {
	var body atomic.Value
	var full atomic.Int64
	body.Store(tarball(t, chart("web", "1.0.0", "")))
	url := tarballServer(t, &body, &full)
	var asked atomic.Int64
	e := newEnvWith(t, func(o *registry.Options) {
		o.AdmitTag = func(_ context.Context, push registry.TagPush) error {
			asked.Add(1)
			return fmt.Errorf("%s:%s: no provenance names an allowed source", push.Repo, push.Tag)
		}
	}, nil, config.Source{Package: "web", Kind: "http", URL: url, Dir: "chart"})
	st := e.check("web")
	if st.LastError == nil || st.LastError.Reason != apiv1.SourceReasonRefused || !strings.Contains(st.LastError.Message, "no provenance names an allowed source") {
		t.Fatalf("LastError = %+v, want refused with the registry's message", st.LastError)
	}
	if asked.Load() == 0 {
		t.Error("the registry's admission was never asked")
	}
	if tags := e.tags("web"); len(tags) != 0 {
		t.Errorf("tags %v, want none", tags)
	}
	if st.LastPublished != nil {
		t.Errorf("LastPublished = %+v, want none", st.LastPublished)
	}
}

// TestImageSource: an image source is checked with a manifest HEAD and
// built once per digest.
func TestImageSource(t *testing.T) {
	ctx := context.Background()
	up, err := registry.New(ctx, registry.Options{Storage: &storage.Config{Driver: "inmemory"}, HTTPSecret: "up", Logger: quiet,
		AllowOverwrite: func(string) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	srv := httptest.NewServer(up)
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	push := func(version string) {
		dir := filepath.Join(t.TempDir(), "web")
		for name, body := range chart("web", version, "") {
			p := filepath.Join(dir, strings.TrimPrefix(name, "chart/"))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		pkg, err := pkgformat.Load(dir, pkgformat.Options{})
		if err != nil {
			t.Fatal(err)
		}
		art, err := pkg.Artifact()
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.New(client.Options{Credentials: credentials.NewMemoryStore()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Push(ctx, client.Reference{Registry: host, Namespace: "up", Name: "web", Tag: "stable"}, art); err != nil {
			t.Fatal(err)
		}
	}
	push("3.0.0")
	e := newEnv(t, nil, config.Source{Package: "web", Kind: "image", URL: host + "/up/web:stable"})
	st := e.check("web")
	if st.LastError != nil || st.LastPublished == nil || st.LastPublished.Version != "3.0.0" || !strings.HasPrefix(st.Revision, "sha256:") {
		t.Fatalf("status %+v", st)
	}
	e.check("web")
	if n := builds(e.tr, buildPublished) + builds(e.tr, buildUnchanged); n != 1 {
		t.Errorf("%v builds, want 1: the digest did not change", n)
	}
	push("3.1.0")
	if st = e.check("web"); st.LastPublished == nil || st.LastPublished.Version != "3.1.0" {
		t.Errorf("after a new digest: %+v", st)
	}
	if !e.verified("web", "3.1.0") {
		t.Error("3.1.0 has no signature berth's key verifies")
	}
}
