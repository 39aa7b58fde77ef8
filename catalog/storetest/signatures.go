package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
)

// checkTime is when the signature checks of the fixtures were made.
var checkTime = time.Date(2025, 6, 1, 12, 0, 0, 123456789, time.UTC)

// signatureCheck returns a check of e's digest that found sigs.
func signatureCheck(e *catalog.Entry, policy string, sigs ...catalog.SignatureRecord) *catalog.SignatureCheck {
	return &catalog.SignatureCheck{
		Namespace: e.Namespace, Name: e.Name, Digest: e.Digest, Checked: checkTime, Policy: policy, Signatures: sigs,
	}
}

// goodSignature is a verified tag signature; badSignature one by an
// untrusted key found as a referrer.
func goodSignature(subject string) catalog.SignatureRecord {
	return catalog.SignatureRecord{Digest: digestOf("sig", subject), Layer: digestOf("layer", subject), Kind: catalog.KindTag, KeyID: "sha256:key-a", Verified: true}
}

func badSignature(subject string) catalog.SignatureRecord {
	return catalog.SignatureRecord{Digest: digestOf("ref", subject), Layer: digestOf("reflayer", subject), Kind: catalog.KindReferrer, Reason: "not signed by a key trusted for a/p"}
}

func attestation(subject string, verified bool) catalog.SignatureRecord {
	r := catalog.SignatureRecord{Digest: digestOf("att", subject), Layer: digestOf("attlayer", subject), Kind: catalog.KindTag, PredicateType: "https://slsa.dev/provenance/v0.2"}
	if verified {
		r.KeyID, r.Verified, r.Sources = "sha256:key-a", true, []string{"https://github.com/org/p"}
	} else {
		r.Reason = "payload digest mismatch"
	}
	return r
}

// requireSource gives c a trust policy rule that requires sources.
func requireSource(c *catalog.SignatureCheck, globs ...string) *catalog.SignatureCheck {
	c.RequireSource, c.PolicyName = globs, "trust policy for a/*"
	return c
}

func (h *harness) putSignatures(c *catalog.SignatureCheck) bool {
	h.t.Helper()
	changed, err := h.store.PutSignatures(h.ctx, c)
	if err != nil {
		h.t.Fatalf("PutSignatures %s/%s@%s: %v", c.Namespace, c.Name, c.Digest, err)
	}
	return changed
}

// verifiedOf returns the Verified of each tag of a package, by tag.
func (h *harness) verifiedOf(namespace, name string) map[string]bool {
	h.t.Helper()
	es, err := h.store.Entries(h.ctx, namespace, name)
	if err != nil {
		h.t.Fatalf("Entries %s/%s: %v", namespace, name, err)
	}
	out := map[string]bool{}
	for _, e := range es {
		out[e.Tag] = e.Verified
	}
	return out
}

// verifiedPackages returns the packages a verified=v search finds.
func (h *harness) verifiedPackages(v bool) []string {
	h.t.Helper()
	return names(h.search(catalog.Query{Verified: &v, Access: all}).Packages)
}

func testSignaturesRoundTrip(t *testing.T, h *harness) {
	v1, v2 := pkg("a", "p", "1.0.0"), pkg("a", "p", "2.0.0")
	h.put(v1, v2, pkg("b", "q", "1.0.0"))
	want := signatureCheck(v2, "sha256:policy-1", goodSignature(v2.Digest), badSignature(v2.Digest), attestation(v2.Digest, true))
	if !h.putSignatures(want) {
		t.Fatal("PutSignatures of a verified check = unchanged, want the latest version to become verified")
	}
	got, err := h.store.Signatures(h.ctx, "a", "p", v2.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Checked.Equal(checkTime) || got.Policy != want.Policy || got.Error != "" || !reflect.DeepEqual(got.Signatures, want.Signatures) ||
		got.Namespace != "a" || got.Name != "p" || got.Digest != v2.Digest {
		t.Errorf("Signatures =\n%+v\nwant\n%+v", got, want)
	}
	if !got.Verified() {
		t.Error("the recorded check is not verified")
	}
	// The latest version is verified, so the package is, for searches at once.
	if v := h.verifiedOf("a", "p"); !v["2.0.0"] || v["1.0.0"] {
		t.Errorf("Verified by tag = %v, want only 2.0.0", v)
	}
	if got := h.verifiedPackages(true); !slices.Equal(got, []string{"a/p"}) {
		t.Errorf("verified=true finds %v, want a/p", got)
	}
	if got := h.verifiedPackages(false); !slices.Equal(got, []string{"b/q"}) {
		t.Errorf("verified=false finds %v, want b/q", got)
	}
	if res := h.search(catalog.Query{Text: "p", Access: all}); len(res.Packages) == 0 || !res.Packages[0].Verified {
		t.Errorf("summary of a/p = %+v, want verified", res.Packages)
	}
	// Never checked, or held by no version: not found.
	if _, err := h.store.Signatures(h.ctx, "a", "p", v1.Digest); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("Signatures of a digest never checked: %v, want ErrNotFound", err)
	}
	if _, err := h.store.Signatures(h.ctx, "a", "p", digestOf("nothing")); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("Signatures of an unknown digest: %v, want ErrNotFound", err)
	}
	// The checks as the catalog lists them: one per digest, never checked ones zero.
	checks, err := h.store.SignatureChecks(h.ctx, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, c := range checks {
		listed = append(listed, c.Namespace+"/"+c.Name+"@"+c.Digest+" "+c.Policy+" "+c.Checked.Format(time.RFC3339Nano))
		if c.Signatures != nil {
			t.Errorf("SignatureChecks loaded the signatures of %s", c.Digest)
		}
	}
	wantListed := []string{
		"a/p@" + v1.Digest + "  " + time.Time{}.Format(time.RFC3339Nano),
		"a/p@" + v2.Digest + " sha256:policy-1 " + checkTime.Format(time.RFC3339Nano),
		"b/q@" + digestOf("b", "q", "1.0.0") + "  " + time.Time{}.Format(time.RFC3339Nano),
	}
	slices.Sort(wantListed)
	if !slices.Equal(listed, wantListed) {
		t.Errorf("SignatureChecks =\n%v\nwant\n%v", listed, wantListed)
	}
	// Paged, one at a time: the same list; stale: only those not checked
	// under that policy.
	for _, tc := range []struct {
		stale string
		want  []string
	}{
		{"", wantListed},
		{"sha256:policy-1", []string{wantListed[0], wantListed[2]}},
		{"sha256:policy-2", wantListed},
	} {
		var paged []string
		var after catalog.SignatureCheck
		for range len(wantListed) + 1 {
			page, err := h.store.SignatureCheckPage(h.ctx, after, 1, tc.stale)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			c := page[0]
			paged = append(paged, c.Namespace+"/"+c.Name+"@"+c.Digest+" "+c.Policy+" "+c.Checked.Format(time.RFC3339Nano))
			after = c
		}
		if !slices.Equal(paged, tc.want) {
			t.Errorf("SignatureCheckPage, one at a time, stale %q =\n%v\nwant\n%v", tc.stale, paged, tc.want)
		}
	}
	for _, f := range []struct {
		ns, name, digest string
		want             int
	}{{"a", "", "", 2}, {"a", "p", "", 2}, {"a", "p", v2.Digest, 1}, {"", "", v1.Digest, 1}, {"c", "", "", 0}, {"a", "p", digestOf("x"), 0}} {
		got, err := h.store.SignatureChecks(h.ctx, f.ns, f.name, f.digest)
		if err != nil || len(got) != f.want {
			t.Errorf("SignatureChecks(%q, %q, %q) = %d checks, %v; want %d", f.ns, f.name, f.digest, len(got), err, f.want)
		}
	}
	signed, err := h.store.SignedBy(h.ctx, "a", "p", goodSignature(v2.Digest).Digest)
	if err != nil || !slices.Equal(signed, []string{v2.Digest}) {
		t.Errorf("SignedBy the signature manifest = %v, %v; want %s", signed, err, v2.Digest)
	}
	if signed, err := h.store.SignedBy(h.ctx, "a", "p", digestOf("other")); err != nil || len(signed) != 0 {
		t.Errorf("SignedBy another manifest = %v, %v; want none", signed, err)
	}

	// A check that replaces it: the old records go, the verdict follows.
	again := signatureCheck(v2, "sha256:policy-2", badSignature(v2.Digest))
	again.Checked = checkTime.Add(time.Hour)
	if !h.putSignatures(again) {
		t.Error("PutSignatures that unverifies = unchanged")
	}
	got, err = h.store.Signatures(h.ctx, "a", "p", v2.Digest)
	if err != nil || len(got.Signatures) != 1 || got.Policy != "sha256:policy-2" || !got.Checked.Equal(again.Checked) {
		t.Errorf("Signatures after a second check = %+v, %v", got, err)
	}
	if got := h.verifiedPackages(true); len(got) != 0 {
		t.Errorf("verified=true finds %v after the signature stopped verifying", got)
	}
	// The same verdict again changes no version.
	if h.putSignatures(again) {
		t.Error("PutSignatures of the same verdict = changed")
	}
}

func testSignaturesVerdict(t *testing.T, h *harness) {
	e := pkg("a", "p", "1.0.0")
	h.put(e)
	for _, tc := range []struct {
		name     string
		check    *catalog.SignatureCheck
		verified bool
	}{
		{"no signature", signatureCheck(e, "x"), false},
		{"a verified signature", signatureCheck(e, "x", goodSignature(e.Digest)), true},
		{"only an untrusted signature", signatureCheck(e, "x", badSignature(e.Digest)), false},
		{"a verified attestation alone", signatureCheck(e, "x", attestation(e.Digest, true)), false},
		{"one verified among others", signatureCheck(e, "x", badSignature(e.Digest), attestation(e.Digest, false), goodSignature(e.Digest)), true},
		{"allowed provenance", requireSource(signatureCheck(e, "x", goodSignature(e.Digest), attestation(e.Digest, true)), "https://github.com/org/*"), true},
		{"provenance from another source", requireSource(signatureCheck(e, "x", goodSignature(e.Digest), attestation(e.Digest, true)), "https://gitlab.com/*"), false},
		{"no verified provenance", requireSource(signatureCheck(e, "x", goodSignature(e.Digest), attestation(e.Digest, false)), "https://github.com/org/*"), false},
		{"signatures that could not be read", func() *catalog.SignatureCheck {
			c := signatureCheck(e, "x", goodSignature(e.Digest))
			c.Error = "manifest unreadable"
			return c
		}(), false},
	} {
		h.putSignatures(tc.check)
		if got := h.verifiedOf("a", "p")["1.0.0"]; got != tc.verified || tc.check.Verified() != tc.verified {
			t.Errorf("%s: entry verified = %v, check.Verified() = %v, want %v", tc.name, got, tc.check.Verified(), tc.verified)
		}
		got, err := h.store.Signatures(h.ctx, "a", "p", e.Digest)
		if err != nil || got.Error != tc.check.Error || len(got.Signatures) != len(tc.check.Signatures) {
			t.Errorf("%s: Signatures = %+v, %v", tc.name, got, err)
		}
		if res := h.search(catalog.Query{Access: all}); len(res.Packages) != 1 || res.Packages[0].Verified != tc.verified {
			t.Errorf("%s: summary %+v, want verified %v", tc.name, res.Packages, tc.verified)
		}
	}
}

// testSignaturesSharedDigest: every version of a digest has the verdict of
// its check, those put after it included; versions of other packages with
// the same digest do not.
func testSignaturesSharedDigest(t *testing.T, h *harness) {
	d := digestOf("shared")
	a, b := pkg("a", "p", "1.0.0", withDigest(d)), pkg("a", "p", "1.0.1", withDigest(d))
	other := pkg("b", "p", "1.0.0", withDigest(d))
	h.put(a, b, other)
	h.putSignatures(signatureCheck(a, "x", goodSignature(d)))
	if v := h.verifiedOf("a", "p"); !v["1.0.0"] || !v["1.0.1"] {
		t.Errorf("versions of one digest: verified %v, want both", v)
	}
	if h.verifiedOf("b", "p")["1.0.0"] {
		t.Error("another package's version with the same digest became verified")
	}
	// A version put later takes the recorded verdict, whatever it says.
	h.put(pkg("a", "p", "latest", withDigest(d), withVerified(false)))
	if !h.verifiedOf("a", "p")["latest"] {
		t.Error("a version put after the check of its digest is not verified")
	}
	// One check per digest, listed once.
	checks, err := h.store.SignatureChecks(h.ctx, "a", "p", "")
	if err != nil || len(checks) != 1 || checks[0].Digest != d {
		t.Errorf("SignatureChecks = %+v, %v; want one check of %s", checks, err, d)
	}
	// Without a check, Put records what the entry says.
	h.put(pkg("c", "p", "1.0.0", withVerified(true)))
	if !h.verifiedOf("c", "p")["1.0.0"] {
		t.Error("Put of a verified entry whose digest has no check recorded it unverified")
	}
}

// testSignaturesFollowVersions: a check lives as long as an indexed version
// holds its digest, and a check of a digest no version holds records nothing.
func testSignaturesFollowVersions(t *testing.T, h *harness) {
	d := digestOf("shared")
	h.put(pkg("a", "p", "1.0.0", withDigest(d)), pkg("a", "p", "1.0.1", withDigest(d)), pkg("a", "p", "2.0.0"))
	h.putSignatures(signatureCheck(pkg("a", "p", "1.0.0", withDigest(d)), "x", goodSignature(d)))
	gone := func(digest string) bool {
		t.Helper()
		_, err := h.store.Signatures(h.ctx, "a", "p", digest)
		if err != nil && !errors.Is(err, catalog.ErrNotFound) {
			t.Fatal(err)
		}
		signed, serr := h.store.SignedBy(h.ctx, "a", "p", goodSignature(digest).Digest)
		if serr != nil {
			t.Fatal(serr)
		}
		return errors.Is(err, catalog.ErrNotFound) && len(signed) == 0
	}
	h.del("a", "p", "1.0.0")
	if gone(d) {
		t.Fatal("deleting one of two versions of a digest removed its signatures")
	}
	h.del("a", "p", "1.0.1")
	if !gone(d) {
		t.Error("the signatures of a digest no version holds any more are still recorded")
	}
	// Put back, it is not verified until checked again.
	h.put(pkg("a", "p", "1.0.0", withDigest(d)))
	if h.verifiedOf("a", "p")["1.0.0"] {
		t.Error("a version put back after its signatures went is verified")
	}

	// Re-pointing the tag, or the tag becoming invalid, forgets the old digest.
	v2 := pkg("a", "p", "2.0.0")
	h.putSignatures(signatureCheck(v2, "x", goodSignature(v2.Digest)))
	h.put(pkg("a", "p", "2.0.0", withDigest(digestOf("rebuilt"))))
	if !gone(v2.Digest) {
		t.Error("a re-pointed version's old digest keeps its signatures")
	}
	if h.verifiedOf("a", "p")["2.0.0"] {
		t.Error("a re-pointed version kept the old digest's verdict")
	}
	e := pkg("a", "p", "1.0.0", withDigest(d))
	h.putSignatures(signatureCheck(e, "x", goodSignature(d)))
	inv := unindexed("a", "p", "1.0.0", apiv1.StatusInvalid, "broken")
	inv.Digest = d
	h.put(inv)
	if !gone(d) {
		t.Error("the signatures of a digest whose only tag became invalid are still recorded")
	}

	// A check of a digest that no indexed version holds records nothing.
	before := h.stats()
	for _, c := range []*catalog.SignatureCheck{
		signatureCheck(pkg("a", "p", "9.9.9"), "x", goodSignature(digestOf("a", "p", "9.9.9"))),
		signatureCheck(inv, "x", goodSignature(d)), // held only by an invalid entry
	} {
		if h.putSignatures(c) {
			t.Errorf("PutSignatures of %s, held by no version = changed", c.Digest)
		}
		if _, err := h.store.Signatures(h.ctx, "a", "p", c.Digest); !errors.Is(err, catalog.ErrNotFound) {
			t.Errorf("PutSignatures of %s, held by no version, recorded it: %v", c.Digest, err)
		}
	}
	if after := h.stats(); after != before {
		t.Errorf("Stats went from %+v to %+v", before, after)
	}
}

// testSignaturesNoChanges: the change feed records versions, not verdicts.
func testSignaturesNoChanges(t *testing.T, h *harness) {
	e := pkg("a", "p", "1.0.0")
	h.put(e)
	seq := h.stats().Seq
	h.putSignatures(signatureCheck(e, "x", goodSignature(e.Digest)))
	if cs := h.changes(seq, 100); len(cs) != 0 {
		t.Errorf("PutSignatures recorded changes %+v", cs)
	}
}

func testSignaturesInvalid(t *testing.T, h *harness) {
	e := pkg("a", "p", "1.0.0")
	h.put(e)
	for _, tc := range []struct {
		name  string
		check *catalog.SignatureCheck
	}{
		{"no namespace", &catalog.SignatureCheck{Name: "p", Digest: e.Digest}},
		{"no name", &catalog.SignatureCheck{Namespace: "a", Digest: e.Digest}},
		{"no digest", &catalog.SignatureCheck{Namespace: "a", Name: "p"}},
		{"unknown kind", signatureCheck(e, "x", catalog.SignatureRecord{Digest: digestOf("s"), Kind: "carrier-pigeon", Verified: true})},
	} {
		changed, err := h.store.PutSignatures(h.ctx, tc.check)
		if !errors.Is(err, catalog.ErrInvalid) || changed {
			t.Errorf("%s: PutSignatures = %v, %v; want ErrInvalid", tc.name, changed, err)
		}
	}
	if _, err := h.store.Signatures(h.ctx, "a", "p", e.Digest); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("a refused check was recorded: %v", err)
	}
	if h.verifiedOf("a", "p")["1.0.0"] {
		t.Error("a refused check verified the version")
	}
}

// testSignaturesReopen: checks, their records and verdicts survive a
// restart, searches included.
func testSignaturesReopen(t *testing.T, h *harness) {
	e := pkg("a", "p", "1.0.0")
	h.put(e, pkg("b", "q", "1.0.0"))
	want := signatureCheck(e, "sha256:policy", goodSignature(e.Digest), attestation(e.Digest, false))
	h.putSignatures(want)
	h.restart()
	got, err := h.store.Signatures(h.ctx, "a", "p", e.Digest)
	if err != nil || !reflect.DeepEqual(got.Signatures, want.Signatures) || got.Policy != want.Policy || !got.Checked.Equal(want.Checked) {
		t.Errorf("Signatures after a restart = %+v, %v", got, err)
	}
	if got := h.verifiedPackages(true); !slices.Equal(got, []string{"a/p"}) {
		t.Errorf("verified=true after a restart finds %v, want a/p", got)
	}
}

// testSignaturesConcurrent: checks of every version while versions are
// written leave each version with its digest's verdict.
func testSignaturesConcurrent(t *testing.T, h *harness) {
	const versions = 40
	var es []*catalog.Entry
	for i := range versions {
		es = append(es, pkg("a", "p", fmt.Sprintf("1.%d.0", i)))
	}
	h.put(es...)
	parallel(4, func(w int) {
		for i := w; i < versions; i += 4 {
			e := es[i]
			c := signatureCheck(e, "x")
			if i%2 == 0 {
				c.Signatures = []catalog.SignatureRecord{goodSignature(e.Digest)}
			}
			if _, err := h.store.PutSignatures(h.ctx, c); err != nil {
				t.Errorf("PutSignatures: %v", err)
			}
			// A version of another package written meanwhile.
			if _, err := h.store.Put(h.ctx, pkg("b", "q", e.Tag)); err != nil {
				t.Errorf("Put: %v", err)
			}
		}
	})
	v := h.verifiedOf("a", "p")
	for i, e := range es {
		if v[e.Tag] != (i%2 == 0) {
			t.Errorf("%s: verified %v, want %v", e.Tag, v[e.Tag], i%2 == 0)
		}
	}
}
