package pkgsource

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// fetchHTTP downloads a gzipped tarball and unpacks its Dir into t.
// Revision is the ETag, else the Last-Modified date, else the sha256 of
// the body.
func fetchHTTP(ctx context.Context, s Spec, t *tree) (Resolved, error) {
	dir, err := cleanDir(t.src, "dir", s.Dir)
	if err != nil {
		return Resolved{}, err
	}
	sess := newSession(t.src, t.l)
	defer sess.close()
	resp, err := httpGet(ctx, sess, s, Resolved{})
	if err != nil {
		return Resolved{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Resolved{}, statusError(t.src, resp)
	}
	sum := sha256.New()
	if err := t.untar(io.TeeReader(resp.Body, sum), dir); err != nil {
		return Resolved{}, err
	}
	// The gzip stream may end before the body does: hash all of it.
	if _, err := io.Copy(sum, resp.Body); err != nil {
		return Resolved{}, err
	}
	r := Resolved{Kind: HTTP, URL: s.URL, Dir: s.Dir, Revision: httpRevision(resp)}
	if r.Revision == "" {
		r.Revision = "sha256:" + hex.EncodeToString(sum.Sum(nil))
	}
	return r, nil
}

// resolveHTTP sends a conditional GET with prev's revision: 304 means
// unchanged. A server that answers 200 has its body closed unread.
func resolveHTTP(ctx context.Context, s Spec, prev Resolved, l Limits) (Resolved, error) {
	src := s.name()
	sess := newSession(src, l)
	defer sess.close()
	resp, err := httpGet(ctx, sess, s, prev)
	if err != nil {
		return Resolved{}, err
	}
	defer resp.Body.Close()
	r := Resolved{Kind: HTTP, URL: s.URL, Dir: s.Dir}
	switch resp.StatusCode {
	case http.StatusNotModified:
		r.Revision = prev.Revision
	case http.StatusOK:
		r.Revision = httpRevision(resp)
		if r.Revision == "" {
			// Neither an ETag nor a Last-Modified: only the body's hash
			// says whether it changed.
			sum := sha256.New()
			if _, err := io.Copy(sum, resp.Body); err != nil {
				return Resolved{}, err
			}
			r.Revision = "sha256:" + hex.EncodeToString(sum.Sum(nil))
		}
	default:
		return Resolved{}, statusError(src, resp)
	}
	return r, nil
}

func httpGet(ctx context.Context, sess *session, s Spec, prev Resolved) (*http.Response, error) {
	u, err := url.Parse(s.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("%s: not an http(s) URL: %w", sess.src, ErrInvalid)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sess.src, err)
	}
	if s.Credentials != (Credentials{}) {
		req.SetBasicAuth(s.Credentials.Username, s.Credentials.Password)
	}
	if prev.Revision != "" {
		if strings.HasPrefix(prev.Revision, `"`) || strings.HasPrefix(prev.Revision, "W/") {
			req.Header.Set("If-None-Match", prev.Revision)
		} else if _, err := http.ParseTime(prev.Revision); err == nil {
			req.Header.Set("If-Modified-Since", prev.Revision)
		}
	}
	resp, err := sess.client().Do(req)
	if err != nil {
		return nil, ctxErr(ctx, named(sess.src, err))
	}
	return resp, nil
}

func httpRevision(resp *http.Response) string {
	if etag := resp.Header.Get("ETag"); etag != "" {
		return etag
	}
	return resp.Header.Get("Last-Modified")
}

func statusError(src string, resp *http.Response) error {
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("%s: the server answered %s: check the credentials: %w", src, resp.Status, ErrDenied)
	case http.StatusNotFound:
		return fmt.Errorf("%s: the server answered %s: check the URL: %w", src, resp.Status, ErrInvalid)
	}
	return fmt.Errorf("%s: the server answered %s", src, resp.Status)
}
