package client

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/berth-registry/berth/client/registrytest"
	"github.com/berth-registry/berth/signing"
)

// sbomType is the artifact type of the SBOM referrers the tests push.
const sbomType = "application/spdx+json"

// pushReferrer pushes an artifact of artifactType whose subject is subject
// into host/repo, and returns its descriptor.
func pushReferrer(t *testing.T, host, repo, artifactType string, subject ocispec.Descriptor, data string) ocispec.Descriptor {
	t.Helper()
	ctx := context.Background()
	r := &remote.Repository{Client: newTestClient(t, Options{}).auth, Reference: registry.Reference{Registry: host, Repository: repo}, PlainHTTP: true}
	layer := ocispec.Descriptor{MediaType: artifactType, Digest: digest.FromString(data), Size: int64(len(data))}
	if err := r.Push(ctx, layer, strings.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	desc, err := oras.PackManifest(ctx, r, oras.PackManifestVersion1_1, artifactType, oras.PackManifestOptions{Subject: &subject, Layers: []ocispec.Descriptor{layer}})
	if err != nil {
		t.Fatal(err)
	}
	return desc
}

// tagManifest pushes an artifact of artifactType and tags it in host/repo.
func tagManifest(t *testing.T, host, repo, tag, artifactType string) ocispec.Descriptor {
	t.Helper()
	ctx := context.Background()
	r := &remote.Repository{Client: newTestClient(t, Options{}).auth, Reference: registry.Reference{Registry: host, Repository: repo}, PlainHTTP: true}
	desc, err := oras.PackManifest(ctx, r, oras.PackManifestVersion1_1, artifactType, oras.PackManifestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Tag(ctx, desc, tag); err != nil {
		t.Fatal(err)
	}
	return desc
}

func TestPromote(t *testing.T) {
	ctx := context.Background()
	key, other, third := newTestKey(t), newTestKey(t), newTestKey(t)
	host := newSigningRegistry(t, policyOf("stable/*", true, key), nil)
	c := newTestClient(t, Options{})
	push := func(version string) ocispec.Descriptor {
		desc, err := c.Push(ctx, mustParse(t, host+"/incubator/demo"), testArtifact(t, "demo", version))
		if err != nil {
			t.Fatal(err)
		}
		return desc
	}
	sign := func(ref string, k testKey, opts SignOptions) {
		t.Helper()
		if _, err := c.Sign(ctx, mustParse(t, ref), k.signer, opts); err != nil {
			t.Fatal(err)
		}
	}
	src := func(version string) Reference { return mustParse(t, host+"/incubator/demo:"+version) }
	stable := mustParse(t, host+"/stable/demo")

	// A version signed by tag and by referrer, with an attestation tag and an SBOM.
	v1 := push("1.0.0")
	sign(host+"/incubator/demo:1.0.0", key, SignOptions{})
	sign(host+"/incubator/demo:1.0.0", key, SignOptions{Referrer: true})
	att := tagManifest(t, host, "incubator/demo", signing.AttestationTag(v1.Digest), "application/vnd.example.attestation")
	sbom := pushReferrer(t, host, "incubator/demo", sbomType, v1, `{"spdxVersion":"SPDX-2.3"}`)

	p, err := c.Promote(ctx, src("1.0.0"), stable)
	if err != nil {
		t.Fatalf("Promote: %v", err)
	}
	sigTag, attTag := signing.SignatureTag(v1.Digest), signing.AttestationTag(v1.Digest)
	if p.Descriptor.Digest != v1.Digest || p.Destination.String() != host+"/stable/demo:1.0.0@"+v1.Digest.String() ||
		p.Source.Digest != v1.Digest || !slices.Equal(p.Tags, []string{sigTag, attTag}) || len(p.Kept) != 0 || p.Signatures != nil {
		t.Errorf("Promotion: %+v", p)
	}
	var types []string
	for _, r := range p.Referrers {
		types = append(types, r.ArtifactType)
	}
	slices.Sort(types)
	if !slices.Equal(types, []string{sbomType, signing.SignatureArtifactType}) || !slices.ContainsFunc(p.Referrers, func(d ocispec.Descriptor) bool { return d.Digest == sbom.Digest }) {
		t.Errorf("referrers copied: %+v", p.Referrers)
	}
	if d, err := c.Resolve(ctx, mustParse(t, host+"/stable/demo:1.0.0")); err != nil || d.Digest != v1.Digest {
		t.Errorf("stable/demo:1.0.0 = %s, %v", d.Digest, err)
	}
	if d, err := c.Fetcher(host).Resolve(ctx, "stable/demo", attTag); err != nil || d != att.Digest.String() {
		t.Errorf("stable/demo:%s = %s, %v", attTag, d, err)
	}
	rep, err := c.VerifyKeys(ctx, mustParse(t, host+"/stable/demo:1.0.0"), []signing.Key{key.public})
	if err != nil || !rep.Verified() || len(rep.Signatures) < 2 || rep.Signatures[0].Kind != signing.KindTag || rep.Signatures[len(rep.Signatures)-1].Kind != signing.KindReferrer {
		t.Errorf("signatures in stable: %+v, %v", rep, err)
	}
	// Again: nothing new, same result.
	if p2, err := c.Promote(ctx, src("1.0.0"), stable); err != nil || !slices.Equal(p2.Tags, p.Tags) || len(p2.Referrers) != len(p.Referrers) {
		t.Errorf("second Promote: %+v, %v", p2, err)
	}

	// Unsigned: the registry refuses the tag, and says why.
	v2 := push("2.0.0")
	_, err = c.Promote(ctx, src("2.0.0"), stable)
	want := "promote " + host + "/incubator/demo:2.0.0 → " + host + "/stable/demo: refused by the registry: stable/demo:2.0.0: " +
		v2.Digest.String() + " has no signature verified by the trust policy for stable/* (no signature)"
	if !errors.Is(err, ErrDenied) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Promote of an unsigned version: %v\nwant ErrDenied starting %q", err, want)
	}

	// Refused by the client's policy before anything is copied.
	v3 := push("3.0.0")
	sign(host+"/incubator/demo:3.0.0", other, SignOptions{})
	strict := newTestClient(t, Options{TrustPolicy: policyOf("stable/*", true, key)})
	_, err = strict.Promote(ctx, src("3.0.0"), stable)
	want = "promote " + host + "/incubator/demo:3.0.0 → " + host + "/stable/demo: refused: no signature verified by the trust policy for stable/*: not signed by a key trusted for stable/demo"
	if !errors.Is(err, ErrUnverified) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Promote under a client policy: %v\nwant ErrUnverified starting %q", err, want)
	}
	if _, err := c.Resolve(ctx, mustParse(t, host+"/stable/demo@"+v3.Digest.String())); !errors.Is(err, ErrNotFound) {
		t.Errorf("a refused promotion copied the manifest: %v", err)
	}

	// Signed by an untrusted key, refused; signed again by the trusted key,
	// the source's signature manifest (now with both) replaces the copy.
	v4 := push("4.0.0")
	sign(host+"/incubator/demo:4.0.0", other, SignOptions{})
	if _, err := c.Promote(ctx, src("4.0.0"), stable); !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "not signed by a key trusted for stable/demo") {
		t.Fatalf("Promote signed by an untrusted key: %v", err)
	}
	sign(host+"/incubator/demo:4.0.0", key, SignOptions{})
	p, err = strict.Promote(ctx, src("4.0.0"), stable)
	if err != nil || !slices.Equal(p.Tags, []string{signing.SignatureTag(v4.Digest)}) || p.Signatures == nil || !p.Signatures.Verified() {
		t.Fatalf("Promote signed again: %+v, %v", p, err)
	}
	rep, err = c.VerifyKeys(ctx, mustParse(t, host+"/stable/demo:4.0.0"), []signing.Key{key.public})
	if err != nil || !rep.Verified() || len(rep.Signatures) != 2 {
		t.Errorf("signatures of 4.0.0 in stable: %+v, %v; want both", rep, err)
	}

	// A signature only the destination has is kept, not overwritten.
	push("5.0.0")
	sign(host+"/incubator/demo:5.0.0", key, SignOptions{})
	if _, err := c.Promote(ctx, src("5.0.0"), stable); err != nil {
		t.Fatal(err)
	}
	sign(host+"/stable/demo:5.0.0", other, SignOptions{})
	sign(host+"/incubator/demo:5.0.0", third, SignOptions{})
	p, err = c.Promote(ctx, src("5.0.0"), stable)
	if err != nil || len(p.Tags) != 0 || len(p.Kept) != 1 {
		t.Errorf("Promote over a destination's own signature: %+v, %v", p, err)
	}

	// By digest, to another version; and the bad cases.
	if p, err := c.Promote(ctx, mustParse(t, host+"/incubator/demo@"+v1.Digest.String()), mustParse(t, host+"/stable/demo:1.0.0")); err != nil || p.Destination.Tag != "1.0.0" {
		t.Errorf("Promote by digest: %+v, %v", p, err)
	}
	for _, tt := range []struct {
		src, dst string
		want     error
	}{
		{host + "/incubator/demo", host + "/stable/demo", ErrInvalidReference},
		{host + "/incubator/demo@" + v1.Digest.String(), host + "/stable/demo", ErrInvalidReference},
		{host + "/incubator/demo:1.0.0", host + "/stable/demo@" + v1.Digest.String(), ErrInvalidReference},
		{host + "/incubator/demo:9.9.9", host + "/stable/demo", ErrNotFound},
	} {
		if _, err := c.Promote(ctx, mustParse(t, tt.src), mustParse(t, tt.dst)); !errors.Is(err, tt.want) {
			t.Errorf("Promote %s → %s: %v, want %v", tt.src, tt.dst, err, tt.want)
		}
	}
}

// TestPromoteAcrossRegistries copies into distribution's registry, which
// has no referrers API: referrers go through the OCI tag fallback, and
// blobs are copied with progress.
func TestPromoteAcrossRegistries(t *testing.T) {
	ctx := context.Background()
	key := newTestKey(t)
	from := newSigningRegistry(t, nil, nil)
	to := registrytest.New(t, nil)
	var (
		mu     sync.Mutex
		copied = map[digest.Digest]bool{}
	)
	c := newTestClient(t, Options{ProgressThreshold: 1, Progress: func(p Progress) {
		if p.Op == "copy" && p.Done == p.Descriptor.Size {
			mu.Lock()
			copied[p.Descriptor.Digest] = true
			mu.Unlock()
		}
	}})
	art := testArtifact(t, "demo", "1.0.0")
	if _, err := c.Push(ctx, mustParse(t, from+"/incubator/demo"), art); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sign(ctx, mustParse(t, from+"/incubator/demo:1.0.0"), key.signer, SignOptions{Referrer: true}); err != nil {
		t.Fatal(err)
	}
	p, err := c.Promote(ctx, mustParse(t, from+"/incubator/demo:1.0.0"), mustParse(t, to+"/kudo/demo"))
	if err != nil || len(p.Tags) != 0 || len(p.Referrers) != 1 {
		t.Fatalf("Promote: %+v, %v", p, err)
	}
	if !copied[art.ContentDesc.Digest] || !copied[art.ConfigDesc.Digest] {
		t.Errorf("progress of the copy: %v", copied)
	}
	rep, err := c.VerifyKeys(ctx, mustParse(t, to+"/kudo/demo:1.0.0"), []signing.Key{key.public})
	if err != nil || !rep.Verified() || rep.Signatures[0].Kind != signing.KindReferrer {
		t.Errorf("Verify in the other registry: %+v, %v", rep, err)
	}
	pkg, err := c.Pull(ctx, mustParse(t, to+"/kudo/demo:1.0.0"))
	if err != nil || string(pkg.Content) != string(art.Content) {
		t.Errorf("Pull of the promoted version: %v", err)
	}
}
