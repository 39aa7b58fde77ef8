package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// s3Counter is a reverse proxy in front of an S3 server that counts the
// requests it passes by kind: the method (LIST for a listing, COPY for a
// server-side copy) and the object's key with digests, upload ids,
// repositories and tags replaced by placeholders, so that the requests of
// one step of a push fall under one kind. A nil counter counts nothing.
type s3Counter struct {
	srv    *httptest.Server
	mu     sync.Mutex
	counts s3Counts
}

// s3Counts are requests by kind.
type s3Counts map[string]int

func newS3Counter(target string) *s3Counter {
	c := &s3Counter{counts: s3Counts{}}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: "http", Host: target})
			r.Out.Host = r.In.Host // the request is signed for it
		},
		Transport: loopbackTransport(target),
	}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind := s3Kind(r)
		c.mu.Lock()
		c.counts[kind]++
		c.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	return c
}

func (c *s3Counter) addr() string { return strings.TrimPrefix(c.srv.URL, "http://") }

// take returns the counts since the last take and starts again from zero.
func (c *s3Counter) take() s3Counts {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.counts
	c.counts = s3Counts{}
	return out
}

func (cs s3Counts) total() int {
	n := 0
	for _, v := range cs {
		n += v
	}
	return n
}

// perPackage prints the total per package of per packages, and each kind
// per package, the most frequent first, but for those of fewer than one
// request in 20 packages (heartbeats and other background work).
func (cs s3Counts) perPackage(per int) string {
	kinds := make([]string, 0, len(cs))
	for k := range cs {
		kinds = append(kinds, k)
	}
	slices.SortFunc(kinds, func(a, b string) int {
		if cs[a] != cs[b] {
			return cs[b] - cs[a]
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	fmt.Fprintf(&b, "%.2f:", float64(cs.total())/float64(per))
	for _, k := range kinds {
		if cs[k]*20 < per {
			break
		}
		fmt.Fprintf(&b, "\n    %5.2f %s", float64(cs[k])/float64(per), k)
	}
	return b.String()
}

var (
	s3Digest = regexp.MustCompile(`[0-9a-f]{64}`)
	s3Fan    = regexp.MustCompile(`/sha256/[0-9a-f]{2}/`)
	s3UUID   = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	s3Repo   = regexp.MustCompile(`/repositories/.*?/(_manifests|_layers|_uploads|_referrers)`)
	s3Tag    = regexp.MustCompile(`/tags/[^/]+`)
)

// s3Kind names the kind of a path-style S3 request.
func s3Kind(r *http.Request) string {
	method := r.Method
	q := r.URL.Query()
	switch {
	case method == http.MethodGet && (q.Has("list-type") || q.Has("prefix")):
		method = "LIST"
	case method == http.MethodPut && r.Header.Get("X-Amz-Copy-Source") != "":
		method = "COPY"
	case method == http.MethodPost && q.Has("delete"):
		method = "DELETE-OBJECTS"
	}
	_, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/") // the bucket
	if p := q.Get("prefix"); p != "" {
		key += "?prefix=" + p
	}
	key = s3Fan.ReplaceAllString(key, "/sha256/xx/")
	key = s3Digest.ReplaceAllString(key, "<hex>")
	key = s3UUID.ReplaceAllString(key, "<uuid>")
	key = s3Repo.ReplaceAllString(key, "/repositories/<repo>/$1")
	key = s3Tag.ReplaceAllString(key, "/tags/<tag>")
	return method + " " + key
}

// cpuOf is the CPU time the processes have used so far, by processCPU;
// a process whose time cannot be read counts for none.
func cpuOf(pids ...int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		if d, err := processCPU(pid); err == nil {
			sum += d
		}
	}
	return sum
}
