package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/berth-registry/berth/internal/testpki"
)

// startBerthTLS runs `berth serve` over TLS (http.tls, a certificate for
// 127.0.0.1 of an authority made here), as startBerth does otherwise. It
// returns the server and the authority's certificates, for its clients.
func startBerthTLS(ctx context.Context, bin, dir string) (*server, *x509.CertPool, error) {
	ca, err := testpki.NewCA("berth bench CA")
	if err != nil {
		return nil, nil, err
	}
	cert, err := ca.Issue(testpki.Options{Hosts: []string{"127.0.0.1"}})
	if err != nil {
		return nil, nil, err
	}
	certFile, keyFile, err := cert.Write(dir, "tls")
	if err != nil {
		return nil, nil, err
	}
	file := filepath.Join(dir, "berth.yaml")
	if err := os.WriteFile(file, fmt.Appendf(nil, "http:\n  tls:\n    certificate: %q\n    key: %q\n", certFile, keyFile), 0o644); err != nil {
		return nil, nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, nil, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM)
	s, err := startReady(ctx, "berth+tls", addr, dir, "https://"+addr+"/readyz", tlsTransport(roots, addr), bin,
		"serve", "--addr", addr, "--data", filepath.Join(dir, "data"), "--config", file)
	return s, roots, err
}

// tlsTransport is loopbackTransport over TLS, trusting roots, with HTTP/2
// as Go clients (oras, helm, crane) negotiate it.
func tlsTransport(roots *x509.CertPool, addr string) *http.Transport {
	t := loopbackTransport(addr)
	t.TLSClientConfig = &tls.Config{RootCAs: roots}
	t.ForceAttemptHTTP2 = true
	return t
}

// newTLSTarget is a target that reaches addr over TLS, trusting roots.
func newTLSTarget(name, addr string, roots *x509.CertPool) *target {
	t := newTarget(name, addr)
	t.client = &http.Client{Transport: tlsTransport(roots, addr)}
	t.https = true
	return t
}

// runTLSTable measures berth over TLS against berth over plain HTTP, two
// servers started side by side in root so that both serve the same
// requests: the blob, package and mixed rows, printed as ratios with the
// target berth+tls >= 0.95x berth.
func runTLSTable(ctx context.Context, o options, bin, root string) error {
	logf("TLS on against TLS off")
	dirs := [2]string{filepath.Join(root, "berth-tls"), filepath.Join(root, "berth-plain")}
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	secured, roots, err := startBerthTLS(ctx, bin, dirs[0])
	if err != nil {
		return err
	}
	defer stop(secured)
	plain, err := startBerth(ctx, bin, dirs[1])
	if err != nil {
		return err
	}
	defer stop(plain)
	plain.name = "berth"
	targets := []*target{newTLSTarget(secured.name, secured.addr, roots), newTarget(plain.name, plain.addr)}
	logf("berth over TLS on %s, over plain HTTP on %s", secured.addr, plain.addr)
	rows, err := measureAll(ctx, o, targets)
	if err != nil {
		return err
	}
	fmt.Println()
	printTable(os.Stdout, parityTable("TLS on against TLS off (berth+tls: TLS 1.3, ECDSA P-256 certificate, HTTP/2 as Go clients negotiate it; berth: plain HTTP/1.1)", targets, rows), o.verbose)
	return nil
}
