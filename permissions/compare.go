package permissions

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/berth-registry/berth/pkgformat"
)

// Comparer tells whether upgrades widen permissions, for the many edges of
// an upgrade graph: it expands each distinct set of rules once, and at most
// budget grants in all, so that the work of one graph is bounded whatever
// its versions ask for. Versions with the same rules never widen.
type Comparer struct {
	budget int
	sets   map[string]*grantSet
}

// grantSet is one expanded set of rules; tooBroad when it could not be
// expanded (beyond MaxGrants or the comparer's budget).
type grantSet struct {
	grants   []Grant
	have     map[Grant]bool
	tooBroad bool
}

// NewComparer returns a Comparer that expands at most budget grants.
func NewComparer(budget int) *Comparer {
	return &Comparer{budget: budget, sets: make(map[string]*grantSet)}
}

// Widens reports whether upgrading from one version's permissions to
// another's grants something the old did not. When either set cannot be
// expanded (too broad, or past the budget) and the two differ, it answers
// true: an upgrade that cannot be shown to stay within its predecessor's
// permissions is treated as widening them.
func (c *Comparer) Widens(from, to *pkgformat.Permissions) bool {
	kf, kt := key(from), key(to)
	if kf == kt {
		return false
	}
	f, t := c.set(kf, from), c.set(kt, to)
	if f.tooBroad || t.tooBroad {
		return true
	}
	for _, g := range t.grants {
		if !covered(g, f.have) {
			return true
		}
	}
	return false
}

// set returns the expanded set of p, whose key is k.
func (c *Comparer) set(k string, p *pkgformat.Permissions) *grantSet {
	if s, ok := c.sets[k]; ok {
		return s
	}
	s := &grantSet{}
	gs, err := grants(p)
	if err != nil || len(gs) > c.budget {
		s.tooBroad = true
	} else {
		c.budget -= len(gs)
		s.grants, s.have = gs, index(gs)
	}
	c.sets[k] = s
	return s
}

// key identifies a set of rules: its JSON, which encodes the struct's
// fields in a fixed order. No rules and nil are the same.
func key(p *pkgformat.Permissions) string {
	if p == nil || len(p.Cluster)+len(p.Namespaced) == 0 {
		return ""
	}
	b, err := json.Marshal(p)
	if err != nil {
		panic("permissions: encoding rules: " + err.Error())
	}
	return string(b)
}

// Fingerprint identifies a set of rules, for approvals of exactly the rules
// reviewed: "sha256:" and the hex digest of its JSON.
func Fingerprint(p *pkgformat.Permissions) string {
	sum := sha256.Sum256([]byte(key(p)))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// fingerprintPattern is the form of Fingerprint.
var fingerprintPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ValidFingerprint checks that s has the form of a Fingerprint.
func ValidFingerprint(s string) error {
	if !fingerprintPattern.MatchString(s) {
		return fmt.Errorf("permissions %q: want sha256: and 64 lower-case hex digits, as berth prints it", s)
	}
	return nil
}
