package registry

import (
	"bytes"
	"cmp"
	"container/list"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opencontainers/go-digest"
)

// The registry keeps what it has just received, the manifests it accepted
// and the small blobs uploaded to it, so that the catalog indexes a push
// from the bytes the registry saw rather than reading them back from the
// storage (three requests for a manifest and five for a blob on S3).
// The catalog reads a manifest only once a fresh read of the storage told
// it which digest the tag names and that the manifest is there, and it
// checks a blob's digest and size as it does one read from the storage.

// RecentOptions bound the manifests and blobs a Registry keeps of what it
// has just received (Registry.RecentManifest, Registry.RecentBlob). The
// zero value is the defaults; a negative bound keeps nothing.
type RecentOptions struct {
	// Entries bounds the manifests and blobs kept; 0 means
	// DefaultRecentEntries.
	Entries int
	// Bytes bounds their bytes; 0 means DefaultRecentBytes. Uploads being
	// received buffer at most as many again.
	Bytes int64
	// MaxBlob is the largest blob kept; 0 means DefaultRecentMaxBlob. It
	// is at most a quarter of Bytes.
	MaxBlob int64
}

// The defaults of RecentOptions, and how long an entry is served.
const (
	DefaultRecentEntries       = 1024
	DefaultRecentBytes   int64 = 32 << 20
	DefaultRecentMaxBlob int64 = 8 << 20
	// recentMaxAge is the age past which an entry is no longer served: a
	// replica does not see what another deletes, and the catalog indexes a
	// push within moments of it, unless it is far behind.
	recentMaxAge = 2 * time.Minute
)

// recentKey names a manifest or blob of a repository.
type recentKey struct {
	repo     string
	digest   digest.Digest
	manifest bool
}

type recentEntry struct {
	key       recentKey
	mediaType string
	data      []byte
	added     time.Time
}

// recentContent is a least-recently-used set of manifests and blobs, bounded
// by count and bytes, with a budget of its own for the uploads being
// buffered (reserve, release). A nil *recentContent keeps nothing.
type recentContent struct {
	entries       int
	bytes         int64
	maxBlob       int64
	now           func() time.Time
	mu            sync.Mutex
	order         *list.List // of *recentEntry, most recent first
	byKey         map[recentKey]*list.Element
	held          int64
	bufferedBytes atomic.Int64
}

func newRecentContent(o RecentOptions) *recentContent {
	o.Entries = cmp.Or(o.Entries, DefaultRecentEntries)
	o.Bytes = cmp.Or(o.Bytes, DefaultRecentBytes)
	o.MaxBlob = cmp.Or(o.MaxBlob, DefaultRecentMaxBlob)
	return &recentContent{entries: o.Entries, bytes: o.Bytes, maxBlob: min(o.MaxBlob, o.Bytes/4),
		now: time.Now, order: list.New(), byKey: make(map[recentKey]*list.Element)}
}

// add keeps data under k, making room by dropping the least recently used.
func (c *recentContent) add(k recentKey, mediaType string, data []byte) {
	if c == nil || int64(len(data)) > c.bytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(k)
	c.byKey[k] = c.order.PushFront(&recentEntry{key: k, mediaType: mediaType, data: data, added: c.now()})
	c.held += int64(len(data))
	for c.order.Len() > c.entries || c.held > c.bytes {
		c.dropLocked(c.order.Back().Value.(*recentEntry).key)
	}
}

// get returns what is kept under k, unless it is older than recentMaxAge.
func (c *recentContent) get(k recentKey) (string, []byte, bool) {
	if c == nil {
		return "", nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[k]
	if !ok {
		return "", nil, false
	}
	e := el.Value.(*recentEntry)
	if c.now().Sub(e.added) > recentMaxAge {
		c.dropLocked(k)
		return "", nil, false
	}
	c.order.MoveToFront(el)
	return e.mediaType, e.data, true
}

// forget drops the manifest and the blob d of repo.
func (c *recentContent) forget(repo string, d digest.Digest) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(recentKey{repo: repo, digest: d, manifest: true})
	c.dropLocked(recentKey{repo: repo, digest: d})
}

// forgetRepository drops everything of repo.
func (c *recentContent) forgetRepository(repo string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.byKey {
		if k.repo == repo {
			c.dropLocked(k)
		}
	}
}

func (c *recentContent) dropLocked(k recentKey) {
	if el, ok := c.byKey[k]; ok {
		c.held -= int64(len(el.Value.(*recentEntry).data))
		c.order.Remove(el)
		delete(c.byKey, k)
	}
}

// reserve takes n bytes of the uploads' budget, reporting whether it could.
func (c *recentContent) reserve(n int64) bool {
	if c.bufferedBytes.Add(n) > c.bytes {
		c.bufferedBytes.Add(-n)
		return false
	}
	return true
}

// release gives n bytes back to the uploads' budget.
func (c *recentContent) release(n int64) { c.bufferedBytes.Add(-n) }

// uploadBuffer keeps the bytes one request writes to an upload that it
// took up empty, as long as they fit under the recent content's bounds; it
// gives up, and keeps nothing more, once they do not. A nil *uploadBuffer
// keeps nothing.
type uploadBuffer struct {
	recent *recentContent
	data   []byte
	off    bool
}

// newUploadBuffer buffers for recent an upload that holds held bytes when
// the request takes it up: only one that holds none, all of whose bytes
// the request sees.
func newUploadBuffer(recent *recentContent, held int64) *uploadBuffer {
	if recent == nil || held != 0 {
		return nil
	}
	return &uploadBuffer{recent: recent}
}

// keep appends p, written to the upload.
func (b *uploadBuffer) keep(p []byte) {
	if b == nil || b.off || len(p) == 0 {
		return
	}
	if int64(len(b.data)+len(p)) > b.recent.maxBlob || !b.recent.reserve(int64(len(p))) {
		b.drop()
		b.off = true
		return
	}
	b.data = append(b.data, p...)
}

// commit keeps the whole blob d of repo, once its upload is committed with
// size bytes, and frees the buffer.
func (b *uploadBuffer) commit(repo string, d digest.Digest, size int64) {
	if b == nil {
		return
	}
	if !b.off && int64(len(b.data)) == size {
		data := b.data
		if cap(data)-len(data) > len(data)/8 {
			// What append left spare would be held unaccounted for.
			data = bytes.Clone(data)
		}
		b.recent.add(recentKey{repo: repo, digest: d}, "", data)
	}
	b.drop()
	b.off = true
}

// drop frees the buffer.
func (b *uploadBuffer) drop() {
	if b == nil {
		return
	}
	b.recent.release(int64(len(b.data)))
	b.data = nil
}

// teeReader is a reader whose reads the buffer keeps.
type teeReader struct {
	r   io.Reader
	buf *uploadBuffer
}

func (t teeReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.buf.keep(p[:n])
	return n, err
}

// RecentManifest returns the media type and bytes of manifest d of repo if
// this process accepted it recently, within the bounds of Options.Recent;
// ok is false otherwise, and always without Options.Recent.
func (r *Registry) RecentManifest(repo string, d digest.Digest) (mediaType string, payload []byte, ok bool) {
	return r.guard.recent.get(recentKey{repo: repo, digest: d, manifest: true})
}

// RecentBlob returns the bytes of blob d of repo if it was uploaded whole
// to this process recently, within the bounds of Options.Recent; ok is
// false otherwise, and always without Options.Recent. The bytes are those
// the upload received, which distribution checked against d as it
// committed them; the caller must not change them.
func (r *Registry) RecentBlob(repo string, d digest.Digest) ([]byte, bool) {
	_, b, ok := r.guard.recent.get(recentKey{repo: repo, digest: d})
	return b, ok
}
