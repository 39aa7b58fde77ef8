package registry

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/distribution/distribution/v3/registry/api/errcode"
	storagedriver "github.com/distribution/distribution/v3/registry/storage/driver"
	storagemiddleware "github.com/distribution/distribution/v3/registry/storage/driver/middleware"
	"github.com/prometheus/client_golang/prometheus"
)

// How berth makes pushes durable on the filesystem driver.
//
// distribution's filesystem driver syncs every file it writes, and the
// directory of every file it replaces: 28 fsyncs for a package push of a
// config, one layer and a manifest. Half of them are of upload session
// files (startedat, hash states, the data of each PATCH), which are
// abandoned after a crash and rebuilt or refused when a client resumes: the
// digest of a blob is checked when its upload completes. The rest, the
// content and link files, must be on disk before the client is answered.
//
// durableDriver, a storage middleware around the filesystem driver, writes
// upload session files without syncing them. Inside a client's write request
// (a request carrying a syncBatch), it writes content and link files
// without syncing either, and marks the batch; serveDurably then holds the
// response until one syncfs(2) of the file system (groupsync, shared by the
// requests that wait at the same time) has put everything on disk, the
// directory entries of renames included, which distribution's Move never
// syncs. Content and links written outside a request (berth's own OLM
// images) keep distribution's per-file syncs.

// durableMiddleware is the name durableDriver is registered under with
// distribution's storage middleware.
const durableMiddleware = "berth-durable"

func init() {
	if err := storagemiddleware.Register(durableMiddleware, initDurable); err != nil {
		panic(err)
	}
}

func initDurable(_ context.Context, d storagedriver.StorageDriver, options map[string]any) (storagedriver.StorageDriver, error) {
	root, _ := options["rootdirectory"].(string)
	if root == "" {
		return nil, errors.New("berth-durable: no rootdirectory")
	}
	return &durableDriver{StorageDriver: d, root: root}, nil
}

// durableDriver is distribution's filesystem driver (d, with its path checks
// and thread limit) with the writes described above.
type durableDriver struct {
	storagedriver.StorageDriver
	root string
}

// syncBatch marks a request whose writes are made durable together before
// its response is sent.
type syncBatch struct{ dirty atomic.Bool }

type syncBatchKey struct{}

func batchOf(ctx context.Context) *syncBatch {
	b, _ := ctx.Value(syncBatchKey{}).(*syncBatch)
	return b
}

// isUploadState reports whether path is in an upload session's directory.
// Repository name components start with a letter or digit, so no name
// holds "/_uploads/".
func isUploadState(path string) bool { return strings.Contains(path, "/_uploads/") }

// PutContent writes contents to path, atomically (a temporary file renamed
// over it), as distribution's driver does.
func (d *durableDriver) PutContent(ctx context.Context, path string, contents []byte) error {
	b := batchOf(ctx)
	if !isUploadState(path) && b == nil {
		return d.StorageDriver.PutContent(ctx, path, contents)
	}
	if !storagedriver.PathRegexp.MatchString(path) {
		return storagedriver.InvalidPathError{Path: path, DriverName: d.Name()}
	}
	full := d.fullPath(path)
	if err := os.MkdirAll(filepath.Dir(full), 0o777); err != nil {
		return err
	}
	var suffix [8]byte
	_, _ = rand.Read(suffix[:])
	tmp := full + "." + hex.EncodeToString(suffix[:]) + ".tmp"
	if err := os.WriteFile(tmp, contents, 0o666); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, full); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if !isUploadState(path) {
		b.dirty.Store(true)
	}
	return nil
}

// Writer writes upload data without syncing it as it goes; its Commit, which
// precedes the move of the data into the blob store, syncs it, or marks the
// request's batch. Other paths are distribution's.
func (d *durableDriver) Writer(ctx context.Context, path string, append bool) (storagedriver.FileWriter, error) {
	if !isUploadState(path) {
		return d.StorageDriver.Writer(ctx, path, append)
	}
	if !storagedriver.PathRegexp.MatchString(path) {
		return nil, storagedriver.InvalidPathError{Path: path, DriverName: d.Name()}
	}
	full := d.fullPath(path)
	if err := os.MkdirAll(filepath.Dir(full), 0o777); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE, 0o666)
	if err != nil {
		return nil, err
	}
	var size int64
	if append {
		size, err = f.Seek(0, 2)
	} else {
		err = f.Truncate(0)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &uploadWriter{file: f, bw: bufio.NewWriter(f), size: size, batch: batchOf(ctx)}, nil
}

func (d *durableDriver) fullPath(path string) string {
	return filepath.Join(d.root, filepath.FromSlash(path))
}

// uploadWriter is an upload's data file. Unlike distribution's writer, Close
// does not sync: the data of an unfinished upload is not the client's yet.
type uploadWriter struct {
	file  *os.File
	bw    *bufio.Writer
	size  int64
	batch *syncBatch
	done  bool
}

func (w *uploadWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, errors.New("upload writer already closed, committed or cancelled")
	}
	n, err := w.bw.Write(p)
	w.size += int64(n)
	return n, err
}

func (w *uploadWriter) Size() int64 { return w.size }

func (w *uploadWriter) Close() error {
	if w.file == nil {
		return errors.New("upload writer already closed")
	}
	var err error
	if !w.done {
		err = w.bw.Flush()
	}
	w.done = true
	err = errors.Join(err, w.file.Close())
	w.file = nil
	return err
}

func (w *uploadWriter) Cancel(context.Context) error {
	if w.done {
		return errors.New("upload writer already closed, committed or cancelled")
	}
	w.done = true
	name := w.file.Name()
	_ = w.file.Close()
	w.file = nil
	return os.Remove(name)
}

func (w *uploadWriter) Commit(context.Context) error {
	if w.done {
		return errors.New("upload writer already closed, committed or cancelled")
	}
	if err := w.bw.Flush(); err != nil {
		return err
	}
	w.done = true
	if w.batch != nil {
		w.batch.dirty.Store(true)
		return nil
	}
	return w.file.Sync()
}

// serveDurably serves a write request with a batch: the response is held
// until what the request stored is on disk. When the flush fails, the client
// gets a 500 (UNKNOWN, as every server error, without details) instead of
// its answer, so that it pushes again; the log says why.
func (r *Registry) serveDurably(w http.ResponseWriter, req *http.Request, serve func(http.ResponseWriter, *http.Request)) {
	b := &syncBatch{}
	held := &heldResponse{header: http.Header{}}
	serve(held, req.WithContext(context.WithValue(req.Context(), syncBatchKey{}, b)))
	if b.dirty.Load() {
		if err := r.syncer.Sync(); err != nil {
			r.log.Error("registry: flushing a push to disk", "method", req.Method, "path", req.URL.Path, "err", err)
			w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
			_ = errcode.ServeJSON(w, errcode.ErrorCodeUnknown)
			return
		}
	}
	held.release(w)
}

// heldResponse keeps a response (status, headers and body: the small answers
// of write requests) until release.
type heldResponse struct {
	header http.Header
	status int
	body   []byte
}

func (h *heldResponse) Header() http.Header { return h.header }

func (h *heldResponse) WriteHeader(status int) {
	if h.status == 0 {
		h.status = status
	}
}

func (h *heldResponse) Write(p []byte) (int, error) {
	h.WriteHeader(http.StatusOK)
	h.body = append(h.body, p...)
	return len(p), nil
}

func (h *heldResponse) release(w http.ResponseWriter) {
	for k, v := range h.header {
		w.Header()[k] = v
	}
	if h.status == 0 {
		h.status = http.StatusOK
	}
	w.WriteHeader(h.status)
	if len(h.body) > 0 {
		_, _ = w.Write(h.body)
	}
}

// timedFlusher records how long write requests wait for their flush,
// sharing one included.
type timedFlusher struct {
	flusher
	wait *prometheus.HistogramVec
}

func newTimedFlusher(f flusher, reg prometheus.Registerer) *timedFlusher {
	t := &timedFlusher{flusher: f, wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "berth_registry_flush_wait_seconds",
		Help:    "Time a push waited for what it stored to be flushed to disk (syncfs), by result.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	}, []string{"result"})}
	reg.MustRegister(t.wait)
	return t
}

func (t *timedFlusher) Sync() error {
	start := time.Now()
	err := t.flusher.Sync()
	result := "ok"
	if err != nil {
		result = "failed"
	}
	t.wait.WithLabelValues(result).Observe(time.Since(start).Seconds())
	return err
}
