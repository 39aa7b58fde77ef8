package catalog_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/httpapi"
	"github.com/berth-registry/berth/catalog/httpapi/openapitest"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/signing"
	"github.com/berth-registry/berth/signing/signingtest"
)

// trusting is a policy that trusts keys for every package.
func trusting(keys ...signingtest.KeyPair) *signing.Policy {
	r := signing.Rule{Repositories: []string{"*/*"}}
	for _, k := range keys {
		r.Keys = append(r.Keys, k.Key)
	}
	return signing.NewPolicyOf(r)
}

// sign signs repo@dgst with k, under cosign's tag or as a referrer.
func (e *env) sign(k signingtest.KeyPair, repo, dgst string, referrer bool) {
	e.t.Helper()
	if err := signing.Sign(e.ctx, k.Signer, e.host+"/"+repo+"@"+dgst, signing.SignOptions{Referrer: referrer}); err != nil {
		e.t.Fatalf("sign %s@%s: %v", repo, dgst, err)
	}
}

// deleteManifest deletes repo@dgst through the registry API.
func (e *env) deleteManifest(repo, dgst string) {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(e.ctx, http.MethodDelete, "http://"+e.host+"/v2/"+repo+"/manifests/"+dgst, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		e.t.Fatalf("delete %s@%s: %s", repo, dgst, resp.Status)
	}
}

// resolve returns the digest a tag names.
func (e *env) resolve(repo, tag string) string {
	e.t.Helper()
	d, err := e.repo(repo).Resolve(e.ctx, tag)
	if err != nil {
		e.t.Fatalf("resolve %s:%s: %v", repo, tag, err)
	}
	return d.Digest.String()
}

// sigTag is cosign's signature tag of dgst; attTag its attestation tag.
func sigTag(dgst string) string { return strings.Replace(dgst, ":", "-", 1) + ".sig" }
func attTag(dgst string) string { return strings.Replace(dgst, ":", "-", 1) + ".att" }

// version returns the catalog's version detail.
func (e *env) version(ns, name, version string) *apiv1.Version {
	e.t.Helper()
	v, err := e.cat.Version(e.ctx, all, ns, name, version)
	if err != nil {
		e.t.Fatalf("version %s/%s %s: %v", ns, name, version, err)
	}
	return v
}

// waitVersion polls the version's detail until cond holds and returns it.
func (e *env) waitVersion(ns, name, version, what string, cond func(*apiv1.Version) bool) *apiv1.Version {
	e.t.Helper()
	var v *apiv1.Version
	e.waitFor(fmt.Sprintf("%s/%s %s: %s", ns, name, version, what), func() bool {
		got, err := e.cat.Version(e.ctx, all, ns, name, version)
		if err != nil {
			return false
		}
		v = got
		return cond(v)
	})
	return v
}

// checkedUnsigned holds for a version checked and found without signature.
func checkedUnsigned(v *apiv1.Version) bool {
	return !v.Verified && v.VerifiedReason == "no signature" && len(v.Signatures) == 0
}

// smallPackage is a plain package name:version of one file.
func smallPackage(t testing.TB, name, version string) *pkgformat.Package {
	t.Helper()
	p, err := pkgformat.New([]pkgformat.File{{Path: "manifests/cm.yaml", Mode: 0o644, Data: []byte(
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n")}},
		pkgformat.Options{Name: name, Version: version})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// api serves the catalog's HTTP API and validates every exchange against
// the OpenAPI document.
type api struct {
	t   *testing.T
	srv *httptest.Server
}

func newAPI(t *testing.T, e *env) *api {
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Catalog: e.cat}))
	t.Cleanup(srv.Close)
	return &api{t: t, srv: srv}
}

func (a *api) get(path string, into any) {
	a.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, a.srv.URL+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	openapitest.Validate(a.t, req, resp.StatusCode, resp.Header, body)
	if resp.StatusCode != http.StatusOK {
		a.t.Fatalf("GET %s: %s: %s", path, resp.Status, body)
	}
	if err := json.Unmarshal(body, into); err != nil {
		a.t.Fatal(err)
	}
}

func (a *api) search(query string) []string {
	a.t.Helper()
	var res apiv1.SearchResponse
	a.get("/api/v1/packages?"+query, &res)
	var out []string
	for _, p := range res.Packages {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

// TestSignaturesFollowEvents signs a version, signs it again with an
// untrusted key, and deletes the signatures, through the registry: the
// catalog's verdict follows each step from the registry's events.
func TestSignaturesFollowEvents(t *testing.T) {
	a, b := signingtest.NewKeyPair(t, ""), signingtest.NewKeyPair(t, "")
	metrics := prometheus.NewRegistry()
	e := newEnv(t, envOptions{policy: trusting(a), metrics: metrics})
	api := newAPI(t, e)
	p := load(t, "kudo/cowsay/0.2.0")
	dgst := e.pushPackage("signed", p)
	e.pushPackage("plain", p)

	v := e.waitVersion("signed", "cowsay", "0.2.0", "checked, unsigned", checkedUnsigned)
	if len(v.Attestations) != 0 {
		t.Errorf("attestations of an unsigned version: %+v", v.Attestations)
	}

	e.sign(a, "signed/cowsay", dgst, false)
	v = e.waitVersion("signed", "cowsay", "0.2.0", "verified", func(v *apiv1.Version) bool { return v.Verified })
	sigDigest := e.resolve("signed/cowsay", sigTag(dgst))
	if len(v.Signatures) != 1 {
		t.Fatalf("signatures = %+v, want one", v.Signatures)
	}
	s := v.Signatures[0]
	if s.Kind != apiv1.KindTag || s.KeyID != a.Key.ID || !s.Verified || s.Reason != "" || s.Digest != sigDigest || s.Layer == "" || s.Checked.IsZero() {
		t.Errorf("signature = %+v, want a verified tag signature by %s in %s", s, a.Key.ID, sigDigest)
	}
	if v.VerifiedReason != "" {
		t.Errorf("verifiedReason of a verified version = %q", v.VerifiedReason)
	}
	// Summaries and searches agree, through the HTTP API.
	var doc apiv1.Version
	api.get("/api/v1/packages/signed/cowsay/versions/0.2.0", &doc)
	if !doc.Verified || len(doc.Signatures) != 1 || doc.Signatures[0].KeyID != a.Key.ID {
		t.Errorf("version document: %+v", doc)
	}
	var pkgDoc apiv1.Package
	api.get("/api/v1/packages/signed/cowsay", &pkgDoc)
	if !pkgDoc.Verified || len(pkgDoc.Versions) != 1 || !pkgDoc.Versions[0].Verified {
		t.Errorf("package document: verified %v, versions %+v", pkgDoc.Verified, pkgDoc.Versions)
	}
	if got := api.search("q=cowsay&verified=true"); !slices.Equal(got, []string{"signed/cowsay"}) {
		t.Errorf("verified=true: %v", got)
	}
	if got := api.search("q=cowsay&verified=false"); !slices.Equal(got, []string{"plain/cowsay"}) {
		t.Errorf("verified=false: %v", got)
	}
	for result, atLeast := range map[string]float64{"verified": 1, "unverified": 2} {
		n := counterValue(t, metrics, "berth_catalog_signatures_checked_total", result)
		if n < atLeast {
			t.Errorf("berth_catalog_signatures_checked_total{result=%q} = %v, want at least %v", result, n, atLeast)
		}
	}

	// Signed again, by a key the policy does not trust: cosign adds the
	// signature to the same tag, and the version stays verified by the first.
	e.sign(b, "signed/cowsay", dgst, false)
	v = e.waitVersion("signed", "cowsay", "0.2.0", "two signatures", func(v *apiv1.Version) bool { return len(v.Signatures) == 2 })
	var good, bad int
	for _, s := range v.Signatures {
		switch {
		case s.Verified && s.KeyID == a.Key.ID:
			good++
		case !s.Verified && s.KeyID == "" && s.Reason == signingtest.Untrusted("signed/cowsay", a.Key):
			bad++
		}
	}
	if good != 1 || bad != 1 || !v.Verified {
		t.Errorf("after an untrusted signature: verified %v, signatures %+v", v.Verified, v.Signatures)
	}

	// The signature manifest deleted: the tag goes with it, and the verdict.
	e.deleteManifest("signed/cowsay", e.resolve("signed/cowsay", sigTag(dgst)))
	e.waitVersion("signed", "cowsay", "0.2.0", "unsigned again", checkedUnsigned)
	if got := api.search("q=cowsay&verified=true"); len(got) != 0 {
		t.Errorf("verified=true after the signature went: %v", got)
	}
}

// counterValue returns the value of the counter name{result=result} of reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if mf.GetName() == name && l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{result=%q}", name, result)
	return 0
}

// TestUntrustedSignatures: a signature by a key the policy does not trust,
// and any signature without a policy, verify nothing, and say why.
func TestUntrustedSignatures(t *testing.T) {
	a, b := signingtest.NewKeyPair(t, ""), signingtest.NewKeyPair(t, "")
	for _, tc := range []struct {
		name   string
		policy *signing.Policy
		reason string
	}{
		{"untrusted key", trusting(a), signingtest.Untrusted("ns/cowsay", a.Key)},
		{"no policy", nil, "no trust policy covers ns/cowsay"},
		{"policy for other repositories", signing.NewPolicyOf(signing.Rule{Repositories: []string{"other/*"}, Keys: []signing.Key{b.Key}}), "no trust policy covers ns/cowsay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{policy: tc.policy})
			dgst := e.pushPackage("ns", load(t, "kudo/cowsay/0.2.0"))
			e.waitVersion("ns", "cowsay", "0.2.0", "checked", checkedUnsigned)
			e.sign(b, "ns/cowsay", dgst, false)
			v := e.waitVersion("ns", "cowsay", "0.2.0", "a signature", func(v *apiv1.Version) bool { return len(v.Signatures) == 1 })
			s := v.Signatures[0]
			if v.Verified || s.Verified || s.KeyID != "" || s.Kind != apiv1.KindTag || s.Reason != tc.reason {
				t.Errorf("verified %v, signature %+v; want not verified because %q", v.Verified, s, tc.reason)
			}
			if v.VerifiedReason != s.Reason {
				t.Errorf("verifiedReason %q, want the signature's reason %q", v.VerifiedReason, s.Reason)
			}
		})
	}
}

// TestReferrerSignature: a signature stored as an OCI referrer (no tag) is
// found through the registry's referrers API, and its deletion is followed.
func TestReferrerSignature(t *testing.T) {
	a := signingtest.NewKeyPair(t, "")
	e := newEnv(t, envOptions{policy: trusting(a)})
	api := newAPI(t, e)
	dgst := e.pushPackage("signed", load(t, "kudo/cowsay/0.2.0"))
	e.waitVersion("signed", "cowsay", "0.2.0", "checked", checkedUnsigned)
	e.sign(a, "signed/cowsay", dgst, true)
	v := e.waitVersion("signed", "cowsay", "0.2.0", "verified", func(v *apiv1.Version) bool { return v.Verified })
	if len(v.Signatures) != 1 || v.Signatures[0].Kind != apiv1.KindReferrer || v.Signatures[0].KeyID != a.Key.ID {
		t.Fatalf("signatures = %+v, want one referrer by %s", v.Signatures, a.Key.ID)
	}
	var doc apiv1.Version
	api.get("/api/v1/packages/signed/cowsay/versions/0.2.0", &doc)
	if !doc.Verified || doc.Signatures[0].Kind != "referrer" {
		t.Errorf("version document: %+v", doc)
	}
	if _, err := e.repo("signed/cowsay").Resolve(e.ctx, sigTag(dgst)); err == nil {
		t.Errorf("a referrer signature left cosign's tag %s", sigTag(dgst))
	}
	e.deleteManifest("signed/cowsay", v.Signatures[0].Digest)
	e.waitVersion("signed", "cowsay", "0.2.0", "unsigned again", checkedUnsigned)
}

// TestGarbageUnderSignatureTags: what is not a cosign signature, pushed
// under cosign's tags, verifies nothing and breaks nothing.
func TestGarbageUnderSignatureTags(t *testing.T) {
	a := signingtest.NewKeyPair(t, "")
	e := newEnv(t, envOptions{policy: trusting(a)})
	p := load(t, "kudo/cowsay/0.2.0")
	dgst := e.pushPackage("ns", p)
	other := e.pushPackage("ns", smallPackage(t, "cowsay", "9.9.9"))
	e.waitVersion("ns", "cowsay", "0.2.0", "checked", checkedUnsigned)
	for _, tc := range []struct {
		name   string
		push   func()
		reason string
	}{
		{"a file pushed by oras", func() {
			e.pushArtifact("ns/cowsay", sigTag(dgst), "", ocispec.MediaTypeEmptyJSON, []byte("{}"), layer{"text/plain", []byte("not a signature")})
		}, "layer " + digest.FromString("not a signature").String() + ` is "text/plain", not a cosign signature`},
		{"a signature layer without its signature", func() {
			e.pushArtifact("ns/cowsay", sigTag(dgst), "", ocispec.MediaTypeImageConfig, []byte("{}"), layer{signing.SimpleSigningMediaType, []byte(`{"critical":{}}`)})
		}, "bad signature: no dev.cosignproject.cosign/signature annotation"},
		{"a signature over another digest", func() {
			e.sign(a, "ns/cowsay", other, false)
			// The other version's signature manifest, under this version's tag.
			m := e.fetchManifest("ns/cowsay", e.resolve("ns/cowsay", sigTag(other)))
			e.pushManifest("ns/cowsay", sigTag(dgst), ocispec.MediaTypeImageManifest, m)
		}, "payload digest mismatch: the signature is for " + other + ", not " + dgst},
		{"an image index", func() {
			idx, _ := json.Marshal(ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{}})
			e.pushManifest("ns/cowsay", sigTag(dgst), ocispec.MediaTypeImageIndex, idx)
		}, "not a cosign signature manifest: no layers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.push()
			sig := e.resolve("ns/cowsay", sigTag(dgst))
			v := e.waitVersion("ns", "cowsay", "0.2.0", "the garbage checked", func(v *apiv1.Version) bool {
				return len(v.Signatures) == 1 && v.Signatures[0].Digest == sig
			})
			if v.Verified || v.Signatures[0].Verified || v.Signatures[0].Reason != tc.reason || v.VerifiedReason != tc.reason {
				t.Errorf("verified %v, reason %q, signature %+v; want not verified because %q", v.Verified, v.VerifiedReason, v.Signatures[0], tc.reason)
			}
			if en := e.entry("ns", "cowsay", sigTag(dgst)); en == nil || en.Status != apiv1.StatusIgnored {
				t.Errorf("the signature tag is recorded as %+v, want ignored", en)
			}
		})
	}
	// The catalog goes on: a new version is indexed, checked and verified.
	next := e.pushPackage("ns", smallPackage(t, "cowsay", "1.0.0"))
	e.sign(a, "ns/cowsay", next, false)
	e.waitVersion("ns", "cowsay", "1.0.0", "verified", func(v *apiv1.Version) bool { return v.Verified })
}

// fetchManifest returns the bytes of repo@dgst.
func (e *env) fetchManifest(repo, dgst string) []byte {
	e.t.Helper()
	_, rc, err := e.repo(repo).FetchReference(e.ctx, dgst)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// attest pushes an attestation of repo@subject under cosign's .att tag as
// cosign attest writes it: an in-toto statement of predicateType about
// statementSubject, in a DSSE envelope signed by k.
func (e *env) attest(k signingtest.KeyPair, repo, subject, statementSubject, predicateType string) string {
	e.t.Helper()
	d := digest.Digest(statementSubject)
	statement, _ := json.Marshal(map[string]any{
		"_type":         "https://in-toto.io/Statement/v0.1",
		"predicateType": predicateType,
		"subject":       []map[string]any{{"name": repo, "digest": map[string]string{d.Algorithm().String(): d.Encoded()}}},
		"predicate":     map[string]any{"builder": map[string]string{"id": "https://ci.example.com"}},
	})
	const payloadType = "application/vnd.in-toto+json"
	pae := fmt.Appendf(nil, "DSSEv1 %d %s %d %s", len(payloadType), payloadType, len(statement), statement)
	sig, err := k.Signer.SignMessage(bytes.NewReader(pae))
	if err != nil {
		e.t.Fatal(err)
	}
	envelope, _ := json.Marshal(map[string]any{
		"payloadType": payloadType,
		"payload":     base64.StdEncoding.EncodeToString(statement),
		"signatures":  []map[string]string{{"keyid": "", "sig": base64.StdEncoding.EncodeToString(sig)}},
	})
	r := e.repo(repo)
	l := e.blob(r, signing.DSSEMediaType, envelope)
	l.Annotations = map[string]string{signing.PredicateTypeAnnotation: predicateType}
	m := ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		Config: e.blob(r, ocispec.MediaTypeImageConfig, []byte("{}")), Layers: []ocispec.Descriptor{l},
	}
	b, _ := json.Marshal(m)
	return e.pushManifest(repo, attTag(subject), ocispec.MediaTypeImageManifest, b)
}

// TestAttestations: attestations are listed with their predicate type and
// verdict, and do not make a version verified on their own.
func TestAttestations(t *testing.T) {
	a, b := signingtest.NewKeyPair(t, ""), signingtest.NewKeyPair(t, "")
	e := newEnv(t, envOptions{policy: trusting(a)})
	api := newAPI(t, e)
	dgst := e.pushPackage("ns", load(t, "kudo/cowsay/0.2.0"))
	e.waitVersion("ns", "cowsay", "0.2.0", "checked", checkedUnsigned)
	const slsa = "https://slsa.dev/provenance/v0.2"
	att := e.attest(a, "ns/cowsay", dgst, dgst, slsa)
	v := e.waitVersion("ns", "cowsay", "0.2.0", "an attestation", func(v *apiv1.Version) bool { return len(v.Attestations) == 1 })
	at := v.Attestations[0]
	if at.PredicateType != slsa || !at.Verified || at.KeyID != a.Key.ID || at.Kind != apiv1.KindTag || at.Digest != att || at.Checked.IsZero() {
		t.Errorf("attestation = %+v, want a verified %s by %s in %s", at, slsa, a.Key.ID, att)
	}
	if v.Verified || v.VerifiedReason != "no signature" || len(v.Signatures) != 0 {
		t.Errorf("an attested, unsigned version: verified %v (%q), signatures %+v", v.Verified, v.VerifiedReason, v.Signatures)
	}
	var doc apiv1.Version
	api.get("/api/v1/packages/ns/cowsay/versions/0.2.0", &doc)
	if len(doc.Attestations) != 1 || doc.Attestations[0].PredicateType != slsa {
		t.Errorf("version document attestations: %+v", doc.Attestations)
	}

	// Replaced by one of an untrusted key, then one about another digest.
	for _, tc := range []struct {
		key     signingtest.KeyPair
		subject string
		reason  string
	}{
		{b, dgst, signingtest.Untrusted("ns/cowsay", a.Key)},
		{a, digest.FromString("other").String(), "payload digest mismatch: the attestation's subjects do not include " + dgst},
	} {
		att := e.attest(tc.key, "ns/cowsay", dgst, tc.subject, "https://spdx.dev/Document")
		v := e.waitVersion("ns", "cowsay", "0.2.0", "the new attestation", func(v *apiv1.Version) bool {
			return len(v.Attestations) == 1 && v.Attestations[0].Digest == att
		})
		if at := v.Attestations[0]; at.Verified || at.PredicateType != "https://spdx.dev/Document" || at.Reason != tc.reason {
			t.Errorf("attestation = %+v, want not verified because %q", at, tc.reason)
		}
	}
}

// TestSearchVerified: the verified filter of searches follows real
// signatures, by the latest version of each package.
func TestSearchVerified(t *testing.T) {
	a := signingtest.NewKeyPair(t, "")
	e := newEnv(t, envOptions{policy: trusting(a)})
	api := newAPI(t, e)
	d1 := e.pushPackage("ns", smallPackage(t, "alpha", "1.0.0"))
	e.pushPackage("ns", smallPackage(t, "beta", "1.0.0"))
	d3 := e.pushPackage("ns", smallPackage(t, "gamma", "1.0.0"))
	e.pushPackage("ns", smallPackage(t, "gamma", "2.0.0"))
	e.sign(a, "ns/alpha", d1, false)
	e.sign(a, "ns/gamma", d3, true) // an older version: gamma's latest is unsigned
	e.waitVersion("ns", "alpha", "1.0.0", "verified", func(v *apiv1.Version) bool { return v.Verified })
	e.waitVersion("ns", "gamma", "1.0.0", "verified", func(v *apiv1.Version) bool { return v.Verified })
	e.waitVersion("ns", "gamma", "2.0.0", "checked", checkedUnsigned)
	e.waitVersion("ns", "beta", "1.0.0", "checked", checkedUnsigned)
	if got := api.search("verified=true"); !slices.Equal(got, []string{"ns/alpha"}) {
		t.Errorf("verified=true: %v, want ns/alpha", got)
	}
	if got := api.search("verified=false"); !slices.Equal(got, []string{"ns/beta", "ns/gamma"}) {
		t.Errorf("verified=false: %v, want ns/beta, ns/gamma", got)
	}
	var p apiv1.Package
	api.get("/api/v1/packages/ns/gamma", &p)
	if p.Verified || len(p.Versions) != 2 || p.Versions[0].Verified || !p.Versions[1].Verified {
		t.Errorf("gamma: verified %v, versions %+v; want only 1.0.0 verified", p.Verified, p.Versions)
	}
}

// TestPolicyChangeRechecksAtStart: a catalog started with another trust
// policy checks every version again, with nothing pushed.
func TestPolicyChangeRechecksAtStart(t *testing.T) {
	a, b := signingtest.NewKeyPair(t, ""), signingtest.NewKeyPair(t, "")
	e := newEnv(t, envOptions{policy: trusting(a)})
	dgst := e.pushPackage("ns", load(t, "kudo/cowsay/0.2.0"))
	e.pushPackage("ns", smallPackage(t, "other", "1.0.0"))
	e.sign(a, "ns/cowsay", dgst, false)
	e.waitVersion("ns", "cowsay", "0.2.0", "verified by a", func(v *apiv1.Version) bool { return v.Verified })

	e.restart(trusting(b))
	v := e.waitVersion("ns", "cowsay", "0.2.0", "not verified under a policy trusting b", func(v *apiv1.Version) bool { return !v.Verified })
	if v.VerifiedReason != signingtest.Untrusted("ns/cowsay", b.Key) || len(v.Signatures) != 1 || v.Signatures[0].Verified {
		t.Errorf("under b: reason %q, signatures %+v", v.VerifiedReason, v.Signatures)
	}
	e.waitVersion("ns", "other", "1.0.0", "checked under b", checkedUnsigned)

	e.restart(trusting(b, a))
	v = e.waitVersion("ns", "cowsay", "0.2.0", "verified again", func(v *apiv1.Version) bool { return v.Verified })
	if v.Signatures[0].KeyID != a.Key.ID {
		t.Errorf("verified by %s, want %s", v.Signatures[0].KeyID, a.Key.ID)
	}

	// The same policy again: nothing is checked at start. The view is
	// taken once the start's checks of both versions are done.
	policy := trusting(b, a).Fingerprint()
	var checks []catalog.SignatureCheck
	e.waitFor("both versions checked under b and a", func() bool {
		var err error
		checks, err = e.store.SignatureChecks(e.ctx, "", "", "")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range checks {
			if c.Policy != policy {
				return false
			}
		}
		return len(checks) == 2
	})
	e.restart(trusting(b, a))
	rep, err := e.cat.CheckSignatures(e.ctx, false)
	if err != nil || rep.Checked != 0 {
		t.Errorf("checks of the versions already checked under the policy: %+v, %v", rep, err)
	}
	again, err := e.store.SignatureChecks(e.ctx, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	for i := range checks {
		if !again[i].Checked.Equal(checks[i].Checked) {
			t.Errorf("%s checked again at start under the same policy", checks[i].Digest)
		}
	}
}

// TestReconcileFindsLostSignatures: with every event lost, reconciliations
// find signatures: a tag's by the tag listing, a referrer's by the periodic
// check of every version.
func TestReconcileFindsLostSignatures(t *testing.T) {
	a := signingtest.NewKeyPair(t, "")
	e := newEnv(t, envOptions{lose: true, policy: trusting(a)})
	tagged := e.pushPackage("ns", smallPackage(t, "tagged", "1.0.0"))
	referred := e.pushPackage("ns", smallPackage(t, "referred", "1.0.0"))
	if _, err := e.cat.Reconcile(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.waitVersion("ns", "tagged", "1.0.0", "checked", checkedUnsigned)
	e.waitVersion("ns", "referred", "1.0.0", "checked", checkedUnsigned)

	e.sign(a, "ns/tagged", tagged, false)
	e.sign(a, "ns/referred", referred, true)
	st, err := e.cat.Reconcile(e.ctx)
	if err != nil || st.Indexed != 1 {
		t.Fatalf("reconcile: %+v, %v; want the signature tag indexed", st, err)
	}
	e.waitVersion("ns", "tagged", "1.0.0", "verified", func(v *apiv1.Version) bool { return v.Verified })
	if v := e.version("ns", "referred", "1.0.0"); v.Verified {
		t.Fatal("a referrer signature found without a check of every version: the test proves nothing")
	}
	rep, err := e.cat.CheckSignatures(e.ctx, true)
	if err != nil || rep.Checked != 2 || rep.Changed != 1 || rep.Failed != 0 {
		t.Errorf("check of every version: %+v, %v; want 2 checked, 1 changed", rep, err)
	}
	if v := e.version("ns", "referred", "1.0.0"); !v.Verified || v.Signatures[0].Kind != apiv1.KindReferrer {
		t.Errorf("referred after the check of every version: %+v", v)
	}

	// The signature tag deleted, the event lost: the tag listing notices.
	e.deleteManifest("ns/tagged", e.resolve("ns/tagged", sigTag(tagged)))
	if st, err := e.cat.Reconcile(e.ctx); err != nil || st.Removed != 1 {
		t.Fatalf("reconcile: %+v, %v; want the signature tag removed", st, err)
	}
	e.waitVersion("ns", "tagged", "1.0.0", "unsigned again", checkedUnsigned)
}

// TestWebhookReferrers: distribution's webhooks say neither what a manifest
// pushed by digest refers to nor what a deleted one did; the catalog reads
// the first and remembers the second.
func TestWebhookReferrers(t *testing.T) {
	a := signingtest.NewKeyPair(t, "")
	e := newEnv(t, envOptions{lose: true, policy: trusting(a)})
	dgst := e.pushPackage("ns", load(t, "kudo/cowsay/0.2.0"))
	if _, err := e.cat.Reconcile(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.waitVersion("ns", "cowsay", "0.2.0", "checked", checkedUnsigned)
	e.sign(a, "ns/cowsay", dgst, true)
	refs, err := e.reg.Referrers(e.ctx, "ns/cowsay", digest.Digest(dgst), "")
	if err != nil || len(refs) != 1 {
		t.Fatalf("referrers: %v, %v", refs, err)
	}
	// As httpapi passes on a webhook's push by digest.
	if err := e.cat.Ingest(e.ctx, []catalog.Event{{Action: catalog.EventPush, Repository: "ns/cowsay", Digest: refs[0].Digest.String(), MediaType: ocispec.MediaTypeImageManifest}}); err != nil {
		t.Fatal(err)
	}
	e.waitVersion("ns", "cowsay", "0.2.0", "verified", func(v *apiv1.Version) bool { return v.Verified })
	e.deleteManifest("ns/cowsay", refs[0].Digest.String())
	if err := e.cat.Ingest(e.ctx, []catalog.Event{{Action: catalog.EventDelete, Repository: "ns/cowsay", Digest: refs[0].Digest.String()}}); err != nil {
		t.Fatal(err)
	}
	e.waitVersion("ns", "cowsay", "0.2.0", "unsigned again", checkedUnsigned)
}

// TestSplitModeSignatures: a catalog reading the registry over HTTP, told
// of changes as distribution's webhooks tell them, follows signatures too.
func TestSplitModeSignatures(t *testing.T) {
	a := signingtest.NewKeyPair(t, "")
	e := newEnv(t, envOptions{split: true, policy: trusting(a)})
	tagged := e.pushPackage("ns", smallPackage(t, "tagged", "1.0.0"))
	referred := e.pushPackage("ns", smallPackage(t, "referred", "1.0.0"))
	e.waitVersion("ns", "tagged", "1.0.0", "checked", checkedUnsigned)
	e.waitVersion("ns", "referred", "1.0.0", "checked", checkedUnsigned)
	e.sign(a, "ns/tagged", tagged, false)
	e.sign(a, "ns/referred", referred, true)
	e.waitVersion("ns", "tagged", "1.0.0", "verified", func(v *apiv1.Version) bool { return v.Verified })
	v := e.waitVersion("ns", "referred", "1.0.0", "verified", func(v *apiv1.Version) bool { return v.Verified })
	if v.Signatures[0].Kind != apiv1.KindReferrer {
		t.Errorf("signatures %+v, want a referrer", v.Signatures)
	}
	e.deleteManifest("ns/referred", v.Signatures[0].Digest)
	e.waitVersion("ns", "referred", "1.0.0", "unsigned again", checkedUnsigned)

	src, err := catalog.NewRemoteSource("http://"+e.host, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, repo := range []string{"ns/referred", "no/such"} {
		if refs, err := src.Referrers(e.ctx, repo, referred); err != nil || len(refs) != 0 {
			t.Errorf("referrers of %s@%s: %v, %v; want none", repo, referred, refs, err)
		}
	}
}

// TestConcurrentSignatureEvents signs and unsigns one version from several
// clients at once, by tag and by referrer, with a trusted and an untrusted
// key: once the events are handled, the verdict is the registry's.
func TestConcurrentSignatureEvents(t *testing.T) {
	keys := []signingtest.KeyPair{signingtest.NewKeyPair(t, ""), signingtest.NewKeyPair(t, "")}
	policy := trusting(keys[0])
	e := newEnv(t, envOptions{policy: policy})
	dgst := e.pushPackage("ns", smallPackage(t, "p", "1.0.0"))
	e.waitVersion("ns", "p", "1.0.0", "checked", checkedUnsigned)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 6 {
				k := keys[(g+i)%2]
				// Clients race for cosign's tag: some of these fail, which is fine.
				if err := signing.Sign(e.ctx, k.Signer, e.host+"/ns/p@"+dgst, signing.SignOptions{Referrer: (g+i)%3 == 0}); err != nil {
					t.Logf("sign: %v", err)
				}
				if i%2 == 1 {
					if d, err := e.repo("ns/p").Resolve(e.ctx, sigTag(dgst)); err == nil {
						req, _ := http.NewRequestWithContext(e.ctx, http.MethodDelete, "http://"+e.host+"/v2/ns/p/manifests/"+d.Digest.String(), nil)
						if resp, err := http.DefaultClient.Do(req); err == nil {
							resp.Body.Close()
						}
					}
				}
			}
		})
	}
	wg.Wait()
	want, err := signing.Check(e.ctx, catalog.SignatureFetcher(catalog.NewDistributionSource(e.reg.Namespace(), e.reg.Referrers, e.reg.UntagDangling)), policy, "ns/p", dgst)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the registry holds %d signatures, verified %v", len(want.Signatures), want.Verified())
	same := func(v *apiv1.Version) bool {
		if v.Verified != want.Verified() || len(v.Signatures) != len(want.Signatures) {
			return false
		}
		for i, s := range want.Signatures {
			if v.Signatures[i].Digest != s.Digest || v.Signatures[i].Layer != s.Layer || v.Signatures[i].Verified != s.Verified {
				return false
			}
		}
		return true
	}
	e.waitVersion("ns", "p", "1.0.0", "the registry's verdict", same)
	// A check now agrees, and it runs after every check queued for the
	// digest before it.
	if _, err := e.cat.CheckSignatures(e.ctx, true); err != nil {
		t.Fatal(err)
	}
	if v := e.version("ns", "p", "1.0.0"); !same(v) {
		t.Errorf("verified %v with %d signatures, the registry says %v with %d", v.Verified, len(v.Signatures), want.Verified(), len(want.Signatures))
	}
}

// TestCheckEveryVersionCost measures what the periodic check of every
// version's signatures costs, at 1,000 versions of which half are signed.
// It logs the time; it asserts nothing about it.
func TestCheckEveryVersionCost(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes and signs 1,000 versions")
	}
	const versions = 1000
	a := signingtest.NewKeyPair(t, "")
	e := newEnv(t, envOptions{lose: true, policy: trusting(a)})
	start := time.Now()
	for i := range versions {
		d := e.pushPackage("cost", smallPackage(t, fmt.Sprintf("pkg%d", i/10), fmt.Sprintf("1.0.%d", i%10)))
		if i%2 == 0 {
			e.sign(a, fmt.Sprintf("cost/pkg%d", i/10), d, i%4 == 0)
		}
	}
	pushed := time.Since(start)
	st, err := e.cat.Reconcile(e.ctx)
	if err != nil || st.Indexed != versions+versions/4 { // and the .sig tags
		t.Fatalf("reconcile: %+v, %v", st, err)
	}
	if _, err := e.cat.CheckSignatures(e.ctx, false); err != nil { // any indexing did not check yet
		t.Fatal(err)
	}
	e.waitFor("every version checked", func() bool {
		checks, err := e.store.SignatureChecks(e.ctx, "", "", "")
		if err != nil {
			return false
		}
		for _, c := range checks {
			if c.Checked.IsZero() {
				return false
			}
		}
		return len(checks) == versions
	})
	rep, err := e.cat.CheckSignatures(e.ctx, true)
	if err != nil || rep.Checked != versions || rep.Failed != 0 || rep.Changed != 0 {
		t.Fatalf("check of every version: %+v, %v", rep, err)
	}
	verified := 0
	if err := e.cat.Walk(e.ctx, all, "", func(en *catalog.Entry) error {
		if en.Verified {
			verified++
		}
		return nil
	}); err != nil || verified != versions/2 {
		t.Fatalf("%d versions verified (%v), want %d", verified, err, versions/2)
	}
	t.Logf("check of every version's signatures: %d versions (%d signed, half by tag, half by referrer) in %v, %v per version, %d workers (setup: pushed and signed in %v)",
		versions, versions/2, rep.Took.Round(time.Millisecond), (rep.Took / versions).Round(time.Microsecond), 2, pushed.Round(time.Millisecond))
}

// failingSource fails reading the manifest fail names, with err.
type failingSource struct {
	catalog.Source
	mu   sync.Mutex
	fail string
	err  error
}

func (s *failingSource) set(dgst string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail, s.err = dgst, err
}

func (s *failingSource) Manifest(ctx context.Context, repo, dgst string) (string, []byte, error) {
	s.mu.Lock()
	fail, err := s.fail, s.err
	s.mu.Unlock()
	if dgst == fail {
		return "", nil, err
	}
	return s.Source.Manifest(ctx, repo, dgst)
}

// TestUnreadableSignatures: a registry that does not answer leaves the last
// verdict in place; a signature that cannot be read at all verifies
// nothing, and says why.
func TestUnreadableSignatures(t *testing.T) {
	a := signingtest.NewKeyPair(t, "")
	var src *failingSource
	e := newEnv(t, envOptions{policy: trusting(a), source: func(s catalog.Source) catalog.Source {
		src = &failingSource{Source: s}
		return src
	}})
	dgst := e.pushPackage("ns", load(t, "kudo/cowsay/0.2.0"))
	// Checked before it is signed, so that the signature's event is the
	// last thing that checks it before the test does.
	e.waitVersion("ns", "cowsay", "0.2.0", "checked", checkedUnsigned)
	e.sign(a, "ns/cowsay", dgst, false)
	e.waitVersion("ns", "cowsay", "0.2.0", "verified", func(v *apiv1.Version) bool { return v.Verified })
	sig := e.resolve("ns/cowsay", sigTag(dgst))
	before := e.version("ns", "cowsay", "0.2.0").Signatures[0].Checked

	src.set(sig, fmt.Errorf("registry down: %w", catalog.ErrUnavailable))
	rep, err := e.cat.CheckSignatures(e.ctx, true)
	if err != nil || rep.Failed != 1 {
		t.Fatalf("check with the registry down: %+v, %v; want 1 failed", rep, err)
	}
	if v := e.version("ns", "cowsay", "0.2.0"); !v.Verified || !v.Signatures[0].Checked.Equal(before) {
		t.Errorf("a check that could not read the registry changed the record: %+v", v)
	}

	src.set(sig, errors.New("manifest blob is corrupt"))
	if rep, err := e.cat.CheckSignatures(e.ctx, true); err != nil || rep.Changed != 1 {
		t.Fatalf("check of a corrupt signature manifest: %+v, %v; want 1 changed", rep, err)
	}
	v := e.version("ns", "cowsay", "0.2.0")
	if v.Verified || v.VerifiedReason != "cannot read signature manifest: manifest blob is corrupt" || len(v.Signatures) != 1 || v.Signatures[0].Reason != v.VerifiedReason {
		t.Errorf("verified %v, reason %q, signatures %+v; want not verified, the signature unreadable", v.Verified, v.VerifiedReason, v.Signatures)
	}

	src.set("", nil)
	if rep, err := e.cat.CheckSignatures(e.ctx, true); err != nil || rep.Changed != 1 {
		t.Fatalf("check once readable again: %+v, %v", rep, err)
	}
	if v := e.version("ns", "cowsay", "0.2.0"); !v.Verified || v.VerifiedReason != "" {
		t.Errorf("verified %v (%q) once readable again", v.Verified, v.VerifiedReason)
	}
}
