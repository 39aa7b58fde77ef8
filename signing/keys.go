package signing

import (
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/options"
)

// PasswordEnv is the variable cosign reads a private key's password from;
// berth reads the same one.
const PasswordEnv = "COSIGN_PASSWORD"

// Key is a trusted public key.
type Key struct {
	// ID is the key's fingerprint: sha256 of its DER (PKIX) encoding.
	ID       string
	verifier signature.Verifier
}

// ParsePublicKey reads a PEM public key, as cosign generate-key-pair writes
// cosign.pub.
func ParsePublicKey(pemBytes []byte) (Key, error) {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pemBytes)
	if err != nil {
		return Key{}, fmt.Errorf("not a PEM public key: %w", err)
	}
	return newKey(pub)
}

// LoadPublicKey reads a PEM public key file.
func LoadPublicKey(file string) (Key, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return Key{}, err
	}
	k, err := ParsePublicKey(b)
	if err != nil {
		return Key{}, fmt.Errorf("%s: %w", file, err)
	}
	return k, nil
}

func newKey(pub crypto.PublicKey) (Key, error) {
	// cosign signs with Ed25519ph for Ed25519 keys; verify the same way.
	v, err := signature.LoadVerifierWithOpts(pub, options.WithHash(crypto.SHA256), options.WithED25519ph())
	if err != nil {
		return Key{}, fmt.Errorf("unsupported public key: %w", err)
	}
	id, err := Fingerprint(pub)
	if err != nil {
		return Key{}, err
	}
	return Key{ID: id, verifier: v}, nil
}

// Fingerprint identifies a public key: "sha256:" and the hex sha256 of its
// DER (PKIX) encoding.
func Fingerprint(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("unsupported public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// Signer is a private key that signs, with the fingerprint of its public half.
type Signer struct {
	// KeyID is the fingerprint of the public key.
	KeyID string
	signature.SignerVerifier
}

// LoadSigner reads a cosign private key file (encrypted, as cosign
// generate-key-pair writes cosign.key) and decrypts it with password.
func LoadSigner(file string, password []byte) (*Signer, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	sv, err := cosign.LoadPrivateKey(b, password, nil)
	if err != nil {
		if strings.HasPrefix(err.Error(), "decrypt:") {
			return nil, fmt.Errorf("%s: cannot decrypt the private key: wrong password (set %s)", file, PasswordEnv)
		}
		return nil, fmt.Errorf("%s: not a cosign private key: %w", file, err)
	}
	pub, err := sv.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	id, err := Fingerprint(pub)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &Signer{KeyID: id, SignerVerifier: sv}, nil
}

// LoadOrCreateSigner is LoadSigner for a key berth holds: when file does
// not exist, it first creates an ECDSA P-256 key pair as cosign
// generate-key-pair does, encrypted with password: the private key in file
// (mode 0600) and then the public key beside it (PublicKeyFile). Of two
// processes creating it at once, one key wins and both load it.
func LoadOrCreateSigner(file string, password []byte) (*Signer, error) {
	if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
		if err := createKeyPair(file, password); err != nil {
			return nil, err
		}
	}
	return LoadSigner(file, password)
}

// PublicKeyFile is where LoadOrCreateSigner writes the public key of the
// private key file: beside it, with the extension .pub.
func PublicKeyFile(file string) string {
	return strings.TrimSuffix(file, filepath.Ext(file)) + ".pub"
}

// createKeyPair writes a new key pair to file and PublicKeyFile(file),
// unless file appeared meanwhile: the private key is written to a
// temporary file and linked into place, which fails when the name exists.
func createKeyPair(file string, password []byte) error {
	kb, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return password, nil })
	if err != nil {
		return fmt.Errorf("%s: create a key pair: %w", file, err)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	place := func(name string, data []byte, mode os.FileMode) error {
		tmp, err := os.CreateTemp(filepath.Dir(name), ".key-*")
		if err != nil {
			return err
		}
		defer os.Remove(tmp.Name())
		_, err = tmp.Write(data)
		if err == nil {
			err = tmp.Chmod(mode)
		}
		if err == nil {
			err = tmp.Sync()
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Link(tmp.Name(), name)
		}
		return err
	}
	if err := place(file, kb.PrivateBytes, 0o600); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil // another process created it
		}
		return fmt.Errorf("%s: %w", file, err)
	}
	if err := os.WriteFile(PublicKeyFile(file), kb.PublicBytes, 0o644); err != nil {
		return fmt.Errorf("%s: %w", PublicKeyFile(file), err)
	}
	return nil
}
