package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

// DefaultChunkSize is the size of the chunks of a chunked upload when an
// import's ChunkSize is not set: blobs larger than it are sent in chunks of
// it, and resumed at the target's upload offset when an import is killed.
const DefaultChunkSize = 32 << 20

// uploadRetries is how many times within one run a chunked upload that
// failed (a connection cut, a token expired mid-chunk) is taken up again
// at the offset the target reports.
const uploadRetries = 3

// maxErrorBody bounds what is read of a registry's error response.
const maxErrorBody = 64 << 10

// uploader sends blobs larger than chunk as chunked uploads (POST, PATCH
// per chunk with Content-Range, PUT ?digest=), recording each upload's
// first Location in a journal so that a later run asks the target how far
// the upload got and sends only the rest.
type uploader struct {
	chunk   int64
	journal *journal // nil: uploads are not recorded
	log     *slog.Logger
	// resumed counts the bytes a run did not send because an upload
	// taken up again already held them.
	resumed atomic.Int64
}

// newUploader returns the uploader of an import: chunks of chunk bytes
// (DefaultChunkSize if <= 0), journaled in dir when it is not empty.
func newUploader(chunk int64, dir string, log *slog.Logger) *uploader {
	if chunk <= 0 {
		chunk = DefaultChunkSize
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	u := &uploader{chunk: chunk, log: log}
	if dir != "" {
		u.journal = &journal{dir: dir}
	}
	return u
}

// chunked reports whether a blob of size bytes goes as a chunked upload.
func (u *uploader) chunked(size int64) bool {
	return u != nil && size > u.chunk
}

// errDigestRejected is the target refusing an upload's final PUT because
// what it holds does not match the digest.
var errDigestRejected = errors.New("the target's upload does not match the digest")

// upload is one chunked upload in progress: where to send its next
// request and how many bytes the target holds.
type upload struct {
	first  string   // the Location of the POST's answer, as the journal keeps it
	next   *url.URL // where the next request goes
	offset int64
}

// put sends blob desc of repository name to the target as a chunked
// upload, taking up the upload a killed run left when the journal records
// one the target still holds. open opens the blob from its start; it is
// called again to take up an upload after a failure. It returns the bytes
// it sent.
func (u *uploader) put(ctx context.Context, repo *remote.Repository, host, name string, desc ocispec.Descriptor, open func() (io.ReadCloser, error), progress *atomic.Int64) (int64, error) {
	ctx = auth.AppendRepositoryScope(ctx, repo.Reference, auth.ActionPull, auth.ActionPush)
	s := &session{u: u, repo: repo, host: host, name: name, desc: desc}
	up := s.takeUp(ctx)
	if up == nil {
		var err error
		if up, err = s.start(ctx); err != nil {
			return 0, err
		}
	} else {
		u.resumed.Add(up.offset)
		u.log.Info("resuming an interrupted upload", "repository", name, "digest", desc.Digest, "offset", up.offset, "size", desc.Size)
	}
	var sent int64
	resumedAt, restarted := up.offset, false
	for retries := 0; ; {
		var shown atomic.Int64 // what this attempt added to progress
		n, err := s.send(ctx, up, open, &tally{progress, &shown})
		sent += n
		if err == nil {
			u.journal.remove(host, name, desc.Digest)
			return sent, nil
		}
		if ctx.Err() != nil {
			return sent, err
		}
		// The next attempt reads the blob from its start again.
		progress.Add(-shown.Load())
		switch {
		case errors.Is(err, errDigestRejected) && !restarted:
			// What the target holds is not the blob: start again from zero, once.
			restarted = true
			u.resumed.Add(-resumedAt)
			u.log.Warn("the target refused the upload's digest; starting it again from zero", "repository", name, "digest", desc.Digest)
			if up, err = s.start(ctx); err != nil {
				return sent, err
			}
			continue
		case errors.Is(err, errDigestRejected) || retries >= uploadRetries:
			return sent, err
		}
		retries++
		at, serr := s.status(ctx, up.first)
		if serr != nil {
			return sent, fmt.Errorf("%w; and then: %w", err, serr)
		}
		u.log.Info("taking up the upload again after an error", "repository", name, "digest", desc.Digest, "offset", at.offset, "error", err)
		up = at
	}
}

// session is the chunked upload of one blob.
type session struct {
	u          *uploader
	repo       *remote.Repository
	host, name string
	desc       ocispec.Descriptor
}

// takeUp returns the upload the journal records for the blob, at the
// offset the target reports, or nil when there is none or it cannot be
// taken up (saying why).
func (s *session) takeUp(ctx context.Context) *upload {
	first, err := s.u.journal.load(s.host, s.name, s.desc.Digest, s.scheme())
	if first == "" && err == nil {
		return nil
	}
	var up *upload
	if err == nil {
		up, err = s.status(ctx, first)
	}
	if err == nil && up.offset > s.desc.Size {
		err = fmt.Errorf("the target holds %d bytes of a blob of %d", up.offset, s.desc.Size)
	}
	if err == nil && up.offset == 0 {
		// Nothing to gain; and distribution answers "0-0" for 0 bytes and for 1.
		err = errors.New("the target holds none of it")
	}
	if err != nil {
		s.u.log.Warn("cannot resume an interrupted upload; starting it again from zero", "repository", s.name, "digest", s.desc.Digest, "reason", err)
		s.u.journal.remove(s.host, s.name, s.desc.Digest)
		return nil
	}
	return up
}

func (s *session) scheme() string {
	if s.repo.PlainHTTP {
		return "http"
	}
	return "https"
}

// start opens a new upload (POST) and records it in the journal.
func (s *session) start(ctx context.Context) (*upload, error) {
	base := &url.URL{Scheme: s.scheme(), Host: s.host, Path: "/v2/" + s.name + "/blobs/uploads/"}
	resp, err := s.do(ctx, http.MethodPost, base, nil, 0, nil, http.StatusAccepted)
	if err != nil {
		return nil, err
	}
	next, err := location(base, resp)
	if err != nil {
		return nil, err
	}
	up := &upload{first: next.String(), next: next}
	if err := s.u.journal.save(s.host, s.name, s.desc.Digest, up.first); err != nil {
		s.u.log.Warn("cannot record the upload; a rerun will send this blob from zero", "repository", s.name, "digest", s.desc.Digest, "error", err)
	}
	return up, nil
}

// status asks the target how many bytes the upload at first holds (GET,
// answered 204 with Range: 0-N and the Location to send the rest to).
func (s *session) status(ctx context.Context, first string) (*upload, error) {
	u, err := url.Parse(first)
	if err != nil {
		return nil, err
	}
	resp, err := s.do(ctx, http.MethodGet, u, nil, 0, nil, http.StatusNoContent)
	if err != nil {
		return nil, err
	}
	offset, err := rangeEnd(resp.Header.Get("Range"))
	if err != nil {
		return nil, err
	}
	up := &upload{first: first, next: u, offset: offset}
	if resp.Header.Get("Location") != "" {
		if up.next, err = location(u, resp); err != nil {
			return nil, err
		}
	}
	return up, nil
}

// send opens the blob, reads past what the target holds (the archive
// checks the digest of all it reads, so the whole blob is read), PATCHes
// the rest chunk by chunk and closes the upload with its digest. It
// returns the bytes sent.
func (s *session) send(ctx context.Context, up *upload, open func() (io.ReadCloser, error), progress *tally) (int64, error) {
	rc, err := open()
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	if _, err := io.CopyN(io.Discard, rc, up.offset); err != nil {
		return 0, fmt.Errorf("read the first %d bytes of blob %s: %w", up.offset, s.desc.Digest, err)
	}
	progress.Add(up.offset)
	var sent int64
	for up.offset < s.desc.Size {
		n := min(s.u.chunk, s.desc.Size-up.offset)
		h := http.Header{
			"Content-Type":  {"application/octet-stream"},
			"Content-Range": {fmt.Sprintf("%d-%d", up.offset, up.offset+n-1)},
		}
		body := &countingReader{r: io.LimitReader(rc, n), n: progress}
		resp, err := s.do(ctx, http.MethodPatch, up.next, body, n, h, http.StatusAccepted)
		if err != nil {
			return sent, err
		}
		if up.next, err = location(up.next, resp); err != nil {
			return sent, err
		}
		up.offset += n
		sent += n
	}
	// Read to the end, where the archive checks the digest, before closing
	// the upload.
	if n, err := io.Copy(io.Discard, rc); err != nil {
		return sent, fmt.Errorf("blob %s: %w", s.desc.Digest, err)
	} else if n != 0 {
		return sent, fmt.Errorf("blob %s: %d bytes past its size of %d", s.desc.Digest, n, s.desc.Size)
	}
	put := *up.next
	put.RawQuery = strings.TrimPrefix(put.RawQuery+"&digest="+url.QueryEscape(s.desc.Digest.String()), "&")
	if _, err := s.do(ctx, http.MethodPut, &put, nil, 0, nil, http.StatusCreated); err != nil {
		var resp *errcode.ErrorResponse
		if errors.As(err, &resp) && resp.StatusCode == http.StatusBadRequest && hasCode(resp, errcode.ErrorCodeDigestInvalid) {
			return sent, fmt.Errorf("%w: %w", errDigestRejected, err)
		}
		return sent, err
	}
	return sent, nil
}

// tally adds to an operation's progress and to a count of its own.
type tally struct {
	progress, own *atomic.Int64
}

func (t *tally) Add(n int64) int64 {
	t.own.Add(n)
	return t.progress.Add(n)
}

// do sends one request of the upload and checks its status; an answer of
// another status is returned as an *errcode.ErrorResponse.
func (s *session) do(ctx context.Context, method string, u *url.URL, body io.Reader, size int64, h http.Header, want int) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.ContentLength = size
	if body == nil {
		req.Body = http.NoBody
	}
	resp, err := s.repo.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("upload blob %s to %s: %w", s.desc.Digest, s.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == want {
		return resp, nil
	}
	e := &errcode.ErrorResponse{Method: method, URL: redacted(u), StatusCode: resp.StatusCode}
	var out struct {
		Errors errcode.Errors `json:"errors"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, maxErrorBody)).Decode(&out) == nil {
		e.Errors = out.Errors
	}
	return nil, fmt.Errorf("upload blob %s to %s: %w", s.desc.Digest, s.name, e)
}

// redacted is u without its query, which carries the upload's state and
// owner binding: not for error messages.
func redacted(u *url.URL) *url.URL {
	r := *u
	r.RawQuery = ""
	return &r
}

func hasCode(resp *errcode.ErrorResponse, code string) bool {
	for _, e := range resp.Errors {
		if e.Code == code {
			return true
		}
	}
	return false
}

// location is the absolute URL of resp's Location, resolved against the
// request's URL base.
func location(base *url.URL, resp *http.Response) (*url.URL, error) {
	raw := resp.Header.Get("Location")
	if raw == "" {
		return nil, fmt.Errorf("%s %s: the target answered no Location", resp.Request.Method, redacted(base))
	}
	u, err := base.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s %s: Location: %w", resp.Request.Method, redacted(base), err)
	}
	return u, nil
}

// rangeEnd reads an upload's Range header, "0-N" (or "bytes=0-N"), as
// the N+1 bytes the upload holds; "0-0" is read as none.
func rangeEnd(h string) (int64, error) {
	from, to, ok := strings.Cut(strings.TrimPrefix(h, "bytes="), "-")
	if !ok || from != "0" {
		return 0, fmt.Errorf("the target's upload status has Range %q, not 0-N", h)
	}
	n, err := strconv.ParseInt(to, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("the target's upload status has Range %q, not 0-N", h)
	}
	if n == 0 {
		return 0, nil
	}
	return n + 1, nil
}

// maxJournalEntry bounds what is read of a journal file.
const maxJournalEntry = 64 << 10

// journal records the uploads in progress, one file per blob in a
// directory (created 0700 when first needed; files 0600) named by the target, repository and
// digest, holding the upload's first Location. A file is written when an
// upload opens and removed when it completes; one that cannot be read or
// names another target or blob is ignored (and removed), so a stale or
// damaged journal costs at most a blob sent again from zero.
type journal struct {
	dir string
}

// journalEntry is one file of the journal.
type journalEntry struct {
	Target     string        `json:"target"`
	Repository string        `json:"repository"`
	Digest     digest.Digest `json:"digest"`
	Location   string        `json:"location"`
}

func (j *journal) file(target, repository string, d digest.Digest) string {
	key := digest.FromString(target + "\x00" + repository + "\x00" + d.String())
	return filepath.Join(j.dir, key.Encoded()[:32]+".json")
}

// load returns the first Location of the upload of blob d recorded for
// target and repository, or "" when none is; an error says why a recorded
// one cannot be used. scheme is how the target is reached.
func (j *journal) load(target, repository string, d digest.Digest, scheme string) (string, error) {
	if j == nil {
		return "", nil
	}
	f, err := os.Open(j.file(target, repository, d))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	var e journalEntry
	if err := json.NewDecoder(io.LimitReader(f, maxJournalEntry)).Decode(&e); err != nil {
		return "", fmt.Errorf("journal file %s: %w", f.Name(), err)
	}
	if e.Target != target || e.Repository != repository || e.Digest != d {
		return "", fmt.Errorf("journal file %s records %s/%s@%s", f.Name(), e.Target, e.Repository, e.Digest)
	}
	u, err := url.Parse(e.Location)
	switch {
	case err != nil:
		return "", fmt.Errorf("journal file %s: location: %w", f.Name(), err)
	case u.Scheme != scheme || !strings.EqualFold(u.Host, target):
		return "", fmt.Errorf("journal file %s: the upload's location is on %s://%s, not the target %s://%s", f.Name(), u.Scheme, u.Host, scheme, target)
	case !strings.HasPrefix(u.Path, "/v2/"+repository+"/blobs/uploads/") || u.Path == "/v2/"+repository+"/blobs/uploads/":
		return "", fmt.Errorf("journal file %s: the location is not an upload of %s", f.Name(), repository)
	}
	return e.Location, nil
}

// save records the first Location of the upload of blob d.
func (j *journal) save(target, repository string, d digest.Digest, loc string) error {
	if j == nil {
		return nil
	}
	b, err := json.Marshal(journalEntry{Target: target, Repository: repository, Digest: d, Location: loc})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(j.dir, 0o700); err != nil {
		return err
	}
	name := j.file(target, repository, d)
	tmp, err := os.CreateTemp(j.dir, ".upload-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
}

// remove forgets the upload of blob d.
func (j *journal) remove(target, repository string, d digest.Digest) {
	if j != nil {
		os.Remove(j.file(target, repository, d))
	}
}

// DefaultStateDir is where an import of the archive at paths into target
// keeps its upload journal when none is given: a directory of the user's
// cache named after both (the archive may be on read-only media).
func DefaultStateDir(paths []string, target string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no directory for the upload state (%w); name one with --state-dir", err)
	}
	key := target
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", err
		}
		key += "\x00" + abs
	}
	return filepath.Join(cache, "berth", "import", digest.FromString(key).Encoded()[:16]), nil
}
