package signing

import (
	"context"
	"fmt"
)

// Admit decides whether repo:tag may name the version digest under the
// policy: always, unless the policy for repo requires signatures; then only
// when a signature by one of its keys verifies for digest and, when the
// policy has requireSource, a verified SLSA provenance attestation names
// only allowed sources. The error says what was missing and how to proceed.
func Admit(ctx context.Context, f Fetcher, p *Policy, repo, tag, digest string) error {
	rule, ok := p.For(repo)
	if !ok || !rule.Require {
		return nil
	}
	rep, err := check(ctx, f, repo, digest, rule, true)
	if err != nil {
		return fmt.Errorf("%s:%s: cannot check the signatures of %s: %w", repo, tag, digest, err)
	}
	if rep.Verified() {
		return nil
	}
	if _, signed := rep.VerifiedBy(); signed {
		return fmt.Errorf("%s:%s: %s is signed but its provenance is refused: %s; attest the provenance of a build from an allowed source (cosign attest --type slsaprovenance), then tag it",
			repo, tag, digest, rep.Reason())
	}
	return fmt.Errorf("%s:%s: %s has no signature verified by the %s (%s); push the version by digest, sign it, then tag it",
		repo, tag, digest, rule.Describe(), rep.Reason())
}

// keyIDs abbreviates the fingerprints of keys for messages.
func keyIDs(keys []Key) []string {
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = shortID(k.ID)
	}
	return ids
}
