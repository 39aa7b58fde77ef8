package node

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/internal/testpki"
)

// TestNodeServesTLS: with http.tls set, berth serves HTTPS only, TLS 1.2 or
// later, HTTP/2 to a client that offers it, and the token realm is https.
func TestNodeServesTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := testpki.NewCA("node test CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue(testpki.Options{Hosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := cert.Write(dir, "tls")
	if err != nil {
		t.Fatal(err)
	}
	n := start(t, testConfig(t, t.TempDir(), func(c *config.Config) {
		c.HTTP.TLS = config.TLS{Certificate: certFile, Key: keyFile}
	}))
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM)
	client := func(tc *tls.Config) *http.Client {
		tc.RootCAs = roots
		return &http.Client{Transport: &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true}}
	}
	url := "https://" + n.Addr().String() + "/v2/"
	resp, err := client(&tls.Config{}).Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 || resp.TLS.Version < tls.VersionTLS12 {
		t.Errorf("GET %s: %d over %s, TLS %x; want 200 over HTTP/2, TLS 1.2 or later", url, resp.StatusCode, resp.Proto, resp.TLS.Version)
	}
	if _, err := client(&tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}).Get(url); err == nil || !strings.Contains(err.Error(), "protocol version") {
		t.Errorf("a TLS 1.1 client: %v, want refused for its protocol version", err)
	}
	resp, err = http.Get("http://" + n.Addr().String() + "/v2/")
	if err != nil {
		t.Fatalf("plain HTTP to the TLS port: %v, want a 400", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("plain HTTP to the TLS port: %d, want 400", resp.StatusCode)
	}
}
