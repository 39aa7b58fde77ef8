package node_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/node"
)

// Example starts berth serve in process on a free loopback port, with
// metrics of its own, asks it whether it is ready, and stops it as SIGTERM
// does.
func Example() {
	data, err := os.MkdirTemp("", "berth-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(data)
	cfg := &config.Config{Addr: "127.0.0.1:0", Data: data}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		panic(err)
	}

	ctx, stop := context.WithCancel(context.Background())
	n, err := node.New(ctx, cfg, node.Options{Logger: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry()})
	if err != nil {
		panic(err)
	}
	defer n.Close()
	served := make(chan error)
	go func() { served <- n.Serve(ctx) }()

	resp, err := http.Get("http://" + n.Addr().String() + "/readyz")
	if err != nil {
		panic(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	fmt.Println("readyz:", resp.Status)

	stop()
	fmt.Println("served:", <-served)
	// Output:
	// readyz: 200 OK
	// served: <nil>
}
