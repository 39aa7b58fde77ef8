package signing

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

const repo = "stable/kafka"

// fakeRegistry is a Fetcher over maps: enough registry to hold signatures.
type fakeRegistry struct {
	tags      map[string]string
	manifests map[string][]byte
	blobs     map[string][]byte
	referrers []ocispec.Descriptor
	failing   error
	// unreadable makes reading these manifests and blobs fail with the error.
	unreadable map[string]error
}

func newFake() *fakeRegistry {
	return &fakeRegistry{tags: map[string]string{}, manifests: map[string][]byte{}, blobs: map[string][]byte{}}
}

func (f *fakeRegistry) Resolve(_ context.Context, _, tag string) (string, error) {
	if f.failing != nil {
		return "", f.failing
	}
	d, ok := f.tags[tag]
	if !ok {
		return "", fmt.Errorf("tag %s: %w", tag, ErrNotFound)
	}
	return d, nil
}

func (f *fakeRegistry) Manifest(_ context.Context, _, d string) (string, []byte, error) {
	if err := f.unreadable[d]; err != nil {
		return "", nil, err
	}
	b, ok := f.manifests[d]
	if !ok {
		return "", nil, fmt.Errorf("manifest %s: %w", d, ErrNotFound)
	}
	return ocispec.MediaTypeImageManifest, b, nil
}

func (f *fakeRegistry) Blob(_ context.Context, _, d string) (io.ReadCloser, error) {
	if err := f.unreadable[d]; err != nil {
		return nil, err
	}
	b, ok := f.blobs[d]
	if !ok {
		return nil, fmt.Errorf("blob %s: %w", d, ErrNotFound)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (f *fakeRegistry) Referrers(context.Context, string, string) ([]ocispec.Descriptor, error) {
	return f.referrers, nil
}

func (f *fakeRegistry) blob(b []byte) ocispec.Descriptor {
	d := digest.FromBytes(b)
	f.blobs[d.String()] = b
	return ocispec.Descriptor{Digest: d, Size: int64(len(b))}
}

// manifest stores a manifest of layers, optionally with a subject, and returns its descriptor.
func (f *fakeRegistry) manifest(artifactType string, subject *ocispec.Descriptor, layers ...ocispec.Descriptor) ocispec.Descriptor {
	cfg := f.blob([]byte("{}"))
	cfg.MediaType = "application/vnd.oci.image.config.v1+json"
	m := ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest, ArtifactType: artifactType, Config: cfg, Layers: layers, Subject: subject}
	m.SchemaVersion = 2
	b, _ := json.Marshal(m)
	d := digest.FromBytes(b)
	f.manifests[d.String()] = b
	return ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: d, Size: int64(len(b)), ArtifactType: artifactType}
}

// keyPair makes a cosign key pair in dir and returns its signer and public key.
func keyPair(t testing.TB, dir, name string) (*Signer, Key) {
	t.Helper()
	kb, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return []byte("pw"), nil })
	if err != nil {
		t.Fatal(err)
	}
	priv, pub := filepath.Join(dir, name+".key"), filepath.Join(dir, name+".pub")
	if err := os.WriteFile(priv, kb.PrivateBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pub, kb.PublicBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := LoadSigner(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := LoadPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	if k.ID != s.KeyID {
		t.Fatalf("public key %s and signer %s disagree", k.ID, s.KeyID)
	}
	return s, k
}

// cosignPayload is the simple-signing payload cosign signs for d.
func cosignPayload(t testing.TB, d digest.Digest) []byte {
	t.Helper()
	ref, err := name.NewDigest("registry.example.com/" + repo + "@" + d.String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := (&payload.Cosign{Image: ref}).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sign(t testing.TB, s *Signer, msg []byte) string {
	t.Helper()
	sig, err := s.SignMessage(bytes.NewReader(msg))
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(sig)
}

// sigLayer stores a payload and returns its layer with the signature annotation.
func (f *fakeRegistry) sigLayer(body []byte, b64sig string) ocispec.Descriptor {
	l := f.blob(body)
	l.MediaType = SimpleSigningMediaType
	l.Annotations = map[string]string{SignatureAnnotation: b64sig}
	return l
}

// attLayer stores a DSSE envelope over an in-toto statement about subjects.
func (f *fakeRegistry) attLayer(t testing.TB, s *Signer, predicateType string, subjects ...digest.Digest) ocispec.Descriptor {
	t.Helper()
	type sub struct {
		Name   string            `json:"name"`
		Digest map[string]string `json:"digest"`
	}
	st := struct {
		Type          string `json:"_type"`
		PredicateType string `json:"predicateType"`
		Subject       []sub  `json:"subject"`
		Predicate     any    `json:"predicate"`
	}{Type: "https://in-toto.io/Statement/v0.1", PredicateType: predicateType, Predicate: map[string]string{"k": "v"}}
	for _, d := range subjects {
		st.Subject = append(st.Subject, sub{Name: "registry.example.com/" + repo, Digest: map[string]string{"sha256": d.Encoded()}})
	}
	body, _ := json.Marshal(st)
	const payloadType = "application/vnd.in-toto+json"
	env := map[string]any{
		"payloadType": payloadType,
		"payload":     base64.StdEncoding.EncodeToString(body),
		"signatures":  []map[string]string{{"keyid": "", "sig": sign(t, s, preAuthEncoding(payloadType, body))}},
	}
	eb, _ := json.Marshal(env)
	l := f.blob(eb)
	l.MediaType = DSSEMediaType
	l.Annotations = map[string]string{PredicateTypeAnnotation: predicateType}
	return l
}

// untrustedBy is the reason of a signature not made by k, the only key
// trusted for stable/kafka.
func untrustedBy(k Key) string {
	return "not signed by a key trusted for stable/kafka (trusted: " + shortID(k.ID) + "): signed by another key, or the payload or signature was altered"
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	trusted, trustedKey := keyPair(t, dir, "trusted")
	other, otherKey := keyPair(t, dir, "other")
	subject := digest.FromString("the version")
	elsewhere := digest.FromString("another version")
	subjectDesc := &ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: subject, Size: 100}
	policy := NewPolicyOf(Rule{Repositories: []string{"stable/*"}, Keys: []Key{trustedKey}, Require: true})
	payloadDigest := digest.FromBytes(cosignPayload(t, subject))

	type want struct {
		verified bool
		reason   string // Report.Reason(); "" when verified
		kinds    []Kind // kinds of the signatures, in order
	}
	for _, tc := range []struct {
		name   string
		setup  func(f *fakeRegistry)
		policy *Policy
		want   want
	}{
		{"no signature", func(*fakeRegistry) {}, policy, want{reason: "no signature"}},
		{"tag signature by the trusted key", func(f *fakeRegistry) {
			body := cosignPayload(t, subject)
			f.tags[SignatureTag(subject)] = f.manifest("", nil, f.sigLayer(body, sign(t, trusted, body))).Digest.String()
		}, policy, want{verified: true, kinds: []Kind{KindTag}}},
		{"referrer signature by the trusted key", func(f *fakeRegistry) {
			body := cosignPayload(t, subject)
			f.referrers = append(f.referrers, f.manifest(SignatureArtifactType, subjectDesc, f.sigLayer(body, sign(t, trusted, body))))
		}, policy, want{verified: true, kinds: []Kind{KindReferrer}}},
		{"one good signature among bad ones", func(f *fakeRegistry) {
			body := cosignPayload(t, subject)
			f.tags[SignatureTag(subject)] = f.manifest("", nil, f.sigLayer(body, sign(t, other, body)), f.sigLayer(body, sign(t, trusted, body))).Digest.String()
		}, policy, want{verified: true, kinds: []Kind{KindTag, KindTag}}},
		{"untrusted key", func(f *fakeRegistry) {
			body := cosignPayload(t, subject)
			f.tags[SignatureTag(subject)] = f.manifest("", nil, f.sigLayer(body, sign(t, other, body))).Digest.String()
		}, policy, want{reason: untrustedBy(trustedKey), kinds: []Kind{KindTag}}},
		{"tampered signature", func(f *fakeRegistry) {
			body := cosignPayload(t, subject)
			sig, _ := base64.StdEncoding.DecodeString(sign(t, trusted, body))
			sig[len(sig)-3] ^= 0xff
			f.tags[SignatureTag(subject)] = f.manifest("", nil, f.sigLayer(body, base64.StdEncoding.EncodeToString(sig))).Digest.String()
		}, policy, want{reason: untrustedBy(trustedKey), kinds: []Kind{KindTag}}},
		{"tampered payload", func(f *fakeRegistry) {
			body := cosignPayload(t, subject)
			sig := sign(t, trusted, body)
			tampered := bytes.Replace(body, []byte(`"optional":null`), []byte(`"optional":{"x":"y"}`), 1)
			if bytes.Equal(tampered, body) {
				t.Fatalf("payload %s not tampered", body)
			}
			f.tags[SignatureTag(subject)] = f.manifest("", nil, f.sigLayer(tampered, sig)).Digest.String()
		}, policy, want{reason: untrustedBy(trustedKey), kinds: []Kind{KindTag}}},
		{"signature for another digest", func(f *fakeRegistry) {
			body := cosignPayload(t, elsewhere)
			f.tags[SignatureTag(subject)] = f.manifest("", nil, f.sigLayer(body, sign(t, trusted, body))).Digest.String()
		}, policy, want{reason: "payload digest mismatch: the signature is for " + elsewhere.String() + ", not " + subject.String(), kinds: []Kind{KindTag}}},
		{"payload of another type", func(f *fakeRegistry) {
			body := bytes.Replace(cosignPayload(t, subject), []byte(`"type":"`+payload.CosignSignatureType+`"`), []byte(`"type":"atomic container signature"`), 1)
			f.tags[SignatureTag(subject)] = f.manifest("", nil, f.sigLayer(body, sign(t, trusted, body))).Digest.String()
		}, policy, want{reason: `payload type is "atomic container signature", not "` + payload.CosignSignatureType + `"`, kinds: []Kind{KindTag}}},
		{"payload naming the digest but no type", func(f *fakeRegistry) {
			body := []byte(`{"critical":{"image":{"docker-manifest-digest":"` + subject.String() + `"}}}`)
			f.tags[SignatureTag(subject)] = f.manifest("", nil, f.sigLayer(body, sign(t, trusted, body))).Digest.String()
		}, policy, want{reason: `payload type is "", not "` + payload.CosignSignatureType + `"`, kinds: []Kind{KindTag}}},
		{"payload not JSON", func(f *fakeRegistry) {
			body := []byte(subject.String())
			f.tags[SignatureTag(subject)] = f.manifest("", nil, f.sigLayer(body, sign(t, trusted, body))).Digest.String()
		}, policy, want{reason: "payload is not a cosign signature payload: invalid character 's' looking for beginning of value", kinds: []Kind{KindTag}}},
		{"payload blob altered in storage", func(f *fakeRegistry) {
			body := cosignPayload(t, subject)
			l := f.sigLayer(body, sign(t, trusted, body))
			f.blobs[l.Digest.String()] = append([]byte(nil), body[:len(body)-1]...)
			f.tags[SignatureTag(subject)] = f.manifest("", nil, l).Digest.String()
		}, policy, want{reason: "payload blob does not match its digest " + payloadDigest.String(), kinds: []Kind{KindTag}}},
		{"payload blob missing", func(f *fakeRegistry) {
			body := cosignPayload(t, subject)
			l := f.sigLayer(body, sign(t, trusted, body))
			delete(f.blobs, l.Digest.String())
			f.tags[SignatureTag(subject)] = f.manifest("", nil, l).Digest.String()
		}, policy, want{reason: "payload blob " + payloadDigest.String() + " is missing", kinds: []Kind{KindTag}}},
		{"no signature annotation", func(f *fakeRegistry) {
			l := f.sigLayer(cosignPayload(t, subject), "")
			l.Annotations = nil
			f.tags[SignatureTag(subject)] = f.manifest("", nil, l).Digest.String()
		}, policy, want{reason: "bad signature: no dev.cosignproject.cosign/signature annotation", kinds: []Kind{KindTag}}},
		{"signature not base64", func(f *fakeRegistry) {
			f.tags[SignatureTag(subject)] = f.manifest("", nil, f.sigLayer(cosignPayload(t, subject), "%%%")).Digest.String()
		}, policy, want{reason: "bad signature: the dev.cosignproject.cosign/signature annotation is not base64", kinds: []Kind{KindTag}}},
		{"garbage under the .sig tag", func(f *fakeRegistry) {
			garbage := []byte("this is not json")
			d := digest.FromBytes(garbage)
			f.manifests[d.String()] = garbage
			f.tags[SignatureTag(subject)] = d.String()
		}, policy, want{reason: "not a cosign signature manifest: invalid character 'h' in literal true (expecting 'r')", kinds: []Kind{KindTag}}},
		{"an image under the .sig tag", func(f *fakeRegistry) {
			l := f.blob([]byte("layer"))
			l.MediaType = ocispec.MediaTypeImageLayerGzip
			f.tags[SignatureTag(subject)] = f.manifest("", nil, l).Digest.String()
		}, policy, want{reason: "layer " + digest.FromString("layer").String() + ` is "` + ocispec.MediaTypeImageLayerGzip + `", not a cosign signature`, kinds: []Kind{KindTag}}},
		{".sig tag naming a missing manifest", func(f *fakeRegistry) {
			f.tags[SignatureTag(subject)] = digest.FromString("gone").String()
		}, policy, want{reason: "signature manifest " + digest.FromString("gone").String() + " is gone", kinds: []Kind{KindTag}}},
		{"referrer with another subject", func(f *fakeRegistry) {
			body := cosignPayload(t, subject)
			other := &ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: elsewhere, Size: 1}
			f.referrers = append(f.referrers, f.manifest(SignatureArtifactType, other, f.sigLayer(body, sign(t, trusted, body))))
		}, policy, want{reason: "referrer's subject is not " + subject.String(), kinds: []Kind{KindReferrer}}},
		{"repository no policy covers", func(f *fakeRegistry) {
			body := cosignPayload(t, subject)
			f.tags[SignatureTag(subject)] = f.manifest("", nil, f.sigLayer(body, sign(t, trusted, body))).Digest.String()
		}, NewPolicyOf(Rule{Repositories: []string{"incubator/*"}, Keys: []Key{trustedKey}}), want{reason: "no trust policy covers stable/kafka", kinds: []Kind{KindTag}}},
		{"nil policy", func(f *fakeRegistry) {
			body := cosignPayload(t, subject)
			f.tags[SignatureTag(subject)] = f.manifest("", nil, f.sigLayer(body, sign(t, trusted, body))).Digest.String()
		}, nil, want{reason: "no trust policy covers stable/kafka", kinds: []Kind{KindTag}}},
		{"key removed from the policy", func(f *fakeRegistry) {
			body := cosignPayload(t, subject)
			f.tags[SignatureTag(subject)] = f.manifest("", nil, f.sigLayer(body, sign(t, trusted, body))).Digest.String()
		}, NewPolicyOf(Rule{Repositories: []string{"stable/*"}, Keys: []Key{otherKey}}), want{reason: untrustedBy(otherKey), kinds: []Kind{KindTag}}},
		{"thousands of bogus referrer signatures", func(f *fakeRegistry) {
			l := f.sigLayer([]byte("bogus"), "AAAA")
			for i := range 5000 {
				d := f.manifest(SignatureArtifactType, subjectDesc, l)
				d.Digest = digest.FromString(fmt.Sprint("bogus", i))
				f.manifests[d.Digest.String()] = f.manifests[f.manifest(SignatureArtifactType, subjectDesc, l).Digest.String()]
				f.referrers = append(f.referrers, d)
			}
		}, policy, want{reason: untrustedBy(trustedKey) + fmt.Sprintf("; not checked: more than %d signature manifests for one version", MaxManifests)}},
		{"thousands of other referrers beside a good signature", func(f *fakeRegistry) {
			for i := range 5000 {
				f.referrers = append(f.referrers, ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, ArtifactType: "application/vnd.example.sbom", Digest: digest.FromString(fmt.Sprint(i)), Size: 10})
			}
			body := cosignPayload(t, subject)
			f.tags[SignatureTag(subject)] = f.manifest("", nil, f.sigLayer(body, sign(t, trusted, body))).Digest.String()
		}, policy, want{verified: true, kinds: []Kind{KindTag}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			tc.setup(f)
			rep, err := Check(context.Background(), f, tc.policy, repo, subject.String())
			if err != nil {
				t.Fatal(err)
			}
			if rep.Verified() != tc.want.verified {
				t.Fatalf("verified = %v, want %v (reason %q)", rep.Verified(), tc.want.verified, rep.Reason())
			}
			if tc.want.verified {
				by, _ := rep.VerifiedBy()
				if by.KeyID != trustedKey.ID || rep.Reason() != "" {
					t.Errorf("verified by %q (reason %q), want key %s", by.KeyID, rep.Reason(), trustedKey.ID)
				}
			} else if rep.Reason() != tc.want.reason {
				t.Errorf("reason %q, want %q", rep.Reason(), tc.want.reason)
			}
			for _, s := range rep.Signatures {
				if !s.Verified && (s.KeyID != "" || s.Reason == "") {
					t.Errorf("not verified %+v: want a reason and no key", s)
				}
			}
			if tc.want.kinds != nil {
				var kinds []Kind
				for _, s := range rep.Signatures {
					kinds = append(kinds, s.Kind)
				}
				if fmt.Sprint(kinds) != fmt.Sprint(tc.want.kinds) {
					t.Errorf("kinds %v, want %v", kinds, tc.want.kinds)
				}
			}
		})
	}
}

func TestCheckAttestations(t *testing.T) {
	dir := t.TempDir()
	trusted, trustedKey := keyPair(t, dir, "trusted")
	other, _ := keyPair(t, dir, "other")
	subject := digest.FromString("the version")
	policy := NewPolicyOf(Rule{Repositories: []string{"stable/*"}, Keys: []Key{trustedKey}})

	f := newFake()
	const slsa = "https://slsa.dev/provenance/v0.2"
	f.tags[AttestationTag(subject)] = f.manifest("", nil,
		f.attLayer(t, trusted, slsa, subject),
		f.attLayer(t, other, "https://spdx.dev/Document", subject),
		f.attLayer(t, trusted, "https://cyclonedx.org/bom", digest.FromString("another version")),
	).Digest.String()
	rep, err := Check(context.Background(), f, policy, repo, subject.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Signatures) != 0 || rep.Verified() {
		t.Errorf("attestations counted as signatures: %+v", rep.Signatures)
	}
	want := []struct {
		predicate string
		verified  bool
		reason    string
	}{
		{slsa, true, ""},
		{"https://spdx.dev/Document", false, untrustedBy(trustedKey)},
		{"https://cyclonedx.org/bom", false, "payload digest mismatch: the attestation's subjects do not include " + subject.String()},
	}
	if len(rep.Attestations) != len(want) {
		t.Fatalf("%d attestations, want %d: %+v", len(rep.Attestations), len(want), rep.Attestations)
	}
	for i, w := range want {
		a := rep.Attestations[i]
		if a.PredicateType != w.predicate || a.Verified != w.verified || a.Reason != w.reason || a.Kind != KindTag {
			t.Errorf("attestation %d = %+v, want predicate %s verified %v reason %q", i, a, w.predicate, w.verified, w.reason)
		}
		if a.Verified && a.KeyID != trustedKey.ID {
			t.Errorf("attestation %d verified by %q", i, a.KeyID)
		}
	}
}

func TestCheckUnreadableSignatures(t *testing.T) {
	dir := t.TempDir()
	trusted, trustedKey := keyPair(t, dir, "trusted")
	subject := digest.FromString("the version")
	subjectDesc := &ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: subject, Size: 100}
	policy := NewPolicyOf(Rule{Repositories: []string{"stable/*"}, Keys: []Key{trustedKey}})
	body := cosignPayload(t, subject)

	// A referrer the registry refuses to serve (too large, say) is one
	// unverified signature; the good signature under the tag still counts.
	f := newFake()
	f.tags[SignatureTag(subject)] = f.manifest("", nil, f.sigLayer(body, sign(t, trusted, body))).Digest.String()
	huge := f.manifest(SignatureArtifactType, subjectDesc, f.sigLayer(body, sign(t, trusted, body)))
	f.referrers = append(f.referrers, huge)
	f.unreadable = map[string]error{huge.Digest.String(): errors.New("manifest of 9999999 bytes is over the limit")}
	rep, err := Check(context.Background(), f, policy, repo, subject.String())
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Verified() || len(rep.Signatures) != 2 || !strings.Contains(rep.Signatures[1].Reason, "cannot read signature manifest: manifest of 9999999 bytes") {
		t.Errorf("with one unreadable referrer: verified %v, signatures %+v", rep.Verified(), rep.Signatures)
	}

	// An unreadable payload blob likewise.
	f = newFake()
	l := f.sigLayer(body, sign(t, trusted, body))
	f.tags[SignatureTag(subject)] = f.manifest("", nil, l).Digest.String()
	f.unreadable = map[string]error{l.Digest.String(): errors.New("blob refused")}
	if rep, err = Check(context.Background(), f, policy, repo, subject.String()); err != nil {
		t.Fatal(err)
	}
	if rep.Verified() || !strings.Contains(rep.Reason(), "cannot read payload blob: blob refused") {
		t.Errorf("with an unreadable payload: verified %v, reason %q", rep.Verified(), rep.Reason())
	}

	// The registry being unavailable fails the check instead: no verdict.
	f.unreadable = map[string]error{l.Digest.String(): fmt.Errorf("connection reset: %w", ErrUnavailable)}
	if _, err := Check(context.Background(), f, policy, repo, subject.String()); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Check with the registry unavailable = %v, want ErrUnavailable", err)
	}
}

func TestCheckRegistryFailure(t *testing.T) {
	f := newFake()
	f.failing = fmt.Errorf("connection refused")
	if _, err := Check(context.Background(), f, nil, repo, digest.FromString("x").String()); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Check on a failing registry = %v, want the failure", err)
	}
	if _, err := Check(context.Background(), newFake(), nil, repo, "sha256:nothex"); err == nil {
		t.Fatal("Check of a malformed digest succeeded")
	}
}

// TestCosignSubject: each of CosignTags names its digest back, and no
// other tag names one.
func TestCosignSubject(t *testing.T) {
	d := digest.FromString("a version")
	for _, tag := range CosignTags(d) {
		if got, ok := CosignSubject(tag); !ok || got != d {
			t.Errorf("CosignSubject(%q) = %s, %v; want %s", tag, got, ok, d)
		}
	}
	for _, tag := range []string{
		"1.0.0", "latest", "", "sha256-" + d.Encoded(), "sha256-" + d.Encoded() + ".sigs",
		"sha256-" + d.Encoded()[1:] + ".sig", "sha256-" + strings.ToUpper(d.Encoded()) + ".sig", "md5-abc.sig",
		"sha256-" + d.Encoded() + ".sig.att",
	} {
		if got, ok := CosignSubject(tag); ok {
			t.Errorf("CosignSubject(%q) = %s, want no cosign tag", tag, got)
		}
	}
}
