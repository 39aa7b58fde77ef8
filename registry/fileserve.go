package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/distribution/distribution/v3/manifest/schema2"
	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// fileServer answers blob and manifest reads (GET and HEAD) straight from the
// files of distribution's filesystem driver, with the headers distribution
// sends, and leaves every other case to distribution: a read it answers is
// one whose repository link, and blob, it found on disk, so a blob or
// manifest is served from a repository only where distribution would serve
// it. Blobs are sent from the open file, which lets the kernel copy them to
// the socket (sendfile); distribution reads each through a new 4 MiB buffer.
//
// It caches only what a digest fixes: the content type of a manifest. Links
// and tags are read from disk on every request, so deletes, tag moves and
// garbage collection are seen at once.
type fileServer struct {
	root  string // <rootdirectory>/docker/registry/v2, the driver's layout
	types contentTypes
}

// newFileServer serves the filesystem driver's files under rootDirectory.
func newFileServer(rootDirectory string) *fileServer {
	return &fileServer{root: filepath.Join(rootDirectory, "docker", "registry", "v2")}
}

// maxManifestBytes bounds the manifests served from disk; distribution
// refuses to store larger ones (its default manifest PUT limit).
const maxManifestBytes = 4 << 20

// blobMaxAge is the Cache-Control max-age distribution gives blobs.
const blobMaxAge = 365 * 24 * time.Hour

// serve answers req when it is a read of a blob or manifest found on disk,
// and reports whether it did; otherwise it has written nothing.
func (f *fileServer) serve(w http.ResponseWriter, req *http.Request) bool {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		return false
	}
	route, ok := quickRoute(req.URL.Path)
	switch {
	case ok && route.Kind == RouteBlob:
		return f.serveBlob(w, req, route.Repository, route.Reference)
	case ok && route.Kind == RouteManifest:
		return f.serveManifest(w, req, route.Repository, route.Reference)
	}
	return false
}

// splitRef splits <name><sep><ref> at the last sep, with a valid repository
// name and a reference without slashes.
func splitRef(p, sep string) (name, ref string, ok bool) {
	i := strings.LastIndex(p, sep)
	if i <= 0 {
		return "", "", false
	}
	name, ref = p[:i], p[i+len(sep):]
	if ref == "" || strings.IndexByte(ref, '/') >= 0 || !validName(name) {
		return "", "", false
	}
	return name, ref, true
}

func (f *fileServer) serveBlob(w http.ResponseWriter, req *http.Request, name, ref string) bool {
	dgst, ok := sha256Digest(ref)
	if !ok || !f.linked(name, "_layers", dgst) {
		return false
	}
	file, err := os.Open(f.blobPath(dgst))
	if err != nil {
		return false
	}
	defer file.Close()
	info, err := file.Stat()
	if err != nil || !info.Mode().IsRegular() {
		return false
	}
	h := w.Header()
	h.Set("Docker-Distribution-API-Version", "registry/2.0")
	h.Set("ETag", `"`+dgst.String()+`"`)
	h.Set("Cache-Control", fmt.Sprintf("max-age=%.f", blobMaxAge.Seconds()))
	h.Set("Docker-Content-Digest", dgst.String())
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.FormatInt(info.Size(), 10))
	http.ServeContent(w, req, dgst.String(), time.Time{}, file)
	return true
}

func (f *fileServer) serveManifest(w http.ResponseWriter, req *http.Request, name, ref string) bool {
	dgst, ok := sha256Digest(ref)
	if !ok {
		if strings.IndexByte(ref, ':') >= 0 || !validTag(ref) {
			return false
		}
		link, err := readLink(filepath.Join(f.root, "repositories", name, "_manifests", "tags", ref, "current", "link"))
		if err != nil {
			return false
		}
		if dgst, ok = sha256Digest(link); !ok {
			return false
		}
	}
	if etagMatch(req, dgst.String()) || !f.linked(name, filepath.Join("_manifests", "revisions"), dgst) {
		return false
	}
	payload, err := readCapped(f.blobPath(dgst), maxManifestBytes)
	if err != nil {
		return false
	}
	ct, ok := f.types.get(dgst)
	if !ok {
		if ct, ok = manifestContentType(payload); !ok {
			return false
		}
		f.types.put(dgst, ct)
	}
	if !accepts(req, ct) {
		return false
	}
	h := w.Header()
	h.Set("Docker-Distribution-API-Version", "registry/2.0")
	h.Set("Content-Type", ct)
	h.Set("Content-Length", strconv.Itoa(len(payload)))
	h.Set("Docker-Content-Digest", dgst.String())
	h.Set("Etag", `"`+dgst.String()+`"`)
	w.WriteHeader(http.StatusOK)
	if req.Method == http.MethodGet {
		_, _ = w.Write(payload)
	}
	return true
}

// linked reports whether repository name links dgst in its dir (_layers for
// blobs, _manifests/revisions for manifests), as distribution's link files
// record it.
func (f *fileServer) linked(name, dir string, dgst digest.Digest) bool {
	link, err := readLink(filepath.Join(f.root, "repositories", name, dir, "sha256", dgst.Encoded(), "link"))
	return err == nil && link == dgst.String()
}

func (f *fileServer) blobPath(dgst digest.Digest) string {
	hex := dgst.Encoded()
	return filepath.Join(f.root, "blobs", "sha256", hex[:2], hex, "data")
}

// readLink reads a link file: a digest, a few dozen bytes.
func readLink(path string) (string, error) {
	b, err := readCapped(path, 256)
	return string(b), err
}

// readCapped reads the file at path, failing when it holds more than max bytes.
func readCapped(path string, max int64) ([]byte, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	b, err := io.ReadAll(io.LimitReader(file, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, errors.New("too large")
	}
	return b, nil
}

// sha256Digest parses s as a sha256 digest in canonical form. Other
// algorithms are left to distribution.
func sha256Digest(s string) (digest.Digest, bool) {
	hex, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(hex) != 64 {
		return "", false
	}
	for i := 0; i < len(hex); i++ {
		if c := hex[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", false
		}
	}
	return digest.Digest(s), true
}

// manifestContentType is the Content-Type distribution answers with for a
// stored manifest, for the kinds it serves to every client that accepts
// them: OCI image manifests and indexes that name their media type, and
// Docker schema 2 manifests. Other kinds (Docker manifest lists, which
// distribution may rewrite for old clients, and documents without a media
// type) are left to distribution.
func manifestContentType(payload []byte) (string, bool) {
	var versioned struct {
		SchemaVersion int    `json:"schemaVersion"`
		MediaType     string `json:"mediaType"`
	}
	if json.Unmarshal(payload, &versioned) != nil || versioned.SchemaVersion != 2 {
		return "", false
	}
	switch versioned.MediaType {
	case v1.MediaTypeImageManifest, v1.MediaTypeImageIndex, schema2.MediaTypeManifest:
		return versioned.MediaType, true
	}
	return "", false
}

// accepts reports whether distribution would serve a manifest of content
// type ct to req: OCI manifests and indexes only to clients that list them
// in Accept.
func accepts(req *http.Request, ct string) bool {
	if ct != v1.MediaTypeImageManifest && ct != v1.MediaTypeImageIndex {
		return true
	}
	for _, header := range req.Header["Accept"] {
		for part := range strings.SplitSeq(header, ",") {
			if mt, _, err := mime.ParseMediaType(part); err == nil && mt == ct {
				return true
			}
		}
	}
	return false
}

// etagMatch reports whether If-None-Match names dgst, quoted or not, as
// distribution checks it; distribution then answers 304 itself.
func etagMatch(req *http.Request, dgst string) bool {
	for _, v := range req.Header["If-None-Match"] {
		if v == dgst || v == `"`+dgst+`"` {
			return true
		}
	}
	return false
}

// validName reports whether name is a repository name as the distribution
// reference grammar defines it: path components of lower-case letters and
// digits, separated inside a component by ".", "_", "__" or runs of "-",
// and at most 255 characters. It never holds "..", so it cannot leave the
// repositories directory.
func validName(name string) bool {
	if len(name) == 0 || len(name) > 255 {
		return false
	}
	for component := range strings.SplitSeq(name, "/") {
		if !validComponent(component) {
			return false
		}
	}
	return true
}

func validComponent(c string) bool {
	alnum := func(b byte) bool { return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' }
	if c == "" || !alnum(c[0]) || !alnum(c[len(c)-1]) {
		return false
	}
	for i := 1; i < len(c); {
		if alnum(c[i]) {
			i++
			continue
		}
		// A separator: ".", "_", "__" or a run of "-", then an alphanumeric.
		j := i
		switch c[i] {
		case '.':
			j++
		case '_':
			j++
			if c[j] == '_' {
				j++
			}
		case '-':
			for c[j] == '-' {
				j++
			}
		default:
			return false
		}
		if !alnum(c[j]) {
			return false
		}
		i = j
	}
	return true
}

// validTag reports whether tag matches the distribution tag grammar,
// [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}.
func validTag(tag string) bool {
	if len(tag) == 0 || len(tag) > 128 {
		return false
	}
	for i := 0; i < len(tag); i++ {
		b := tag[i]
		word := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_'
		if !word && (i == 0 || b != '.' && b != '-') {
			return false
		}
	}
	return true
}

// contentTypes remembers the content type of manifests by digest, which
// fixes it. It holds at most maxContentTypes; when full, it starts over.
type contentTypes struct {
	mu sync.RWMutex
	m  map[digest.Digest]string
}

const maxContentTypes = 1 << 16

func (c *contentTypes) get(d digest.Digest) (string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ct, ok := c.m[d]
	return ct, ok
}

func (c *contentTypes) put(d digest.Digest, ct string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxContentTypes {
		c.m = make(map[digest.Digest]string)
	}
	c.m[d] = ct
}
