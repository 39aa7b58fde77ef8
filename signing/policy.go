package signing

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/berth-registry/berth/config"
)

// Policy is a loaded trust policy: for each repository, the keys whose
// signatures are trusted and whether a verified signature is required.
type Policy struct {
	rules []Rule
}

// Rule is the trust of the repositories its globs match.
type Rule struct {
	// Repositories are the globs over namespace/name the rule applies to.
	Repositories []string
	// Images are the globs over image repositories (quay.io/org/*) the
	// rule applies to (ForImage).
	Images []string
	// Keys are the trusted keys.
	Keys []Key
	// Require makes a verified signature a condition for tagging and pulling.
	Require bool
	// RequireSource, when set, makes a verified SLSA provenance
	// attestation, every source of which one of these globs matches, a
	// condition of the version being verified (Report.Verified).
	RequireSource []string
	// Log, when set, trusts a signature only with an entry of one of these
	// transparency logs (checked offline, from the entry cosign attaches).
	Log *LogKeys
}

// NewPolicy loads the public keys the policies name. Errors name the
// configuration key under prefix (e.g. "trust", or "" for a document whose
// top level is policies) and the file.
func NewPolicy(prefix string, t config.Trust) (*Policy, error) {
	if err := t.Validate(prefix); err != nil {
		return nil, err
	}
	p := &Policy{}
	for i, tp := range t.Policies {
		r := Rule{Repositories: tp.Repositories, Images: tp.Images, Require: tp.Require, RequireSource: tp.RequireSource}
		for j, file := range tp.Keys {
			k, err := LoadPublicKey(file)
			if err != nil {
				return nil, fmt.Errorf("%spolicies[%d].keys[%d]: %w", config.KeyPrefix(prefix), i, j, err)
			}
			r.Keys = append(r.Keys, k)
		}
		if len(tp.TLogKeys) > 0 {
			l, err := LoadLogKeys(tp.TLogKeys...)
			if err != nil {
				return nil, fmt.Errorf("%spolicies[%d].tlogKeys: %w", config.KeyPrefix(prefix), i, err)
			}
			r.Log = l
		}
		p.rules = append(p.rules, r)
	}
	return p, nil
}

// NewPolicyOf builds a policy from loaded rules.
func NewPolicyOf(rules ...Rule) *Policy { return &Policy{rules: rules} }

// For returns the rule of the first policy with a glob matching repo
// (namespace/name), and false when no policy covers it. A nil Policy covers nothing.
func (p *Policy) For(repo string) (Rule, bool) {
	return p.first(repo, func(r Rule) []string { return r.Repositories })
}

// ForImage returns the rule of the first policy with an Images glob
// matching repo, the source repository of a container image
// (quay.io/org/img), and false when no policy covers it.
func (p *Policy) ForImage(repo string) (Rule, bool) {
	return p.first(repo, func(r Rule) []string { return r.Images })
}

// first returns the first rule one of whose globs matches name.
func (p *Policy) first(name string, globs func(Rule) []string) (Rule, bool) {
	if p == nil {
		return Rule{}, false
	}
	for _, r := range p.rules {
		for _, glob := range globs(r) {
			if ok, _ := path.Match(glob, name); ok {
				return r, true
			}
		}
	}
	return Rule{}, false
}

// Requires reports whether repo needs a verified signature.
func (p *Policy) Requires(repo string) bool {
	r, ok := p.For(repo)
	return ok && r.Require
}

// Empty reports whether the policy has no rules.
func (p *Policy) Empty() bool { return p == nil || len(p.rules) == 0 }

// Fingerprint identifies the policy's content (globs, key IDs, require,
// requireSource), so that a change since a verdict was recorded can be
// noticed.
func (p *Policy) Fingerprint() string {
	h := sha256.New()
	if p != nil {
		for _, r := range p.rules {
			fmt.Fprintf(h, "%q %v", r.Repositories, r.Require)
			if len(r.Images) > 0 {
				fmt.Fprintf(h, " images %q", r.Images)
			}
			for _, k := range r.Keys {
				fmt.Fprintf(h, " %s", k.ID)
			}
			if r.Log != nil {
				fmt.Fprintf(h, " log %s", strings.Join(r.Log.ids, " "))
			}
			if len(r.RequireSource) > 0 {
				fmt.Fprintf(h, " sources %q", r.RequireSource)
			}
			h.Write([]byte{'\n'})
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Describe names the rule for messages, "trust policy for stable/*": its globs.
func (r Rule) Describe() string {
	return "trust policy for " + strings.Join(slices.Concat(r.Repositories, r.Images), ", ")
}
