package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/client/registrytest"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/signing"
	"github.com/berth-registry/berth/signing/signingtest"
)

// testKey is a signingtest key pair with an empty password, under the
// field names this file and promote_test.go use.
type testKey struct {
	signer *signing.Signer
	public signing.Key
}

func newTestKey(t *testing.T) testKey {
	t.Helper()
	k := signingtest.NewKeyPair(t, "")
	return testKey{signer: k.Signer, public: k.Key}
}

// policyOf is a trust policy with one rule.
func policyOf(glob string, require bool, keys ...testKey) *signing.Policy {
	r := signing.Rule{Repositories: []string{glob}, Require: require}
	for _, k := range keys {
		r.Keys = append(r.Keys, k.public)
	}
	return signing.NewPolicyOf(r)
}

// newSigningRegistry starts berth's registry, whose tag admission enforces
// policy (nil: none), and returns its host.
func newSigningRegistry(t *testing.T, policy *signing.Policy, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	var host string
	opts := registry.Options{}
	if policy != nil {
		reader := newTestClient(t, Options{})
		opts.AdmitTag = func(ctx context.Context, push registry.TagPush) error {
			return signing.Admit(ctx, reader.Fetcher(host), policy, push.Repo, push.Tag, push.Digest.String())
		}
	}
	host = registrytest.NewBerth(t, opts, wrap)
	return host
}

func TestResolve(t *testing.T) {
	ctx := context.Background()
	host := registrytest.New(t, nil)
	c := newTestClient(t, Options{})
	desc, err := c.Push(ctx, mustParse(t, host+"/charts/demo"), testArtifact(t, "demo", "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ref  string
		want error
	}{
		{host + "/charts/demo:1.0.0", nil},
		{host + "/charts/demo@" + desc.Digest.String(), nil},
		{host + "/charts/demo:9.9.9", ErrNotFound},
		{host + "/charts/other:1.0.0", ErrNotFound},
		{host + "/charts/demo", ErrInvalidReference},
	}
	for _, tt := range tests {
		got, err := c.Resolve(ctx, mustParse(t, tt.ref))
		if !errors.Is(err, tt.want) || (err == nil && got.Digest != desc.Digest) {
			t.Errorf("Resolve(%s) = %s, %v; want %s, %v", tt.ref, got.Digest, err, desc.Digest, tt.want)
		}
	}
}

func TestFetcher(t *testing.T) {
	ctx := context.Background()
	host := newSigningRegistry(t, nil, nil)
	c := newTestClient(t, Options{})
	art := testArtifact(t, "demo", "1.0.0")
	if _, err := c.Push(ctx, mustParse(t, host+"/charts/demo"), art); err != nil {
		t.Fatal(err)
	}
	f := c.Fetcher(host)
	missing := digest.FromString("missing").String()

	if d, err := f.Resolve(ctx, "charts/demo", "1.0.0"); err != nil || d != art.ManifestDesc.Digest.String() {
		t.Errorf("Resolve: %s, %v", d, err)
	}
	mediaType, b, err := f.Manifest(ctx, "charts/demo", art.ManifestDesc.Digest.String())
	if err != nil || mediaType != ocispec.MediaTypeImageManifest || string(b) != string(art.Manifest) {
		t.Errorf("Manifest: %s, %d bytes, %v", mediaType, len(b), err)
	}
	rc, err := f.Blob(ctx, "charts/demo", art.ConfigDesc.Digest.String())
	if err != nil {
		t.Fatalf("Blob: %v", err)
	}
	rc.Close()
	if refs, err := f.Referrers(ctx, "charts/demo", art.ManifestDesc.Digest.String()); err != nil || len(refs) != 0 {
		t.Errorf("Referrers of an unsigned version: %v, %v", refs, err)
	}
	if refs, err := f.Referrers(ctx, "charts/nothing", missing); err != nil || len(refs) != 0 {
		t.Errorf("Referrers in an unknown repository: %v, %v", refs, err)
	}

	notFound := map[string]error{}
	_, notFound["Resolve of a missing tag"] = f.Resolve(ctx, "charts/demo", "sha256-x.sig")
	_, notFound["Resolve in a missing repository"] = f.Resolve(ctx, "charts/nothing", "1.0.0")
	_, _, notFound["Manifest"] = f.Manifest(ctx, "charts/demo", missing)
	_, notFound["Blob"] = f.Blob(ctx, "charts/demo", missing)
	for what, err := range notFound {
		if !errors.Is(err, signing.ErrNotFound) || !strings.Contains(err.Error(), host+"/charts/") {
			t.Errorf("%s: %v, want signing.ErrNotFound naming the repository", what, err)
		}
	}
	if _, _, err := f.Manifest(ctx, "charts/demo", "sha256:nothex"); err == nil || errors.Is(err, signing.ErrNotFound) {
		t.Errorf("Manifest of a malformed digest: %v", err)
	}
}

func TestSignVerify(t *testing.T) {
	ctx := context.Background()
	host := newSigningRegistry(t, nil, nil)
	c := newTestClient(t, Options{})
	key, other := newTestKey(t), newTestKey(t)
	versions := map[string]digest.Digest{}
	for _, v := range []string{"1.0.0", "2.0.0", "3.0.0"} {
		desc, err := c.Push(ctx, mustParse(t, host+"/charts/demo"), testArtifact(t, "demo", v))
		if err != nil {
			t.Fatal(err)
		}
		versions[v] = desc.Digest
	}

	// Signing a tag signs its digest.
	d, err := c.Sign(ctx, mustParse(t, host+"/charts/demo:1.0.0"), key.signer, SignOptions{Annotations: map[string]string{"ci": "42"}})
	if err != nil || d != versions["1.0.0"] {
		t.Fatalf("Sign 1.0.0 = %s, %v; want %s", d, err, versions["1.0.0"])
	}
	// By digest, as a referrer.
	if _, err := c.Sign(ctx, mustParse(t, host+"/charts/demo@"+versions["2.0.0"].String()), key.signer, SignOptions{Referrer: true}); err != nil {
		t.Fatalf("Sign 2.0.0 as a referrer: %v", err)
	}

	untrusted := signingtest.Untrusted("charts/demo", other.public)
	tests := []struct {
		version  string
		keys     []testKey
		verified bool
		kind     signing.Kind
		reason   string
	}{
		{"1.0.0", []testKey{key}, true, signing.KindTag, ""},
		{"1.0.0", []testKey{other, key}, true, signing.KindTag, ""},
		{"2.0.0", []testKey{key}, true, signing.KindReferrer, ""},
		{"1.0.0", []testKey{other}, false, signing.KindTag, untrusted},
		{"2.0.0", []testKey{other}, false, signing.KindReferrer, untrusted},
		{"3.0.0", []testKey{key}, false, "", "no signature"},
	}
	for _, tt := range tests {
		keys := make([]signing.Key, len(tt.keys))
		for i, k := range tt.keys {
			keys[i] = k.public
		}
		rep, err := c.VerifyKeys(ctx, mustParse(t, host+"/charts/demo:"+tt.version), keys)
		if err != nil {
			t.Fatalf("VerifyKeys %s: %v", tt.version, err)
		}
		if rep.Subject != versions[tt.version].String() || rep.Verified() != tt.verified || rep.Reason() != tt.reason {
			t.Errorf("%s with %d keys: subject %s verified %v reason %q; want %v %q", tt.version, len(keys), rep.Subject, rep.Verified(), rep.Reason(), tt.verified, tt.reason)
		}
		if tt.kind != "" && (len(rep.Signatures) != 1 || rep.Signatures[0].Kind != tt.kind) {
			t.Errorf("%s: signatures %+v, want one found by %s", tt.version, rep.Signatures, tt.kind)
		}
		if s, ok := rep.VerifiedBy(); tt.verified && (!ok || s.KeyID != key.signer.KeyID) {
			t.Errorf("%s: verified by %+v, want %s", tt.version, s, key.signer.KeyID)
		}
	}
	// Verify with a policy that does not cover the repository.
	rep, err := c.Verify(ctx, mustParse(t, host+"/charts/demo:1.0.0"), policyOf("other/*", false, key))
	if err != nil || rep.Verified() || rep.Reason() != "no trust policy covers charts/demo" {
		t.Errorf("Verify outside the policy: %+v, %v", rep, err)
	}

	for _, tt := range []struct {
		ref  string
		want error
		msg  string
	}{
		{host + "/charts/demo:9.9.9", ErrNotFound, "sign " + host + "/charts/demo:9.9.9: not found"},
		{host + "/charts/demo", ErrInvalidReference, "give a version"},
	} {
		_, err := c.Sign(ctx, mustParse(t, tt.ref), key.signer, SignOptions{})
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("Sign %s: %v, want %v containing %q", tt.ref, err, tt.want, tt.msg)
		}
		if _, err := c.VerifyKeys(ctx, mustParse(t, tt.ref), []signing.Key{key.public}); !errors.Is(err, tt.want) {
			t.Errorf("VerifyKeys %s: %v, want %v", tt.ref, err, tt.want)
		}
	}
	if _, err := c.Sign(ctx, mustParse(t, host+"/charts/demo:1.0.0"), nil, SignOptions{}); err == nil {
		t.Error("Sign with no signer succeeded")
	}
}

func TestPullTrustPolicy(t *testing.T) {
	ctx := context.Background()
	var contentGets atomic.Int32
	art := testArtifact(t, "demo", "1.0.0")
	host := newSigningRegistry(t, nil, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+art.ContentDesc.Digest.String()) {
				contentGets.Add(1)
			}
			next.ServeHTTP(w, r)
		})
	})
	key, other := newTestKey(t), newTestKey(t)
	pusher := newTestClient(t, Options{})
	for _, repo := range []string{"stable/demo", "relaxed/demo", "open/demo"} {
		if _, err := pusher.Push(ctx, mustParse(t, host+"/"+repo), testArtifact(t, "demo", "1.0.0")); err != nil {
			t.Fatal(err)
		}
	}
	policy := signing.NewPolicyOf(
		signing.Rule{Repositories: []string{"stable/*"}, Keys: []signing.Key{key.public}, Require: true},
		signing.Rule{Repositories: []string{"relaxed/*"}, Keys: []signing.Key{key.public}},
	)
	c := newTestClient(t, Options{TrustPolicy: policy})

	// Unsigned, or signed by another key, in stable: refused before any content is read.
	for _, signer := range []*testKey{nil, &other} {
		if signer != nil {
			if _, err := pusher.Sign(ctx, mustParse(t, host+"/stable/demo:1.0.0"), signer.signer, SignOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		pkg, err := c.Pull(ctx, mustParse(t, host+"/stable/demo:1.0.0"))
		want := "pull " + host + "/stable/demo:1.0.0: refused: no signature verified by the trust policy for stable/*: "
		if !errors.Is(err, ErrUnverified) || !strings.HasPrefix(err.Error(), want) || pkg != nil {
			t.Errorf("Pull of an unverified version: %v, want ErrUnverified starting %q", err, want)
		}
	}
	if n := contentGets.Load(); n != 0 {
		t.Errorf("refused pulls downloaded the content %d times", n)
	}
	if _, err := pusher.Sign(ctx, mustParse(t, host+"/stable/demo:1.0.0"), key.signer, SignOptions{}); err != nil {
		t.Fatal(err)
	}
	pkg, err := c.Pull(ctx, mustParse(t, host+"/stable/demo:1.0.0"))
	if err != nil {
		t.Fatalf("Pull of a verified version: %v", err)
	}
	if s, ok := pkg.Signatures.VerifiedBy(); !ok || s.KeyID != key.signer.KeyID || len(pkg.Content) == 0 {
		t.Errorf("Pull of a verified version: signatures %+v", pkg.Signatures)
	}

	// require: false reports and pulls; no policy: no check.
	pkg, err = c.Pull(ctx, mustParse(t, host+"/relaxed/demo:1.0.0"))
	if err != nil || pkg.Signatures == nil || pkg.Signatures.Verified() || pkg.Signatures.Reason() != "no signature" {
		t.Errorf("Pull where signatures are not required: %v, %+v", err, pkg)
	}
	pkg, err = c.Pull(ctx, mustParse(t, host+"/open/demo:1.0.0"))
	if err != nil || pkg.Signatures != nil {
		t.Errorf("Pull outside the policy: %v, signatures %+v", err, pkg)
	}
	// Inspect does not check.
	if _, err := newTestClient(t, Options{TrustPolicy: policyOf("*/*", true, other)}).Inspect(ctx, mustParse(t, host+"/open/demo:1.0.0")); err != nil {
		t.Errorf("Inspect under a policy: %v", err)
	}
}

func TestPushSigned(t *testing.T) {
	ctx := context.Background()
	key, other := newTestKey(t), newTestKey(t)
	host := newSigningRegistry(t, policyOf("stable/*", true, key), nil)
	c := newTestClient(t, Options{})
	art := testArtifact(t, "demo", "1.0.0")

	_, err := c.Push(ctx, mustParse(t, host+"/stable/demo"), art)
	want := "push " + host + "/stable/demo:1.0.0: denied: stable/demo:1.0.0: " + art.ManifestDesc.Digest.String() + " has no signature verified"
	if !errors.Is(err, ErrDenied) || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("unsigned Push into stable: %v, want ErrDenied starting %q", err, want)
	}
	_, err = c.PushSigned(ctx, mustParse(t, host+"/stable/demo"), art, other.signer, SignOptions{})
	if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "push "+host+"/stable/demo:1.0.0: tag: denied: ") ||
		!strings.Contains(err.Error(), "not signed by a key trusted for stable/demo") {
		t.Fatalf("PushSigned with an untrusted key: %v", err)
	}
	for _, opts := range []SignOptions{{}, {Referrer: true}} {
		desc, err := c.PushSigned(ctx, mustParse(t, host+"/stable/demo"), art, key.signer, opts)
		if err != nil || desc.Digest != art.ManifestDesc.Digest {
			t.Fatalf("PushSigned (referrer %v): %s, %v", opts.Referrer, desc.Digest, err)
		}
	}
	rep, err := c.VerifyKeys(ctx, mustParse(t, host+"/stable/demo:1.0.0"), []signing.Key{key.public})
	if err != nil {
		t.Fatal(err)
	}
	verified := map[signing.Kind]bool{}
	for _, s := range rep.Signatures {
		verified[s.Kind] = verified[s.Kind] || s.Verified
	}
	if !verified[signing.KindTag] || !verified[signing.KindReferrer] {
		t.Errorf("Verify after PushSigned: %+v; want verified signatures by tag and by referrer", rep.Signatures)
	}
	if _, err := c.PushSigned(ctx, mustParse(t, host+"/stable/demo"), art, nil, SignOptions{}); err == nil {
		t.Error("PushSigned with no signer succeeded")
	}
	// Elsewhere PushSigned is Push and a signature.
	if _, err := c.PushSigned(ctx, mustParse(t, host+"/incubator/demo:1.0.0"), art, other.signer, SignOptions{}); err != nil {
		t.Errorf("PushSigned outside the policy: %v", err)
	}
}

// TestPushSignedAttestations: PushSigned attests before it tags, so that a
// registry whose policy requires provenance from allowed sources tags the
// version only when its attestation names them.
func TestPushSignedAttestations(t *testing.T) {
	ctx := context.Background()
	key := newTestKey(t)
	policy := signing.NewPolicyOf(signing.Rule{Repositories: []string{"stable/*"}, Keys: []signing.Key{key.public}, Require: true,
		RequireSource: []string{"https://github.com/org/*"}})
	host := newSigningRegistry(t, policy, nil)
	c := newTestClient(t, Options{})
	provenance := func(art *pkgformat.Artifact, uris ...string) [][]byte {
		p := signing.Provenance{BuilderID: "https://berth.example"}
		for _, u := range uris {
			p.Sources = append(p.Sources, signing.ProvenanceSource{Kind: "git", URI: u, Revision: strings.Repeat("b", 40)})
		}
		st, err := signing.ProvenanceStatement("stable/demo", art.ManifestDesc.Digest, p)
		if err != nil {
			t.Fatal(err)
		}
		return [][]byte{st}
	}

	for _, tt := range []struct {
		version string
		sources []string
		want    string
	}{
		{"1.0.0", nil, "no verified SLSA provenance attestation; the trust policy for stable/* requires one naming a source in https://github.com/org/*"},
		{"1.0.1", []string{"https://github.com/org/demo", "https://evil.example/demo"},
			"provenance names source https://evil.example/demo, not allowed by the trust policy for stable/* (requireSource: https://github.com/org/*)"},
	} {
		art := testArtifact(t, "demo", tt.version)
		var atts [][]byte
		if tt.sources != nil {
			atts = provenance(art, tt.sources...)
		}
		_, err := c.PushSigned(ctx, mustParse(t, host+"/stable/demo"), art, key.signer, SignOptions{Attestations: atts})
		if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("PushSigned %s from %q: %v, want ErrDenied naming %q", tt.version, tt.sources, err, tt.want)
		}
	}

	art := testArtifact(t, "demo", "2.0.0")
	for range 2 { // pushing again attests nothing new
		if _, err := c.PushSigned(ctx, mustParse(t, host+"/stable/demo"), art, key.signer, SignOptions{Attestations: provenance(art, "git+https://github.com/org/demo@refs/tags/v2.0.0")}); err != nil {
			t.Fatalf("PushSigned from an allowed source: %v", err)
		}
	}
	rep, err := c.Verify(ctx, mustParse(t, host+"/stable/demo:2.0.0"), policy)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := rep.Provenance()
	if !rep.Verified() || !ok || len(rep.Attestations) != 1 || a.Kind != signing.KindTag || fmt.Sprint(a.Sources) != "[https://github.com/org/demo]" {
		t.Errorf("Verify: verified %v (%s), attestations %+v; want one verified provenance from https://github.com/org/demo", rep.Verified(), rep.Reason(), rep.Attestations)
	}
	refs, err := c.Fetcher(host).Referrers(ctx, "stable/demo", art.ManifestDesc.Digest.String())
	if err != nil || !slices.ContainsFunc(refs, func(d ocispec.Descriptor) bool { return d.Digest.String() == a.Digest }) {
		t.Errorf("referrers %+v, %v; want the attestation manifest %s", refs, err, a.Digest)
	}

	// Sign attests a version already tagged.
	if _, err := c.Sign(ctx, mustParse(t, host+"/stable/demo:2.0.0"), key.signer, SignOptions{Attestations: [][]byte{[]byte(`{"subject":[]}`)}}); err == nil ||
		!strings.Contains(err.Error(), "attest "+host+"/stable/demo@"+art.ManifestDesc.Digest.String()+": attestation 1: not an in-toto statement") {
		t.Errorf("Sign with a bad statement: %v", err)
	}
}
