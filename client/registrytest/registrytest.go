// Package registrytest runs a real CNCF distribution registry with in-memory
// storage behind an httptest server, for tests of code that talks to a
// registry. It is a test helper; nothing in berth's binaries imports it.
package registrytest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory" // the "inmemory" storage driver
	"github.com/sirupsen/logrus"
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
