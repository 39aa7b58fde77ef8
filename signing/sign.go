package signing

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	cremote "github.com/sigstore/cosign/v2/pkg/cosign/remote"
	"github.com/sigstore/cosign/v2/pkg/oci"
	"github.com/sigstore/cosign/v2/pkg/oci/empty"
	"github.com/sigstore/cosign/v2/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	signatureoptions "github.com/sigstore/sigstore/pkg/signature/options"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// SignOptions say how a signature is stored.
type SignOptions struct {
	// Referrer stores the signature as an OCI 1.1 referrer of the version
	// (what cosign sign --registry-referrers-mode=oci-1-1 writes) instead of
	// under cosign's sha256-<hex>.sig tag.
	Referrer bool
	// Annotations are signed with the payload (cosign sign -a).
	Annotations map[string]any
	// Remote are go-containerregistry options: authentication, transport.
	Remote []remote.Option
	// Insecure allows plain HTTP to a registry that is not on loopback.
	Insecure bool
	// TLog is the URL of a transparency log (Rekor's API) to record the
	// signature in; the entry is attached to the signature, as cosign does.
	// Empty: offline, no log (the air-gapped case).
	TLog string
}

// Sign signs the version ref names, which must be by digest
// (host/namespace/name@sha256:...), with s, as cosign sign --key does: the
// payload is cosign's simple-signing payload, and the signature is recorded
// in a transparency log only when opts.TLog names one. Signing the same
// digest with the same key again under the tag scheme stores nothing new.
func Sign(ctx context.Context, s *Signer, ref string, opts SignOptions) error {
	t, err := newTarget(ctx, "sign", ref, opts.Insecure, opts.Remote)
	if err != nil {
		return err
	}
	d := t.digest
	body, err := (&payload.Cosign{Image: d, Annotations: opts.Annotations}).MarshalJSON()
	if err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	sig, err := s.SignMessage(bytes.NewReader(body), signatureoptions.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	var sigOpts []static.Option
	if opts.TLog != "" {
		b, err := upload(ctx, opts.TLog, s, body, sig)
		if err != nil {
			return err
		}
		sigOpts = append(sigOpts, static.WithBundle(b))
	}
	ociSig, err := static.NewSignature(body, base64.StdEncoding.EncodeToString(sig), sigOpts...)
	if err != nil {
		return err
	}
	se, err := t.entity()
	if err != nil {
		return err
	}
	// Under the .sig tag a signature joins the others, once per key unless
	// it brings a log entry; a referrer carries this signature alone.
	var attach []mutate.SignOption
	if opts.TLog == "" {
		attach = append(attach, mutate.WithDupeDetector(cremote.NewDupeDetector(s)))
	}
	write := func(se oci.SignedEntity) error { return ociremote.WriteSignatures(d.Repository, se, t.regOpts...) }
	if opts.Referrer {
		attach = []mutate.SignOption{mutate.WithReplaceOp(alone{})}
		write = func(se oci.SignedEntity) error { return ociremote.WriteSignaturesExperimentalOCI(d, se, t.regOpts...) }
	}
	signed, err := mutate.AttachSignatureToEntity(se, ociSig, attach...)
	if err == nil {
		err = write(signed)
	}
	if err != nil {
		return fmt.Errorf("%s: store the signature: %w", ref, err)
	}
	return nil
}

// alone is the cosign replace operation that keeps only the new signature.
type alone struct{}

func (alone) Replace(_ oci.Signatures, sig oci.Signature) (oci.Signatures, error) {
	return mutate.AppendSignatures(empty.Signatures(), false, sig)
}

// target is the version, by digest, that a signature or an attestation is
// stored for, and the options that reach its registry.
type target struct {
	ref     string
	digest  name.Digest
	remote  []remote.Option
	regOpts []ociremote.Option
}

// newTarget parses ref, which must be by digest; verb names the operation
// in its error.
func newTarget(ctx context.Context, verb, ref string, insecure bool, opts []remote.Option) (target, error) {
	var nameOpts []name.Option
	if insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	d, err := name.NewDigest(ref, nameOpts...)
	if err != nil {
		return target{}, fmt.Errorf("%s: %s by digest (host/namespace/name@sha256:...): %w", ref, verb, err)
	}
	ro := append([]remote.Option{remote.WithContext(ctx)}, opts...)
	return target{ref: ref, digest: d, remote: ro,
		regOpts: []ociremote.Option{ociremote.WithRemoteOptions(ro...), ociremote.WithNameOptions(nameOpts...)}}, nil
}

// entity reads the version, with the signatures and attestations cosign's
// tags hold.
func (t target) entity() (oci.SignedEntity, error) {
	se, err := ociremote.SignedEntity(t.digest, t.regOpts...)
	var notFound *ociremote.EntityNotFoundError
	if errors.As(err, &notFound) {
		return nil, fmt.Errorf("%s: no such manifest", t.ref)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.ref, err)
	}
	return se, nil
}
