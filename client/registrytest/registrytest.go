// Package registrytest runs a real CNCF distribution registry with in-memory
// storage behind an httptest server, for tests of code that talks to a
// registry: distribution's own (Start, New), or berth's (StartBerth,
// NewBerth), which adds the referrers API, version immutability and tag
// admission. It is a test helper; nothing in berth's binaries imports it.
package registrytest

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory" // the "inmemory" storage driver
	"github.com/sirupsen/logrus"

	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/storage"
)

// Start starts a registry with empty in-memory storage and returns its
// host:port (a loopback address, so clients default to plain HTTP) and a
// function that stops it. If wrap is not nil, the registry's handler is
// passed through it, so that a test can alter requests or responses. Start
// discards the output of the standard logrus logger, which distribution logs to.
func Start(wrap func(http.Handler) http.Handler) (host string, stop func()) {
	logrus.SetOutput(io.Discard)
	config := &configuration.Configuration{
		Storage: configuration.Storage{
			"inmemory":    configuration.Parameters{},
			"maintenance": configuration.Parameters{"uploadpurging": map[any]any{"enabled": false}},
		},
	}
	config.HTTP.Secret = "registrytest"
	// distribution's configuration parser defaults this to 1000; built in
	// code it would be 0, and /v2/_catalog would list nothing.
	config.Catalog.MaxEntries = 1000
	ctx, cancel := context.WithCancel(context.Background())
	var h http.Handler = handlers.NewApp(ctx, config)
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	return strings.TrimPrefix(srv.URL, "http://"), func() {
		srv.Close()
		cancel()
	}
}

// New is Start for a test: the registry stops when the test ends.
func New(t testing.TB, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	host, stop := Start(wrap)
	t.Cleanup(stop)
	return host
}

// StartBerth starts berth's registry (package registry) with empty
// in-memory storage and returns its host:port (a loopback address) and a
// function that stops it. opts.Storage, opts.HTTPSecret and opts.Logger
// default to in-memory storage, a fixed secret and a logger that discards.
// If wrap is not nil, the registry's handler is passed through it.
func StartBerth(opts registry.Options, wrap func(http.Handler) http.Handler) (host string, stop func(), err error) {
	if opts.Storage == nil {
		opts.Storage = &storage.Config{Driver: "inmemory"}
	}
	if opts.HTTPSecret == "" {
		opts.HTTPSecret = "registrytest"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	reg, err := registry.New(context.Background(), opts)
	if err != nil {
		return "", nil, err
	}
	var h http.Handler = reg
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	return strings.TrimPrefix(srv.URL, "http://"), func() {
		srv.Close()
		reg.Close()
	}, nil
}

// NewBerth is StartBerth for a test: the registry stops when the test ends.
func NewBerth(t testing.TB, opts registry.Options, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	host, stop, err := StartBerth(opts, wrap)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return host
}
