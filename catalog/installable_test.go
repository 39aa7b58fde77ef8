package catalog_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/signing"
	"github.com/berth-registry/berth/signing/signingtest"
)

// pushImage pushes a one-layer image of platform (os/arch) to repo under
// tag; it returns its descriptor.
func (e *env) pushImage(repo, tag, os, arch string) ocispec.Descriptor {
	e.t.Helper()
	config, _ := json.Marshal(ocispec.Image{Platform: ocispec.Platform{OS: os, Architecture: arch}})
	m := e.manifestOf(repo, "", layer{ocispec.MediaTypeImageConfig, config}, layer{ocispec.MediaTypeImageLayerGzip, []byte(repo + os + arch)})
	d := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(m), Size: int64(len(m)),
		Platform: &ocispec.Platform{OS: os, Architecture: arch}}
	e.pushManifest(repo, tag, ocispec.MediaTypeImageManifest, m)
	return d
}

// setImages replaces the images of an indexed version in the store, as
// indexing derives them from content.
func (e *env) setImages(ns, name, tag string, refs ...string) {
	e.t.Helper()
	en := e.entry(ns, name, tag)
	if _, err := e.store.Delete(e.ctx, ns, name, tag); err != nil {
		e.t.Fatal(err)
	}
	en.Metadata.Images = nil
	for _, r := range refs {
		en.Metadata.Images = append(en.Metadata.Images, pkgformat.Image{Reference: r, Found: []string{"test"}, Mutable: !strings.Contains(r, "@")})
	}
	if _, err := e.store.Put(e.ctx, en); err != nil {
		e.t.Fatal(err)
	}
}

// TestInstallable checks the images of a version at their mirrors in the
// embedded registry: by digest and by tag, a sparse index, cosign
// signatures verified by the rule of the source repository, and each way
// an image can be missing.
func TestInstallable(t *testing.T) {
	key := signingtest.NewKeyPair(t, "")
	policy := signing.NewPolicyOf(signing.Rule{Images: []string{"quay.io/org/*"}, Keys: []signing.Key{key.Key}, Require: true})
	e := newEnv(t, envOptions{policy: policy})
	e.pushPackage("ns", load(t, "kudo/cowsay/0.2.0"))
	e.waitVersion("ns", "cowsay", "0.2.0", "indexed", func(*apiv1.Version) bool { return true })

	// quay.io/org/operator is mirrored by digest and signed at its mirror.
	operator := e.pushImage("mirror/org/operator", "keep", "linux", "amd64")
	e.sign(key, "mirror/org/operator", operator.Digest.String(), false)
	// quay.io/org/operand:1.0 is an index of which only amd64 is at the
	// mirror, as an export filtered by platform leaves it (the registry
	// takes an index only with all its manifests: arm64 goes after).
	amd := e.pushImage("mirror/org/operand", "amd64", "linux", "amd64")
	arm := e.pushImage("mirror/org/operand", "arm64", "linux", "arm64")
	idx, _ := json.Marshal(ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{amd, arm}})
	operand := e.pushManifest("mirror/org/operand", "1.0", ocispec.MediaTypeImageIndex, idx)
	e.deleteManifest("mirror/org/operand", arm.Digest.String())
	// own/img lives at this berth under its own name.
	e.pushImage("own/img", "1", "linux", "amd64")

	if _, err := e.cat.SetImageMirrors(e.ctx, []apiv1.ImageMirror{
		{Source: "quay.io/org", Mirror: e.host + "/mirror/org"},
		{Source: "ghcr.io/far", Mirror: "other.example/far"},
	}); err != nil {
		t.Fatal(err)
	}
	check := func(refs ...string) *apiv1.Installable {
		t.Helper()
		e.setImages("ns", "cowsay", "0.2.0", refs...)
		inst, err := e.cat.Installable(e.ctx, all, "ns", "cowsay", "0.2.0", e.host)
		if err != nil {
			t.Fatal(err)
		}
		if inst.Installable != (len(inst.Problems) == 0) || len(inst.Images) != len(refs) {
			t.Fatalf("installable %v with problems %q and %d images, want %d images", inst.Installable, inst.Problems, len(inst.Images), len(refs))
		}
		return inst
	}
	image := func(inst *apiv1.Installable, ref string) apiv1.ImageCheck {
		t.Helper()
		for _, c := range inst.Images {
			if c.Reference == ref {
				return c
			}
		}
		t.Fatalf("no check of %s in %+v", ref, inst.Images)
		return apiv1.ImageCheck{}
	}

	opRef := "quay.io/org/operator@" + operator.Digest.String()
	inst := check(opRef, "quay.io/org/operand:1.0")
	if c := image(inst, opRef); !c.Present || !c.Signed || !c.Verified || c.Reason != "" || c.Mirror != e.host+"/mirror/org/operator@"+operator.Digest.String() {
		t.Errorf("operator: %+v, want present, signed and verified at its mirror", c)
	}
	c := image(inst, "quay.io/org/operand:1.0")
	if !c.Present || c.Signed || c.Verified || !strings.Contains(c.Reason, "linux/arm64") || c.Mirror != e.host+"/mirror/org/operand:1.0" {
		t.Errorf("operand: %+v, want present for amd64, naming linux/arm64 as not carried, unsigned", c)
	}
	if inst.Installable || len(inst.Problems) != 1 || !strings.Contains(inst.Problems[0], "quay.io/org/operand:1.0: the trust policy requires a verified signature") {
		t.Errorf("problems %q, want the unsigned operand's alone", inst.Problems)
	}
	if inst.Verified || inst.VerifiedReason == "" {
		t.Errorf("version verified %v (%q), want the version's own verdict: unsigned", inst.Verified, inst.VerifiedReason)
	}

	// Signed at its mirror (as a referrer, where the operator's signature
	// is a cosign tag), the sparse index passes: its missing platform is
	// information, not a problem.
	e.sign(key, "mirror/org/operand", operand, true)
	inst = check(opRef, "quay.io/org/operand:1.0", e.host+"/own/img:1")
	if !inst.Installable {
		t.Errorf("after signing the operand: problems %q, want none", inst.Problems)
	}
	if c := image(inst, e.host+"/own/img:1"); !c.Present || c.Signed || c.Mirror != e.host+"/own/img:1" {
		t.Errorf("own image: %+v, want present under its own name, unsigned (no rule covers it)", c)
	}

	gone := "quay.io/org/gone@" + digest.FromString("gone").String()
	for _, tc := range []struct {
		ref, reason string
	}{
		{"docker.io/library/busybox:1.36", "no mirror recorded for docker.io/library/busybox"},
		{gone, "is not at this berth"},
		{"quay.io/org/operand:2.0", e.host + "/mirror/org/operand:2.0 is not at this berth"},
		{"quay.io/org/operand", e.host + "/mirror/org/operand:latest is not at this berth"},
		{"ghcr.io/far/img@" + operator.Digest.String(), "mirrored at other.example/far/img, not at this berth"},
	} {
		inst := check(opRef, tc.ref)
		c := image(inst, tc.ref)
		if c.Present || !strings.Contains(c.Reason, tc.reason) {
			t.Errorf("%s: %+v, want absent: %s", tc.ref, c, tc.reason)
		}
		if inst.Installable || len(inst.Problems) != 1 || !strings.Contains(inst.Problems[0], tc.ref+": ") {
			t.Errorf("%s: problems %q, want one naming it", tc.ref, inst.Problems)
		}
	}

	// A version the trust policy requires verified is a problem unverified.
	e.restart(signing.NewPolicyOf(signing.Rule{Repositories: []string{"ns/*"}, Keys: []signing.Key{key.Key}, Require: true}))
	inst = check(opRef)
	if inst.Installable || len(inst.Problems) != 1 || !strings.Contains(inst.Problems[0], "version 0.2.0 is not verified") {
		t.Errorf("unverified version under a rule that requires it: problems %q", inst.Problems)
	}
	if _, err := e.cat.Installable(e.ctx, catalog.NamespaceAccess("other"), "ns", "cowsay", "0.2.0", e.host); err == nil {
		t.Error("Installable of a version the caller may not pull answered")
	}
}
