package ui_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/ui"
)

// secretFiles are files of alice's private chart a/secret beside its
// Chart.yaml: a binary file, one past what a file page shows, and an HTML
// and an SVG file that would run script if a browser rendered them.
var secretFiles = map[string]string{
	"files/blob.bin":  "\x00\x01\x02binary",
	"files/big.txt":   strings.Repeat("a line of text\n", (300<<10)/15),
	"files/page.html": `<html><body><script>alert('html')</script></body></html>`,
	"files/logo.svg":  `<svg xmlns="http://www.w3.org/2000/svg"><script>alert('svg')</script></svg>`,
}

// TestDownload: the file page's download link is a UI URL that honours the
// session, under the access decision of every page, and serves the file as
// an attachment that never runs in berth's origin.
func TestDownload(t *testing.T) {
	h := authUI(t)
	rec := postLogin(h, "alice", "alice-pw")
	if rec.Code != http.StatusSeeOther || len(rec.Result().Cookies()) != 1 {
		t.Fatalf("login: %d", rec.Code)
	}
	alice := func(r *http.Request) { r.AddCookie(rec.Result().Cookies()[0]) }
	anonymous := func(*http.Request) {}
	const secret = "/ui/packages/a/secret/versions/1.0.0"

	_, page := get(t, h, secret+"/files/files/big.txt", alice)
	if !strings.Contains(page, `href="`+secret+`/download/files/big.txt" download>Download</a>`) {
		t.Errorf("the file page does not link %s/download/files/big.txt", secret)
	}

	for _, tc := range []struct {
		name    string
		path    string
		viewer  func(*http.Request)
		status  int
		body    string // of a download; "" for an error page
		typ     string
		attName string // the attachment's file name
	}{
		{"binary", secret + "/download/files/blob.bin", alice, http.StatusOK, secretFiles["files/blob.bin"], "application/octet-stream", "blob.bin"},
		{"past 256 KiB", secret + "/download/files/big.txt", alice, http.StatusOK, secretFiles["files/big.txt"], "text/plain; charset=utf-8", "big.txt"},
		{"HTML", secret + "/download/files/page.html", alice, http.StatusOK, secretFiles["files/page.html"], "application/octet-stream", "page.html"},
		{"SVG", secret + "/download/files/logo.svg", alice, http.StatusOK, secretFiles["files/logo.svg"], "image/svg+xml", "logo.svg"},
		{"escaped slash", secret + "/download/files%2Fblob.bin", alice, http.StatusOK, secretFiles["files/blob.bin"], "application/octet-stream", "blob.bin"},
		{"public, anonymous", "/ui/packages/pub/open/versions/1.0.0/download/Chart.yaml", anonymous, http.StatusOK, "apiVersion: v2\nname: open\nversion: 1.0.0\n", "application/yaml", "Chart.yaml"},
		{"private, anonymous", secret + "/download/files/blob.bin", anonymous, http.StatusNotFound, "", "", ""},
		{"another team's", "/ui/packages/b/other/versions/1.0.0/download/Chart.yaml", alice, http.StatusNotFound, "", "", ""},
		{"no such file", secret + "/download/files/none.bin", alice, http.StatusNotFound, "", "", ""},
		{"no such version", "/ui/packages/a/secret/versions/9.9.9/download/Chart.yaml", alice, http.StatusNotFound, "", "", ""},
	} {
		resp, body := get(t, h, tc.path, tc.viewer)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.status)
			continue
		}
		if tc.status != http.StatusOK {
			checkPage(t, tc.name, resp, body)
			_, unknown := get(t, h, "/ui/packages/nowhere/nothing/versions/1.0.0/download/Chart.yaml", tc.viewer)
			if body != unknown {
				t.Errorf("%s: the 404 page differs from an unknown package's", tc.name)
			}
			continue
		}
		if body != tc.body {
			t.Errorf("%s: %d bytes, want the file's %d", tc.name, len(body), len(tc.body))
		}
		for k, want := range map[string]string{
			"Content-Type":           tc.typ,
			"Content-Disposition":    `attachment; filename=` + tc.attName,
			"X-Content-Type-Options": "nosniff",
			"Cache-Control":          "no-store",
		} {
			if got := resp.Header.Get(k); got != want {
				t.Errorf("%s: %s %q, want %q", tc.name, k, got, want)
			}
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "sandbox") || !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("%s: Content-Security-Policy %q does not sandbox the file", tc.name, csp)
		}
	}
}

// fileCatalog is a catalog whose files are what file returns, for any path.
type fileCatalog struct {
	*catalog.Catalog
	file func() (io.ReadCloser, int64)
}

func (c fileCatalog) File(context.Context, catalog.Access, string, string, string, string) (io.ReadCloser, int64, error) {
	rc, size := c.file()
	return rc, size, nil
}

// writtenReader yields 1 KiB at a time, n times, and fails the test when
// it is read again before the response has any of the bytes already read.
type writtenReader struct {
	t       *testing.T
	rec     *httptest.ResponseRecorder
	n, read int
}

func (c *writtenReader) Read(p []byte) (int, error) {
	if c.read == c.n {
		return 0, io.EOF
	}
	if c.read > 0 && c.rec.Body.Len() == 0 {
		c.t.Errorf("chunk %d read before anything was written", c.read)
	}
	c.read++
	n := min(len(p), 1<<10)
	copy(p, bytes.Repeat([]byte{'x'}, n))
	return n, nil
}

func (c *writtenReader) Close() error { return nil }

// TestDownloadIsStreamed: a download is written as it is read, not held.
func TestDownloadIsStreamed(t *testing.T) {
	rec := httptest.NewRecorder()
	r := &writtenReader{t: t, rec: rec, n: 64}
	h := ui.New(ui.Options{Catalog: fileCatalog{file: func() (io.ReadCloser, int64) { return r, 64 << 10 }}})
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ui/packages/a/b/versions/1.0.0/download/big.bin", nil))
	if rec.Code != http.StatusOK || rec.Body.Len() != 64<<10 {
		t.Fatalf("status %d, %d bytes", rec.Code, rec.Body.Len())
	}
}

// TestDownloadShortReadAborts: a file that ends before its size is a broken
// download, logged, never a short file that looks complete.
func TestDownloadShortReadAborts(t *testing.T) {
	var logs bytes.Buffer
	h := ui.New(ui.Options{
		Catalog: fileCatalog{file: func() (io.ReadCloser, int64) { return io.NopCloser(strings.NewReader("short")), 100 }},
		Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	res, err := http.Get(srv.URL + "/ui/packages/a/b/versions/1.0.0/download/x.bin")
	if err == nil {
		defer res.Body.Close()
		_, err = io.ReadAll(res.Body)
	}
	if err == nil {
		t.Error("a short file was served as a complete one")
	}
	srv.Close() // waits for the handler, which logged
	if !strings.Contains(logs.String(), "download failed after it started") {
		t.Errorf("not logged: %s", logs.String())
	}
}
