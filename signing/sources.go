package signing

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	slsa1 "github.com/in-toto/in-toto-golang/in_toto/slsa_provenance/v1"
)

// PredicateSLSAProvenanceV1 is the predicate type of SLSA provenance v1,
// which a trust policy's requireSource accepts as well as v0.2.
const PredicateSLSAProvenanceV1 = slsa1.PredicateSLSAProvenance

// MaxSources is how many sources one provenance attestation may name; one
// that names more is not verified.
const MaxSources = 256

// IsProvenance reports whether predicateType is SLSA provenance, v0.2 or v1.
func IsProvenance(predicateType string) bool {
	return predicateType == PredicateSLSAProvenance || predicateType == PredicateSLSAProvenanceV1
}

// provenanceSources reads the sources an SLSA provenance predicate names:
// for v0.2 its invocation's configSource and its materials, for v1 its
// buildDefinition's resolvedDependencies; each normalized by
// NormalizeSource, once, in order. A predicate that cannot be read, or
// names more than MaxSources, is an error.
func provenanceSources(predicateType string, predicate json.RawMessage) ([]string, error) {
	var uris []string
	switch predicateType {
	case PredicateSLSAProvenance:
		var p struct {
			Invocation struct {
				ConfigSource struct {
					URI string `json:"uri"`
				} `json:"configSource"`
			} `json:"invocation"`
			Materials []sourceURI `json:"materials"`
		}
		if err := json.Unmarshal(predicate, &p); err != nil {
			return nil, fmt.Errorf("the SLSA v0.2 predicate cannot be read: %v", err)
		}
		uris = append(uris, p.Invocation.ConfigSource.URI)
		for _, m := range p.Materials {
			uris = append(uris, m.URI)
		}
	case PredicateSLSAProvenanceV1:
		var p struct {
			BuildDefinition struct {
				ResolvedDependencies []sourceURI `json:"resolvedDependencies"`
			} `json:"buildDefinition"`
		}
		if err := json.Unmarshal(predicate, &p); err != nil {
			return nil, fmt.Errorf("the SLSA v1 predicate cannot be read: %v", err)
		}
		for _, d := range p.BuildDefinition.ResolvedDependencies {
			uris = append(uris, d.URI)
		}
	default:
		return nil, fmt.Errorf("predicate type %q is not SLSA provenance", predicateType)
	}
	var sources []string
	for _, u := range uris {
		if u == "" {
			continue
		}
		if n := NormalizeSource(u); !slices.Contains(sources, n) {
			if len(sources) == MaxSources {
				return nil, fmt.Errorf("more than %d sources", MaxSources)
			}
			sources = append(sources, n)
		}
	}
	return sources, nil
}

// sourceURI is a material of v0.2 or a resolved dependency of v1.
type sourceURI struct {
	URI string `json:"uri"`
}

// NormalizeSource is the source URL a trust policy's requireSource globs
// are matched against: uri without SLSA's "git+" scheme prefix
// ("git+https://...") and without an "@ref" suffix after the host
// ("https://github.com/org/repo@refs/tags/v1" is https://github.com/org/repo).
func NormalizeSource(uri string) string {
	uri = strings.TrimPrefix(uri, "git+")
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return uri
	}
	host, p, ok := strings.Cut(rest, "/")
	if !ok {
		return uri
	}
	if i := strings.IndexByte(p, '@'); i >= 0 {
		p = p[:i]
	}
	return scheme + "://" + host + "/" + p
}

// MatchSource returns the first of sources that no glob matches, and
// false; or "" and true when each matches one.
func MatchSource(globs, sources []string) (string, bool) {
	for _, s := range sources {
		if !slices.ContainsFunc(globs, func(g string) bool {
			ok, _ := path.Match(g, s)
			return ok
		}) {
			return s, false
		}
	}
	return "", true
}
