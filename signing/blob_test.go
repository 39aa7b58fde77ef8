package signing_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-registry/berth/internal/testenv"
	"github.com/berth-registry/berth/signing"
	"github.com/berth-registry/berth/signing/signingtest"
)

func TestSignBlob(t *testing.T) {
	t.Parallel()
	kp := signingtest.NewKeyPair(t, "pw")
	other := signingtest.NewKeyPair(t, "")
	msg := []byte(`{"mediaType":"application/vnd.berth.mirror.manifest.v1+json"}` + "\n")
	sig, err := signing.SignBlob(kp.Signer, msg)
	if err != nil {
		t.Fatal(err)
	}
	if err := signing.VerifyBlob(kp.Key, msg, sig); err != nil {
		t.Fatalf("VerifyBlob of its own signature: %v", err)
	}
	if err := signing.VerifyBlob(kp.Key, msg, sig+"\n"); err != nil {
		t.Errorf("VerifyBlob with a trailing newline: %v", err)
	}
	altered := append([]byte(nil), msg...)
	altered[3] ^= 1
	for _, tc := range []struct {
		name string
		key  signing.Key
		msg  []byte
		sig  string
		want string
	}{
		{"altered message", kp.Key, altered, sig, "not signed by key " + kp.Key.ID},
		{"other key", other.Key, msg, sig, "not signed by key " + other.Key.ID},
		{"not base64", kp.Key, msg, "%%%", "not base64"},
		{"empty", kp.Key, msg, "", "not base64"},
		{"no key", signing.Key{}, msg, sig, "no key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := signing.VerifyBlob(tc.key, tc.msg, tc.sig)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("VerifyBlob = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := signing.SignBlob(nil, msg); err == nil {
		t.Error("SignBlob(nil) succeeded")
	}
}

// TestSignBlobCosign proves the signatures interoperate with the real cosign
// (pinned in go.mod): cosign verify-blob accepts SignBlob's signature and
// rejects it over altered content, and VerifyBlob accepts cosign sign-blob's.
func TestSignBlobCosign(t *testing.T) {
	t.Parallel()
	cosign := cosignBin(t)
	kp := signingtest.NewKeyPair(t, "pw")
	dir := t.TempDir()
	msg := []byte("{\n  \"schemaVersion\": 1\n}")
	msgFile := filepath.Join(dir, "berth-mirror.json")
	sigFile := filepath.Join(dir, "berth-mirror.json.sig")
	write := func(file string, b []byte) {
		t.Helper()
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) (string, error) {
		cmd := exec.Command(cosign, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), signing.PasswordEnv+"=pw", "TUF_ROOT="+filepath.Join(dir, "tuf"), "HOME="+dir)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	sig, err := signing.SignBlob(kp.Signer, msg)
	if err != nil {
		t.Fatal(err)
	}
	write(msgFile, msg)
	write(sigFile, []byte(sig))
	verify := []string{"verify-blob", "--key", kp.PublicFile, "--signature", sigFile, "--insecure-ignore-tlog=true", msgFile}
	if out, err := run(verify...); err != nil {
		t.Fatalf("cosign verify-blob rejects SignBlob's signature: %v\n%s", err, out)
	}
	write(msgFile, append(msg, ' '))
	if out, err := run(verify...); err == nil {
		t.Fatalf("cosign verify-blob accepts SignBlob's signature over altered content:\n%s", out)
	}

	write(msgFile, msg)
	cosignSig := filepath.Join(dir, "cosign.sig")
	if out, err := run("sign-blob", "--key", kp.PrivateFile, "--output-signature", cosignSig, "--tlog-upload=false", "--yes", msgFile); err != nil {
		t.Fatalf("cosign sign-blob: %v\n%s", err, out)
	}
	b, err := os.ReadFile(cosignSig)
	if err != nil {
		t.Fatal(err)
	}
	if err := signing.VerifyBlob(kp.Key, msg, string(b)); err != nil {
		t.Fatalf("VerifyBlob rejects cosign sign-blob's signature: %v", err)
	}
	if err := signing.VerifyBlob(kp.Key, append(msg, ' '), string(b)); err == nil {
		t.Fatal("VerifyBlob accepts cosign sign-blob's signature over altered content")
	}
}

// cosignBin is the cosign pinned in go.mod (go tool -n cosign builds it
// once); the test is skipped without it, and fails in CI.
func cosignBin(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "tool", "-n", "cosign").Output()
	if err != nil {
		if testenv.CI() {
			t.Fatalf("cosign is required in CI (go tool -n cosign): %v", err)
		}
		t.Skipf("cosign not available (go tool -n cosign): %v", err)
	}
	return strings.TrimSpace(string(out))
}
