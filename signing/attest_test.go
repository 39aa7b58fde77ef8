package signing_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/signing"
	"github.com/berth-registry/berth/signing/signingtest"
)

// provenanceOf is berth's SLSA v0.2 statement for subject built from uris.
func provenanceOf(t *testing.T, subject digest.Digest, uris ...string) []byte {
	t.Helper()
	p := signing.Provenance{BuilderID: "https://berth.example"}
	for _, u := range uris {
		p.Sources = append(p.Sources, signing.ProvenanceSource{Kind: "git", URI: u, Revision: strings.Repeat("a", 40)})
	}
	b, err := signing.ProvenanceStatement("stable/op", subject, p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// statementOf is an in-toto statement of subject with a raw predicate.
func statementOf(subject digest.Digest, predicateType, predicate string) []byte {
	return fmt.Appendf(nil, `{"_type":"https://in-toto.io/Statement/v0.1","predicateType":%q,"subject":[{"name":"stable/op","digest":{"sha256":%q}}],"predicate":%s}`,
		predicateType, subject.Encoded(), predicate)
}

// provenanceCase is a version attested by signer with statement, and what
// Check says of it.
type provenanceCase struct {
	name      string
	signer    *signing.Signer // of the attestation; the version is signed by key
	statement func(d digest.Digest) []byte
	verified  bool
	reason    string
	sources   []string
}

func TestAttestRequireSource(t *testing.T) {
	ctx := context.Background()
	r := newTestRegistry(t)
	key, other := signingtest.NewKeyPair(t, ""), signingtest.NewKeyPair(t, "")
	const repo = "stable/op"
	globs := []string{"https://github.com/org/*"}
	policy := signing.NewPolicyOf(signing.Rule{Repositories: []string{"stable/*"}, Keys: []signing.Key{key.Key}, Require: true, RequireSource: globs})
	const noProvenance = "no verified SLSA provenance attestation; the trust policy for stable/* requires one naming a source in https://github.com/org/*"
	outside := func(src string) string {
		return "provenance names source " + src + ", not allowed by the trust policy for stable/* (requireSource: https://github.com/org/*)"
	}
	v1 := func(uris ...string) func(digest.Digest) []byte {
		return func(d digest.Digest) []byte {
			deps := make([]string, len(uris))
			for i, u := range uris {
				deps[i] = fmt.Sprintf(`{"uri":%q}`, u)
			}
			return statementOf(d, signing.PredicateSLSAProvenanceV1,
				`{"buildDefinition":{"buildType":"https://example.com/b","resolvedDependencies":[`+strings.Join(deps, ",")+`]},"runDetails":{"builder":{"id":"https://ci.example.com"}}}`)
		}
	}
	tests := []provenanceCase{
		{"allowed source", key.Signer, func(d digest.Digest) []byte { return provenanceOf(t, d, "https://github.com/org/op") }, true, "", []string{"https://github.com/org/op"}},
		{"git+ and @ref are normalized", key.Signer, func(d digest.Digest) []byte {
			return provenanceOf(t, d, "git+https://github.com/org/op@refs/tags/v1.0.0")
		}, true, "", []string{"https://github.com/org/op"}},
		{"v1 predicate", key.Signer, v1("git+https://github.com/org/op@v1", "https://github.com/org/lib"), true, "", []string{"https://github.com/org/op", "https://github.com/org/lib"}},
		{"v1 predicate outside", key.Signer, v1("https://gitlab.com/x/op"), false, outside("https://gitlab.com/x/op"), []string{"https://gitlab.com/x/op"}},
		{"source outside the globs", key.Signer, func(d digest.Digest) []byte { return provenanceOf(t, d, "http://x/y") }, false, outside("http://x/y"), []string{"http://x/y"}},
		{"composed package with one outside source", key.Signer, func(d digest.Digest) []byte {
			return provenanceOf(t, d, "https://github.com/org/op", "https://evil.example/crds.tgz")
		}, false, outside("https://evil.example/crds.tgz"), []string{"https://github.com/org/op", "https://evil.example/crds.tgz"}},
		{"glob does not cross a slash", key.Signer, func(d digest.Digest) []byte { return provenanceOf(t, d, "https://github.com/org/op/sub") }, false, outside("https://github.com/org/op/sub"), nil},
		{"untrusted key", other.Signer, func(d digest.Digest) []byte { return provenanceOf(t, d, "https://github.com/org/op") }, false,
			noProvenance + " (" + signingtest.Untrusted(repo, key.Key) + ")", nil},
		{"wrong subject", key.Signer, func(digest.Digest) []byte {
			return provenanceOf(t, digest.FromString("another"), "https://github.com/org/op")
		}, false,
			noProvenance + " (payload digest mismatch: the attestation's subjects do not include %s)", nil},
		{"not SLSA", key.Signer, func(d digest.Digest) []byte {
			return statementOf(d, "https://spdx.dev/Document", `{"uri":"https://github.com/org/op"}`)
		}, false, noProvenance, nil},
		{"malformed predicate", key.Signer, func(d digest.Digest) []byte {
			return statementOf(d, signing.PredicateSLSAProvenance, `{"materials":"https://github.com/org/op"}`)
		}, false, noProvenance + " (bad provenance: the SLSA v0.2 predicate cannot be read: json: cannot unmarshal string into Go struct field .materials of type []signing.sourceURI)", nil},
		{"no sources", key.Signer, func(d digest.Digest) []byte {
			return statementOf(d, signing.PredicateSLSAProvenance, `{"materials":[{"digest":{"sha1":"aa"}}]}`)
		}, false, "provenance names no source; the trust policy for stable/* requires one naming a source in https://github.com/org/*", nil},
	}
	many := make([]string, signing.MaxSources+1)
	for i := range many {
		many[i] = fmt.Sprintf("https://github.com/org/op%d", i)
	}
	tests = append(tests, provenanceCase{"too many sources", key.Signer, func(d digest.Digest) []byte { return provenanceOf(t, d, many...) }, false,
		noProvenance + fmt.Sprintf(" (bad provenance: more than %d sources)", signing.MaxSources), nil})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := r.pushManifest(t, repo, tt.name)
			ref := r.host + "/" + repo + "@" + d.String()
			if err := signing.Sign(ctx, key.Signer, ref, signing.SignOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := signing.Attest(ctx, tt.signer, ref, [][]byte{tt.statement(d)}, signing.AttestOptions{}); err != nil {
				t.Fatal(err)
			}
			rep, err := signing.Check(ctx, r.fetcher, policy, repo, d.String())
			if err != nil {
				t.Fatal(err)
			}
			reason := tt.reason
			if strings.Contains(reason, "%s") {
				reason = fmt.Sprintf(reason, d)
			}
			if rep.Verified() != tt.verified || rep.Reason() != reason {
				t.Errorf("verified %v, reason %q; want %v, %q", rep.Verified(), rep.Reason(), tt.verified, reason)
			}
			if len(rep.Attestations) != 1 {
				t.Fatalf("attestations %+v, want one (by tag, not again by referrer)", rep.Attestations)
			}
			if a := rep.Attestations[0]; tt.sources != nil && fmt.Sprint(a.Sources) != fmt.Sprint(tt.sources) {
				t.Errorf("sources %q, want %q", a.Sources, tt.sources)
			}
			err = signing.Admit(ctx, r.fetcher, policy, repo, "1.0.0", d.String())
			if tt.verified != (err == nil) || !tt.verified && !strings.Contains(err.Error(), reason) {
				t.Errorf("Admit: %v; want verified %v, naming %q", err, tt.verified, reason)
			}
		})
	}
}

func TestAttestStoresOneReferrer(t *testing.T) {
	ctx := context.Background()
	r := newTestRegistry(t)
	key, other := signingtest.NewKeyPair(t, ""), signingtest.NewKeyPair(t, "")
	const repo = "stable/op"
	d := r.pushManifest(t, repo, "one referrer")
	ref := r.host + "/" + repo + "@" + d.String()
	first := provenanceOf(t, d, "https://github.com/org/op")
	for _, att := range []struct {
		signer     *signing.Signer
		statements [][]byte
	}{
		{key.Signer, [][]byte{first}},
		{key.Signer, [][]byte{first}}, // again: nothing new
		{other.Signer, [][]byte{first}},
		{key.Signer, [][]byte{provenanceOf(t, d, "https://github.com/org/other")}},
	} {
		if err := signing.Attest(ctx, att.signer, ref, att.statements, signing.AttestOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tagged, err := r.fetcher.Resolve(ctx, repo, signing.AttestationTag(d))
	if err != nil {
		t.Fatal(err)
	}
	refs, err := r.fetcher.Referrers(ctx, repo, d.String())
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, d := range refs {
		listed = listed || d.Digest.String() == tagged && d.ArtifactType == signing.AttestationArtifactType
	}
	if !listed {
		t.Errorf("referrers %+v, want the .att manifest %s, of type %s", refs, tagged, signing.AttestationArtifactType)
	}
	rep, err := signing.Check(ctx, r.fetcher, signing.NewPolicyOf(signing.Rule{Repositories: []string{repo}, Keys: []signing.Key{key.Key, other.Key}}), repo, d.String())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range rep.Attestations {
		if a.Digest != tagged || a.Kind != signing.KindTag || !a.Verified {
			t.Errorf("attestation %+v, want verified in %s", a, tagged)
		}
		got = append(got, a.KeyID[:15]+" "+strings.Join(a.Sources, ","))
	}
	want := []string{key.Key.ID[:15] + " https://github.com/org/op", other.Key.ID[:15] + " https://github.com/org/op", key.Key.ID[:15] + " https://github.com/org/other"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("attestations %q, want %q", got, want)
	}

	for _, tt := range []struct {
		name, ref string
		statement []byte
		want      string
	}{
		{"not a statement", ref, []byte(`{"predicate":{}}`), "attestation 1: not an in-toto statement with a predicateType"},
		{"by tag", r.host + "/" + repo + ":1.0.0", first, "attest by digest"},
		{"no such manifest", r.host + "/" + repo + "@" + digest.FromString("none").String(), first, ""},
	} {
		err := signing.Attest(ctx, key.Signer, tt.ref, [][]byte{tt.statement}, signing.AttestOptions{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}

// TestAttestCosignVerifies: cosign verify-attestation --type slsaprovenance
// verifies what Attest stores, with the public key, and refuses another key.
func TestAttestCosignVerifies(t *testing.T) {
	bin := cosignBin(t)
	ctx := context.Background()
	r := newTestRegistry(t)
	key, other := signingtest.NewKeyPair(t, ""), signingtest.NewKeyPair(t, "")
	d := r.pushManifest(t, "stable/op", "cosign")
	ref := r.host + "/stable/op@" + d.String()
	if err := signing.Attest(ctx, key.Signer, ref, [][]byte{provenanceOf(t, d, "https://github.com/org/op")}, signing.AttestOptions{}); err != nil {
		t.Fatal(err)
	}
	verify := func(pub string) (string, error) {
		cmd := exec.Command(bin, "verify-attestation", "--type", "slsaprovenance", "--key", pub, "--insecure-ignore-tlog", ref)
		cmd.Env = append(cmd.Environ(), "COSIGN_PASSWORD=")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := verify(key.PublicFile); err != nil || !strings.Contains(out, `"predicateType":"https://slsa.dev/provenance/v0.2"`) && !strings.Contains(out, "payload") {
		t.Fatalf("cosign verify-attestation: %v\n%s", err, out)
	}
	if out, err := verify(other.PublicFile); err == nil {
		t.Errorf("cosign verify-attestation with another key succeeded:\n%s", out)
	}
}

// TestCheckSourceGlobsMatchNormalized: every glob config accepts is matched
// against normalized sources.
func TestCheckSourceGlobsMatchNormalized(t *testing.T) {
	for _, tt := range []struct {
		glob, uri string
		match     bool
	}{
		{"https://github.com/org/*", "git+https://github.com/org/op@refs/heads/main", true},
		{"https://github.com/org/*", "https://github.com/org/op.git", true},
		{"https://github.com/org/*", "https://github.com/other/op", false},
		{"http://127.0.0.1:*/allowed/*", "http://127.0.0.1:41234/allowed/op.git", true},
		{"http://127.0.0.1:*/allowed/*", "http://127.0.0.1:41234/other/op.git", false},
		{"oci://quay.io/org/*", "oci://quay.io/org/bundle@sha256:abc", true},
	} {
		if err := config.CheckSourceGlob(tt.glob); err != nil {
			t.Fatalf("%s: %v", tt.glob, err)
		}
		if _, ok := signing.MatchSource([]string{tt.glob}, []string{signing.NormalizeSource(tt.uri)}); ok != tt.match {
			t.Errorf("%s matches %s (%s): %v, want %v", tt.glob, tt.uri, signing.NormalizeSource(tt.uri), ok, tt.match)
		}
	}
}

// TestProvenanceStatementSources: the sources a ProvenanceStatement names
// are what the verifier reads back, an image as oci://<reference>.
func TestProvenanceStatementSources(t *testing.T) {
	ctx := context.Background()
	r := newTestRegistry(t)
	key := signingtest.NewKeyPair(t, "")
	d := r.pushManifest(t, "stable/op", "sources")
	st, err := signing.ProvenanceStatement("stable/op", d, signing.Provenance{BuilderID: "https://berth.example", Sources: []signing.ProvenanceSource{
		{Kind: "git", URI: "https://github.com/org/op", Ref: "refs/heads/main", Revision: strings.Repeat("c", 40), Dir: "deploy"},
		{Kind: "image", URI: "quay.io/org/bundle@sha256:" + strings.Repeat("d", 64), Revision: "sha256:" + strings.Repeat("d", 64), Destination: "bundle"},
		{Kind: "http", URI: "https://example.com/crds.tgz", Revision: `"etag"`, Destination: "crds"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ref := r.host + "/stable/op@" + d.String()
	if err := signing.Attest(ctx, key.Signer, ref, [][]byte{st}, signing.AttestOptions{}); err != nil {
		t.Fatal(err)
	}
	rep, err := signing.Check(ctx, r.fetcher, signing.NewPolicyOf(signing.Rule{Repositories: []string{"stable/*"}, Keys: []signing.Key{key.Key},
		RequireSource: []string{"https://github.com/org/*", "oci://quay.io/org/*", "https://example.com/*"}}), "stable/op", d.String())
	if err != nil {
		t.Fatal(err)
	}
	a, ok := rep.Provenance()
	want := "[https://github.com/org/op oci://quay.io/org/bundle https://example.com/crds.tgz]"
	if !ok || fmt.Sprint(a.Sources) != want {
		t.Errorf("provenance %+v (%v), want sources %s", a, ok, want)
	}
}
