package gittest

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestPushAndFetchOverHTTP: a tag pushed over smart HTTP to a bare
// repository from InitBare is what ls-remote then reads through the same
// server, behind basic auth, and OnRequest saw every request.
func TestPushAndFetchOverHTTP(t *testing.T) {
	Require(t)
	root := t.TempDir()
	Bare(t, root, "r.git")
	var mu sync.Mutex
	var paths []string
	url := Serve(t, root, Options{Password: "p4ssw0rd", OnRequest: func(r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		paths = append(paths, r.URL.Path)
	}})
	remote := strings.Replace(url, "http://", "http://"+User+":p4ssw0rd@", 1) + "/r.git"
	work := t.TempDir()
	Run(t, work, "init", "-q")
	if err := os.WriteFile(filepath.Join(work, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	commit := CommitAll(t, work, "one")
	Run(t, work, "tag", "v1")
	Run(t, work, "push", "-q", remote, "main", "v1")
	got := Run(t, work, "ls-remote", remote, "refs/tags/v1")
	if !strings.HasPrefix(got, commit) {
		t.Errorf("ls-remote refs/tags/v1 = %q, want %s", got, commit)
	}
	if _, err := Output(work, "ls-remote", url+"/r.git"); err == nil {
		t.Error("ls-remote without the password succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) < 3 || paths[0] != "/r.git/info/refs" {
		t.Errorf("OnRequest saw %q, want the push's and ls-remote's requests", paths)
	}
}
