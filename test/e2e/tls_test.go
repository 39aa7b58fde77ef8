package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/internal/testpki"
)

// testCA issues the certificates of the TLS tests; the tests' HTTP client
// (http.DefaultTransport) trusts it, and the CLIs are given its file.
var testCA struct {
	*testpki.CA
	file string
	pool *x509.CertPool
}

// makeTestCA makes testCA, its file in dir.
func makeTestCA(dir string) error {
	ca, err := testpki.NewCA("berth e2e CA")
	if err != nil {
		return err
	}
	testCA.CA = ca
	if testCA.file, err = ca.WriteCA(dir, "e2e-ca"); err != nil {
		return err
	}
	testCA.pool = x509.NewCertPool()
	testCA.pool.AppendCertsFromPEM(ca.PEM)
	return nil
}

// loopbackHosts are what a certificate for a test server is valid for.
var loopbackHosts = []string{"127.0.0.1", "localhost"}

// issue writes a certificate of testCA as dir/name.crt and dir/name.key.
func issue(t *testing.T, dir, name string, opts testpki.Options) (cert *testpki.Cert, certFile, keyFile string) {
	t.Helper()
	cert, err := testCA.Issue(opts)
	if err != nil {
		t.Fatal(err)
	}
	if certFile, keyFile, err = cert.Write(dir, name); err != nil {
		t.Fatal(err)
	}
	return cert, certFile, keyFile
}

// tlsYAML is the http.tls section for the certificate and key files, and
// more settings of it (e.g. "    clientAuth: require\n").
func tlsYAML(certFile, keyFile, more string) string {
	return fmt.Sprintf("http:\n  tls:\n    certificate: %q\n    key: %q\n%s", certFile, keyFile, more)
}

// startTLSServer starts berth serve with a certificate of testCA for opts
// (loopbackHosts when it names none) and more http.tls settings. It returns
// the server and the certificate's directory.
func startTLSServer(t *testing.T, opts testpki.Options, more string) (*server, string) {
	t.Helper()
	dir := t.TempDir()
	if opts.Hosts == nil {
		opts.Hosts = loopbackHosts
	}
	_, certFile, keyFile := issue(t, dir, "tls", opts)
	cfg := filepath.Join(dir, "berth.yaml")
	if err := os.WriteFile(cfg, []byte(tlsYAML(certFile, keyFile, more)), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "", "--config", cfg)
	if !s.tls {
		t.Fatalf("berth serve with http.tls did not log %s\n%s", servingTLS, s.logs())
	}
	return s, dir
}

// serverSerial connects to addr over TLS and returns the serial number of
// the certificate it presents, and the protocol ALPN chose.
func serverSerial(t *testing.T, addr string) (serial, proto string) {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: testCA.pool, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatalf("TLS to %s: %v", addr, err)
	}
	defer conn.Close()
	st := conn.ConnectionState()
	return st.PeerCertificates[0].SerialNumber.String(), st.NegotiatedProtocol
}

// TestTLSClients: against a berth serving TLS with a certificate of a
// private authority, the real oras, helm, cosign, crane, opm and berth
// push, pull, sign, verify and search when given the authority's file,
// over HTTP/2.
func TestTLSClients(t *testing.T) {
	s, _ := startTLSServer(t, testpki.Options{}, "")
	ca := testCA.file
	resp, err := http.Get(s.url() + "/v2/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
		t.Fatalf("GET /v2/ over TLS: %d over %s, want 200 over HTTP/2", resp.StatusCode, resp.Proto)
	}

	// berth: push, pull, search, sign and verify, with --ca-file.
	berth(t, "", "push", kudoFixture(t, "kafka", "2.5.1-1.3.2"), s.addr+"/tls/kafka", "--ca-file", ca)
	pulled := t.TempDir()
	berth(t, pulled, "pull", s.addr+"/tls/kafka:2.5.1_1.3.2", "--ca-file", ca)
	waitUntil(t, s, "tls/kafka indexed", func() bool {
		var v apiv1.Version
		return getJSON(t, s, "/api/v1/packages/tls/kafka/versions/2.5.1_1.3.2", &v) == http.StatusOK
	})
	if out := berth(t, "", "search", "kafka", "--server", s.addr, "--ca-file", ca).stdout; !strings.Contains(out, "tls/kafka") {
		t.Errorf("berth search --ca-file: %q, want tls/kafka", out)
	}
	kp := cosignKeyPair(t)
	berth(t, "", "sign", s.addr+"/tls/kafka:2.5.1_1.3.2", "--key", kp.key, "--ca-file", ca)

	// cosign verifies berth's signature and signs itself.
	cosign(t, kp.dir, "verify", "--key", kp.pub, "--insecure-ignore-tlog", "--registry-cacert", ca, s.addr+"/tls/kafka:2.5.1_1.3.2")
	orasDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(orasDir, "notes.txt"), []byte("over TLS"), 0o644); err != nil {
		t.Fatal(err)
	}
	oras(t, orasDir, "push", "--ca-file", ca, s.addr+"/tls/notes:1", "notes.txt")
	oras(t, t.TempDir(), "pull", "--ca-file", ca, s.addr+"/tls/notes:1")
	cosign(t, kp.dir, "sign", "--key", kp.key, "--tlog-upload=false", "--yes", "--registry-cacert", ca, s.addr+"/tls/notes:1")
	cosign(t, kp.dir, "verify", "--key", kp.pub, "--insecure-ignore-tlog", "--registry-cacert", ca, s.addr+"/tls/notes:1")

	// crane reads the authority from SSL_CERT_FILE, as Go programs do.
	requireTool(t, "the crane CLI", craneBin)
	withCA := command{env: []string{"SSL_CERT_FILE=" + ca}}
	if r := runWith(t, withCA, craneBin, "digest", s.addr+"/tls/notes:1"); r.code != 0 || !strings.HasPrefix(r.stdout, "sha256:") {
		t.Errorf("crane digest with SSL_CERT_FILE: exit %d %s%s", r.code, r.stdout, r.stderr)
	}

	// helm push and pull oci:// with --ca-file.
	requireTool(t, "the helm CLI", helmBin)
	home := t.TempDir()
	if err := os.Mkdir(filepath.Join(home, "pulled"), 0o755); err != nil {
		t.Fatal(err)
	}
	helm := command{dir: home, env: []string{"HOME=" + home, "HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(home, "config"), "HELM_DATA_HOME=" + filepath.Join(home, "data")}}
	for _, args := range [][]string{
		{"create", "webapp"},
		{"package", "webapp"},
		{"push", "webapp-0.1.0.tgz", "oci://" + s.addr + "/charts", "--ca-file", ca},
		{"pull", "oci://" + s.addr + "/charts/webapp", "--version", "0.1.0", "--ca-file", ca, "-d", "pulled"},
	} {
		if r := runWith(t, helm, helmBin, args...); r.code != 0 {
			t.Fatalf("helm %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "pulled", "webapp-0.1.0.tgz")); err != nil {
		t.Errorf("helm pull over TLS: %v", err)
	}

	// opm renders the namespace's OLM catalog image over TLS.
	opm := newOpm(t)
	opm.https = true
	opm.env = append(opm.env, "SSL_CERT_FILE="+ca)
	berth(t, "", "push", filepath.Join(fixtures, "olm-community", "cockroachdb", "5.0.4"), s.addr+"/olmtls/cockroachdb", "--ca-file", ca)
	digest := steadyCatalog(t, s, "olmtls")
	docs := opm.render(t, s.addr+"/olmtls/olm/catalog@"+digest)
	if !hasDoc(docs, "olm.package", "cockroachdb") {
		t.Errorf("opm render of the catalog image over TLS: %v, want the cockroachdb package", docs)
	}

	if _, proto := serverSerial(t, s.addr); proto != "h2" {
		t.Errorf("ALPN chose %q, want h2", proto)
	}
}

// hasDoc reports whether docs has a document of schema named name.
func hasDoc(docs []fbcDoc, schema, name string) bool {
	for _, d := range docs {
		if d.str("schema") == schema && d.str("name") == name {
			return true
		}
	}
	return false
}

// TestTLSRotation: a certificate renewed in place is served to new
// connections within seconds, without a restart.
func TestTLSRotation(t *testing.T) {
	s, dir := startTLSServer(t, testpki.Options{}, "")
	first, _ := serverSerial(t, s.addr)
	next, err := testCA.Issue(testpki.Options{Hosts: loopbackHosts})
	if err != nil {
		t.Fatal(err)
	}
	// Written aside and renamed into place, as cert-manager's csi driver
	// and most tools do; the key first, since the pair is read together.
	for _, f := range []struct {
		name string
		data []byte
	}{{"tls.key", next.KeyPEM}, {"tls.crt", next.CertPEM}} {
		tmp := filepath.Join(dir, "."+f.name)
		if err := os.WriteFile(tmp, f.data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, f.name)); err != nil {
			t.Fatal(err)
		}
	}
	var got string
	waitUntil(t, s, "the renewed certificate served", func() bool {
		got, _ = serverSerial(t, s.addr)
		return got == next.Serial.String()
	})
	if got == first {
		t.Fatal("the serial did not change")
	}
	waitUntil(t, s, "the reload logged with the new serial", func() bool {
		return strings.Contains(s.logs(), `msg="reloaded the TLS certificate"`) && strings.Contains(s.logs(), "serial="+got)
	})
	select {
	case <-s.done:
		t.Fatalf("berth serve exited: %v", s.err)
	default:
	}
	berth(t, "", "push", kudoFixture(t, "kafka", "2.5.1-1.3.2"), s.addr+"/rotated/kafka", "--ca-file", testCA.file)
}

// TestTLSRefusesBadCertificates: oras and berth refuse an expired
// certificate and one for another host with an x509 error, and berth says
// what to do about an authority it does not know.
func TestTLSRefusesBadCertificates(t *testing.T) {
	requireOras(t)
	for _, tc := range []struct {
		name string
		opts testpki.Options
		want string
	}{
		{"expired", testpki.Options{NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)}, "expired"},
		{"wrong host", testpki.Options{Hosts: []string{"127.0.0.2", "registry.example.com"}}, "not 127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := startTLSServer(t, tc.opts, "")
			for _, r := range []result{
				run(t, "", orasBin, "repo", "ls", "--ca-file", testCA.file, s.addr),
				run(t, "", berthBin, "search", "--server", s.addr, "--ca-file", testCA.file),
				run(t, "", berthBin, "push", kudoFixture(t, "kafka", "2.5.1-1.3.2"), s.addr+"/x/kafka", "--ca-file", testCA.file),
			} {
				if msg := r.stdout + r.stderr; r.code == 0 || !strings.Contains(msg, "x509") || !strings.Contains(msg, tc.want) {
					t.Errorf("exit %d, want an x509 error saying %q:\n%s", r.code, tc.want, msg)
				}
			}
		})
	}
	s, _ := startTLSServer(t, testpki.Options{}, "")
	r := run(t, "", berthBin, "search", "--server", "https://"+s.addr)
	if msg := r.stderr; r.code == 0 || !strings.Contains(msg, "x509") || !strings.Contains(msg, "--ca-file") {
		t.Errorf("berth search without the authority: exit %d, want an x509 error and a hint naming --ca-file:\n%s", r.code, msg)
	}
	r = run(t, "", berthBin, "search", "--server", s.addr, "--ca-file", filepath.Join(t.TempDir(), "none.pem"))
	if msg := r.stderr; r.code == 0 || !strings.Contains(msg, "none.pem") {
		t.Errorf("berth search with a missing --ca-file: exit %d, want an error naming the file:\n%s", r.code, msg)
	}
}

// TestTLSClientCertificates: with clientAuth require, a client without a
// certificate is refused at the handshake and one with a certificate of
// the client CA gets through.
func TestTLSClientCertificates(t *testing.T) {
	requireOras(t)
	s, dir := startTLSServer(t, testpki.Options{}, fmt.Sprintf("    clientCA: %q\n    clientAuth: require\n", testCA.file))
	_, certFile, keyFile := issue(t, dir, "client", testpki.Options{Client: true, CommonName: "ci"})
	ca := testCA.file
	fixture := kudoFixture(t, "kafka", "2.5.1-1.3.2")
	if r := run(t, "", orasBin, "repo", "ls", "--ca-file", ca, s.addr); r.code == 0 || !certificateRequired.MatchString(r.stderr) {
		t.Errorf("oras without a client certificate: exit %d, want refused for it:\n%s", r.code, r.stderr)
	}
	if r := run(t, "", berthBin, "push", fixture, s.addr+"/mtls/kafka", "--ca-file", ca); r.code == 0 || !certificateRequired.MatchString(r.stderr) || !strings.Contains(r.stderr, "--cert-file") {
		t.Errorf("berth push without a client certificate: exit %d, want refused for it, with a hint naming --cert-file:\n%s", r.code, r.stderr)
	}
	berth(t, "", "push", fixture, s.addr+"/mtls/kafka", "--ca-file", ca, "--cert-file", certFile, "--key-file", keyFile)
	oras(t, "", "repo", "ls", "--ca-file", ca, "--cert-file", certFile, "--key-file", keyFile, s.addr)
}

// certificateRequired is how a client learns that the server refused it
// for want of a certificate: over TLS 1.3 the server refuses after the
// client's handshake ends, so a client that writes first sees the
// connection reset or closed instead of the alert.
var certificateRequired = regexp.MustCompile(`certificate required|connection reset by peer|broken pipe|client conn could not be established`)

// TestTLSWithAuth: auth on and TLS on, the token realm is https and
// berth login and helm registry login work over it.
func TestTLSWithAuth(t *testing.T) {
	dir := t.TempDir()
	_, certFile, keyFile := issue(t, dir, "tls", testpki.Options{Hosts: loopbackHosts})
	s := startAuthServer(t, authOptions{extra: tlsYAML(certFile, keyFile, "")})
	if !s.tls {
		t.Fatalf("berth serve with auth and http.tls did not log %s", servingTLS)
	}
	resp, err := http.Get(s.url() + "/v2/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if want := `realm="https://` + s.addr + `/auth/token"`; !strings.Contains(resp.Header.Get("WWW-Authenticate"), want) {
		t.Errorf("challenge %q, want %s", resp.Header.Get("WWW-Authenticate"), want)
	}
	alice := s.users["alice"]
	alice.login(t, berthBin, "login", "--ca-file", testCA.file)
	alice.must(t, berthBin, "push", kudoFixture(t, "kafka", "2.5.1-1.3.2"), s.addr+"/a/kafka", "--ca-file", testCA.file)
	alice.must(t, berthBin, "search", "kafka", "--ca-file", testCA.file)
	requireTool(t, "the helm CLI", helmBin)
	alice.login(t, helmBin, "registry", "login", "--ca-file", testCA.file)
	alice.must(t, helmBin, "create", "webapp")
	alice.must(t, helmBin, "package", "webapp")
	alice.must(t, helmBin, "push", "webapp-0.1.0.tgz", "oci://"+s.addr+"/a", "--ca-file", testCA.file)
}

// TestTLSSplitCatalog: berth serve catalog indexes a registry that serves
// TLS with a private authority's certificate, trusting it through
// SSL_CERT_FILE as Go programs do (docs/configuration.md#tls).
func TestTLSSplitCatalog(t *testing.T) {
	reg, _ := startTLSServer(t, testpki.Options{}, "")
	berth(t, "", "push", kudoFixture(t, "kafka", "2.5.1-1.3.2"), reg.addr+"/split/kafka", "--ca-file", testCA.file)
	t.Setenv("SSL_CERT_FILE", testCA.file)
	cat := startProcess(t, "", "serve", "catalog", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--registry", reg.url())
	waitUntil(t, cat, "split/kafka indexed from the TLS registry", func() bool {
		_, code := versionDoc(t, cat, "split/kafka", "2.5.1_1.3.2")
		return code == http.StatusOK
	})
}
