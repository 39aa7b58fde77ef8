package tlsreload

import (
	"bytes"
	"crypto/tls"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/internal/testpki"
)

// clock is a settable time for the Reloader.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func issue(t *testing.T, ca *testpki.CA) *testpki.Cert {
	t.Helper()
	c, err := ca.Issue(testpki.Options{Hosts: []string{"127.0.0.1", "localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newCA(t *testing.T) *testpki.CA {
	t.Helper()
	ca, err := testpki.NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// start makes a Reloader on cfg with a clock the test moves and a log it reads.
func start(t *testing.T, cfg config.TLS) (*Reloader, *clock, *bytes.Buffer) {
	t.Helper()
	var log bytes.Buffer
	r, err := New(cfg, slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Now()}
	r.now = c.now
	return r, c, &log
}

func serving(t *testing.T, r *Reloader) string {
	t.Helper()
	return r.Config().Certificates[0].Leaf.SerialNumber.String()
}

// expectServing fails the test unless r serves want; when says at what point.
func expectServing(t *testing.T, r *Reloader, want *testpki.Cert, when string) {
	t.Helper()
	if got := serving(t, r); got != want.Serial.String() {
		t.Fatalf("%s: serving the certificate of serial %s, want %s", when, got, want.Serial)
	}
}

// renewal is a Reloader serving the first of two certificates of one
// authority from certFile and keyFile, which the test overwrites.
type renewal struct {
	r                 *Reloader
	clk               *clock
	log               *bytes.Buffer
	first, second     *testpki.Cert
	certFile, keyFile string
}

func newRenewal(t *testing.T) renewal {
	t.Helper()
	ca := newCA(t)
	n := renewal{first: issue(t, ca), second: issue(t, ca)}
	var err error
	if n.certFile, n.keyFile, err = n.first.Write(t.TempDir(), "tls"); err != nil {
		t.Fatal(err)
	}
	n.r, n.clk, n.log = start(t, config.TLS{Certificate: n.certFile, Key: n.keyFile})
	return n
}

func TestReloadsARotatedCertificateOnceASecondAtMost(t *testing.T) {
	n := newRenewal(t)
	r, clk, log, first, second, certFile, keyFile := n.r, n.clk, n.log, n.first, n.second, n.certFile, n.keyFile
	expectServing(t, r, first, "at start")
	write(t, certFile, second.CertPEM)
	write(t, keyFile, second.KeyPEM)
	clk.advance(500 * time.Millisecond)
	expectServing(t, r, first, "within a second of the last look")
	clk.advance(time.Second)
	expectServing(t, r, second, "after the files changed")
	if !strings.Contains(log.String(), "reloaded the TLS certificate") || !strings.Contains(log.String(), second.Serial.String()) {
		t.Errorf("the reload was not logged with the new serial:\n%s", log)
	}
}

func TestABadNewPairKeepsTheOldCertificate(t *testing.T) {
	n := newRenewal(t)
	r, clk, log, first, second, certFile, keyFile := n.r, n.clk, n.log, n.first, n.second, n.certFile, n.keyFile

	// The certificate is renewed, but its key is not written yet.
	write(t, certFile, second.CertPEM)
	clk.advance(2 * time.Second)
	expectServing(t, r, first, "with a certificate that does not match the key")
	if !strings.Contains(log.String(), "level=ERROR") || !strings.Contains(log.String(), certFile) {
		t.Fatalf("the failed reload was not logged naming %s:\n%s", certFile, log)
	}
	errors := strings.Count(log.String(), "level=ERROR")
	clk.advance(2 * time.Second)
	serving(t, r)
	if n := strings.Count(log.String(), "level=ERROR"); n != errors {
		t.Errorf("the same failure was logged again (%d errors, then %d)", errors, n)
	}

	write(t, keyFile, []byte("not a key"))
	clk.advance(2 * time.Second)
	expectServing(t, r, first, "with a garbled key")
	write(t, keyFile, second.KeyPEM)
	clk.advance(2 * time.Second)
	expectServing(t, r, second, "once the key matches")
}

// TestFollowsAKubernetesSecretMount swaps the ..data symlink as the
// kubelet updates a mounted Secret: the file names stay, their targets change.
func TestFollowsAKubernetesSecretMount(t *testing.T) {
	mount := t.TempDir()
	ca := newCA(t)
	first, second := issue(t, ca), issue(t, ca)
	version := func(name string, c *testpki.Cert) {
		dir := filepath.Join(mount, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Write(dir, "tls"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(name, filepath.Join(mount, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(mount, "..data_tmp"), filepath.Join(mount, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("..2026_11_27_01", first)
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(mount, f)); err != nil {
			t.Fatal(err)
		}
	}
	r, clk, _ := start(t, config.TLS{Certificate: filepath.Join(mount, "tls.crt"), Key: filepath.Join(mount, "tls.key")})
	expectServing(t, r, first, "at start")
	version("..2026_11_27_02", second)
	if err := os.RemoveAll(filepath.Join(mount, "..2026_11_27_01")); err != nil {
		t.Fatal(err)
	}
	clk.advance(2 * time.Second)
	expectServing(t, r, second, "after the Secret was updated")
}

func TestClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t)
	certFile, keyFile, err := issue(t, ca).Write(dir, "tls")
	if err != nil {
		t.Fatal(err)
	}
	caFile, err := ca.WriteCA(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		auth string
		want tls.ClientAuthType
	}{
		{config.ClientAuthIfGiven, tls.VerifyClientCertIfGiven},
		{config.ClientAuthRequired, tls.RequireAndVerifyClientCert},
	} {
		r, _, _ := start(t, config.TLS{Certificate: certFile, Key: keyFile, ClientCA: caFile, ClientAuth: tc.auth, MinVersion: config.TLS13})
		cfg := r.Config()
		if cfg.ClientAuth != tc.want || cfg.ClientCAs == nil {
			t.Errorf("clientAuth %s: ClientAuth %v (CAs %v), want %v", tc.auth, cfg.ClientAuth, cfg.ClientCAs != nil, tc.want)
		}
		if cfg.MinVersion != tls.VersionTLS13 || r.ServerConfig().MinVersion != tls.VersionTLS13 {
			t.Errorf("minVersion 1.3: MinVersion %x", cfg.MinVersion)
		}
		if got := r.ServerConfig().NextProtos; len(got) == 0 || got[0] != "h2" {
			t.Errorf("NextProtos %v, want h2 first", got)
		}
	}
}

func TestNewNamesTheFileThatDoesNotLoad(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t)
	certFile, keyFile, err := issue(t, ca).Write(dir, "tls")
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey, err := issue(t, ca).Write(dir, "other")
	if err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage.pem")
	write(t, garbage, []byte("not PEM"))
	missing := filepath.Join(dir, "missing.pem")
	for _, tc := range []struct {
		name string
		cfg  config.TLS
		want []string
	}{
		{"missing certificate", config.TLS{Certificate: missing, Key: keyFile}, []string{"http.tls.certificate", missing}},
		{"missing key", config.TLS{Certificate: certFile, Key: missing}, []string{"http.tls.key", missing}},
		{"missing client CA", config.TLS{Certificate: certFile, Key: keyFile, ClientCA: missing}, []string{"http.tls.clientCA", missing}},
		{"key of another certificate", config.TLS{Certificate: certFile, Key: otherKey}, []string{"http.tls.certificate " + certFile, "http.tls.key " + otherKey, "does not match"}},
		{"certificate not PEM", config.TLS{Certificate: garbage, Key: keyFile}, []string{"http.tls.certificate " + garbage}},
		{"client CA not PEM", config.TLS{Certificate: certFile, Key: keyFile, ClientCA: garbage}, []string{"http.tls.clientCA " + garbage, "no PEM certificate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg, slog.New(slog.DiscardHandler))
			if err == nil {
				t.Fatal("New succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}
