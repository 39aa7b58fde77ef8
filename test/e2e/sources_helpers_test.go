package e2e

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/internal/gittest"
	"github.com/berth-registry/berth/signing"
)

// The helpers of the tracked-sources tests (sources_test.go): git
// repositories pushed to over smart HTTP, a tarball server with ETags,
// webhooks signed as GitHub and GitLab sign them, and readers of berth's
// source status.

// keyPasswordEnv is the variable berth reads the password of its
// provenance key from (docs/sources.md#provenance).
const keyPasswordEnv = "BERTH_SOURCES_KEY_PASSWORD"

// provenanceKey creates berth's provenance key pair in dir with
// signing.LoadOrCreateSigner before berth starts, so that a trust policy
// can name its public half, sets its password for every berth the test
// starts, and registers both as secrets. It returns the private and the
// public key files.
func provenanceKey(t *testing.T, dir string) (key, pub string) {
	t.Helper()
	const password = "provenance-key-password"
	t.Setenv(keyPasswordEnv, password)
	secrets.add(t, "the provenance key's password", password)
	key = filepath.Join(dir, "provenance.key")
	if _, err := signing.LoadOrCreateSigner(key, []byte(password)); err != nil {
		t.Fatal(err)
	}
	secrets.addPEM(t, "the provenance key", key)
	return key, signing.PublicKeyFile(key)
}

// gitRepo is a bare repository served over smart HTTP and a working
// clone of it that pushes there over HTTP, as a publisher's CI does.
type gitRepo struct {
	// url is the repository's URL as berth is configured with it (no
	// credentials).
	url  string
	work string
	// remote is url with the credentials to push, if the server asks.
	remote string
}

// newGitRepo creates the bare repository root/name, served by the server
// at base (gittest.Serve under root; with a password, pushes send it), and
// an empty working directory for it.
func newGitRepo(t *testing.T, root, name, base, password string) *gitRepo {
	t.Helper()
	gittest.Bare(t, root, name)
	r := &gitRepo{url: base + "/" + name, work: t.TempDir()}
	r.remote = r.url
	if password != "" {
		r.remote = strings.Replace(r.url, "http://", "http://"+gittest.User+":"+password+"@", 1)
	}
	gittest.Run(t, r.work, "init", "-q")
	return r
}

// writeFiles writes files (slash-separated path: content) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// commit writes files, commits everything and returns the commit.
func (r *gitRepo) commit(t *testing.T, msg string, files map[string]string) string {
	t.Helper()
	writeFiles(t, r.work, files)
	return gittest.CommitAll(t, r.work, msg)
}

// tag points tag at rev, moving it if it exists.
func (r *gitRepo) tag(t *testing.T, tag, rev string) {
	t.Helper()
	gittest.Run(t, r.work, "tag", "-f", tag, rev)
}

// push pushes refs (branches, tags) over smart HTTP, forcing them, as
// `git push --force` does for a moved tag.
func (r *gitRepo) push(t *testing.T, refs ...string) {
	t.Helper()
	gittest.Run(t, r.work, append([]string{"push", "-q", "--force", r.remote}, refs...)...)
}

// plainFiles is a plain package (no name or version of its own) under
// dir, whose ConfigMap holds value.
func plainFiles(dir, value string) map[string]string {
	return map[string]string{dir + "/manifests/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  value: " + strconv.Quote(value) + "\n"}
}

// chartFiles is a Helm chart web at version under dir, whose ConfigMap
// holds value.
func chartFiles(dir, version, value string) map[string]string {
	return map[string]string{
		dir + "/Chart.yaml":        "apiVersion: v2\nname: web\nversion: " + version + "\n",
		dir + "/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  value: " + strconv.Quote(value) + "\n",
	}
}

// tarballServer serves tarballs by path with an ETag (the quoted sha256
// of the body), answering 304 to an If-None-Match that names it, and
// counts what it answered.
type tarballServer struct {
	url string
	mu  sync.Mutex
	// files are the tarballs by path; counts what was answered by status.
	files  map[string][]byte
	counts map[int]int
}

func startTarballServer(t *testing.T) *tarballServer {
	t.Helper()
	ts := &tarballServer{files: map[string][]byte{}, counts: map[int]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		body, ok := ts.files[r.URL.Path]
		status := http.StatusOK
		switch {
		case !ok:
			status = http.StatusNotFound
		case r.Header.Get("If-None-Match") == etagOf(body):
			status = http.StatusNotModified
		}
		ts.counts[status]++
		ts.mu.Unlock()
		if ok {
			w.Header().Set("ETag", etagOf(body))
		}
		switch status {
		case http.StatusOK:
			w.Header().Set("Content-Type", "application/gzip")
			w.Write(body)
		default:
			w.WriteHeader(status)
		}
	}))
	t.Cleanup(srv.Close)
	ts.url = srv.URL
	return ts
}

// put serves body at path.
func (ts *tarballServer) put(path string, body []byte) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.files[path] = body
}

// answered is how many answers of status the server sent.
func (ts *tarballServer) answered(status int) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.counts[status]
}

// etagOf is the ETag the tarball server sends for body.
func etagOf(body []byte) string {
	sum := sha256.Sum256(body)
	return `"` + hex.EncodeToString(sum[:8]) + `"`
}

// tarGzFiles is a gzipped tarball of files (path: content) in a top
// directory named top, made by tarGzTree from a directory written here.
func tarGzFiles(t *testing.T, top string, files map[string]string) []byte {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, files)
	return tarGzTree(t, dir, top)
}

// writeSecretFile writes secret to a new file, registers it as a secret,
// and returns the file.
func writeSecretFile(t *testing.T, what, secret string) string {
	t.Helper()
	secrets.add(t, what, secret)
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// webhookPath is where berth takes webhook deliveries.
const webhookPath = "/api/v1/sources/webhook"

// githubPush is the body of a GitHub push event of ref to the repository
// at url, with the fields berth reads and a few it does not.
func githubPush(url, ref string) []byte {
	b, _ := json.Marshal(map[string]any{
		"ref":    ref,
		"after":  strings.Repeat("0", 40),
		"pusher": map[string]string{"name": "e2e"},
		"repository": map[string]any{
			"full_name": "e2e/" + filepath.Base(url),
			"clone_url": url,
			"html_url":  strings.TrimSuffix(url, ".git"),
		},
	})
	return b
}

// gitlabPush is the body of a GitLab push (or tag push) hook of ref to
// the repository at url.
func gitlabPush(url, ref string) []byte {
	b, _ := json.Marshal(map[string]any{
		"object_kind": "tag_push",
		"ref":         ref,
		"project": map[string]any{
			"git_http_url": url,
			"web_url":      strings.TrimSuffix(url, ".git"),
		},
	})
	return b
}

// hubSignature is GitHub's X-Hub-Signature-256 of body with secret.
func hubSignature(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// delivery is a webhook delivery: GitHub's when event is set, signed with
// secret; GitLab's when gitlab is set, with the token secret.
type delivery struct {
	github, gitlab string // the event header's value
	secret         string
	body           []byte
	// signed, when set, is the body GitHub's signature is computed over
	// instead of body.
	signed []byte
	// query is the webhook URL's query (source=ns/pkg), if any.
	query string
}

// deliver posts d to the server at base and returns the answer's status
// and its "checked" count (-1 when the answer holds none).
func deliver(t *testing.T, base string, d delivery) (int, int) {
	t.Helper()
	target := base + webhookPath
	if d.query != "" {
		target += "?" + d.query
	}
	req, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(d.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	switch {
	case d.github != "":
		req.Header.Set("X-GitHub-Event", d.github)
		req.Header.Set("X-GitHub-Delivery", "e2e-"+strconv.FormatInt(time.Now().UnixNano(), 36))
		signed := d.body
		if d.signed != nil {
			signed = d.signed
		}
		req.Header.Set("X-Hub-Signature-256", hubSignature(d.secret, signed))
	case d.gitlab != "":
		req.Header.Set("X-Gitlab-Event", d.gitlab)
		req.Header.Set("X-Gitlab-Token", d.secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var answer struct {
		Checked *int `json:"checked"`
	}
	if json.Unmarshal(body, &answer) != nil || answer.Checked == nil {
		return resp.StatusCode, -1
	}
	return resp.StatusCode, *answer.Checked
}

// mustDeliver delivers d and fails the test unless berth answers 202 and
// checks want sources.
func mustDeliver(t *testing.T, base string, d delivery, want int) {
	t.Helper()
	if code, n := deliver(t, base, d); code != http.StatusAccepted || n != want {
		t.Fatalf("webhook %s: %d {checked: %d}, want 202 {checked: %d}", d.query, code, n, want)
	}
}

// reader reads path from a berth (directly, or with credentials) and
// returns the status and body.
type reader func(t *testing.T, path string) (int, []byte)

// open reads from s without credentials.
func open(s *server) reader {
	return func(t *testing.T, path string) (int, []byte) {
		t.Helper()
		code, body := s.get(t, path)
		return code, []byte(body)
	}
}

// as reads from s's /api/v1 and /metrics with c's Basic credentials.
func as(s *server, c creds) reader {
	return func(t *testing.T, path string) (int, []byte) {
		t.Helper()
		h := roundTrip(t, http.MethodGet, s.url()+path, c, "", nil, nil)
		return h.status, h.body
	}
}

// sourcesOf is GET /api/v1/sources.
func sourcesOf(t *testing.T, read reader) apiv1.Sources {
	t.Helper()
	code, body := read(t, "/api/v1/sources")
	if code != http.StatusOK {
		t.Fatalf("GET /api/v1/sources: %d %s", code, body)
	}
	var list apiv1.Sources
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("GET /api/v1/sources: %v\n%s", err, body)
	}
	return list
}

// sourceOf is the status of the source of ns/pkg, failing the test when
// GET /api/v1/sources does not list it.
func sourceOf(t *testing.T, read reader, ns, pkg string) apiv1.Source {
	t.Helper()
	list := sourcesOf(t, read)
	for _, s := range list.Sources {
		if s.Namespace == ns && s.Package == pkg {
			return s
		}
	}
	t.Fatalf("GET /api/v1/sources does not list %s/%s: %+v", ns, pkg, list.Sources)
	return apiv1.Source{}
}

// sourceTimeout bounds how long a test waits for a check and its build.
const sourceTimeout = 60 * time.Second

// waitSource polls the status of ns/pkg until cond holds, and returns it.
func waitSource(t *testing.T, read reader, ns, pkg, what string, cond func(apiv1.Source) bool) apiv1.Source {
	t.Helper()
	var last apiv1.Source
	for deadline := time.Now().Add(sourceTimeout); ; time.Sleep(100 * time.Millisecond) {
		if last = sourceOf(t, read, ns, pkg); cond(last) {
			return last
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(last, "", "  ")
			t.Fatalf("timed out after %v waiting for the source of %s/%s: %s; its status:\n%s", sourceTimeout, ns, pkg, what, b)
		}
	}
}

// failedWith reports whether the source's last error has reason and its
// message holds every one of words.
func failedWith(s apiv1.Source, reason string, words ...string) bool {
	if s.LastError == nil || s.LastError.Reason != reason {
		return false
	}
	for _, w := range words {
		if !strings.Contains(s.LastError.Message, w) {
			return false
		}
	}
	return true
}

// refOf is the tag-pattern source's entry for ref (refs/tags/...).
func refOf(s apiv1.Source, ref string) (apiv1.SourceRef, bool) {
	for _, r := range s.Refs {
		if r.Ref == ref {
			return r, true
		}
	}
	return apiv1.SourceRef{}, false
}

// versionTags are the version tags of repo, sorted: its tags without
// cosign's signature and attestation tags (sha256-<hex>.sig, .att); none
// when the repository does not exist.
func versionTags(t *testing.T, read reader, repo string) []string {
	t.Helper()
	code, body := read(t, "/v2/"+repo+"/tags/list")
	if code == http.StatusNotFound {
		return nil
	}
	if code != http.StatusOK {
		t.Fatalf("GET /v2/%s/tags/list: %d %s", repo, code, body)
	}
	var list struct{ Tags []string }
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	var tags []string
	for _, tag := range list.Tags {
		if !strings.HasPrefix(tag, "sha256-") {
			tags = append(tags, tag)
		}
	}
	slices.Sort(tags)
	return tags
}

// catalogVersions are the versions GET /api/v1/packages/{repo} lists,
// sorted, with their digests; none when the package is unknown.
func catalogVersions(t *testing.T, read reader, repo string) map[string]string {
	t.Helper()
	code, body := read(t, "/api/v1/packages/"+repo)
	if code == http.StatusNotFound {
		return nil
	}
	if code != http.StatusOK {
		t.Fatalf("GET /api/v1/packages/%s: %d %s", repo, code, body)
	}
	var p apiv1.Package
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	versions := map[string]string{}
	for _, v := range p.Versions {
		versions[v.Version] = v.Digest
	}
	return versions
}

// waitVersions waits until the catalog lists exactly the versions want of
// repo, and returns their digests.
func waitVersions(t *testing.T, read reader, repo string, want ...string) map[string]string {
	t.Helper()
	slices.Sort(want)
	var got map[string]string
	for deadline := time.Now().Add(sourceTimeout); ; time.Sleep(100 * time.Millisecond) {
		got = catalogVersions(t, read, repo)
		keys := make([]string, 0, len(got))
		for v := range got {
			keys = append(keys, v)
		}
		slices.Sort(keys)
		if slices.Equal(keys, want) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s to list the versions %q: it lists %q", sourceTimeout, repo, want, keys)
		}
	}
}

// sourceChanges are the change feed's events of tracked sources, read
// page by page from the start.
func sourceChanges(t *testing.T, read reader) []apiv1.Change {
	t.Helper()
	var out []apiv1.Change
	for since := int64(0); ; {
		code, body := read(t, "/api/v1/changes?since="+strconv.FormatInt(since, 10))
		if code != http.StatusOK {
			t.Fatalf("GET /api/v1/changes?since=%d: %d %s", since, code, body)
		}
		var feed apiv1.Changes
		if err := json.Unmarshal(body, &feed); err != nil {
			t.Fatal(err)
		}
		for _, c := range feed.Changes {
			if c.Action == apiv1.ActionSource {
				out = append(out, c)
			}
		}
		if len(feed.Changes) == 0 || feed.Next <= since {
			return out
		}
		since = feed.Next
	}
}

// hasChange reports whether changes hold a source event of ns/name with
// status, and (when not empty) version and reason.
func hasChange(changes []apiv1.Change, ns, name, status, version, reason string) bool {
	return slices.ContainsFunc(changes, func(c apiv1.Change) bool {
		return c.Namespace == ns && c.Name == name && c.Status == status &&
			(version == "" || c.Version == version) && (reason == "" || c.Reason == reason)
	})
}

// peerPID is the process, of pids, on the other end of the loopback TCP
// connection whose far address is remote (host:port, as a server sees
// it) and whose near port is port: the socket is found in
// /proc/net/tcp, then among the processes' descriptors. It returns 0
// when none of pids holds it.
func peerPID(remote string, port int, pids ...int) int {
	_, rport, err := net.SplitHostPort(remote)
	if err != nil {
		return 0
	}
	far, err := strconv.Atoi(rport)
	if err != nil {
		return 0
	}
	inode := socketInode(far, port)
	if inode == "" {
		return 0
	}
	for _, pid := range pids {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			if link, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); link == "socket:["+inode+"]" {
				return pid
			}
		}
	}
	return 0
}

// socketInode is the inode of the IPv4 TCP socket whose local port is
// local and remote port is remote, from /proc/net/tcp; "" if none.
func socketInode(local, remote int) string {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return ""
	}
	defer f.Close()
	want := [2]string{fmt.Sprintf(":%04X", local), fmt.Sprintf(":%04X", remote)}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 9 && strings.HasSuffix(fields[1], want[0]) && strings.HasSuffix(fields[2], want[1]) {
			return fields[9]
		}
	}
	return ""
}
