package main

// The corpus of the OLM catalog benchmarks (olm.go): OLM packages of the
// catalog corpus's generator, all in one namespace, and the next version of
// a package, pushed while the benchmark times the catalog image's update.

import (
	"fmt"
	"math/rand/v2"

	"github.com/berth-registry/berth/pkgformat"
)

// maxOLMVersions is the most versions a package of the OLM corpus has, as
// in the catalog corpus (versionWeights).
var maxOLMVersions = len(versionWeights)

// newOLMCorpus plans packages OLM packages in namespace holding versions
// versions in all, between 1 and maxOLMVersions each. They are drawn as the
// catalog corpus draws its packages (names, descriptions, CRDs, channels,
// replaces chains, skip ranges), keeping the OLM ones; the version counts
// drawn are then evened out, one at a time from the first package on, until
// they add up to versions. The caller checks that packages <= versions <=
// packages*maxOLMVersions.
func newOLMCorpus(seed uint64, packages, versions int, namespace string) *corpus {
	r := rand.New(rand.NewPCG(seed, 0))
	c := &corpus{seed: seed}
	names := newNamer()
	for len(c.packages) < packages {
		p := planPackage(r, seed, len(c.packages), names.next(r))
		if p.format != pkgformat.OLM {
			continue
		}
		p.namespace = namespace
		p.versions = 1 + pickWeighted(r, versionWeights)
		c.packages = append(c.packages, p)
		c.versions += p.versions
	}
	for i := 0; c.versions != versions; i = (i + 1) % len(c.packages) {
		p := &c.packages[i]
		switch {
		case c.versions < versions && p.versions < maxOLMVersions:
			p.versions++
			c.versions++
		case c.versions > versions && p.versions > 1:
			p.versions--
			c.versions--
		}
	}
	return c
}

// nextVersion builds the version that follows the last of p's versions: a
// newer semver whose CSV replaces the head's, in every channel of the
// package. The versions before it are those of p built with one more
// version, which share the head's version and CSV name with p's own but not
// all of its content, so only the last is returned.
func (p *pkgSpec) nextVersion() (*pkgformat.Package, error) {
	q := *p
	q.versions++
	pkgs, err := q.build()
	if err != nil {
		return nil, err
	}
	if len(pkgs) != q.versions {
		return nil, fmt.Errorf("%s/%s: built %d versions, want %d", p.namespace, p.name, len(pkgs), q.versions)
	}
	return pkgs[len(pkgs)-1], nil
}

// pushTargets are the indexes of n packages of c spread evenly over it, each
// once: the packages that get a new version.
func pushTargets(c *corpus, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i * len(c.packages) / n
	}
	return out
}
