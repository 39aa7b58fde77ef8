package client

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/berth-registry/berth/client/registrytest"
	"github.com/berth-registry/berth/internal/testpki"
)

// tlsRegistry serves a test registry over HTTPS (HTTP/2 offered) on
// loopback and returns its host and the file of its certificate, which
// is its own authority.
func tlsRegistry(t *testing.T) (host, caFile string) {
	t.Helper()
	var reg http.Handler
	registrytest.New(t, func(h http.Handler) http.Handler { reg = h; return h })
	srv := httptest.NewUnstartedServer(reg)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(srv.URL, "https://"), caFile
}

// TestTLSOptions: a CA file selects HTTPS on loopback and trusts the
// server; without it the certificate does not verify, and the error says so.
func TestTLSOptions(t *testing.T) {
	ctx := context.Background()
	host, caFile := tlsRegistry(t)
	art := testArtifact(t, "demo", "1.0.0")
	ref := mustParse(t, host+"/charts/demo:1.0.0")

	for _, o := range []TLSOptions{{CAFile: caFile}, {InsecureSkipVerify: true}} {
		cfg, err := o.Config()
		if err != nil {
			t.Fatal(err)
		}
		c := newTestClient(t, Options{TLS: cfg})
		if c.PlainHTTP(host) {
			t.Fatalf("%+v: plain HTTP for %s, want HTTPS once TLS is configured", o, host)
		}
		if _, err := c.Push(ctx, ref, art); err != nil {
			t.Fatalf("%+v: Push over TLS: %v", o, err)
		}
		if _, err := c.Pull(ctx, ref); err != nil {
			t.Fatalf("%+v: Pull over TLS: %v", o, err)
		}
	}

	https := false
	c := newTestClient(t, Options{PlainHTTP: &https})
	_, err := c.Pull(ctx, ref)
	if err == nil || !IsCertificateError(err) {
		t.Fatalf("Pull without the CA: %v, want a certificate error", err)
	}
	if IsCertificateError(ErrNotFound) {
		t.Error("IsCertificateError(ErrNotFound) = true")
	}
}

func TestTLSOptionsConfigNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	ca, err := testpki.NewCA("client test CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue(testpki.Options{Client: true})
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := cert.Write(dir, "client")
	if err != nil {
		t.Fatal(err)
	}
	caFile, err := ca.WriteCA(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "garbage")
	if err := os.WriteFile(notPEM, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	for _, tc := range []struct {
		name string
		opts TLSOptions
		want string
	}{
		{"missing CA file", TLSOptions{CAFile: missing}, "CA file: open " + missing},
		{"CA file not PEM", TLSOptions{CAFile: notPEM}, "CA file " + notPEM + ": no PEM certificate found"},
		{"certificate without key", TLSOptions{CertFile: certFile}, "client certificate " + certFile + ": invalid: its key file is needed too"},
		{"key without certificate", TLSOptions{KeyFile: keyFile}, "client key " + keyFile + ": invalid: its certificate file is needed too"},
		{"key of nothing", TLSOptions{CertFile: certFile, KeyFile: notPEM}, "client certificate " + certFile + " and key " + notPEM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.opts.Config()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Config() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	cfg, err := TLSOptions{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}.Config()
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Certificates) != 1 || cfg.RootCAs == nil || cfg.InsecureSkipVerify {
		t.Errorf("Config() = %d certificates, roots %v, insecure %v; want the client certificate and the CA", len(cfg.Certificates), cfg.RootCAs != nil, cfg.InsecureSkipVerify)
	}
}

func TestIsClientCertificateRefusal(t *testing.T) {
	reset := &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&url.Error{Op: "Head", URL: "https://127.0.0.1:5000/v2/", Err: reset}, true},
		{fmt.Errorf("push: %w", &url.Error{Op: "Get", URL: "https://r/v2/", Err: syscall.ECONNRESET}), true},
		{&url.Error{Op: "Get", URL: "https://r/v2/", Err: errors.New("remote error: tls: certificate required")}, true},
		{&url.Error{Op: "Head", URL: "https://r/v2/", Err: errors.New("http2: client conn could not be established")}, true},
		{&url.Error{Op: "Head", URL: "http://127.0.0.1:5000/v2/", Err: reset}, false},
		{&url.Error{Op: "Get", URL: "https://r/v2/", Err: syscall.ECONNREFUSED}, false},
		{ErrNotFound, false},
	} {
		if got := IsClientCertificateRefusal(tc.err); got != tc.want {
			t.Errorf("IsClientCertificateRefusal(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
