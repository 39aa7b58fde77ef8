// Package tlsreload serves berth's TLS certificate, key and client CA from
// files that may be replaced while berth runs: cert-manager renewing a
// certificate in place, or Kubernetes updating a mounted Secret (which
// swaps the ..data symlink the files point through). At most once a second,
// on a handshake, the files are looked at again; when one changed (another
// file, size or modification time), they are read again. A new set that
// does not load (a key that does not match, a half-written file) is logged,
// naming the file, and the old one is served until a good one appears.
package tlsreload

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/berth-registry/berth/config"
)

// checkInterval is how often, at most, the files are looked at.
const checkInterval = time.Second

// Reloader holds the TLS configuration read from the files of http.tls and
// reads them again when they change. It is safe for concurrent use.
type Reloader struct {
	cfg config.TLS
	log *slog.Logger
	// now is time.Now but in tests.
	now func() time.Time

	mu        sync.Mutex
	checked   time.Time
	seen      []os.FileInfo
	current   *tls.Config
	serial    string
	lastError error
}

// New reads the certificate, key and client CA of cfg (validated by
// config.TLS.Validate) and returns a Reloader serving them. Its error names
// the setting and the file that did not load, e.g. "http.tls.key
// /etc/berth/tls.key: ...".
func New(cfg config.TLS, log *slog.Logger) (*Reloader, error) {
	r := &Reloader{cfg: cfg, log: log, now: time.Now}
	seen, err := r.stat()
	if err != nil {
		return nil, err
	}
	current, err := r.load()
	if err != nil {
		return nil, err
	}
	r.seen, r.current, r.checked = seen, current, r.now()
	r.logLoaded("serving TLS")
	return r, nil
}

// ServerConfig returns the configuration to serve TLS with: each handshake
// gets the newest configuration that loaded (GetConfigForClient), which
// offers HTTP/2 and HTTP/1.1 over ALPN.
func (r *Reloader) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:         r.minVersion(),
		NextProtos:         nextProtos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return r.Config(), nil },
	}
}

// nextProtos are the application protocols offered over ALPN, HTTP/2 first.
var nextProtos = []string{"h2", "http/1.1"}

// Config returns the configuration of the files as last loaded, first
// reading them again if they changed and were last looked at a second ago
// or more.
func (r *Reloader) Config() *tls.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.now(); now.Sub(r.checked) >= checkInterval {
		r.checked = now
		r.reloadIfChanged()
	}
	return r.current
}

// reloadIfChanged reads the files again if any changed since they were last
// looked at. A set that does not load is logged once, and the old one kept.
func (r *Reloader) reloadIfChanged() {
	seen, err := r.stat()
	if err != nil {
		r.fail(err)
		return
	}
	if sameFiles(seen, r.seen) {
		return
	}
	r.seen = seen
	next, err := r.load()
	if err != nil {
		r.fail(err)
		return
	}
	r.current, r.lastError = next, nil
	r.logLoaded("reloaded the TLS certificate")
}

// fail logs err, once while it lasts, saying the old certificate stays.
func (r *Reloader) fail(err error) {
	if r.lastError != nil && r.lastError.Error() == err.Error() {
		return
	}
	r.lastError = err
	r.log.Error("TLS files changed but do not load; still serving the certificate loaded before", "serial", r.serial, "error", err)
}

func (r *Reloader) logLoaded(msg string) {
	leaf := r.current.Certificates[0].Leaf
	r.serial = leaf.SerialNumber.String()
	attrs := []any{"certificate", r.cfg.Certificate, "serial", r.serial, "subject", leaf.Subject.String(), "notAfter", leaf.NotAfter.UTC()}
	if r.now().After(leaf.NotAfter) {
		r.log.Warn(msg+": the certificate has expired, clients will refuse it", attrs...)
		return
	}
	r.log.Info(msg, attrs...)
}

// files are the files read, by their setting.
func (r *Reloader) files() [][2]string {
	f := [][2]string{{"http.tls.certificate", r.cfg.Certificate}, {"http.tls.key", r.cfg.Key}}
	if r.cfg.ClientCA != "" {
		f = append(f, [2]string{"http.tls.clientCA", r.cfg.ClientCA})
	}
	return f
}

// stat looks at the files, following symlinks, as a change is told.
func (r *Reloader) stat() ([]os.FileInfo, error) {
	var infos []os.FileInfo
	for _, f := range r.files() {
		fi, err := os.Stat(f[1])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f[0], err)
		}
		infos = append(infos, fi)
	}
	return infos, nil
}

// sameFiles reports whether a and b are the same files, unchanged.
func sameFiles(a, b []os.FileInfo) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !os.SameFile(a[i], b[i]) || a[i].Size() != b[i].Size() || !a[i].ModTime().Equal(b[i].ModTime()) {
			return false
		}
	}
	return true
}

// load reads the files into a server configuration.
func (r *Reloader) load() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(r.cfg.Certificate, r.cfg.Key)
	if err != nil {
		return nil, fmt.Errorf("http.tls.certificate %s and http.tls.key %s: %w", r.cfg.Certificate, r.cfg.Key, err)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   r.minVersion(),
		NextProtos:   nextProtos,
	}
	if r.cfg.ClientCA == "" {
		return cfg, nil
	}
	pem, err := os.ReadFile(r.cfg.ClientCA)
	if err != nil {
		return nil, fmt.Errorf("http.tls.clientCA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("http.tls.clientCA %s: %w", r.cfg.ClientCA, errNoCertificates)
	}
	cfg.ClientCAs = pool
	cfg.ClientAuth = tls.VerifyClientCertIfGiven
	if r.cfg.ClientAuth == config.ClientAuthRequired {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

var errNoCertificates = errors.New("no PEM certificate found")

func (r *Reloader) minVersion() uint16 {
	if r.cfg.MinVersion == config.TLS13 {
		return tls.VersionTLS13
	}
	return tls.VersionTLS12
}
