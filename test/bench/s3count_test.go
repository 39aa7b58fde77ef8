package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestS3Kind(t *testing.T) {
	const hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		method, target string
		header         string
		want           string
	}{
		{"HEAD", "/b/docker/registry/v2/blobs/sha256/01/" + hex + "/data", "", "HEAD docker/registry/v2/blobs/sha256/xx/<hex>/data"},
		{"GET", "/b/docker/registry/v2/repositories/ns/pkg-1/_layers/sha256/" + hex + "/link", "", "GET docker/registry/v2/repositories/<repo>/_layers/sha256/<hex>/link"},
		{"GET", "/b/docker/registry/v2/repositories/ns/p/_manifests/tags/1.0.0/current/link", "", "GET docker/registry/v2/repositories/<repo>/_manifests/tags/<tag>/current/link"},
		{"GET", "/b?list-type=2&prefix=docker/registry/v2/repositories/ns/p/_uploads/01234567-89ab-cdef-0123-456789abcdef/data", "", "LIST ?prefix=docker/registry/v2/repositories/<repo>/_uploads/<uuid>/data"},
		{"PUT", "/b/docker/registry/v2/blobs/sha256/01/" + hex + "/data", "b/x", "COPY docker/registry/v2/blobs/sha256/xx/<hex>/data"},
		{"POST", "/b?delete", "", "DELETE-OBJECTS "},
	} {
		r := httptest.NewRequest(tc.method, tc.target, nil)
		if tc.header != "" {
			r.Header.Set("X-Amz-Copy-Source", tc.header)
		}
		if got := s3Kind(r); got != tc.want {
			t.Errorf("%s %s: kind %q, want %q", tc.method, tc.target, got, tc.want)
		}
	}
	c := newS3Counter("127.0.0.1:1")
	defer c.srv.Close()
	resp, err := http.Head(c.srv.URL + "/b/key")
	if err == nil {
		resp.Body.Close()
	}
	if got := c.take(); got["HEAD key"] != 1 || got.total() != 1 {
		t.Errorf("counts %v, want one HEAD key", got)
	}
	if got := c.take(); got.total() != 0 {
		t.Errorf("counts after take %v, want none", got)
	}
}
