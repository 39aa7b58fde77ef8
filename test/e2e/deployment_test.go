package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDeployedReplicasBehindRoundRobinProxy runs berth as docs/scale-out.md
// deploys it: two berth serve on one PostgreSQL database and one S3 bucket
// (versitygw), with auth (htpasswd users, robots, an OIDC issuer), behind a
// reverse proxy that sends every request to the next replica in turn, with
// no session affinity. Through the proxy, the real berth, oras, helm,
// cosign and crane log in, push, pull and sign, so that each of their
// multi-request flows (token, upload, manifest) crosses replicas. Then,
// addressed to each replica directly:
//   - a robot created through A authenticates at once through B; revoked
//     through A, it is refused at once through B, also with a token A
//     minted before;
//   - a token minted by A is accepted by B;
//   - a UI session signed out through A is refused by B;
//   - an upload alice opens on A is unknown (404 BLOB_UPLOAD_UNKNOWN) to
//     another subject with push on its repository, on B; alice finishes it
//     on B;
//   - a manifest and a blob deleted through A are gone at once through B,
//     which read them just before.
func TestDeployedReplicasBehindRoundRobinProxy(t *testing.T) {
	requireOras(t)
	requireTool(t, "the helm CLI", helmBin)
	requireTool(t, "the crane CLI", craneBin)
	kp := cosignKeyPair(t)
	issuer := startOIDCIssuer(t)
	const sub = "system:serviceaccount:ci:builder"
	a, b, s := authReplicas(t, "deployed", authOptions{oidc: issuer.config(sub)})
	audit := s.audit
	t.Run("clients through the proxy", func(t *testing.T) { deployedClients(t, s, issuer, sub, kp) })
	t.Run("state across replicas", func(t *testing.T) {
		deployedAcrossReplicas(t, newAuthServer(t, a, audit), newAuthServer(t, b, audit))
	})
}

// authReplicas starts two berth serve with auth (o, with a token key they
// share) on one PostgreSQL database and one bucket named bucket
// (sharedState), and a round-robin proxy in front of them, which they
// trust. It returns the replicas and the proxy, as the auth tests' server.
func authReplicas(t *testing.T, bucket string, o authOptions) (a, b *server, front *authServer) {
	t.Helper()
	dir := t.TempDir()
	_, shared := sharedState(t, bucket, dir)
	keyFile := filepath.Join(dir, "token-key.pem")
	o.auth += fmt.Sprintf("  keyFile: %q\n", keyFile)
	o.extra = shared + "trustedProxies: [127.0.0.1/32]\n" + o.extra
	cfg, audit := writeAuthConfig(t, o)
	a = startServer(t, "", "--config", cfg)
	secrets.addPEM(t, "the token key", keyFile)
	b = startServer(t, "", "--config", cfg)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replica a:\n%s\nreplica b:\n%s", a.logs(), b.logs())
		}
	})
	return a, b, newAuthServer(t, roundRobinProxy(t, a, b), audit)
}

// deployedClients logs in, pushes, pulls and signs with the real CLIs
// through s, the proxy.
func deployedClients(t *testing.T, s *authServer, issuer *oidcIssuer, sub string, kp keyPair) {
	admin, alice := s.users["admin"], s.users["alice"]

	// berth: login, push, pull.
	admin.login(t, berthBin, "login")
	admin.pushFixture(t, "redis", "5.0.1-0.2.0", "pub/redis")
	kafka := admin.pushFixture(t, "kafka", "2.5.1-1.3.2", "a/kafka")
	alice.login(t, berthBin, "login")
	alice.must(t, berthBin, "pull", s.addr+"/pub/redis:5.0.1_0.2.0", "--tarball", "-o", "berth-pulled")
	readFile(t, filepath.Join(alice.home, "berth-pulled", "redis-5.0.1_0.2.0.tgz"))

	// oras: login, push, pull back byte for byte.
	alice.login(t, orasBin, "login", "--plain-http")
	file := packageTarball(t, alice.home, "cowsay", "0.2.0")
	alice.must(t, orasBin, orasPush(s.addr+"/a/cowsay:0.2.0", file)...)
	alice.must(t, orasBin, "pull", "--plain-http", s.addr+"/a/cowsay:0.2.0", "-o", "oras-pulled")
	if !bytes.Equal(readFile(t, filepath.Join(alice.home, "oras-pulled", file)), readFile(t, filepath.Join(alice.home, file))) {
		t.Error("oras pull through the proxy: the tarball differs from the one pushed")
	}

	// helm: registry login, push, pull back byte for byte.
	alice.must(t, helmBin, "create", "webapp")
	alice.must(t, helmBin, "package", "webapp")
	alice.login(t, helmBin, "registry", "login", "--plain-http")
	chart := filepath.Join(alice.home, "webapp-0.1.0.tgz")
	alice.must(t, helmBin, "push", chart, "oci://"+s.addr+"/a", "--plain-http")
	if err := os.MkdirAll(filepath.Join(alice.home, "helm-pulled"), 0o755); err != nil {
		t.Fatal(err)
	}
	alice.must(t, helmBin, "pull", "oci://"+s.addr+"/a/webapp", "--version", "0.1.0", "--plain-http", "-d", "helm-pulled")
	if !bytes.Equal(readFile(t, filepath.Join(alice.home, "helm-pulled", "webapp-0.1.0.tgz")), readFile(t, chart)) {
		t.Error("helm pull through the proxy: the chart differs from the one pushed")
	}

	// cosign: sign and verify with alice's Docker config credentials.
	ref := s.addr + "/a/kafka@" + kafka
	alice.must(t, cosignBin, "sign", "--key", kp.key, "--tlog-upload=false", "--yes", ref)
	alice.must(t, cosignBin, "verify", "--key", kp.pub, "--insecure-ignore-tlog", ref)

	// crane: login, copy, catalog.
	alice.login(t, craneBin, "auth", "login")
	alice.must(t, craneBin, "copy", "--insecure", s.addr+"/pub/redis:5.0.1_0.2.0", s.addr+"/a/redis:5.0.1_0.2.0")
	if got := alice.must(t, craneBin, "catalog", "--insecure", s.addr).stdout; !strings.Contains(got, "a/redis") || !strings.Contains(got, "a/webapp") {
		t.Errorf("crane catalog through the proxy as alice:\n%s", got)
	}

	// A CI job federated by OIDC pushes with oras, no stored secret.
	ci := s.account(t, "oidc", issuer.mint(t, issuer.key, "berth", sub, 10*time.Minute))
	ci.login(t, orasBin, "login", "--plain-http")
	ci.must(t, orasBin, orasPush(s.addr+"/a/cowsay-ci:0.2.0", packageTarball(t, ci.home, "cowsay", "0.2.0"))...)

	// A robot alice creates through the proxy pulls through it.
	created := alice.must(t, berthBin, "robot", "create", "a/puller", "--scope", "a/*:pull", "--expires", "1h")
	secret := robotSecret.FindString(created.stdout)
	if secret == "" {
		t.Fatalf("berth robot create printed no secret:\n%s", created.stdout)
	}
	secrets.add(t, "the secret of robot a/puller", secret)
	robot := s.account(t, "robot+a+puller", secret)
	robot.login(t, orasBin, "login", "--plain-http")
	robot.must(t, orasBin, "pull", "--plain-http", s.addr+"/a/cowsay:0.2.0", "-o", "pulled")
	robot.refused(t, orasBin, orasPush(s.addr+"/a/cowsay:0.2.1", packageTarball(t, robot.home, "cowsay", "0.2.0"))...)
}

// deployedAcrossReplicas checks what one replica does is honoured by the
// other at once: ra and rb are the two replicas, each with the users.
func deployedAcrossReplicas(t *testing.T, ra, rb *authServer) {
	alice, admin := ra.users["alice"], ra.users["admin"]
	alice.login(t, berthBin, "login")
	// A version pushed to A alone, for what follows to read.
	flow, direct := ra.pushPlain(t, admin.creds(), "a/direct", "1.0.0")
	if last(flow).status != http.StatusCreated {
		t.Fatalf("push a/direct:1.0.0 to A: %s", last(flow))
	}
	manifest := "/v2/a/direct/manifests/1.0.0"
	pull := "repository:a/direct:pull"

	// A token minted by A is accepted by B.
	_, token := ra.token(t, alice.creds(), "", "", pull)
	if token == "" {
		t.Fatal("A minted no token for alice")
	}
	if e := roundTrip(t, "GET", rb.url()+manifest, creds{}, token, manifestAccept, nil); e.status != http.StatusOK {
		t.Errorf("alice's token minted by A, at B: %s, want 200", e)
	}

	// A robot created through A authenticates at once through B.
	created := alice.must(t, berthBin, "robot", "create", "a/cross", "--scope", "a/*:pull", "--expires", "1h")
	secret := robotSecret.FindString(created.stdout)
	if secret == "" {
		t.Fatalf("berth robot create through A printed no secret:\n%s", created.stdout)
	}
	secrets.add(t, "the secret of robot a/cross", secret)
	robot := creds{"robot+a+cross", secret}
	_, fromA := ra.token(t, robot, "", "", pull)
	if e, tok := rb.token(t, robot, "", "", pull); tok == "" {
		t.Errorf("robot a/cross, created through A, asks B for a token: %s, want 200", e)
	}
	if e := rb.api(t, robot, "GET", "/api/v1/packages/a/direct"); e.status != http.StatusOK {
		t.Errorf("robot a/cross, created through A, on B's /api/v1: %s, want 200", e)
	}
	if e := roundTrip(t, "GET", rb.url()+manifest, creds{}, fromA, manifestAccept, nil); e.status != http.StatusOK {
		t.Errorf("robot a/cross's token minted by A, at B: %s, want 200", e)
	}

	// Revoked through A, it is refused at once through B.
	alice.must(t, berthBin, "robot", "revoke", "a/cross")
	if e, tok := rb.token(t, robot, "", "", pull); e.status != http.StatusUnauthorized || tok != "" {
		t.Errorf("robot a/cross, revoked through A, asks B for a token: %s, want 401", e)
	}
	if e := rb.api(t, robot, "GET", "/api/v1/packages/a/direct"); e.status != http.StatusUnauthorized {
		t.Errorf("robot a/cross, revoked through A, on B's /api/v1: %s, want 401", e)
	}
	if e := roundTrip(t, "GET", rb.url()+manifest, creds{}, fromA, manifestAccept, nil); e.status != http.StatusUnauthorized {
		t.Errorf("robot a/cross's unexpired token minted by A, at B after the revocation through A: %s, want 401", e)
	}

	// A UI session signed out through A is refused by B.
	login := postForm(t, ra.server, "/ui/login", url.Values{"username": {"alice"}, "password": {passwordOf("alice")}})
	cookie := sessionCookie(login)
	if login.status != http.StatusSeeOther || cookie == "" {
		t.Fatalf("UI login at A: %d, cookie set: %t", login.status, cookie != "")
	}
	if home := getWithCookie(t, rb.server, cookie); !strings.Contains(string(home.body), "Signed in as") {
		t.Errorf("alice's session from A is not signed in at B: %d", home.status)
	}
	if out := postForm(t, ra.server, "/ui/logout", nil, "Cookie", "berth_session="+cookie); out.status != http.StatusSeeOther {
		t.Fatalf("sign-out at A: %d", out.status)
	}
	if home := getWithCookie(t, rb.server, cookie); strings.Contains(string(home.body), "Signed in as") {
		t.Errorf("alice's session signed out at A still signs in at B (%d)", home.status)
	}

	// An upload alice opens on A: admin, who may push to a/hijack too, is
	// told on B that it does not exist; alice finishes it on B.
	blob := []byte("an upload opened on one replica and finished on the other")
	sum := sha256.Sum256(blob)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	push := "repository:a/hijack:pull,push"
	_, aliceToken := ra.token(t, alice.creds(), "", "", push)
	_, adminToken := rb.token(t, admin.creds(), "", "", push)
	if aliceToken == "" || adminToken == "" {
		t.Fatal("no push token for alice at A or admin at B")
	}
	opened := roundTrip(t, "POST", ra.url()+"/v2/a/hijack/blobs/uploads/", creds{}, aliceToken, nil, nil)
	loc, err := url.Parse(opened.header.Get("Location"))
	if opened.status != http.StatusAccepted || err != nil {
		t.Fatalf("alice opens an upload at A: %s, Location %q", opened, opened.header.Get("Location"))
	}
	put := *loc
	q := put.Query()
	q.Set("digest", digest)
	put.RawQuery = q.Encode()
	octets := http.Header{"Content-Type": {"application/octet-stream"}}
	for _, hijack := range []struct{ method, target string }{{"PATCH", loc.RequestURI()}, {"PUT", put.RequestURI()}} {
		e := roundTrip(t, hijack.method, rb.url()+hijack.target, creds{}, adminToken, octets, blob)
		if e.status != http.StatusNotFound || !strings.Contains(string(e.body), "BLOB_UPLOAD_UNKNOWN") {
			t.Errorf("admin %ss alice's upload at B: %s, want 404 BLOB_UPLOAD_UNKNOWN", hijack.method, e)
		}
	}
	if e := roundTrip(t, "PUT", rb.url()+put.RequestURI(), creds{}, aliceToken, octets, blob); e.status != http.StatusCreated {
		t.Errorf("alice finishes at B the upload she opened at A: %s, want 201", e)
	}
	if e := roundTrip(t, "GET", ra.url()+"/v2/a/hijack/blobs/"+digest, creds{}, aliceToken, nil, nil); e.status != http.StatusOK || !bytes.Equal(e.body, blob) {
		t.Errorf("the blob alice uploaded through both replicas, at A: %d, %d bytes; want 200 and the blob", e.status, len(e.body))
	}

	// What is deleted through A is gone at once through B, though B read it
	// just before.
	for _, gone := range []struct{ repo, path string }{
		{"a/direct", "/v2/a/direct/manifests/" + direct},
		{"a/hijack", "/v2/a/hijack/blobs/" + digest},
	} {
		_, token := ra.token(t, admin.creds(), "", "", "repository:"+gone.repo+":pull,delete")
		if e := roundTrip(t, "HEAD", rb.url()+gone.path, creds{}, token, manifestAccept, nil); e.status != http.StatusOK {
			t.Errorf("%s at B before the delete: %d, want 200", gone.path, e.status)
		}
		if e := roundTrip(t, "DELETE", ra.url()+gone.path, creds{}, token, nil, nil); e.status != http.StatusAccepted {
			t.Fatalf("DELETE %s at A: %s, want 202", gone.path, e)
		}
		for name, r := range map[string]*authServer{"A": ra, "B": rb} {
			if e := roundTrip(t, "HEAD", r.url()+gone.path, creds{}, token, manifestAccept, nil); e.status != http.StatusNotFound {
				t.Errorf("%s at %s after its delete through A: %d, want 404", gone.path, name, e.status)
			}
		}
	}
}
