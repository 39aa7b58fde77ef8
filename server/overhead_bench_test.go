package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sirupsen/logrus"

	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/storage"
)

// BenchmarkOverhead measures what berth's wrapper (router, request ID, access
// log, metrics, immutability guard, per-tag lock) costs per request, against
// distribution's bare handlers.App on the same in-memory storage:
//
//	go test -run - -bench Overhead -benchmem ./server/
func BenchmarkOverhead(b *testing.B) {
	stacks := map[string]func(b *testing.B) http.Handler{
		"distribution": func(b *testing.B) http.Handler {
			// As distribution ships: its per-request info line formatted
			// (into io.Discard, as berth's own access line is in these benchmarks).
			std := logrus.StandardLogger()
			std.ReplaceHooks(logrus.LevelHooks{})
			std.SetOutput(io.Discard)
			std.SetLevel(logrus.InfoLevel)
			cfg := &configuration.Configuration{Storage: configuration.Storage{
				"inmemory": configuration.Parameters{},
				"delete":   configuration.Parameters{"enabled": true},
				"cache":    configuration.Parameters{"blobdescriptor": "inmemory"},
			}}
			cfg.HTTP.Secret = "bench"
			return handlers.NewApp(context.Background(), cfg)
		},
		"berth": func(b *testing.B) http.Handler {
			reg, err := registry.New(context.Background(), registry.Options{Storage: &storage.Config{Driver: "inmemory"}, HTTPSecret: "bench", Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { reg.Close() })
			return New(Options{Registry: reg, Logger: quiet}).Handler()
		},
	}
	for _, name := range []string{"distribution", "berth"} {
		b.Run(name+"/manifest-put", func(b *testing.B) {
			h := stacks[name](b)
			m := benchManifest(b, h)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				serve(b, h, http.MethodPut, fmt.Sprintf("/v2/bench/pkg/manifests/1.0.%d", i), m, http.StatusCreated)
			}
		})
		b.Run(name+"/manifest-get", func(b *testing.B) {
			h := stacks[name](b)
			serve(b, h, http.MethodPut, "/v2/bench/pkg/manifests/1.0.0", benchManifest(b, h), http.StatusCreated)
			b.ResetTimer()
			for b.Loop() {
				serve(b, h, http.MethodGet, "/v2/bench/pkg/manifests/1.0.0", nil, http.StatusOK)
			}
		})
	}
}

// benchManifest uploads a package's blobs and returns its manifest.
func benchManifest(b *testing.B, h http.Handler) []byte {
	m := ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest, ArtifactType: pkgformat.ArtifactType}
	m.SchemaVersion = 2
	m.Config = benchBlob(b, h, pkgformat.ConfigMediaType, []byte(`{"name":"pkg"}`))
	m.Layers = []ocispec.Descriptor{benchBlob(b, h, pkgformat.ContentMediaType, bytes.Repeat([]byte("x"), 50<<10))}
	body, err := json.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	return body
}

func benchBlob(b *testing.B, h http.Handler, mediaType string, data []byte) ocispec.Descriptor {
	w := serve(b, h, http.MethodPost, "/v2/bench/pkg/blobs/uploads/", nil, http.StatusAccepted)
	d := digest.FromBytes(data)
	serve(b, h, http.MethodPut, w.Header().Get("Location")+"&digest="+d.String(), data, http.StatusCreated)
	return ocispec.Descriptor{MediaType: mediaType, Digest: d, Size: int64(len(data))}
}

func serve(b *testing.B, h http.Handler, method, target string, body []byte, want int) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, bytes.NewReader(body))
	req.Header.Set("Content-Type", ocispec.MediaTypeImageManifest)
	req.Header.Set("Accept", ocispec.MediaTypeImageManifest)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != want {
		b.Fatalf("%s %s: %d %s", method, target, w.Code, w.Body)
	}
	return w
}
