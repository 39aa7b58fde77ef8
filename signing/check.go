package signing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Kind says how a signature or attestation was found.
type Kind string

// Kinds of discovery.
const (
	// KindTag: cosign's tag scheme, sha256-<hex>.sig or .att in the repository.
	KindTag Kind = "tag"
	// KindReferrer: a manifest whose subject is the version, listed by the referrers API.
	KindReferrer Kind = "referrer"
)

// Media and artifact types of cosign's signatures and attestations.
const (
	// SimpleSigningMediaType is the layer type of a cosign signature payload.
	SimpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	// DSSEMediaType is the layer type of a cosign attestation (a DSSE envelope).
	DSSEMediaType = "application/vnd.dsse.envelope.v1+json"
	// SignatureArtifactType is the artifactType of cosign's referrer signatures
	// (cosign sign --registry-referrers-mode=oci-1-1).
	SignatureArtifactType = "application/vnd.dev.cosign.artifact.sig.v1+json"
	// AttestationArtifactType is the artifactType of referrer attestations.
	AttestationArtifactType = "application/vnd.dev.cosign.artifact.att.v1+json"
	// SignatureAnnotation holds the base64 signature of a payload layer.
	SignatureAnnotation = "dev.cosignproject.cosign/signature"
	// PredicateTypeAnnotation is the predicate type cosign records on an attestation layer.
	PredicateTypeAnnotation = "predicateType"
)

// Limits that keep a hostile registry from exhausting the verifier.
const (
	// MaxManifests is how many signature and attestation manifests are
	// checked for one version; more are reported, not read.
	MaxManifests = 64
	// MaxLayers is how many signatures one manifest may carry.
	MaxLayers = 64
	// maxManifestBytes bounds a signature manifest.
	maxManifestBytes = 4 << 20
	// maxPayloadBytes bounds a signature payload or attestation envelope.
	maxPayloadBytes = 16 << 20
)

// Errors a Fetcher wraps.
var (
	// ErrNotFound: the tag, manifest or blob does not exist.
	ErrNotFound = errors.New("not found")
	// ErrUnavailable: the registry could not be read this time; trying
	// again may succeed. A signature whose manifest or payload cannot be
	// read for any other reason is not verified, and says why.
	ErrUnavailable = errors.New("registry unavailable")
)

// Fetcher reads the registry a version lives in.
type Fetcher interface {
	// Resolve returns the digest a tag names, or an error wrapping ErrNotFound.
	Resolve(ctx context.Context, repo, tag string) (string, error)
	// Manifest returns a manifest's media type and bytes.
	Manifest(ctx context.Context, repo, digest string) (mediaType string, payload []byte, err error)
	// Blob opens a blob of the repository.
	Blob(ctx context.Context, repo, digest string) (io.ReadCloser, error)
	// Referrers lists the manifests whose subject is digest.
	Referrers(ctx context.Context, repo, digest string) ([]ocispec.Descriptor, error)
}

// Signature is one signature or attestation of a version and its verdict.
type Signature struct {
	// Digest is the digest of the manifest that carries it.
	Digest string
	// Layer is the digest of its payload (a manifest may carry several).
	Layer string
	// Kind says how it was found.
	Kind Kind
	// PredicateType is set for attestations (in-toto statements).
	PredicateType string
	// KeyID is the fingerprint of the trusted key that verified it.
	KeyID string
	// Verified is true when a trusted key verified it for this digest.
	Verified bool
	// Reason says why it is not verified.
	Reason string
	// Sources are the source URLs a verified SLSA provenance attestation
	// names (NormalizeSource), in order.
	Sources []string
}

// Attestation reports whether s is an attestation rather than a signature.
func (s Signature) Attestation() bool { return s.PredicateType != "" }

// Report is what Check found for a version.
type Report struct {
	// Subject is the digest of the version.
	Subject string
	// Signatures and Attestations found, in a stable order.
	Signatures   []Signature
	Attestations []Signature
	// RequireSource are the requireSource globs of the trust policy that
	// applied: when set, the version is verified only with a verified SLSA
	// provenance attestation every source of which one of them matches.
	RequireSource []string
	// Policy names the trust policy that applied, for messages ("trust
	// policy for prod/*").
	Policy string
}

// Verified reports whether a signature of the version is verified and,
// when the policy requires sources, whether a verified SLSA provenance
// attestation names only allowed sources.
func (r *Report) Verified() bool {
	_, signed := r.VerifiedBy()
	return signed && r.provenanceReason() == ""
}

// VerifiedBy returns the first verified signature.
func (r *Report) VerifiedBy() (Signature, bool) {
	for _, s := range r.Signatures {
		if s.Verified {
			return s, true
		}
	}
	return Signature{}, false
}

// Provenance returns the first verified SLSA provenance attestation whose
// sources the policy allows (any, without RequireSource).
func (r *Report) Provenance() (Signature, bool) {
	for _, a := range r.Attestations {
		if !a.Verified || !IsProvenance(a.PredicateType) {
			continue
		}
		if len(r.RequireSource) == 0 {
			return a, true
		}
		if _, ok := MatchSource(r.RequireSource, a.Sources); ok && len(a.Sources) > 0 {
			return a, true
		}
	}
	return Signature{}, false
}

// Reason explains why the version is not verified: no signature, each
// signature's reason, or what its provenance lacks.
func (r *Report) Reason() string {
	if _, signed := r.VerifiedBy(); signed {
		return r.provenanceReason()
	}
	if len(r.Signatures) == 0 {
		return "no signature"
	}
	return joinReasons(r.Signatures)
}

// provenanceReason says why the provenance does not satisfy the policy's
// RequireSource, or "" when it does or the policy has none.
func (r *Report) provenanceReason() string {
	if len(r.RequireSource) == 0 {
		return ""
	}
	if _, ok := r.Provenance(); ok {
		return ""
	}
	globs := strings.Join(r.RequireSource, ", ")
	for _, a := range r.Attestations {
		if a.Verified && IsProvenance(a.PredicateType) {
			src, _ := MatchSource(r.RequireSource, a.Sources)
			if src == "" {
				return fmt.Sprintf("provenance names no source; the %s requires one naming a source in %s", r.Policy, globs)
			}
			return fmt.Sprintf("provenance names source %s, not allowed by the %s (requireSource: %s)", src, r.Policy, globs)
		}
	}
	reason := fmt.Sprintf("no verified SLSA provenance attestation; the %s requires one naming a source in %s", r.Policy, globs)
	var bad []Signature
	for _, a := range r.Attestations {
		if IsProvenance(a.PredicateType) || a.PredicateType == "unknown" {
			bad = append(bad, a)
		}
	}
	if len(bad) > 0 {
		reason += " (" + joinReasons(bad) + ")"
	}
	return reason
}

// joinReasons joins the distinct reasons of sigs.
func joinReasons(sigs []Signature) string {
	seen := map[string]bool{}
	var reasons []string
	for _, s := range sigs {
		if !seen[s.Reason] {
			seen[s.Reason] = true
			reasons = append(reasons, s.Reason)
		}
	}
	return strings.Join(reasons, "; ")
}

// Check finds every signature and attestation of subject in repo, by tag and
// by referrer, and verifies each with the keys the policy trusts for repo
// (none: nothing verifies, and each signature says why). Bad signatures
// never fail Check: they become not-verified entries with a reason. Check
// fails only when the registry cannot be read.
func Check(ctx context.Context, f Fetcher, p *Policy, repo, subject string) (*Report, error) {
	rule, covered := p.For(repo)
	return check(ctx, f, repo, subject, rule, covered)
}

// CheckImage is Check for a container image whose source repository is
// src (quay.io/org/img), read from repo of f (where it is mirrored): its
// signatures are verified with the keys of the rule p has for src
// (ForImage).
func CheckImage(ctx context.Context, f Fetcher, p *Policy, src, repo, subject string) (*Report, error) {
	rule, covered := p.ForImage(src)
	return check(ctx, f, repo, subject, rule, covered)
}

func check(ctx context.Context, f Fetcher, repo, subject string, rule Rule, covered bool) (*Report, error) {
	d, err := digest.Parse(subject)
	if err != nil {
		return nil, fmt.Errorf("%s: not a digest: %w", subject, err)
	}
	found, err := discover(ctx, f, repo, d)
	if err != nil {
		return nil, err
	}
	rep := &Report{Subject: subject}
	if covered {
		rep.RequireSource, rep.Policy = rule.RequireSource, rule.Describe()
	}
	v := verifier{f: f, repo: repo, subject: d, rule: rule, covered: covered, seen: map[digest.Digest]bool{}}
	for i, m := range found {
		var sigs []Signature
		if i >= MaxManifests {
			sigs = []Signature{{Digest: m.digest, Kind: m.kind, PredicateType: m.predicateHint(), Reason: fmt.Sprintf("not checked: more than %d signature manifests for one version", MaxManifests)}}
		} else {
			sigs, err = v.manifest(ctx, m)
			if err != nil {
				return nil, err
			}
		}
		for _, s := range sigs {
			if s.Attestation() {
				rep.Attestations = append(rep.Attestations, s)
			} else {
				rep.Signatures = append(rep.Signatures, s)
			}
		}
	}
	return rep, nil
}

// candidate is a manifest that may hold signatures or attestations.
type candidate struct {
	digest      string
	kind        Kind
	attestation bool
}

func (c candidate) predicateHint() string {
	if c.attestation {
		return "unknown"
	}
	return ""
}

// SignatureTag is cosign's tag for the signatures of a digest.
func SignatureTag(d digest.Digest) string { return d.Algorithm().String() + "-" + d.Encoded() + ".sig" }

// AttestationTag is cosign's tag for the attestations of a digest.
func AttestationTag(d digest.Digest) string {
	return d.Algorithm().String() + "-" + d.Encoded() + ".att"
}

// CosignTags are the tags cosign keeps next to a digest: its signatures
// (.sig), attestations (.att) and SBOM (.sbom).
func CosignTags(d digest.Digest) []string {
	base := d.Algorithm().String() + "-" + d.Encoded()
	return []string{base + ".sig", base + ".att", base + ".sbom"}
}

// CosignSubject is CosignTags' inverse: the digest a tag of cosign's scheme
// is of; ok is false for any other tag.
func CosignSubject(tag string) (subject digest.Digest, ok bool) {
	base, _, _ := strings.Cut(tag, ".")
	alg, encoded, _ := strings.Cut(base, "-")
	d := digest.NewDigestFromEncoded(digest.Algorithm(alg), encoded)
	if d.Validate() != nil || !slices.Contains(CosignTags(d), tag) {
		return "", false
	}
	return d, true
}

// discover lists the candidate manifests: the tag-scheme ones first, then
// referrers ordered by digest, each manifest once.
func discover(ctx context.Context, f Fetcher, repo string, d digest.Digest) ([]candidate, error) {
	var found []candidate
	for _, t := range []struct {
		tag         string
		attestation bool
	}{{SignatureTag(d), false}, {AttestationTag(d), true}} {
		got, err := f.Resolve(ctx, repo, t.tag)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%s: %w", repo, t.tag, err)
		}
		found = append(found, candidate{digest: got, kind: KindTag, attestation: t.attestation})
	}
	refs, err := f.Referrers(ctx, repo, d.String())
	if err != nil {
		return nil, fmt.Errorf("%s: referrers of %s: %w", repo, d, err)
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].Digest < refs[j].Digest })
	for _, r := range refs {
		if slices.ContainsFunc(found, func(c candidate) bool { return c.digest == r.Digest.String() }) {
			continue // found by tag already: cosign's .att manifest is also a referrer
		}
		switch r.ArtifactType {
		case SignatureArtifactType:
			found = append(found, candidate{digest: r.Digest.String(), kind: KindReferrer})
		case AttestationArtifactType:
			found = append(found, candidate{digest: r.Digest.String(), kind: KindReferrer, attestation: true})
		}
	}
	return found, nil
}

// verifier checks the candidates of one version.
type verifier struct {
	f       Fetcher
	repo    string
	subject digest.Digest
	rule    Rule
	covered bool
	// seen are the attestation layers checked already: Attest rewrites
	// the .att manifest, a referrer, with one more layer, so that earlier
	// manifests hold the same envelopes.
	seen map[digest.Digest]bool
}

// manifest reads a candidate and checks each of its layers. A manifest that
// cannot be understood is one not-verified entry.
func (v *verifier) manifest(ctx context.Context, c candidate) ([]Signature, error) {
	bad := func(format string, args ...any) []Signature {
		return []Signature{{Digest: c.digest, Kind: c.kind, PredicateType: c.predicateHint(), Reason: fmt.Sprintf(format, args...)}}
	}
	_, payload, err := v.f.Manifest(ctx, v.repo, c.digest)
	switch {
	case errors.Is(err, ErrNotFound):
		return bad("signature manifest %s is gone", c.digest), nil
	case err != nil && transient(ctx, err):
		return nil, fmt.Errorf("%s@%s: %w", v.repo, c.digest, err)
	case err != nil:
		return bad("cannot read signature manifest: %v", err), nil
	}
	if len(payload) > maxManifestBytes {
		return bad("not a cosign signature manifest: %d bytes", len(payload)), nil
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(payload, &m); err != nil {
		return bad("not a cosign signature manifest: %v", err), nil
	}
	if len(m.Layers) == 0 {
		return bad("not a cosign signature manifest: no layers"), nil
	}
	if c.kind == KindReferrer && (m.Subject == nil || m.Subject.Digest != v.subject) {
		return bad("referrer's subject is not %s", v.subject), nil
	}
	var out []Signature
	for i, l := range m.Layers {
		if i >= MaxLayers {
			out = append(out, Signature{Digest: c.digest, Kind: c.kind, PredicateType: c.predicateHint(), Reason: fmt.Sprintf("not checked: more than %d signatures in one manifest", MaxLayers)})
			break
		}
		s := Signature{Digest: c.digest, Layer: l.Digest.String(), Kind: c.kind}
		var err error
		switch {
		case l.MediaType == SimpleSigningMediaType && !c.attestation:
			err = v.signature(ctx, &s, l)
		case l.MediaType == DSSEMediaType && c.attestation && v.seen[l.Digest]:
			continue
		case l.MediaType == DSSEMediaType && c.attestation:
			v.seen[l.Digest] = true
			s.PredicateType = l.Annotations[PredicateTypeAnnotation]
			if s.PredicateType == "" {
				s.PredicateType = "unknown"
			}
			err = v.attestation(ctx, &s, l)
		default:
			s.PredicateType = c.predicateHint()
			s.Reason = fmt.Sprintf("layer %s is %q, not a cosign %s", l.Digest, l.MediaType, map[bool]string{false: "signature", true: "attestation"}[c.attestation])
		}
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// payload reads a layer's blob, checking its size and digest.
func (v *verifier) payload(ctx context.Context, l ocispec.Descriptor) ([]byte, string, error) {
	if l.Size > maxPayloadBytes {
		return nil, fmt.Sprintf("payload of %d bytes is over the %d limit", l.Size, maxPayloadBytes), nil
	}
	if l.Digest.Validate() != nil {
		return nil, fmt.Sprintf("payload digest %q is not a digest", l.Digest), nil
	}
	rc, err := v.f.Blob(ctx, v.repo, l.Digest.String())
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Sprintf("payload blob %s is missing", l.Digest), nil
	}
	var b []byte
	if err == nil {
		b, err = io.ReadAll(io.LimitReader(rc, maxPayloadBytes+1))
		rc.Close()
	}
	switch {
	case err != nil && transient(ctx, err):
		return nil, "", fmt.Errorf("%s: blob %s: %w", v.repo, l.Digest, err)
	case err != nil:
		return nil, fmt.Sprintf("cannot read payload blob: %v", err), nil
	}
	if l.Digest.Algorithm().Available() && l.Digest.Algorithm().FromBytes(b) != l.Digest {
		return nil, fmt.Sprintf("payload blob does not match its digest %s", l.Digest), nil
	}
	return b, "", nil
}

// transient reports whether a read failed for now (the registry did not
// answer, or the check was cancelled) rather than for good.
func transient(ctx context.Context, err error) bool {
	return errors.Is(err, ErrUnavailable) || ctx.Err() != nil
}

// untrusted is the reason of a signature no trusted key verifies.
func (v *verifier) untrusted() string {
	if !v.covered {
		return fmt.Sprintf("no trust policy covers %s", v.repo)
	}
	return fmt.Sprintf("not signed by a key trusted for %s (trusted: %s): signed by another key, or the payload or signature was altered", v.repo, strings.Join(keyIDs(v.rule.Keys), ", "))
}

// shortID abbreviates a key fingerprint for messages.
func shortID(id string) string {
	if len(id) > len("sha256:")+16 {
		return id[:len("sha256:")+16]
	}
	return id
}
