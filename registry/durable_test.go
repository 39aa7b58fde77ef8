//go:build linux

package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// gatedFlusher stands in for the file system flush: each Sync reports that
// it was entered, then waits for the gate and returns err.
type gatedFlusher struct {
	calls   atomic.Int64
	entered chan struct{}
	gate    chan struct{}
	err     error
}

func (f *gatedFlusher) Sync() error {
	f.calls.Add(1)
	if f.entered != nil {
		f.entered <- struct{}{}
		<-f.gate
	}
	return f.err
}

func (f *gatedFlusher) Close() error { return nil }

// send sends a request and returns the status and body.
func send(method, url string, body []byte, header ...string) (int, string, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// startUpload POSTs a new upload of repo and returns its location.
func startUpload(t *testing.T, base, repo string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/v2/"+repo+"/blobs/uploads/", nil)
	return accepted(t, base, req)
}

// accepted sends an upload request, requires 202 Accepted and returns the
// upload's next location.
func accepted(t *testing.T, base string, req *http.Request) string {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("%s upload: %s", req.Method, resp.Status)
	}
	loc := resp.Header.Get("Location")
	if !strings.HasPrefix(loc, "http") {
		loc = base + loc
	}
	return loc
}

// TestPushIsAnsweredAfterTheFlush: the 201 of a blob upload and of a
// manifest reaches the client only once the flush has returned, and only
// requests that stored something flush.
func TestPushIsAnsweredAfterTheFlush(t *testing.T) {
	reg, srv := newFilesystemRegistry(t)
	if reg.syncer == nil {
		t.Fatal("a filesystem registry on Linux has no flusher")
	}
	f := &gatedFlusher{entered: make(chan struct{}), gate: make(chan struct{})}
	reg.syncer = f

	blob := []byte("layer")
	patch, _ := http.NewRequest(http.MethodPatch, startUpload(t, srv.URL, "a/one"), bytes.NewReader(blob))
	patch.Header.Set("Content-Type", "application/octet-stream")
	loc := accepted(t, srv.URL, patch)
	if n := f.calls.Load(); n != 0 {
		t.Fatalf("%d flushes for starting an upload and sending its data, want 0", n)
	}
	sep := "?"
	if strings.Contains(loc, "?") {
		sep = "&"
	}
	done := make(chan string, 1)
	go func() {
		code, body, err := send(http.MethodPut, loc+sep+"digest="+digest.FromBytes(blob).String(), nil)
		done <- fmt.Sprintf("%d %s %v", code, body, err)
	}()
	select {
	case got := <-done:
		t.Fatalf("the upload was answered (%s) without a flush", got)
	case <-f.entered:
	}
	select {
	case got := <-done:
		t.Fatalf("the upload was answered (%s) while its flush had not returned", got)
	default:
	}
	close(f.gate)
	if got := <-done; !strings.HasPrefix(got, "201 ") {
		t.Fatalf("PUT after the flush: %s", got)
	}

	f.entered = nil
	m := manifest(t, srv.URL, "a/one", "content", "image")
	before := f.calls.Load()
	if code, e := putManifest(t, srv.URL, "a/one", "v1", m); code != http.StatusCreated {
		t.Fatalf("manifest PUT: %d %v", code, e)
	}
	if n := f.calls.Load() - before; n != 1 {
		t.Errorf("%d flushes for a manifest PUT, want 1", n)
	}
}

// TestFailedFlushFailsThePush: when the flush fails, the client is told the
// push failed, and pushing again once the disk is back works.
func TestFailedFlushFailsThePush(t *testing.T) {
	reg, srv := newFilesystemRegistry(t)
	f := &gatedFlusher{err: errors.New("input/output error")}
	reg.syncer = f

	blob := []byte("config")
	loc := startUpload(t, srv.URL, "a/one")
	code, body, err := send(http.MethodPut, loc+"&digest="+digest.FromBytes(blob).String(), blob, "Content-Type", "application/octet-stream")
	if err != nil || code != http.StatusInternalServerError || !strings.Contains(body, `"UNKNOWN"`) {
		t.Fatalf("upload with a failing flush: %d %s %v; want 500 UNKNOWN", code, body, err)
	}

	f.err = nil
	m := manifest(t, srv.URL, "a/one", "content", "image")
	if code, e := putManifest(t, srv.URL, "a/one", "v1", m); code != http.StatusCreated {
		t.Fatalf("push once the disk is back: %d %v", code, e)
	}
	if code, got, err := send(http.MethodGet, srv.URL+"/v2/a/one/manifests/v1", nil, "Accept", ocispec.MediaTypeImageManifest); err != nil || code != http.StatusOK || got != string(m) {
		t.Fatalf("GET v1: %d %v", code, err)
	}
}

// recordingDriver is the in-memory driver, counting the writes it is asked for.
type recordingDriver struct {
	*inmemory.Driver
	puts atomic.Int64
}

func (d *recordingDriver) PutContent(ctx context.Context, path string, content []byte) error {
	d.puts.Add(1)
	return d.Driver.PutContent(ctx, path, content)
}

// TestDurableDriverWrites: upload state is written by berth and never marks
// a batch; content inside a request is written by berth and marks it;
// content outside a request is left to distribution's driver, which syncs.
func TestDurableDriverWrites(t *testing.T) {
	root := t.TempDir()
	inner := &recordingDriver{Driver: inmemory.New()}
	d := &durableDriver{StorageDriver: inner, root: root}
	link := "/docker/registry/v2/repositories/a/one/_layers/sha256/" + strings.Repeat("0", 64) + "/link"
	upload := "/docker/registry/v2/repositories/a/one/_uploads/1234/startedat"

	for _, tc := range []struct {
		name        string
		path        string
		batch       bool
		inner       bool // distribution's driver writes it
		markedDirty bool
	}{
		{"content outside a request", link, false, true, false},
		{"content inside a request", link, true, false, true},
		{"upload state outside a request", upload, false, false, false},
		{"upload state inside a request", upload, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, b := context.Background(), &syncBatch{}
			if tc.batch {
				ctx = context.WithValue(ctx, syncBatchKey{}, b)
			}
			before := inner.puts.Load()
			if err := d.PutContent(ctx, tc.path, []byte("sha256:x")); err != nil {
				t.Fatal(err)
			}
			if got := inner.puts.Load() > before; got != tc.inner {
				t.Errorf("written by distribution's driver: %v, want %v", got, tc.inner)
			}
			if !tc.inner {
				if got, err := os.ReadFile(filepath.Join(root, tc.path)); err != nil || string(got) != "sha256:x" {
					t.Errorf("file: %q %v", got, err)
				}
			}
			if got := b.dirty.Load(); got != tc.markedDirty {
				t.Errorf("batch marked: %v, want %v", got, tc.markedDirty)
			}
		})
	}
	for _, bad := range []string{"relative/path", "/a/_uploads/x y", "/a//_uploads/x"} {
		if err := d.PutContent(context.Background(), bad, nil); err == nil {
			t.Errorf("PutContent(%q) accepted", bad)
		}
	}
}
