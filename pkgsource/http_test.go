package pkgsource

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// entry is one tar entry of a test archive.
type entry struct {
	name, body, link string
	typ              byte
}

func tgz(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		hdr := &tar.Header{Name: e.name, Typeflag: typ, Mode: 0o644, Size: int64(len(e.body)), Linkname: e.link, Format: tar.FormatPAX}
		if typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// loopback are the limits of tests, whose servers are on 127.0.0.1.
var loopback = Limits{AllowPrivate: true}

// emptyDir is a new empty directory for a fetch.
func emptyDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "out")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func assertEmpty(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) > 0 {
		t.Errorf("%s holds %d entries after a failed fetch, want none", dir, len(entries))
	}
	siblings, _ := os.ReadDir(filepath.Dir(dir))
	if len(siblings) != 1 {
		t.Errorf("%d entries beside %s after a failed fetch, want none (staging left behind)", len(siblings)-1, dir)
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// tarballServer serves body at /pkg.tgz with etag, honouring If-None-Match.
type tarballServer struct {
	body []byte
	etag string
}

func (s *tarballServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.etag != "" {
		w.Header().Set("ETag", s.etag)
		if r.Header.Get("If-None-Match") == s.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	w.Write(s.body)
}

func TestHTTPFetchAndResolve(t *testing.T) {
	ts := &tarballServer{etag: `"v1"`, body: tgz(t,
		entry{name: "op-1.0/", typ: tar.TypeDir},
		entry{name: "op-1.0/manifests/csv.yaml", body: "kind: ClusterServiceVersion\n"},
		entry{name: "op-1.0/metadata/annotations.yaml", body: "annotations: {}\n"},
		entry{name: "op-1.0/manifests/link.yaml", typ: tar.TypeSymlink, link: "csv.yaml"},
		entry{name: "README.md", body: "outside dir"},
	)}
	srv := httptest.NewServer(ts)
	defer srv.Close()
	spec := Spec{Kind: HTTP, URL: srv.URL + "/pkg.tgz", Dir: "op-1.0"}
	dir := emptyDir(t)
	got, err := Fetch(context.Background(), spec, dir, loopback)
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != `"v1"` || got.Kind != HTTP || got.Dir != "op-1.0" {
		t.Errorf("Fetch resolved %+v, want revision \"v1\"", got)
	}
	if s := readFile(t, filepath.Join(dir, "manifests/csv.yaml")); s != "kind: ClusterServiceVersion\n" {
		t.Errorf("csv.yaml = %q", s)
	}
	if s := readFile(t, filepath.Join(dir, "manifests/link.yaml")); s != "kind: ClusterServiceVersion\n" {
		t.Errorf("in-tree symlink reads %q", s)
	}
	if _, err := os.Stat(filepath.Join(dir, "README.md")); err == nil {
		t.Error("README.md outside Dir was written")
	}
	same, err := Resolve(context.Background(), spec, got, loopback)
	if err != nil || same.Revision != got.Revision {
		t.Errorf("Resolve of an unchanged tarball = %+v, %v; want revision %s", same, err, got.Revision)
	}
	ts.etag = `"v2"`
	moved, err := Resolve(context.Background(), spec, got, loopback)
	if err != nil || moved.Revision != `"v2"` {
		t.Errorf("Resolve after the ETag changed = %+v, %v; want revision \"v2\"", moved, err)
	}
}

func TestHTTPNoETagHashesBody(t *testing.T) {
	body := tgz(t, entry{name: "a.yaml", body: "a: 1\n"})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	defer srv.Close()
	spec := Spec{Kind: HTTP, URL: srv.URL + "/a.tgz"}
	got, err := Fetch(context.Background(), spec, emptyDir(t), loopback)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got.Revision, "sha256:") {
		t.Fatalf("revision %q, want the sha256 of the body", got.Revision)
	}
	again, err := Resolve(context.Background(), spec, got, loopback)
	if err != nil || again.Revision != got.Revision {
		t.Errorf("Resolve = %+v, %v; want revision %s", again, err, got.Revision)
	}
}

func TestHTTPHostile(t *testing.T) {
	bomb := tgz(t, entry{name: "big.yaml", body: strings.Repeat("a", 4<<20)})
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(bomb) }))
	defer other.Close()
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	files := make([]entry, 20)
	for i := range files {
		files[i] = entry{name: strings.Repeat("f", i+1), body: "x"}
	}
	routes := map[string]http.HandlerFunc{
		"/bomb.tgz":   func(w http.ResponseWriter, r *http.Request) { w.Write(bomb) },
		"/dotdot.tgz": func(w http.ResponseWriter, r *http.Request) { w.Write(tgz(t, entry{name: "../evil", body: "x"})) },
		"/abs.tgz":    func(w http.ResponseWriter, r *http.Request) { w.Write(tgz(t, entry{name: "/etc/evil", body: "x"})) },
		"/symlink.tgz": func(w http.ResponseWriter, r *http.Request) {
			w.Write(tgz(t, entry{name: "l", typ: tar.TypeSymlink, link: "../../etc/passwd"}))
		},
		"/absLink.tgz": func(w http.ResponseWriter, r *http.Request) {
			w.Write(tgz(t, entry{name: "l", typ: tar.TypeSymlink, link: "/etc/passwd"}))
		},
		"/device.tgz":   func(w http.ResponseWriter, r *http.Request) { w.Write(tgz(t, entry{name: "dev", typ: tar.TypeChar})) },
		"/whiteout.tgz": func(w http.ResponseWriter, r *http.Request) { w.Write(tgz(t, entry{name: "a/.wh.b", body: ""})) },
		"/many.tgz":     func(w http.ResponseWriter, r *http.Request) { w.Write(tgz(t, files...)) },
		"/notgz":        func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>")) },
		"/missing":      http.NotFound,
		"/private":      func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusUnauthorized) },
		"/redirect":     func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, otherURL+"/x.tgz", http.StatusFound) },
		"/trickle": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			for _, b := range tgz(t, entry{name: "a", body: "slow"})[:8] {
				w.Write([]byte{b})
				w.(http.Flusher).Flush()
				time.Sleep(300 * time.Millisecond)
			}
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { routes[r.URL.Path](w, r) }))
	defer srv.Close()
	small := Limits{AllowPrivate: true, MaxBytes: 1 << 20, MaxFiles: 10, StallTimeout: 200 * time.Millisecond, AllowHosts: []string{"127.0.0.1"}}
	for _, tc := range []struct {
		path   string
		dir    string
		limits Limits
		want   string
		is     error
	}{
		{"/bomb.tgz", "", small, "more than 1048576 bytes unpacked (at big.yaml)", ErrLimit},
		{"/bomb.tgz", "elsewhere", small, "the archive unpacks to more than 1048576 bytes", ErrLimit},
		{"/bomb.tgz", "", Limits{AllowPrivate: true, MaxBytes: 3 << 20, MaxFiles: 10}, "more than 3145728 bytes unpacked (at big.yaml)", ErrLimit},
		{"/dotdot.tgz", "", small, `path "../evil" is absolute or goes out of the directory`, ErrInvalid},
		{"/abs.tgz", "", small, `path "/etc/evil" is absolute or goes out of the directory`, ErrInvalid},
		{"/symlink.tgz", "", small, "symlink l points out of the directory (to ../../etc/passwd)", ErrInvalid},
		{"/absLink.tgz", "", small, "symlink l points out of the directory (to /etc/passwd)", ErrInvalid},
		{"/device.tgz", "", small, "dev is a character device, not a file, directory or symlink", ErrInvalid},
		{"/whiteout.tgz", "", small, "a/.wh.b is a whiteout", ErrInvalid},
		{"/many.tgz", "", small, "more than 10 files", ErrLimit},
		{"/notgz", "", small, "not a gzipped tar", ErrInvalid},
		{"/missing", "", small, "404 Not Found: check the URL", ErrInvalid},
		{"/private", "", small, "401 Unauthorized: check the credentials", ErrDenied},
		{"/redirect", "", small, "redirect from " + strings.TrimPrefix(srv.URL, "http://") + " to host localhost, which is not in the allowed hosts", ErrDenied},
		{"/trickle", "", small, "the server sent nothing for 200ms (stall timeout)", ErrLimit},
		{"/bomb.tgz", "", Limits{}, "is loopback, link-local, private or unspecified (allow private addresses to fetch it)", ErrDenied},
		{"/bomb.tgz", "", Limits{AllowPrivate: true, AllowHosts: []string{"example.com"}}, "host 127.0.0.1 is not in the allowed hosts", ErrDenied},
		{"/trickle", "", Limits{AllowPrivate: true, Timeout: 500 * time.Millisecond}, "the fetch took longer than 500ms (timeout)", ErrLimit},
	} {
		t.Run(tc.path, func(t *testing.T) {
			dir := emptyDir(t)
			_, err := Fetch(context.Background(), Spec{Kind: HTTP, URL: srv.URL + tc.path, Dir: tc.dir, Credentials: Credentials{Username: "u", Password: "hunter2"}}, dir, tc.limits)
			t.Log(err)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, tc.is) {
				t.Fatalf("Fetch error %v, want one containing %q and wrapping %v", err, tc.want, tc.is)
			}
			if !strings.Contains(err.Error(), "http source "+srv.URL+tc.path) {
				t.Errorf("error %q does not name the source", err)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q shows the password", err)
			}
			assertEmpty(t, dir)
		})
	}
}

func TestCompose(t *testing.T) {
	bodies := map[string][]byte{
		"/crds.tgz":  tgz(t, entry{name: "crds/a.yaml", body: "kind: CustomResourceDefinition\n"}),
		"/op.tgz":    tgz(t, entry{name: "deploy.yaml", body: "kind: Deployment\n"}),
		"/clash.tgz": tgz(t, entry{name: "a.yaml", body: "other\n"}),
		"/bad.tgz":   tgz(t, entry{name: "../x", body: "x"}),
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(bodies[r.URL.Path]) }))
	defer srv.Close()
	ctx := context.Background()
	dir := emptyDir(t)
	got, err := Compose(ctx, []Spec{
		{Kind: HTTP, URL: srv.URL + "/crds.tgz", Dir: "crds", Destination: "manifests/crds"},
		{Kind: HTTP, URL: srv.URL + "/op.tgz", Destination: "manifests"},
	}, dir, loopback)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].URL != srv.URL+"/crds.tgz" || got[1].URL != srv.URL+"/op.tgz" {
		t.Errorf("Compose resolved %+v, want both sources in order", got)
	}
	if s := readFile(t, filepath.Join(dir, "manifests/crds/a.yaml")); s != "kind: CustomResourceDefinition\n" {
		t.Errorf("manifests/crds/a.yaml = %q", s)
	}
	if s := readFile(t, filepath.Join(dir, "manifests/deploy.yaml")); s != "kind: Deployment\n" {
		t.Errorf("manifests/deploy.yaml = %q", s)
	}
	for _, tc := range []struct {
		name  string
		specs []Spec
		want  string
	}{
		{"same file", []Spec{
			{Kind: HTTP, URL: srv.URL + "/crds.tgz", Dir: "crds"},
			{Kind: HTTP, URL: srv.URL + "/clash.tgz"},
		}, "http source " + srv.URL + "/crds.tgz and http source " + srv.URL + "/clash.tgz both write a.yaml: give them different destinations"},
		{"file where a directory is", []Spec{
			{Kind: HTTP, URL: srv.URL + "/crds.tgz", Dir: "crds", Destination: "a.yaml"},
			{Kind: HTTP, URL: srv.URL + "/clash.tgz"},
		}, "http source " + srv.URL + "/crds.tgz writes the directory a.yaml and http source " + srv.URL + "/clash.tgz a file of that name"},
		{"directory where a file is", []Spec{
			{Kind: HTTP, URL: srv.URL + "/crds.tgz", Dir: "crds", Destination: "x"},
			{Kind: HTTP, URL: srv.URL + "/clash.tgz", Destination: "x/a.yaml"},
		}, "http source " + srv.URL + "/crds.tgz writes the file x/a.yaml and http source " + srv.URL + "/clash.tgz a directory of that name"},
		{"destination out", []Spec{{Kind: HTTP, URL: srv.URL + "/op.tgz", Destination: "../up"}}, `destination "../up" goes out of the directory`},
		{"one bad source", []Spec{{Kind: HTTP, URL: srv.URL + "/op.tgz"}, {Kind: HTTP, URL: srv.URL + "/bad.tgz"}}, `path "../x" is absolute`},
		{"unknown kind", []Spec{{Kind: "svn", URL: "svn://x"}}, `kind "svn" is not git, http or image`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := emptyDir(t)
			_, err := Compose(ctx, tc.specs, dir, loopback)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Compose error %v, want one containing %q", err, tc.want)
			}
			assertEmpty(t, dir)
		})
	}
	if _, err := Fetch(ctx, Spec{Kind: HTTP, URL: srv.URL + "/op.tgz"}, dir, loopback); err == nil || !strings.Contains(err.Error(), "the directory is not empty") {
		t.Errorf("Fetch into a non-empty directory: %v, want an error saying it is not empty", err)
	}
}

// A host name is checked at the address it resolves to, when dialled:
// localhost is refused like 127.0.0.1, and so is a redirect to it.
func TestPrivateAddressByName(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(tgz(t, entry{name: "a", body: "a"})) }))
	defer srv.Close()
	url := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) + "/a.tgz"
	for _, check := range []func() error{
		func() error {
			_, err := Fetch(context.Background(), Spec{Kind: HTTP, URL: url}, emptyDir(t), Limits{})
			return err
		},
		func() error {
			_, err := Resolve(context.Background(), Spec{Kind: HTTP, URL: url}, Resolved{}, Limits{})
			return err
		},
	} {
		err := check()
		if err == nil || !strings.Contains(err.Error(), "is loopback, link-local, private or unspecified") || !errors.Is(err, ErrDenied) {
			t.Errorf("error %v, want the loopback address refused", err)
		}
	}
}

func TestHTTPLastModified(t *testing.T) {
	body := tgz(t, entry{name: "a.yaml", body: "a: 1\n"})
	modified := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var conditional atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-Modified-Since") != "" {
			conditional.Add(1)
		}
		http.ServeContent(w, r, "a.tgz", modified, bytes.NewReader(body))
	}))
	defer srv.Close()
	spec := Spec{Kind: HTTP, URL: srv.URL + "/a.tgz"}
	got, err := Fetch(context.Background(), spec, emptyDir(t), loopback)
	if err != nil {
		t.Fatal(err)
	}
	if want := modified.Format(http.TimeFormat); got.Revision != want {
		t.Fatalf("revision %q, want the Last-Modified date %q", got.Revision, want)
	}
	same, err := Resolve(context.Background(), spec, got, loopback)
	if err != nil || same.Revision != got.Revision {
		t.Errorf("Resolve (If-Modified-Since) = %+v, %v; want revision %s", same, err, got.Revision)
	}
	modified = modified.Add(time.Hour)
	moved, err := Resolve(context.Background(), spec, got, loopback)
	if want := modified.Format(http.TimeFormat); err != nil || moved.Revision != want {
		t.Errorf("Resolve after the file changed = %+v, %v; want revision %s", moved, err, want)
	}
	if n := conditional.Load(); n != 2 {
		t.Errorf("%d conditional requests, want 2 (each Resolve)", n)
	}
}
