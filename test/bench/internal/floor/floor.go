// Package floor is the bench harness's per-request floor: a bare net/http
// handler that answers the registry API's pull requests, and nothing else,
// from files on disk with http.ServeContent. No registry can serve a pull
// with less work than this on the same machine, so the harness reports
// berth's pull rows as a fraction of it.
//
// It answers GET and HEAD of /v2/ (200, for readiness),
// /v2/<repository>/manifests/<tag or digest> and
// /v2/<repository>/blobs/<digest>, with Content-Type, Content-Length and
// Docker-Content-Digest, from a directory laid out as Store writes it:
//
//	blobs/<algorithm>/<encoded>      every blob, by digest
//	manifests/<algorithm>/<encoded>  every manifest, by digest
//	tags/<repository>/<tag>          the digest of the manifest the tag names
//
// Blobs are shared by every repository, and every manifest is served as an
// OCI image manifest, the only kind the harness writes. The harness fills
// the directory itself; nothing is pushed through HTTP.
package floor

import (
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// The repository name and tag grammars of the OCI distribution spec.
var (
	repositoryPattern = regexp.MustCompile(`^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*$`)
	tagPattern        = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$`)
)

const (
	blobsDir     = "blobs"
	manifestsDir = "manifests"
	tagsDir      = "tags"
)

// contentPath is where the content with digest d lives under kind (blobsDir
// or manifestsDir).
func contentPath(kind string, d digest.Digest) string {
	return path.Join(kind, d.Algorithm().String(), d.Encoded())
}

// Store writes content into a floor directory.
type Store struct {
	root *os.Root
}

// NewStore opens dir, which must exist, for writing.
func NewStore(dir string) (*Store, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &Store{root: root}, nil
}

// Close releases the directory.
func (s *Store) Close() error {
	return s.root.Close()
}

// PutBlob writes data as the blob with digest d. It does not sync.
func (s *Store) PutBlob(d digest.Digest, data []byte) error {
	return s.write(contentPath(blobsDir, d), data)
}

// PutManifest writes data as the manifest with digest d, and tags it as
// repository:tag. It does not sync.
func (s *Store) PutManifest(repository, tag string, d digest.Digest, data []byte) error {
	if err := s.write(contentPath(manifestsDir, d), data); err != nil {
		return err
	}
	return s.write(path.Join(tagsDir, repository, tag), []byte(d.String()))
}

func (s *Store) write(name string, data []byte) error {
	if err := s.root.MkdirAll(path.Dir(name), 0o755); err != nil {
		return err
	}
	return s.root.WriteFile(name, data, 0o644)
}

// Handler serves the floor directory root.
func Handler(root *os.Root) http.Handler {
	return handler{root: root}
}

type handler struct {
	root *os.Root
}

func (h handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == "/v2/" {
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v2/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	if repository, ref, ok := cut(rest, "/manifests/"); ok {
		d, err := h.manifestDigest(repository, ref)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		h.serve(w, r, contentPath(manifestsDir, d), d, ocispec.MediaTypeImageManifest)
		return
	}
	if repository, ref, ok := cut(rest, "/blobs/"); ok {
		d, err := digest.Parse(ref)
		if err != nil || !repositoryPattern.MatchString(repository) {
			http.NotFound(w, r)
			return
		}
		h.serve(w, r, contentPath(blobsDir, d), d, "application/octet-stream")
		return
	}
	http.NotFound(w, r)
}

// cut splits s around the last sep.
func cut(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+len(sep):], true
}

// errNotFound is a repository, tag or digest the floor does not hold, or one
// it cannot name.
var errNotFound = errors.New("not found")

// manifestDigest is the digest ref names in repository: ref itself when it
// is a digest, else the digest its tag file holds.
func (h handler) manifestDigest(repository, ref string) (digest.Digest, error) {
	if !repositoryPattern.MatchString(repository) {
		return "", errNotFound
	}
	if d, err := digest.Parse(ref); err == nil {
		return d, nil
	}
	if !tagPattern.MatchString(ref) {
		return "", errNotFound
	}
	b, err := h.root.ReadFile(path.Join(tagsDir, repository, ref))
	if err != nil {
		return "", err
	}
	return digest.Parse(string(b))
}

// serve answers with the file name under root, as content d of mediaType.
func (h handler) serve(w http.ResponseWriter, r *http.Request, name string, d digest.Digest, mediaType string) {
	f, err := h.root.Open(name)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", mediaType)
	w.Header().Set("Docker-Content-Digest", d.String())
	http.ServeContent(w, r, "", time.Time{}, f)
}

func (h handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, errNotFound) || errors.Is(err, fs.ErrNotExist) {
		http.NotFound(w, r)
		return
	}
	http.Error(w, err.Error(), http.StatusInternalServerError)
}
