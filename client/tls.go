package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
)

// TLSOptions name the files of the client's TLS configuration, as oras's
// flags do. The zero value trusts the system's certificate authorities
// and sends no client certificate.
type TLSOptions struct {
	// CAFile is a PEM file of certificate authorities trusted for the
	// server's certificate, besides the system's.
	CAFile string
	// CertFile and KeyFile are the PEM files of a client certificate and
	// its key, sent to a server that asks for one. They go together.
	CertFile, KeyFile string
	// InsecureSkipVerify accepts any server certificate: for a test server
	// only, since anyone in the middle can then read and change the traffic.
	InsecureSkipVerify bool
}

// IsZero reports whether o asks for nothing beyond the default.
func (o TLSOptions) IsZero() bool { return o == TLSOptions{} }

// Config reads the files of o into a TLS client configuration (TLS 1.2 or
// later). Its errors name the file that did not load and the field: "CA
// file ca.pem: no PEM certificate found".
func (o TLSOptions) Config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: o.InsecureSkipVerify}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s: %w", o.CAFile, errNoPEMCertificate)
		}
		cfg.RootCAs = pool
	}
	switch {
	case o.CertFile != "" && o.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate %s and key %s: %w", o.CertFile, o.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case o.CertFile != "":
		return nil, fmt.Errorf("client certificate %s: %w: its key file is needed too", o.CertFile, ErrInvalid)
	case o.KeyFile != "":
		return nil, fmt.Errorf("client key %s: %w: its certificate file is needed too", o.KeyFile, ErrInvalid)
	}
	return cfg, nil
}

var errNoPEMCertificate = errors.New("no PEM certificate found")

// transport is the HTTP transport of the client: http.DefaultTransport's
// settings with cfg, or http.DefaultTransport itself when cfg is nil.
func transport(cfg *tls.Config) http.RoundTripper {
	if cfg == nil {
		return http.DefaultTransport
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = cfg
	return t
}

// IsCertificateError reports whether err is a server certificate that did
// not verify: an unknown authority, another host's, or expired.
func IsCertificateError(err error) bool {
	var (
		verify    *tls.CertificateVerificationError
		authority x509.UnknownAuthorityError
		host      x509.HostnameError
		invalid   x509.CertificateInvalidError
	)
	return errors.As(err, &verify) || errors.As(err, &authority) || errors.As(err, &host) || errors.As(err, &invalid)
}

// IsClientCertificateRefusal reports whether err may be a server refusing
// the client for want of a client certificate: its alert "certificate
// required", or an HTTPS connection reset or closed under the request (or
// under HTTP/2's setup, which net/http reports as "http2: client conn
// could not be established"), as a TLS 1.3 server's refusal, sent after
// the handshake, often reaches a client that is writing.
func IsClientCertificateRefusal(err error) bool {
	if strings.Contains(err.Error(), "tls: certificate required") {
		return true
	}
	var u *url.Error
	return errors.As(err, &u) && strings.HasPrefix(u.URL, "https://") &&
		(errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
			strings.Contains(u.Err.Error(), "http2: client conn could not be established"))
}
