package signing

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// SignBlob signs msg as `cosign sign-blob --key` does and returns the base64
// signature (what cosign writes to --output-signature). It returns the
// signer's error.
func SignBlob(s *Signer, msg []byte) (string, error) {
	if s == nil {
		return "", errors.New("sign blob: no signer")
	}
	sig, err := s.SignMessage(bytes.NewReader(msg))
	if err != nil {
		return "", fmt.Errorf("sign blob: %w", err)
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// VerifyBlob checks a base64 signature made by SignBlob or cosign sign-blob
// against msg with key k, as `cosign verify-blob --key` does. Whitespace
// around the signature (a trailing newline in a .sig file) is ignored. It
// returns an error when sig is not base64 or does not verify.
func VerifyBlob(k Key, msg []byte, sig string) error {
	if k.verifier == nil {
		return errors.New("verify blob: no key")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(sig))
	if err != nil || len(raw) == 0 {
		return errors.New("the signature is not base64")
	}
	if err := k.verifier.VerifySignature(bytes.NewReader(raw), bytes.NewReader(msg)); err != nil {
		return fmt.Errorf("not signed by key %s: signed by another key, or the content or signature was altered", k.ID)
	}
	return nil
}
