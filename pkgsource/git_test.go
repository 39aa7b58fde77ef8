package pkgsource

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/internal/gittest"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// orphan starts an empty branch in dir.
func orphan(t *testing.T, dir, branch string) {
	t.Helper()
	gittest.Run(t, dir, "checkout", "-q", "--orphan", branch)
	gittest.Run(t, dir, "rm", "-rfq", "--ignore-unmatch", ".")
}

type gitFixture struct {
	work            string
	url, authURL    string
	first, main, v1 string
}

func newGitFixture(t *testing.T) *gitFixture {
	gittest.Require(t)
	root := t.TempDir()
	work := filepath.Join(root, "repo")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	gittest.Run(t, work, "init", "-q")
	gittest.Run(t, work, "config", "uploadpack.allowAnySHA1InWant", "true")
	writeFiles(t, work, map[string]string{"README.md": "first\n", "bundle/manifests/csv.yaml": "version: 0.1.0\n"})
	f := &gitFixture{work: work}
	f.first = gittest.CommitAll(t, work, "first")
	writeFiles(t, work, map[string]string{"bundle/manifests/csv.yaml": "version: 1.0.0\n", "bundle/metadata/annotations.yaml": "a: b\n"})
	if err := os.Symlink("csv.yaml", filepath.Join(work, "bundle/manifests/alias.yaml")); err != nil {
		t.Fatal(err)
	}
	f.main = gittest.CommitAll(t, work, "second")
	gittest.Run(t, work, "tag", "-a", "-m", "v1", "v1")
	f.v1 = f.main

	orphan(t, work, "symlink-out")
	if err := os.Symlink("../../../etc/passwd", filepath.Join(work, "passwd")); err != nil {
		t.Fatal(err)
	}
	gittest.CommitAll(t, work, "symlink out")
	orphan(t, work, "lfs")
	writeFiles(t, work, map[string]string{"chart.tgz": "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 12345\n"})
	gittest.CommitAll(t, work, "lfs")
	orphan(t, work, "many")
	many := map[string]string{}
	for _, c := range "abcdefghijkl" {
		many[string(c)+".yaml"] = "x: 1\n"
	}
	writeFiles(t, work, many)
	gittest.CommitAll(t, work, "many")
	orphan(t, work, "big")
	writeFiles(t, work, map[string]string{"big.yaml": strings.Repeat("0123456789abcdef\n", 1<<13)})
	gittest.CommitAll(t, work, "big")
	orphan(t, work, "submodule")
	writeFiles(t, work, map[string]string{"pkg/a.yaml": "a: 1\n"})
	gittest.Run(t, work, "add", "-A")
	gittest.Run(t, work, "update-index", "--add", "--cacheinfo", "160000,"+f.first+",pkg/vendored")
	gittest.Run(t, work, "commit", "-q", "-m", "submodule")
	gittest.Run(t, work, "checkout", "-q", "main")

	f.url = gittest.Server(t, root, "") + "/repo"
	f.authURL = gittest.Server(t, root, "s3cret") + "/repo"
	return f
}

func TestGitFetch(t *testing.T) {
	f := newGitFixture(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		spec  Spec
		ref   string
		rev   string
		files map[string]string
	}{
		{"default branch", Spec{URL: f.url}, "refs/heads/main", f.main, map[string]string{"README.md": "first\n", "bundle/manifests/csv.yaml": "version: 1.0.0\n"}},
		{"branch and dir", Spec{URL: f.url, Ref: "main", Dir: "bundle"}, "refs/heads/main", f.main,
			map[string]string{"manifests/csv.yaml": "version: 1.0.0\n", "manifests/alias.yaml": "version: 1.0.0\n", "metadata/annotations.yaml": "a: b\n"}},
		{"annotated tag", Spec{URL: f.url, Ref: "v1", Dir: "bundle/"}, "refs/tags/v1", f.v1, map[string]string{"manifests/csv.yaml": "version: 1.0.0\n"}},
		{"commit", Spec{URL: f.url, Ref: f.first}, f.first, f.first, map[string]string{"bundle/manifests/csv.yaml": "version: 0.1.0\n"}},
		{"basic auth", Spec{URL: f.authURL, Ref: "main", Dir: "bundle", Credentials: Credentials{Username: gittest.User, Password: "s3cret"}}, "refs/heads/main", f.main,
			map[string]string{"manifests/csv.yaml": "version: 1.0.0\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.Kind = Git
			dir := emptyDir(t)
			got, err := Fetch(ctx, tc.spec, dir, loopback)
			if err != nil {
				t.Fatal(err)
			}
			if got.Ref != tc.ref || got.Revision != tc.rev || got.Kind != Git || got.URL != tc.spec.URL {
				t.Errorf("Fetch resolved %+v, want ref %s at %s", got, tc.ref, tc.rev)
			}
			for name, body := range tc.files {
				if s := readFile(t, filepath.Join(dir, name)); s != body {
					t.Errorf("%s = %q, want %q", name, s, body)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
				t.Error("a .git directory was written")
			}
			now, err := Resolve(ctx, tc.spec, got, loopback)
			if err != nil || now != got {
				t.Errorf("Resolve = %+v, %v; want %+v", now, err, got)
			}
		})
	}
}

func TestGitResolveSeesMovedRefs(t *testing.T) {
	f := newGitFixture(t)
	ctx := context.Background()
	branch := Spec{Kind: Git, URL: f.url, Ref: "main"}
	tag := Spec{Kind: Git, URL: f.url, Ref: "v1"}
	before, err := Resolve(ctx, branch, Resolved{}, loopback)
	if err != nil || before.Revision != f.main {
		t.Fatalf("Resolve(main) = %+v, %v; want %s", before, err, f.main)
	}
	writeFiles(t, f.work, map[string]string{"bundle/manifests/csv.yaml": "version: 1.0.1\n"})
	next := gittest.CommitAll(t, f.work, "third")
	gittest.Run(t, f.work, "tag", "-f", "-a", "-m", "moved", "v1")
	for _, s := range []Spec{branch, tag} {
		after, err := Resolve(ctx, s, before, loopback)
		if err != nil || after.Revision != next {
			t.Errorf("Resolve(%s) after the ref moved = %+v, %v; want revision %s", s.Ref, after, err, next)
		}
	}
	dir := emptyDir(t)
	if _, err := Fetch(ctx, tag, dir, loopback); err != nil {
		t.Fatal(err)
	}
	if s := readFile(t, filepath.Join(dir, "bundle/manifests/csv.yaml")); s != "version: 1.0.1\n" {
		t.Errorf("the moved tag fetched csv.yaml %q", s)
	}
}

func TestGitHostile(t *testing.T) {
	f := newGitFixture(t)
	small := Limits{AllowPrivate: true, MaxFiles: 10, MaxBytes: 64 << 10}
	for _, tc := range []struct {
		name   string
		spec   Spec
		limits Limits
		want   string
		is     error
	}{
		{"symlink out", Spec{URL: f.url, Ref: "symlink-out"}, small, "symlink passwd points out of the directory (to ../../../etc/passwd)", ErrInvalid},
		{"symlink inside dir", Spec{URL: f.url, Ref: "main", Dir: "bundle/manifests"}, small, "", nil},
		{"lfs pointer", Spec{URL: f.url, Ref: "lfs"}, small, "chart.tgz is a git LFS pointer", ErrInvalid},
		{"too many files", Spec{URL: f.url, Ref: "many"}, small, "more than 10 files", ErrLimit},
		{"pack that inflates past MaxBytes", Spec{URL: f.url, Ref: "big"}, small, "more than 65536 bytes unpacked (at big.yaml)", ErrLimit},
		{"submodule", Spec{URL: f.url, Ref: "submodule"}, small, "pkg/vendored is a submodule, which is not fetched", ErrInvalid},
		{"bad ref", Spec{URL: f.url, Ref: "nope"}, small, `no branch or tag "nope"`, ErrInvalid},
		{"missing dir", Spec{URL: f.url, Ref: "main", Dir: "nope"}, small, "no directory nope at commit", ErrInvalid},
		{"dir out", Spec{URL: f.url, Ref: "main", Dir: "../x"}, small, `dir "../x" goes out of the directory`, ErrInvalid},
		{"unknown commit", Spec{URL: f.url, Ref: strings.Repeat("0", 39) + "1"}, small, "the server may not allow fetching a commit", ErrInvalid},
		{"wrong password", Spec{URL: f.authURL, Ref: "main", Credentials: Credentials{Username: gittest.User, Password: "hunter2"}}, small, "check the credentials", ErrDenied},
		{"no password", Spec{URL: f.authURL, Ref: "main"}, small, "check the credentials", ErrDenied},
		{"private address", Spec{URL: f.url, Ref: "main"}, Limits{}, "is loopback, link-local, private or unspecified", ErrDenied},
		{"host not allowed", Spec{URL: f.url, Ref: "main"}, Limits{AllowPrivate: true, AllowHosts: []string{"github.com"}}, "host 127.0.0.1 is not in the allowed hosts", ErrDenied},
		{"not http", Spec{URL: "ssh://example.com/x"}, small, "not an http(s) URL", ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.Kind = Git
			dir := emptyDir(t)
			_, err := Fetch(context.Background(), tc.spec, dir, tc.limits)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Fetch: %v", err)
				}
				return
			}
			t.Log(err)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, tc.is) {
				t.Fatalf("Fetch error %v, want one containing %q and wrapping %v", err, tc.want, tc.is)
			}
			if !strings.Contains(err.Error(), "git source "+tc.spec.URL) {
				t.Errorf("error %q does not name the source", err)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q shows the password", err)
			}
			assertEmpty(t, dir)
		})
	}
}

func TestGitServerHostile(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/stall/"):
			w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
			w.Write([]byte("001e# service=git-upload-pack\n"))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(2 * time.Second):
			}
		case strings.HasPrefix(r.URL.Path, "/redirect/"):
			http.Redirect(w, r, "http://localhost:1/repo/info/refs?service=git-upload-pack", http.StatusFound)
		}
	}))
	defer srv.Close()
	limits := Limits{AllowPrivate: true, StallTimeout: 200 * time.Millisecond, AllowHosts: []string{"127.0.0.1"}}
	for _, tc := range []struct {
		path, want string
		is         error
	}{
		{"/stall/repo", "the server sent nothing for 200ms (stall timeout)", ErrLimit},
		{"/redirect/repo", "to host localhost, which is not in the allowed hosts", ErrDenied},
	} {
		t.Run(tc.path, func(t *testing.T) {
			_, err := Resolve(context.Background(), Spec{Kind: Git, URL: srv.URL + tc.path, Ref: "main"}, Resolved{}, limits)
			t.Log(err)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, tc.is) {
				t.Fatalf("Resolve error %v, want one containing %q and wrapping %v", err, tc.want, tc.is)
			}
		})
	}
}
