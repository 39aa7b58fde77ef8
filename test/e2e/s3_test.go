package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/pkgformat"
)

// TestS3StorageOnVersitygw runs berth serve on its s3 storage against a real
// S3 server, versitygw (pinned in tools/versitygw), through distribution's
// s3 driver: once serving blobs itself (storage.disableRedirect) and once
// redirecting blob reads to presigned URLs of the store.
func TestS3StorageOnVersitygw(t *testing.T) {
	requireOras(t)
	gw := startVersitygw(t)
	for _, tc := range []struct {
		name     string
		redirect bool
	}{{"no-redirect", false}, {"redirect", true}} {
		t.Run(tc.name, func(t *testing.T) { testS3Storage(t, gw, gw.bucket(t, "berth-"+tc.name), tc.redirect) })
	}
}

// testS3Storage pushes packages and a blob larger than a multipart part to
// berth on bucket, pulls them back byte for byte, checks how a blob GET is
// answered, deletes a version, and starts a new berth with an empty data
// directory on the same bucket: its catalog, rebuilt from the bucket alone,
// lists what is there and not what was deleted.
func testS3Storage(t *testing.T, gw *versitygw, bucket string, redirect bool) {
	s := gw.serveBerth(t, bucket, redirect)
	work := t.TempDir()

	// A package pushed by berth, pulled by oras and berth.
	zookeeper := kudoFixture(t, "zookeeper", "3.4.14-0.3.0")
	berth(t, work, "package", zookeeper, "-o", "zookeeper.tgz")
	zkTarball := readFile(t, filepath.Join(work, "zookeeper.tgz"))
	zkDigest := digestOf(t, berth(t, work, "push", zookeeper, s.addr+"/kudo/zookeeper", "--format", "json").stdout)
	orasPullsBack(t, s, "kudo/zookeeper:3.4.14_0.3.0", "zookeeper-3.4.14_0.3.0.tgz", zkTarball)
	berth(t, work, "pull", s.addr+"/kudo/zookeeper:3.4.14_0.3.0", "--tarball", "-o", "berth-out")
	if !bytes.Equal(readFile(t, filepath.Join(work, "berth-out", "zookeeper-3.4.14_0.3.0.tgz")), zkTarball) {
		t.Fatal("berth pull --tarball: the tarball differs from what berth package wrote")
	}
	checkBlobGET(t, s, gw, bucket, "kudo/zookeeper", zkTarball, redirect)

	// A package pushed by oras.
	berth(t, work, "package", kudoFixture(t, "kafka", "2.4.0-1.2.0"), "-o", "kafka-2.4.0_1.2.0.tgz")
	oras(t, work, "push", "--plain-http", "--artifact-type", pkgformat.ArtifactType, s.addr+"/kudo/kafka:2.4.0_1.2.0",
		"kafka-2.4.0_1.2.0.tgz:"+pkgformat.ContentMediaType)
	orasPullsBack(t, s, "kudo/kafka:2.4.0_1.2.0", "kafka-2.4.0_1.2.0.tgz", readFile(t, filepath.Join(work, "kafka-2.4.0_1.2.0.tgz")))

	// 40 MiB: uploaded in four multipart parts of the driver's default 10 MiB,
	// and moved into place by a multipart copy (above 32 MiB) rather than one CopyObject.
	big := make([]byte, 40<<20)
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	oras(t, work, "push", "--plain-http", s.addr+"/misc/big:1", "big.bin")
	orasPullsBack(t, s, "misc/big:1", "big.bin", big)

	// A version deleted by oras is gone from the registry and from search.
	cowsayDigest := digestOf(t, berth(t, work, "push", kudoFixture(t, "cowsay", "0.2.0"), s.addr+"/kudo/cowsay", "--format", "json").stdout)
	waitUntil(t, s, "zookeeper, kafka and cowsay to be searchable", func() bool {
		return len(search(t, s, "zookeeper")) == 1 && len(search(t, s, "kafka")) == 1 && len(search(t, s, "cowsay")) == 1
	})
	oras(t, work, "manifest", "delete", "--force", "--plain-http", s.addr+"/kudo/cowsay:0.2.0")
	for _, ref := range []string{"0.2.0", cowsayDigest} {
		if code, _ := s.get(t, "/v2/kudo/cowsay/manifests/"+ref); code != http.StatusNotFound {
			t.Errorf("GET kudo/cowsay manifest %s after the delete: %d, want 404", ref, code)
		}
	}
	waitUntil(t, s, "cowsay to leave search", func() bool { return len(search(t, s, "cowsay")) == 0 })

	// A new berth on the same bucket, with none of the first one's data directory.
	if err := s.stop(t); err != nil {
		t.Fatalf("berth serve: %v\n%s", err, s.logs())
	}
	s = gw.serveBerth(t, bucket, redirect)
	waitReconciled(t, s, 1)
	if found := search(t, s, "zookeeper"); len(found) != 1 || found[0].Digest != zkDigest {
		t.Errorf("search zookeeper after the restart: %+v, want kudo/zookeeper at %s", found, zkDigest)
	}
	if found := search(t, s, "kafka"); len(found) != 1 {
		t.Errorf("search kafka after the restart: %+v", found)
	}
	if found := search(t, s, "cowsay"); len(found) != 0 {
		t.Errorf("search cowsay after the restart lists the deleted version: %+v", found)
	}
	if code, _ := s.get(t, "/v2/kudo/cowsay/manifests/0.2.0"); code != http.StatusNotFound {
		t.Errorf("GET kudo/cowsay:0.2.0 after the restart: %d, want 404", code)
	}
	orasPullsBack(t, s, "kudo/zookeeper:3.4.14_0.3.0", "zookeeper-3.4.14_0.3.0.tgz", zkTarball)
}

// orasPullsBack pulls ref from s with oras and fails unless it writes file
// holding exactly want.
func orasPullsBack(t *testing.T, s *server, ref, file string, want []byte) {
	t.Helper()
	dir := t.TempDir()
	oras(t, dir, "pull", "--plain-http", s.addr+"/"+ref, "-o", "out")
	if got := readFile(t, filepath.Join(dir, "out", file)); !bytes.Equal(got, want) {
		t.Fatalf("oras pull %s: %s differs from what was pushed (%d bytes, want %d)", ref, file, len(got), len(want))
	}
}

// checkBlobGET gets the blob holding want from repo without following
// redirects. With redirects on, berth answers 307 to a presigned URL of the
// bucket on versitygw, which serves the blob; with them off, berth serves it.
func checkBlobGET(t *testing.T, s *server, gw *versitygw, bucket, repo string, want []byte, redirect bool) {
	t.Helper()
	sum := sha256.Sum256(want)
	path := "/v2/" + repo + "/blobs/sha256:" + hex.EncodeToString(sum[:])
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	code, location, body := httpGet(t, client, s.url()+path)
	if !redirect {
		if code != http.StatusOK || !bytes.Equal(body, want) {
			t.Fatalf("GET %s with redirects off: %d, Location %q, %d bytes; want 200 and the blob", path, code, location, len(body))
		}
		return
	}
	if code != http.StatusTemporaryRedirect {
		t.Fatalf("GET %s with redirects on: %d, want 307", path, code)
	}
	u, err := url.Parse(location)
	if err != nil || u.Host != gw.addr || !strings.HasPrefix(u.Path, "/"+bucket+"/") || u.Query().Get("X-Amz-Signature") == "" {
		t.Fatalf("GET %s redirects to %q, want a presigned URL of http://%s/%s/", path, location, gw.addr, bucket)
	}
	if code, _, body := httpGet(t, http.DefaultClient, location); code != http.StatusOK || !bytes.Equal(body, want) {
		t.Fatalf("GET %s (the redirect): %d, %d bytes; want 200 and the blob", location, code, len(body))
	}
}

// httpGet gets u with client and returns the status, the Location header and the body.
func httpGet(t *testing.T, client *http.Client, u string) (int, string, []byte) {
	t.Helper()
	resp, err := client.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Location"), body
}

// search returns what the catalog finds for the query q.
func search(t *testing.T, s *server, q string) []apiv1.PackageSummary {
	t.Helper()
	var res apiv1.SearchResponse
	if code := getJSON(t, s, "/api/v1/packages?q="+url.QueryEscape(q), &res); code != http.StatusOK {
		t.Fatalf("search %q: %d", q, code)
	}
	return res.Packages
}

// versitygw is a running versitygw S3 gateway on a loopback port, its
// posix backend in a temp dir where each folder is a bucket, with one root
// account.
type versitygw struct {
	addr          string // 127.0.0.1:port
	root          string // the posix backend
	accessKey     string
	secretKeyFile string // the root account's secret key, as berth reads it
}

// startVersitygw starts versitygw and stops it when the test ends. It skips
// the test (fails it in CI) when bin/versitygw has not been built.
func startVersitygw(t *testing.T) *versitygw {
	t.Helper()
	requireTool(t, "versitygw (bin/versitygw: run `make tools`)", versitygwBin)
	dir := t.TempDir()
	gw := &versitygw{addr: freeAddr(t), root: filepath.Join(dir, "posix"), accessKey: "berth-e2e",
		secretKeyFile: filepath.Join(dir, "secret-key")}
	const secret = "berth-e2e-secret"
	secrets.add(t, "the S3 secret key", secret)
	if err := os.Mkdir(gw.root, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gw.secretKeyFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "versitygw.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	// The root account comes from the environment, keeping the secret out of
	// the process list.
	cmd := exec.Command(versitygwBin, "--port", gw.addr, "--quiet", "posix", gw.root)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+gw.accessKey, "ROOT_SECRET_ACCESS_KEY="+secret)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
	})
	// Any answer will do: an unsigned request is refused.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + gw.addr + "/")
		if err == nil {
			resp.Body.Close()
			return gw
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			t.Fatalf("versitygw did not answer on %s within 30s: %v\n%s", gw.addr, err, log)
		}
	}
}

// bucket creates the bucket name, a folder of the posix backend.
func (gw *versitygw) bucket(t *testing.T, name string) string {
	t.Helper()
	if err := os.Mkdir(filepath.Join(gw.root, name), 0o755); err != nil {
		t.Fatal(err)
	}
	return name
}

// serveBerth starts berth serve, with a new data directory, on bucket and
// checks that it finds its storage ready.
func (gw *versitygw) serveBerth(t *testing.T, bucket string, redirect bool) *server {
	t.Helper()
	config := filepath.Join(t.TempDir(), "berth.yaml")
	if err := os.WriteFile(config, []byte(gw.storageConfig(bucket, redirect)), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "", "--config", config)
	if code, body := s.get(t, "/readyz"); code != http.StatusOK || !strings.Contains(body, `"storage":"ok"`) {
		t.Fatalf("GET /readyz = %d %s\n%s", code, body, s.logs())
	}
	return s
}

// storageConfig is the storage section of a berth configuration on bucket.
func (gw *versitygw) storageConfig(bucket string, redirect bool) string {
	return fmt.Sprintf(`storage:
  driver: s3
  disableRedirect: %t
  s3:
    bucket: %s
    region: us-east-1
    regionEndpoint: http://%s
    accessKey: %s
    secretKeyFile: %s
    forcePathStyle: true
    insecure: true
`, !redirect, bucket, gw.addr, gw.accessKey, gw.secretKeyFile)
}
