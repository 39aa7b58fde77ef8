package signing

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/sigstore/cosign/v2/pkg/cosign"
	cbundle "github.com/sigstore/cosign/v2/pkg/cosign/bundle"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	"github.com/sigstore/rekor/pkg/client"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/tuf"
)

// BundleAnnotation holds a signature's transparency log entry: cosign's
// bundle, the log's signed promise to include it (SET), checked offline.
const BundleAnnotation = static.BundleAnnotationKey

// LogKeys are the public keys of transparency logs (Rekor) whose entries
// are trusted. A rule with log keys trusts a signature only when it also
// carries a log entry one of them signed.
type LogKeys struct {
	keys cosign.TrustedTransparencyLogPubKeys
	// ids are the log IDs (hex sha256 of each key), for messages and fingerprints.
	ids []string
}

// LoadLogKeys reads PEM public keys of transparency logs (for Rekor, what
// GET /api/v1/log/publicKey answers). Errors name the file.
func LoadLogKeys(files ...string) (*LogKeys, error) {
	l := &LogKeys{keys: cosign.NewTrustedTransparencyLogPubKeys()}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		pub, err := cryptoutils.UnmarshalPEMToPublicKey(b)
		if err != nil {
			return nil, fmt.Errorf("%s: not a PEM public key: %w", file, err)
		}
		if err := l.keys.AddTransparencyLogPubKey(b, tuf.Active); err != nil {
			return nil, fmt.Errorf("%s: not a transparency log key: %w", file, err)
		}
		id, err := cosign.GetTransparencyLogID(pub)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		l.ids = append(l.ids, id)
	}
	return l, nil
}

// verify checks that the signature b64sig of payload, verified by key,
// carries a log entry for exactly that signature, key and payload, which
// one of the logs signed. It returns the reason when it does not.
func (l *LogKeys) verify(annotations map[string]string, payload []byte, b64sig string, key Key) string {
	raw, ok := annotations[BundleAnnotation]
	if !ok {
		return "no transparency log entry: the trust policy requires one (" + BundleAnnotation + ")"
	}
	var b cbundle.RekorBundle
	if err := json.Unmarshal([]byte(raw), &b); err != nil {
		return fmt.Sprintf("transparency log entry is not a cosign bundle: %v", err)
	}
	sig, err := static.NewSignature(payload, b64sig, static.WithBundle(&b))
	if err != nil {
		return fmt.Sprintf("transparency log entry: %v", err)
	}
	if _, ok := l.keys.Keys[b.Payload.LogID]; !ok {
		return fmt.Sprintf("transparency log entry is from log %s, not a trusted log (%s)", shortLogID(b.Payload.LogID), strings.Join(l.shortIDs(), ", "))
	}
	ok, err = cosign.VerifyBundle(sig, &cosign.CheckOpts{RekorPubKeys: &l.keys, SigVerifier: key.verifier})
	if err != nil || !ok {
		return fmt.Sprintf("transparency log entry does not verify: %v", err)
	}
	return ""
}

func (l *LogKeys) shortIDs() []string {
	ids := make([]string, len(l.ids))
	for i, id := range l.ids {
		ids[i] = shortLogID(id)
	}
	return ids
}

func shortLogID(id string) string {
	if len(id) > 16 {
		return id[:16]
	}
	return id
}

// upload records a signature in the transparency log at url (Rekor's API)
// and returns the entry as cosign attaches it to the signature.
func upload(ctx context.Context, url string, s *Signer, payload, sig []byte) (*cbundle.RekorBundle, error) {
	rc, err := client.GetRekorClient(url)
	if err != nil {
		return nil, fmt.Errorf("transparency log %s: %w", url, err)
	}
	pub, err := s.PublicKey()
	if err != nil {
		return nil, err
	}
	pemBytes, err := cryptoutils.MarshalPublicKeyToPEM(pub)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	h.Write(payload)
	entry, err := cosign.TLogUpload(ctx, rc, sig, h, pemBytes)
	if err != nil {
		return nil, fmt.Errorf("transparency log %s: upload: %w", url, err)
	}
	b := cbundle.EntryToBundle(entry)
	if b == nil {
		return nil, fmt.Errorf("transparency log %s: the entry has no signed inclusion promise", url)
	}
	return b, nil
}
