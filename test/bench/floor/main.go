// Command floor is the per-request floor of `make bench`: a bare net/http
// server answering the registry API's pull requests from files on disk with
// http.ServeContent (see package floor for what it serves and the layout of
// its directory). The harness builds it, fills its directory and starts it
// like the registries it compares:
//
//	floor -addr 127.0.0.1:PORT -dir DIR
//
// It logs nothing per request and exits on SIGTERM or Ctrl-C.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/berth-registry/berth/test/bench/internal/floor"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:5000", "address to listen on")
	dir := flag.String("dir", "", "directory to serve, laid out as floor.Store writes it")
	flag.Parse()
	if *dir == "" || flag.NArg() > 0 {
		return errors.New("usage: floor -addr HOST:PORT -dir DIR")
	}
	root, err := os.OpenRoot(*dir)
	if err != nil {
		return err
	}
	defer root.Close()

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	srv := &http.Server{Addr: *addr, Handler: floor.Handler(root)}
	stopped := make(chan error, 1)
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		stopped <- srv.Shutdown(shutdown)
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return <-stopped
}
