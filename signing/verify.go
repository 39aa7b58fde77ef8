package signing

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// signature verifies a cosign simple-signing layer: its base64 signature
// annotation over the payload blob, by a trusted key, and the payload naming
// the version's digest.
func (v *verifier) signature(ctx context.Context, s *Signature, l ocispec.Descriptor) error {
	b64, ok := l.Annotations[SignatureAnnotation]
	if !ok {
		s.Reason = "bad signature: no " + SignatureAnnotation + " annotation"
		return nil
	}
	sig, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(sig) == 0 {
		s.Reason = "bad signature: the " + SignatureAnnotation + " annotation is not base64"
		return nil
	}
	body, reason, err := v.payload(ctx, l)
	if err != nil || reason != "" {
		s.Reason = reason
		return err
	}
	key, ok := v.verify(sig, body)
	if !ok {
		s.Reason = v.untrusted()
		return nil
	}
	var p payload.SimpleContainerImage
	if err := json.Unmarshal(body, &p); err != nil {
		s.Reason = fmt.Sprintf("payload is not a cosign signature payload: %v", err)
		return nil
	}
	if p.Critical.Type != payload.CosignSignatureType {
		s.Reason = fmt.Sprintf("payload type is %q, not %q", p.Critical.Type, payload.CosignSignatureType)
		return nil
	}
	if got := p.Critical.Image.DockerManifestDigest; got != v.subject.String() {
		s.Reason = fmt.Sprintf("payload digest mismatch: the signature is for %s, not %s", got, v.subject)
		return nil
	}
	if v.rule.Log != nil {
		if s.Reason = v.rule.Log.verify(l.Annotations, body, b64, key); s.Reason != "" {
			return nil
		}
	}
	s.KeyID, s.Verified = key.ID, true
	return nil
}

// attestation verifies a cosign attestation layer: a DSSE envelope whose
// signature over the in-toto statement is by a trusted key, and whose
// statement names the version's digest among its subjects.
func (v *verifier) attestation(ctx context.Context, s *Signature, l ocispec.Descriptor) error {
	body, reason, err := v.payload(ctx, l)
	if err != nil || reason != "" {
		s.Reason = reason
		return err
	}
	statement, env, ok := openEnvelope(body)
	if !ok {
		s.Reason = "not a DSSE envelope with a base64 payload"
		return nil
	}
	var st struct {
		PredicateType string             `json:"predicateType"`
		Subject       []statementSubject `json:"subject"`
		Predicate     json.RawMessage    `json:"predicate"`
	}
	if err := json.Unmarshal(statement, &st); err != nil {
		s.Reason = fmt.Sprintf("bad attestation: the payload is not an in-toto statement: %v", err)
		return nil
	}
	if st.PredicateType != "" {
		s.PredicateType = st.PredicateType
	}
	if len(env.Signatures) == 0 {
		s.Reason = "bad signature: the envelope has no signatures"
		return nil
	}
	pae := preAuthEncoding(env.PayloadType, statement)
	for _, es := range env.Signatures {
		sig, err := base64.StdEncoding.DecodeString(es.Sig)
		if err != nil {
			continue
		}
		if key, ok := v.verify(sig, pae); ok {
			s.KeyID = key.ID
			break
		}
	}
	if s.KeyID == "" {
		s.Reason = v.untrusted()
		return nil
	}
	if !slices.ContainsFunc(st.Subject, func(sub statementSubject) bool {
		return sub.Digest[v.subject.Algorithm().String()] == v.subject.Encoded()
	}) {
		s.KeyID = ""
		s.Reason = fmt.Sprintf("payload digest mismatch: the attestation's subjects do not include %s", v.subject)
		return nil
	}
	if IsProvenance(st.PredicateType) {
		if s.Sources, err = provenanceSources(st.PredicateType, st.Predicate); err != nil {
			s.KeyID = ""
			s.Reason = "bad provenance: " + err.Error()
			return nil
		}
	}
	s.Verified = true
	return nil
}

// statementSubject is a subject of an in-toto statement.
type statementSubject struct {
	Digest map[string]string `json:"digest"`
}

// verify returns the first trusted key that verifies sig over msg.
func (v *verifier) verify(sig, msg []byte) (Key, bool) {
	if !v.covered {
		return Key{}, false
	}
	for _, k := range v.rule.Keys {
		if k.verifier.VerifySignature(bytes.NewReader(sig), bytes.NewReader(msg)) == nil {
			return k, true
		}
	}
	return Key{}, false
}

// preAuthEncoding is DSSE's PAE, the bytes a DSSE signature signs.
func preAuthEncoding(payloadType string, body []byte) []byte {
	return fmt.Appendf(nil, "DSSEv1 %d %s %d %s", len(payloadType), payloadType, len(body), body)
}
