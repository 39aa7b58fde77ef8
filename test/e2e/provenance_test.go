package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/cryptoutils"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/internal/gittest"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/signing/signingtest"
)

// requireCosign skips (or, in CI, fails) a test that needs the cosign CLI.
func requireCosign(t *testing.T) { requireTool(t, "the cosign CLI", cosignBin) }

// keyPair is a cosign key pair made by the real cosign CLI.
type keyPair struct {
	dir, key, pub, id string
}

// cosignKeyPair runs cosign generate-key-pair in a new directory, with
// COSIGN_PASSWORD set for it and for every later cosign and berth command of the test.
func cosignKeyPair(t *testing.T) keyPair {
	t.Helper()
	requireCosign(t)
	t.Setenv("COSIGN_PASSWORD", "e2e-password")
	dir := t.TempDir()
	cosign(t, dir, "generate-key-pair")
	kp := keyPair{dir: dir, key: filepath.Join(dir, "cosign.key"), pub: filepath.Join(dir, "cosign.pub")}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(readFile(t, kp.pub))
	if err != nil {
		t.Fatal(err)
	}
	der, err := cryptoutils.MarshalPublicKeyToDER(pub)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(der)
	kp.id = "sha256:" + hex.EncodeToString(sum[:])
	return kp
}

// cosign runs the cosign CLI in dir and fails the test unless it succeeds.
func cosign(t *testing.T, dir string, args ...string) result {
	t.Helper()
	requireCosign(t)
	return mustRun(t, dir, cosignBin, args...)
}

// trustConfig writes a berth serve configuration with the given trust policies.
func trustConfig(t *testing.T, policies ...string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "berth.yaml")
	doc := "trust:\n  policies:\n" + strings.Join(policies, "")
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func policy(glob, key string, require bool) string {
	return fmt.Sprintf("    - repositories: [%q]\n      keys: [%q]\n      require: %v\n", glob, key, require)
}

// pushVersion pushes a KUDO fixture version and returns its digest.
func pushVersion(t *testing.T, s *server, fixture, repo string, extra ...string) string {
	t.Helper()
	args := append([]string{"push", kudoFixture(t, "kafka", fixture), s.addr + "/" + repo, "--format", "json"}, extra...)
	return digestOf(t, berth(t, "", args...).stdout)
}

// versionDoc fetches the catalog's version detail.
func versionDoc(t *testing.T, s *server, repo, version string) (apiv1.Version, int) {
	t.Helper()
	var v apiv1.Version
	code := getJSON(t, s, "/api/v1/packages/"+repo+"/versions/"+version, &v)
	return v, code
}

// waitVerified waits until the version's verdict is want and returns the document.
func waitVerified(t *testing.T, s *server, repo, version string, want bool, cond func(apiv1.Version) bool) apiv1.Version {
	t.Helper()
	var v apiv1.Version
	waitUntil(t, s, fmt.Sprintf("%s:%s verified=%v", repo, version, want), func() bool {
		var code int
		v, code = versionDoc(t, s, repo, version)
		return code == http.StatusOK && v.Verified == want && (cond == nil || cond(v))
	})
	return v
}

// TestCosignInterop: what the real cosign CLI signs and attests, berth
// verifies and lists; what berth signs, cosign verifies; referrers are served
// to cosign and oras.
func TestCosignInterop(t *testing.T) {
	kp := cosignKeyPair(t)
	s := startServer(t, "", "--config", trustConfig(t, policy("*/kafka", kp.pub, false)))
	const version = "2.5.1_1.3.2"

	// cosign sign, tag scheme.
	tagged := pushVersion(t, s, "2.5.1-1.3.2", "signed/kafka")
	v, _ := versionDoc(t, s, "signed/kafka", version)
	if v.Verified || len(v.Signatures) != 0 {
		t.Fatalf("unsigned version: verified %v signatures %+v", v.Verified, v.Signatures)
	}
	cosign(t, kp.dir, "sign", "--key", kp.key, "--tlog-upload=false", "--yes", s.addr+"/signed/kafka@"+tagged)
	v = waitVerified(t, s, "signed/kafka", version, true, nil)
	if len(v.Signatures) != 1 || v.Signatures[0].Kind != "tag" || v.Signatures[0].KeyID != kp.id || !v.Signatures[0].Verified {
		t.Errorf("signatures after cosign sign: %+v, want one verified tag signature by %s", v.Signatures, kp.id)
	}
	var found apiv1.SearchResponse
	getJSON(t, s, "/api/v1/packages?q=kafka&verified=true", &found)
	if len(found.Packages) != 1 || found.Packages[0].Name != "kafka" || found.Packages[0].Namespace != "signed" {
		t.Errorf("search verified=true: %+v", found.Packages)
	}

	// cosign sign, OCI 1.1 referrers.
	referred := pushVersion(t, s, "2.5.1-1.3.2", "referred/kafka")
	r := runEnv(t, []string{"COSIGN_EXPERIMENTAL=1"}, cosignBin, "sign", "--key", kp.key, "--tlog-upload=false", "--yes",
		"--registry-referrers-mode=oci-1-1", s.addr+"/referred/kafka@"+referred)
	if r.code != 0 {
		t.Fatalf("cosign sign --registry-referrers-mode=oci-1-1: %s", r.stderr)
	}
	v = waitVerified(t, s, "referred/kafka", version, true, nil)
	if len(v.Signatures) != 1 || v.Signatures[0].Kind != "referrer" {
		t.Errorf("signatures after a referrer signature: %+v", v.Signatures)
	}
	var index struct {
		Manifests []struct {
			Digest, ArtifactType string
		}
	}
	getJSON(t, s, "/v2/referred/kafka/referrers/"+referred, &index)
	if len(index.Manifests) != 1 || index.Manifests[0].ArtifactType != "application/vnd.dev.cosign.artifact.sig.v1+json" || index.Manifests[0].Digest != v.Signatures[0].Digest {
		t.Errorf("referrers API: %+v, want the signature %s", index.Manifests, v.Signatures[0].Digest)
	}
	cosign(t, kp.dir, "verify", "--key", kp.pub, "--insecure-ignore-tlog", "--experimental-oci11", s.addr+"/referred/kafka@"+referred)
	discovered := oras(t, "", "discover", "--plain-http", "--format", "json", s.addr+"/referred/kafka@"+referred).stdout
	if !strings.Contains(discovered, v.Signatures[0].Digest) {
		t.Errorf("oras discover does not list the signature %s:\n%s", v.Signatures[0].Digest, discovered)
	}

	// berth sign, cosign verify.
	byBerth := pushVersion(t, s, "2.5.0-1.3.1", "signed/kafka")
	berth(t, "", "sign", s.addr+"/signed/kafka:2.5.0_1.3.1", "--key", kp.key)
	cosign(t, kp.dir, "verify", "--key", kp.pub, "--insecure-ignore-tlog", s.addr+"/signed/kafka@"+byBerth)
	waitVerified(t, s, "signed/kafka", "2.5.0_1.3.1", true, nil)
	berth(t, "", "verify", s.addr+"/signed/kafka:2.5.0_1.3.1", "--key", kp.pub)

	// cosign attest: listed with its predicate type.
	predicate := filepath.Join(t.TempDir(), "provenance.json")
	if err := os.WriteFile(predicate, []byte(`{"buildType":"https://example.com/berth-e2e","builder":{"id":"https://ci.example.com"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cosign(t, kp.dir, "attest", "--key", kp.key, "--tlog-upload=false", "--yes", "--type", "slsaprovenance",
		"--predicate", predicate, s.addr+"/signed/kafka@"+tagged)
	v = waitVerified(t, s, "signed/kafka", version, true, func(v apiv1.Version) bool { return len(v.Attestations) == 1 })
	if a := v.Attestations[0]; a.PredicateType != "https://slsa.dev/provenance/v0.2" || !a.Verified || a.KeyID != kp.id || a.Kind != "tag" {
		t.Errorf("attestation: %+v", a)
	}
}

// TestRequiredSignatures: in a namespace whose policy requires signatures, an
// unsigned version cannot be tagged; pushing by digest, signing, then tagging
// works; promote carries signatures and is refused when they do not satisfy
// the destination; berth pull enforces the client's policy.
func TestRequiredSignatures(t *testing.T) {
	kp := cosignKeyPair(t)
	other := cosignKeyPair(t)
	stranger := cosignKeyPair(t) // signed nothing
	s := startServer(t, "", "--config", trustConfig(t, policy("stable/*", kp.pub, true)))

	// An unsigned version is refused its tag, by berth and by oras alike.
	r := run(t, "", berthBin, "push", kudoFixture(t, "kafka", "2.5.1-1.3.2"), s.addr+"/stable/kafka")
	if r.code != 1 || !strings.Contains(r.stderr, "stable/kafka:2.5.1_1.3.2") || !strings.Contains(r.stderr, "no signature") {
		t.Fatalf("unsigned push into stable: exit %d, stderr %s", r.code, r.stderr)
	}
	// The oras push: no --artifact-type, the content layer alone. It
	// is a package version, so the tag is refused as berth's push was.
	work := t.TempDir()
	berth(t, work, "package", kudoFixture(t, "kafka", "2.5.1-1.3.2"), "-o", "kafka.tgz")
	r = run(t, work, orasBin, "push", "--plain-http", s.addr+"/stable/kafka:2.5.1_1.3.2", "kafka.tgz:"+pkgformat.ContentMediaType)
	if r.code == 0 || !strings.Contains(r.stderr, "denied: stable/kafka:2.5.1_1.3.2: ") || !strings.Contains(r.stderr, "(no signature)") {
		t.Fatalf("unsigned oras push without --artifact-type into stable: exit %d, stderr %s", r.code, r.stderr)
	}

	// berth push --key pushes by digest, signs, then tags.
	signed := pushVersion(t, s, "2.5.1-1.3.2", "stable/kafka", "--key", kp.key)
	v := waitVerified(t, s, "stable/kafka", "2.5.1_1.3.2", true, nil)
	if v.Digest != signed {
		t.Errorf("stable/kafka:2.5.1_1.3.2 is %s, pushed %s", v.Digest, signed)
	}

	// Promote: a version signed by an untrusted key is refused; signed by the trusted key, it goes.
	pushVersion(t, s, "2.5.0-1.3.1", "incubator/kafka")
	berth(t, "", "sign", s.addr+"/incubator/kafka:2.5.0_1.3.1", "--key", other.key)
	r = run(t, "", berthBin, "promote", s.addr+"/incubator/kafka:2.5.0_1.3.1", s.addr+"/stable/kafka")
	if r.code != 1 || !strings.Contains(r.stderr, "not signed by a key trusted for stable/kafka") {
		t.Fatalf("promote with an untrusted signature: exit %d, stderr %s", r.code, r.stderr)
	}
	cosign(t, kp.dir, "sign", "--key", kp.key, "--tlog-upload=false", "--yes", s.addr+"/incubator/kafka:2.5.0_1.3.1")
	berth(t, "", "promote", s.addr+"/incubator/kafka:2.5.0_1.3.1", s.addr+"/stable/kafka")
	v = waitVerified(t, s, "stable/kafka", "2.5.0_1.3.1", true, nil)
	if len(v.Signatures) != 2 {
		t.Errorf("promoted version has %d signatures, want both (untrusted and trusted): %+v", len(v.Signatures), v.Signatures)
	}

	// berth pull with a client policy requiring the trusted key, then one that signed nothing.
	pull := func(key string) result {
		policyFile := filepath.Join(t.TempDir(), "trust.yaml")
		doc := fmt.Sprintf("policies:\n  - repositories: [\"stable/*\"]\n    keys: [%q]\n    require: true\n", key)
		if err := os.WriteFile(policyFile, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return run(t, t.TempDir(), berthBin, "pull", s.addr+"/stable/kafka:2.5.0_1.3.1", "--trust-policy", policyFile)
	}
	if r := pull(kp.pub); r.code != 0 {
		t.Errorf("pull of a verified version: %s", r.stderr)
	}
	r = pull(stranger.pub)
	if r.code != 1 || !strings.Contains(r.stderr, "refused") {
		t.Errorf("pull with a policy the signatures do not meet: exit %d, stderr %s", r.code, r.stderr)
	}
}

// TestGarbageSignatureTag: junk pushed under cosign's tag never verifies
// and never breaks the catalog.
func TestGarbageSignatureTag(t *testing.T) {
	kp := cosignKeyPair(t)
	s := startServer(t, "", "--config", trustConfig(t, policy("signed/*", kp.pub, false)))
	d := pushVersion(t, s, "2.5.1-1.3.2", "signed/kafka")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "junk.txt"), []byte("not a signature"), 0o644); err != nil {
		t.Fatal(err)
	}
	oras(t, dir, "push", "--plain-http", s.addr+"/signed/kafka:"+strings.Replace(d, ":", "-", 1)+".sig", "junk.txt")
	v := waitVerified(t, s, "signed/kafka", "2.5.1_1.3.2", false, func(v apiv1.Version) bool { return len(v.Signatures) == 1 })
	if v.Signatures[0].Verified || v.Signatures[0].Reason == "" {
		t.Errorf("junk signature: %+v", v.Signatures[0])
	}
	b, _ := json.Marshal(v.Signatures)
	t.Logf("junk signature verdict: %s", b)
}

// TestTransparencyLog: with a transparency log, berth sign --tlog records the
// signature there and the real cosign verifies the entry offline against the
// log's key; what cosign signs into the log, berth verify --tlog-key checks.
// The log is signingtest's (Rekor's API and entry format on loopback): no
// public log is reachable from here, and the check is offline either way.
func TestTransparencyLog(t *testing.T) {
	kp := cosignKeyPair(t)
	log := signingtest.NewLog(t)
	s := startServer(t, "")
	byBerth := pushVersion(t, s, "2.5.1-1.3.2", "logged/kafka")
	byCosign := pushVersion(t, s, "2.5.0-1.3.1", "logged/kafka")

	berth(t, "", "sign", s.addr+"/logged/kafka@"+byBerth, "--key", kp.key, "--tlog", "--rekor-url", log.URL)
	r := runEnv(t, []string{"SIGSTORE_REKOR_PUBLIC_KEY=" + log.PublicKeyFile}, cosignBin, "verify", "--key", kp.pub, s.addr+"/logged/kafka@"+byBerth)
	if r.code != 0 {
		t.Fatalf("cosign verify (with the log) of berth sign --tlog: %s", r.stderr)
	}
	// cosign did check the entry: with another log's key it refuses.
	r = runEnv(t, []string{"SIGSTORE_REKOR_PUBLIC_KEY=" + signingtest.NewLog(t).PublicKeyFile}, cosignBin, "verify", "--key", kp.pub, s.addr+"/logged/kafka@"+byBerth)
	if r.code == 0 {
		t.Fatal("cosign verify trusting another log accepted the entry")
	}

	if r := run(t, kp.dir, cosignBin, "sign", "--key", kp.key, "--rekor-url", log.URL, "--yes", s.addr+"/logged/kafka@"+byCosign); r.code != 0 {
		t.Fatalf("cosign sign into the log: %s", r.stderr)
	}
	berth(t, "", "verify", s.addr+"/logged/kafka@"+byCosign, "--key", kp.pub, "--tlog-key", log.PublicKeyFile)

	// A signature made offline has no entry: refused when a log is required.
	offline := pushVersion(t, s, "2.5.0-1.3.0", "logged/kafka")
	berth(t, "", "sign", s.addr+"/logged/kafka@"+offline, "--key", kp.key)
	r = run(t, "", berthBin, "verify", s.addr+"/logged/kafka@"+offline, "--key", kp.pub, "--tlog-key", log.PublicKeyFile)
	if r.code != 1 || !strings.Contains(r.stderr, "no transparency log entry") {
		t.Errorf("verify of an offline signature with --tlog-key: exit %d, stderr %s", r.code, r.stderr)
	}
}

// TestRequireSource: in a namespace whose trust policy requires signatures
// and provenance from http://127.0.0.1:*/allowed/*, berth import git --key
// from a repository under /allowed/ is tagged, verified, and its
// attestation verifies with cosign verify-attestation; from one under
// /other/ it is refused naming the source; a version oras pushed and cosign
// signed, without provenance, is refused its tag; berth pull with a client
// policy requiring other sources refuses the version, naming its source.
func TestRequireSource(t *testing.T) {
	gittest.Require(t)
	kp := cosignKeyPair(t)
	const allowed = "http://127.0.0.1:*/allowed/*"
	s := startServer(t, "", "--config", trustConfig(t,
		policy("prod*/*", kp.pub, true)+fmt.Sprintf("      requireSource: [%q]\n", allowed),
		policy("audit/*", kp.pub, false)+fmt.Sprintf("      requireSource: [%q]\n", allowed)))
	src := kudoFixture(t, "kafka", "2.5.1-1.3.2")
	root := t.TempDir()
	for _, dir := range []string{"allowed", "other"} {
		repo := filepath.Join(root, dir, "kafka.git")
		if err := os.MkdirAll(repo, 0o755); err != nil {
			t.Fatal(err)
		}
		gittest.Run(t, repo, "init", "-q")
		copyTree(t, src, filepath.Join(repo, "operator"))
		gittest.CommitAll(t, repo, "kafka")
		gittest.Run(t, repo, "tag", "v1")
	}
	base := gittest.Server(t, root, "")
	work := t.TempDir()
	importGit := func(url, ns string) result {
		return run(t, work, berthBin, "import", "git", url, "--ref", "v1", "--dir", "operator", "--allow-private",
			"--key", kp.key, s.addr+"/"+ns+"/kafka", "--format", "json")
	}

	// From an allowed source: tagged, verified, and cosign verifies the provenance.
	allowedURL := base + "/allowed/kafka.git"
	r := importGit(allowedURL, "prod")
	if r.code != 0 {
		t.Fatalf("berth import git --key from %s: exit %d\n%s", allowedURL, r.code, r.stderr)
	}
	var res importResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatal(err)
	}
	v := waitVerified(t, s, "prod/kafka", "2.5.1_1.3.2", true, func(v apiv1.Version) bool { return len(v.Attestations) == 1 })
	if a := v.Attestations[0]; v.Digest != res.Digest || !a.Verified || a.PredicateType != "https://slsa.dev/provenance/v0.2" || a.KeyID != kp.id ||
		fmt.Sprint(a.Sources) != "["+allowedURL+"]" {
		t.Errorf("prod/kafka:2.5.1_1.3.2 is %s with attestation %+v; want %s with a verified SLSA provenance by %s from %s", v.Digest, a, res.Digest, kp.id, allowedURL)
	}
	if code, page := s.get(t, "/ui/packages/prod/kafka/versions/2.5.1_1.3.2"); code != http.StatusOK || !strings.Contains(page, "built from "+allowedURL) {
		t.Errorf("the version page (%d) does not say the version was built from %s", code, allowedURL)
	}
	verified := berth(t, work, "verify", res.Reference, "--key", kp.pub, "--require-source", allowed).stdout
	if !strings.Contains(verified, "built from:\n  "+allowedURL+"\n") {
		t.Errorf("berth verify does not list the source %s:\n%s", allowedURL, verified)
	}
	att := cosign(t, kp.dir, "verify-attestation", "--type", "slsaprovenance", "--key", kp.pub, "--insecure-ignore-tlog", s.addr+"/prod/kafka@"+res.Digest)
	if !strings.Contains(att.stdout, `"payloadType":"application/vnd.in-toto+json"`) {
		t.Errorf("cosign verify-attestation printed no in-toto envelope:\n%s", att.stdout)
	}

	// From a source outside the policy: refused, naming the source and the globs.
	otherURL := base + "/other/kafka.git"
	r = importGit(otherURL, "prod-other")
	want := "provenance names source " + otherURL + ", not allowed by the trust policy for prod*/* (requireSource: " + allowed + ")"
	if r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("berth import git --key from %s: exit %d, stderr %s; want %q", otherURL, r.code, r.stderr, want)
	}
	if _, body := s.get(t, "/v2/prod-other/kafka/tags/list"); strings.Contains(body, "2.5.1_1.3.2") {
		t.Errorf("prod-other/kafka was tagged: %s", body)
	}

	// oras push by digest and cosign sign, without provenance: the tag is refused.
	berth(t, work, "package", src, "-o", "kafka.tgz")
	if err := os.WriteFile(filepath.Join(work, "config.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	content := readFile(t, filepath.Join(work, "kafka.tgz"))
	manifest := fmt.Sprintf(`{"schemaVersion":2,"mediaType":%q,"config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},"layers":[{"mediaType":%q,"digest":%q,"size":%d,"annotations":{"org.opencontainers.image.title":"kafka.tgz"}}]}`,
		"application/vnd.oci.image.manifest.v1+json", pkgformat.ContentMediaType, sha256Digest(content), len(content))
	if err := os.WriteFile(filepath.Join(work, "manifest.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	repo := s.addr + "/prod-oras/kafka"
	oras(t, work, "blob", "push", "--plain-http", repo, "kafka.tgz")
	oras(t, work, "blob", "push", "--plain-http", repo, "config.json")
	oras(t, work, "manifest", "push", "--plain-http", repo, "manifest.json")
	d := sha256Digest([]byte(manifest))
	cosign(t, kp.dir, "sign", "--key", kp.key, "--tlog-upload=false", "--yes", repo+"@"+d)
	r = run(t, work, orasBin, "tag", "--plain-http", repo+"@"+d, "2.5.1_1.3.2")
	want = "no verified SLSA provenance attestation; the trust policy for prod*/* requires one naming a source in " + allowed
	if r.code == 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("oras tag of a signed version without provenance: exit %d, stderr %s; want %q", r.code, r.stderr, want)
	}

	// Where signatures are not required, a version signed without
	// provenance is listed but not verified, and the catalog says why.
	signed := pushVersion(t, s, "2.5.1-1.3.2", "audit/kafka", "--key", kp.key)
	v = waitVerified(t, s, "audit/kafka", "2.5.1_1.3.2", false, func(v apiv1.Version) bool { return len(v.Signatures) == 1 })
	want = "no verified SLSA provenance attestation; the trust policy for audit/* requires one naming a source in " + allowed
	if v.Digest != signed || !v.Signatures[0].Verified || v.VerifiedReason != want {
		t.Errorf("audit/kafka signed without provenance: %s verified %v (%q), signatures %+v; want %s not verified: %q", v.Digest, v.Verified, v.VerifiedReason, v.Signatures, signed, want)
	}

	// berth pull with a client policy that requires other sources.
	policyFile := filepath.Join(t.TempDir(), "trust.yaml")
	doc := fmt.Sprintf("policies:\n  - repositories: [\"prod/*\"]\n    keys: [%q]\n    require: true\n    requireSource: [\"https://github.com/org/*\"]\n", kp.pub)
	if err := os.WriteFile(policyFile, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	r = run(t, t.TempDir(), berthBin, "pull", res.Reference, "--trust-policy", policyFile)
	want = "refused: provenance not verified by the trust policy for prod/*: provenance names source " + allowedURL
	if r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("pull with a policy requiring other sources: exit %d, stderr %s; want %q", r.code, r.stderr, want)
	}
}

// sha256Digest is the OCI digest of b.
func sha256Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
