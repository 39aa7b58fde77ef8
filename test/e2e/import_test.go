package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-registry/berth/internal/gittest"
	"github.com/berth-registry/berth/pkgsource"
)

// importResult is berth import --format json.
type importResult struct {
	Sources   []pkgsource.Built
	Digest    string
	Reference string
}

// TestImportFromSources: berth import builds a version from a git
// repository served by git http-backend behind basic auth and from a
// tarball behind an http server with ETags, as berth package builds it
// from the same directory (the pulled content is byte for byte what
// berth package writes), records the revision it resolved, and refuses
// a loopback source unless --allow-private, pushing nothing.
func TestImportFromSources(t *testing.T) {
	gittest.Require(t)
	s := startServer(t, "")
	work := t.TempDir()
	src := kudoFixture(t, "kafka", "2.5.1-1.3.2")
	berth(t, work, "package", src, "-o", "want.tgz")
	want := readFile(t, filepath.Join(work, "want.tgz"))

	// A repository whose operator/ holds the fixture, tagged v1.
	root := t.TempDir()
	repo := filepath.Join(root, "operators.git")
	if err := os.Mkdir(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	gittest.Run(t, repo, "init", "-q")
	copyTree(t, src, filepath.Join(repo, "operator"))
	commit := gittest.CommitAll(t, repo, "kafka")
	gittest.Run(t, repo, "tag", "v1")
	const password = "git-s3cret"
	gitURL := gittest.Server(t, root, password) + "/operators.git"

	imported := runWith(t, command{dir: work, stdin: password + "\n"}, berthBin, "import", "git", gitURL, "--ref", "v1", "--dir", "operator",
		"--allow-private", "--username", gittest.User, "--password-stdin", s.addr+"/kudo/kafka", "--format", "json")
	if imported.code != 0 {
		t.Fatalf("berth import git: exit %d\n%s%s", imported.code, imported.stdout, imported.stderr)
	}
	var res importResult
	if err := json.Unmarshal([]byte(imported.stdout), &res); err != nil || len(res.Sources) != 1 {
		t.Fatalf("berth import git --format json: %v\n%s", err, imported.stdout)
	}
	if got := res.Sources[0]; got.Revision != commit || got.Ref != "refs/tags/v1" || res.Reference != s.addr+"/kudo/kafka:2.5.1_1.3.2" {
		t.Errorf("imported %+v as %s, want commit %s of refs/tags/v1 as kudo/kafka:2.5.1_1.3.2", got, res.Reference, commit)
	}
	if strings.Contains(imported.stdout+imported.stderr, password) {
		t.Error("berth import printed the source's password")
	}
	berth(t, work, "pull", res.Reference, "--tarball", "-o", "from-git")
	if got := readFile(t, filepath.Join(work, "from-git", "kafka-2.5.1_1.3.2.tgz")); !bytes.Equal(got, want) {
		t.Errorf("the version imported from git differs from berth package's tarball (%d against %d bytes)", len(got), len(want))
	}
	var annotations struct {
		Annotations map[string]string `json:"annotations"`
	}
	manifest := oras(t, work, "manifest", "fetch", "--plain-http", res.Reference)
	if err := json.Unmarshal([]byte(manifest.stdout), &annotations); err != nil {
		t.Fatal(err)
	}
	if a := annotations.Annotations; a["org.opencontainers.image.source"] != gitURL || a["org.opencontainers.image.revision"] != commit {
		t.Errorf("manifest annotations %v: want the git source and its commit", a)
	}

	// The same operator as a tarball behind an http server with an ETag.
	tgz := tarGzTree(t, src, "kafka")
	const etag = `"kafka-1"`
	tarballs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", etag)
		w.Write(tgz)
	}))
	defer tarballs.Close()
	imported = berth(t, work, "import", "http", tarballs.URL+"/kafka.tgz", "--dir", "kafka", "--allow-private", s.addr+"/mirror/kafka", "--format", "json")
	res = importResult{}
	if err := json.Unmarshal([]byte(imported.stdout), &res); err != nil || len(res.Sources) != 1 || res.Sources[0].Revision != etag {
		t.Fatalf("berth import http: %v, want the revision %s\n%s", err, etag, imported.stdout)
	}
	berth(t, work, "pull", res.Reference, "--tarball", "-o", "from-http")
	if got := readFile(t, filepath.Join(work, "from-http", "kafka-2.5.1_1.3.2.tgz")); !bytes.Equal(got, want) {
		t.Errorf("the version imported from http differs from berth package's tarball")
	}

	// A loopback source without --allow-private is refused, and nothing is pushed.
	refused := run(t, work, berthBin, "import", "http", tarballs.URL+"/kafka.tgz", "--dir", "kafka", s.addr+"/refused/kafka")
	if refused.code == 0 || !strings.Contains(refused.stderr, "127.0.0.1") {
		t.Errorf("a loopback source without --allow-private: exit %d, %s", refused.code, refused.stderr)
	}
	if code, _ := s.get(t, "/v2/refused/kafka/tags/list"); code != http.StatusNotFound {
		t.Errorf("after a refused import, refused/kafka answers %d, want 404", code)
	}
}

// copyTree copies the regular files under src to dst, keeping whether
// each is executable.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if err := os.MkdirAll(filepath.Join(dst, filepath.Dir(rel)), 0o755); err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, fileMode(t, d))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// tarGzTree is a gzipped tarball of the regular files under src, in a
// top directory named top, executable files with mode 0755.
func tarGzTree(t *testing.T, src, top string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: top + "/" + filepath.ToSlash(rel), Mode: int64(fileMode(t, d)), Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// fileMode is 0755 for an executable file, else 0644.
func fileMode(t *testing.T, d fs.DirEntry) fs.FileMode {
	t.Helper()
	info, err := d.Info()
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode()&0o111 != 0 {
		return 0o755
	}
	return 0o644
}
