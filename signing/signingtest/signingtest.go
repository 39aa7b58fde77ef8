// Package signingtest makes cosign key pairs for tests — cosign.key and
// cosign.pub written to files, as cosign generate-key-pair writes them, and
// loaded the way berth loads keys (signing.LoadSigner, signing.LoadPublicKey)
// — and runs a transparency log for them to sign into (Log). It is a test
// helper; nothing in berth's binaries imports it.
package signingtest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sigstore/cosign/v2/pkg/cosign"

	"github.com/berth-registry/berth/signing"
)

// KeyPair is a cosign key pair written to files, as cosign generate-key-pair
// makes one.
type KeyPair struct {
	// PrivateFile is cosign.key, encrypted with the password given.
	PrivateFile string
	// PublicFile is cosign.pub.
	PublicFile string
	Signer     *signing.Signer
	// Key is the public key; Key.ID equals Signer.KeyID.
	Key signing.Key
}

// NewKeyPair makes a key pair in a new t.TempDir(), encrypted with password
// (which may be empty). It fails the test on any error.
func NewKeyPair(t testing.TB, password string) KeyPair {
	t.Helper()
	k, err := WriteKeyPair(t.TempDir(), password)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// WriteKeyPair makes a key pair, writes cosign.key (encrypted with password)
// and cosign.pub into dir, which must exist, and loads them back. It is
// NewKeyPair for code without a testing.TB, such as examples. It returns the
// error of generating, writing or loading the keys.
func WriteKeyPair(dir, password string) (KeyPair, error) {
	pw := []byte(password)
	kb, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return pw, nil })
	if err != nil {
		return KeyPair{}, fmt.Errorf("generate key pair: %w", err)
	}
	k := KeyPair{
		PrivateFile: filepath.Join(dir, "cosign.key"),
		PublicFile:  filepath.Join(dir, "cosign.pub"),
	}
	if err := os.WriteFile(k.PrivateFile, kb.PrivateBytes, 0o600); err != nil {
		return KeyPair{}, err
	}
	if err := os.WriteFile(k.PublicFile, kb.PublicBytes, 0o644); err != nil {
		return KeyPair{}, err
	}
	if k.Signer, err = signing.LoadSigner(k.PrivateFile, pw); err != nil {
		return KeyPair{}, err
	}
	if k.Key, err = signing.LoadPublicKey(k.PublicFile); err != nil {
		return KeyPair{}, err
	}
	if k.Signer.KeyID != k.Key.ID {
		return KeyPair{}, fmt.Errorf("%s: signer %s, public key %s", dir, k.Signer.KeyID, k.Key.ID)
	}
	return k, nil
}

// Untrusted is the reason a signature in repo does not verify when the policy
// trusts only key for repo and key did not make it.
func Untrusted(repo string, key signing.Key) string {
	return fmt.Sprintf("not signed by a key trusted for %s (trusted: %s): signed by another key, or the payload or signature was altered", repo, key.ID[:len("sha256:")+16])
}
