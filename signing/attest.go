package signing

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	ggcrstatic "github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"
	"github.com/sigstore/cosign/v2/pkg/oci"
	"github.com/sigstore/cosign/v2/pkg/oci/mutate"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	ctypes "github.com/sigstore/cosign/v2/pkg/types"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
	signatureoptions "github.com/sigstore/sigstore/pkg/signature/options"
)

// InTotoPayloadType is the DSSE payload type of an in-toto statement.
const InTotoPayloadType = ctypes.IntotoPayloadType

// AttestOptions say how Attest reaches the registry.
type AttestOptions struct {
	// Remote are go-containerregistry options: authentication, transport.
	Remote []remote.Option
	// Insecure allows plain HTTP to a registry that is not on loopback.
	Insecure bool
}

// Attest DSSE-signs each in-toto statement with s and stores the
// envelopes as cosign attest --key does offline: one layer each (media type
// DSSEMediaType, annotated with its predicateType) of the manifest under
// cosign's sha256-<hex>.att tag, after the attestations already there. The
// manifest also has the version as its subject and AttestationArtifactType
// as its artifactType, so the referrers API lists it too (Check reports
// it once). A statement s attested already is not attested again, and
// when every one was, nothing is written. ref must be by digest.
func Attest(ctx context.Context, s *Signer, ref string, statements [][]byte, opts AttestOptions) error {
	if len(statements) == 0 {
		return nil
	}
	predicateTypes := make([]string, len(statements))
	for i, st := range statements {
		var header struct {
			PredicateType string `json:"predicateType"`
		}
		if err := json.Unmarshal(st, &header); err != nil || header.PredicateType == "" {
			return fmt.Errorf("attestation %d: not an in-toto statement with a predicateType", i+1)
		}
		predicateTypes[i] = header.PredicateType
	}
	t, err := newTarget(ctx, "attest", ref, opts.Insecure, opts.Remote)
	if err != nil {
		return err
	}
	se, err := t.entity()
	if err != nil {
		return err
	}
	subject, err := remote.Head(t.digest, t.remote...)
	if err != nil {
		return fmt.Errorf("%s: %w", ref, err)
	}
	existing, err := se.Attestations()
	if err != nil {
		return fmt.Errorf("%s: read the attestations: %w", ref, err)
	}
	have, err := existing.Get()
	if err != nil {
		return fmt.Errorf("%s: read the attestations: %w", ref, err)
	}
	wrapped := dsse.WrapSigner(s, InTotoPayloadType)
	added := false
	for i, st := range statements {
		if slices.ContainsFunc(have, func(old oci.Signature) bool { return attests(old, st, s) }) {
			continue
		}
		env, err := wrapped.SignMessage(bytes.NewReader(st), signatureoptions.WithContext(ctx))
		if err != nil {
			return fmt.Errorf("attestation %d: sign: %w", i+1, err)
		}
		att, err := static.NewAttestation(env, static.WithLayerMediaType(DSSEMediaType),
			static.WithAnnotations(map[string]string{PredicateTypeAnnotation: predicateTypes[i]}))
		if err != nil {
			return err
		}
		if se, err = mutate.AttachAttestationToEntity(se, att); err != nil {
			return fmt.Errorf("%s: %w", ref, err)
		}
		added = true
	}
	if !added {
		return nil
	}
	if err := writeAttestations(t.digest, se, subject, t.remote); err != nil {
		return fmt.Errorf("%s: store the attestations: %w", ref, err)
	}
	return nil
}

// writeAttestations writes the attestations of se, as
// ociremote.WriteAttestations does, in a manifest whose subject is the
// version: its layers and config, then the manifest under the .att tag.
func writeAttestations(d name.Digest, se oci.SignedEntity, subject *v1.Descriptor, ro []remote.Option) error {
	atts, err := se.Attestations()
	if err != nil {
		return err
	}
	layers, err := atts.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		if err := remote.WriteLayer(d.Repository, l, ro...); err != nil {
			return err
		}
	}
	config, err := atts.RawConfigFile()
	if err != nil {
		return err
	}
	m, err := atts.Manifest()
	if err != nil {
		return err
	}
	if err := remote.WriteLayer(d.Repository, ggcrstatic.NewLayer(config, m.Config.MediaType), ro...); err != nil {
		return err
	}
	m.Subject = &v1.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size}
	dg, err := digest.Parse(d.DigestStr())
	if err != nil {
		return err
	}
	tag := d.Repository.Tag(AttestationTag(dg))
	return remote.Put(tag, referrerManifest{Manifest: *m, ArtifactType: AttestationArtifactType}, ro...)
}

// referrerManifest is an image manifest with the OCI 1.1 artifactType,
// which go-containerregistry's v1.Manifest lacks.
type referrerManifest struct {
	v1.Manifest
	ArtifactType string `json:"artifactType,omitempty"`
}

// RawManifest implements remote.Taggable.
func (r referrerManifest) RawManifest() ([]byte, error) { return json.Marshal(r) }

// MediaType implements remote.Taggable.
func (r referrerManifest) MediaType() (types.MediaType, error) {
	if r.Manifest.MediaType != "" {
		return r.Manifest.MediaType, nil
	}
	return types.OCIManifestSchema1, nil
}

// attests reports whether att, an attestation layer, is an envelope of
// statement signed by s.
func attests(att oci.Signature, statement []byte, s *Signer) bool {
	b, err := att.Payload()
	if err != nil {
		return false
	}
	got, env, ok := openEnvelope(b)
	if !ok || !bytes.Equal(got, statement) {
		return false
	}
	pae := preAuthEncoding(env.PayloadType, got)
	for _, es := range env.Signatures {
		sig, err := base64.StdEncoding.DecodeString(es.Sig)
		if err == nil && s.VerifySignature(bytes.NewReader(sig), bytes.NewReader(pae)) == nil {
			return true
		}
	}
	return false
}

// envelope is a DSSE envelope.
type envelope struct {
	PayloadType string `json:"payloadType"`
	Payload     string `json:"payload"`
	Signatures  []struct {
		Sig string `json:"sig"`
	} `json:"signatures"`
}

// openEnvelope parses a DSSE envelope and decodes its payload.
func openEnvelope(b []byte) ([]byte, envelope, bool) {
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, env, false
	}
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	return payload, env, err == nil
}
