package registry

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/distribution/distribution/v3/registry/api/errcode"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// referrersPath splits /v2/<repo>/referrers/<digest>.
func referrersPath(p string) (repo, ref string, ok bool) {
	rest, ok := strings.CutPrefix(p, "/v2/")
	if !ok {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return "", "", false
	}
	repo, ok = strings.CutSuffix(rest[:i], "/referrers")
	if !ok || repo == "" {
		return "", "", false
	}
	return repo, rest[i+1:], true
}

// serveReferrers answers GET /v2/<repo>/referrers/<ref> (OCI distribution
// spec 1.1) with an image index of the referrers of ref in repo, filtered by
// the artifactType query parameter when it is set. An unknown repository or
// subject has an empty list, never a 404; a malformed name or digest is a 400.
func (r *Registry) serveReferrers(w http.ResponseWriter, req *http.Request, repo, ref string) {
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		_ = errcode.ServeJSON(w, errcode.ErrorCodeUnsupported.WithMessage("the referrers API only answers GET"))
		return
	}
	if _, err := reference.WithName(repo); err != nil {
		_ = errcode.ServeJSON(w, errcode.ErrorCodeNameInvalid.WithMessage(fmt.Sprintf("invalid repository name %q: %v", repo, err)))
		return
	}
	subject, err := digest.Parse(ref)
	if err != nil {
		_ = errcode.ServeJSON(w, errcode.ErrorCodeDigestInvalid.WithMessage(fmt.Sprintf("invalid digest %q: %v", ref, err)))
		return
	}
	artifactType := req.URL.Query().Get("artifactType")
	entries, err := r.guard.referrers.list(req.Context(), repo, subject, artifactType)
	if err != nil {
		r.log.ErrorContext(req.Context(), "registry: referrers", "repo", repo, "digest", subject.String(), "err", err)
		_ = errcode.ServeJSON(w, errcode.ErrorCodeUnknown.WithDetail(err))
		return
	}
	body := referrersIndex(entries)
	if artifactType != "" {
		w.Header().Set("OCI-Filters-Applied", "artifactType")
	}
	w.Header().Set("Content-Type", v1.MediaTypeImageIndex)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if req.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}

// referrersIndexHead opens the image index the referrers API answers with.
const referrersIndexHead = `{"schemaVersion":2,"mediaType":"` + v1.MediaTypeImageIndex + `","manifests":[`

// referrersIndex is the image index that lists entries; their descriptors
// are JSON already, so it is put together rather than encoded.
func referrersIndex(entries []referrerEntry) []byte {
	n := len(referrersIndexHead) + 2
	for _, e := range entries {
		n += len(e.json) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, referrersIndexHead...)
	for i, e := range entries {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e.json...)
	}
	return append(b, "]}"...)
}

// pushResult carries, from the manifest service back to the HTTP layer,
// what a manifest PUT stored that its response reports: the subject of a
// referrer, for the OCI-Subject header. distribution derives its request
// context from the request's, so the guard finds it there.
type pushResult struct {
	subject digest.Digest
}

type pushResultKey struct{}

// withPushResult prepares a manifest PUT for the guard to report its subject:
// it puts a pushResult in the request's context and sets the OCI-Subject
// header on the response when the status is written.
func withPushResult(w http.ResponseWriter, req *http.Request) (http.ResponseWriter, *http.Request) {
	p := &pushResult{}
	return &subjectHeaderWriter{ResponseWriter: w, push: p}, req.WithContext(context.WithValue(req.Context(), pushResultKey{}, p))
}

// pushResultFrom returns the pushResult of the request ctx belongs to, or nil.
func pushResultFrom(ctx context.Context) *pushResult {
	p, _ := ctx.Value(pushResultKey{}).(*pushResult)
	return p
}

// subjectHeaderWriter adds OCI-Subject to a successful manifest PUT response
// when the stored manifest has a subject.
type subjectHeaderWriter struct {
	http.ResponseWriter
	push        *pushResult
	wroteHeader bool
}

func (w *subjectHeaderWriter) WriteHeader(status int) {
	if !w.wroteHeader {
		w.wroteHeader = true
		if status == http.StatusCreated && w.push.subject != "" {
			w.Header().Set("OCI-Subject", w.push.subject.String())
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *subjectHeaderWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *subjectHeaderWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
