package signing

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/in-toto/in-toto-golang/in_toto"
	"github.com/in-toto/in-toto-golang/in_toto/slsa_provenance/common"
	slsa02 "github.com/in-toto/in-toto-golang/in_toto/slsa_provenance/v0.2"
	"github.com/opencontainers/go-digest"
)

// PredicateSLSAProvenance is the predicate type of the provenance berth
// attests: SLSA provenance v0.2, what cosign verify-attestation --type
// slsaprovenance checks.
const PredicateSLSAProvenance = slsa02.PredicateSLSAProvenance

// BuildTypeSources is the buildType of a version berth built from package
// sources (docs/sources.md#provenance).
const BuildTypeSources = "https://github.com/berth-registry/berth/blob/main/docs/sources.md#provenance"

// Provenance is where a version came from: the sources it was built of,
// in order, and who built it.
type Provenance struct {
	// BuilderID names the builder: the berth that built the version (its
	// public URL).
	BuilderID string
	// Sources are what each source resolved to when the version was built.
	Sources []ProvenanceSource
	// Started and Finished bound the build; zero values are left out.
	Started, Finished time.Time
}

// ProvenanceSource is one source of a version.
type ProvenanceSource struct {
	// Kind is git, http or image.
	Kind string `json:"kind"`
	// URI is the source's URL (without credentials) or image reference
	// (quay.io/org/bundle:1.0, a material oci://quay.io/org/bundle:1.0).
	URI string `json:"uri"`
	// Ref is the git ref it resolved (refs/tags/v1.2.0).
	Ref string `json:"ref,omitempty"`
	// Revision is the commit, the ETag or Last-Modified date, or the
	// manifest digest it resolved to.
	Revision string `json:"revision"`
	// Dir is the directory of the source that holds the package.
	Dir string `json:"dir,omitempty"`
	// Destination is where in the package its files went.
	Destination string `json:"destination,omitempty"`
}

// materialURI is the URI of the source as a material: its URL, or for an
// image reference, which has no scheme, oci://<reference>, so that a trust
// policy's requireSource globs ("oci://quay.io/org/*") can match it.
func (s ProvenanceSource) materialURI() string {
	if s.Kind == "image" && !strings.Contains(s.URI, "://") {
		return "oci://" + s.URI
	}
	return s.URI
}

// digestSet is the material digest of a source: the commit of git
// (sha1, or sha256 for a SHA-256 repository), the digest of an image;
// an http source's ETag is no digest, so it is a parameter only.
func (s ProvenanceSource) digestSet() common.DigestSet {
	switch s.Kind {
	case "git":
		switch len(s.Revision) {
		case 40:
			return common.DigestSet{"sha1": s.Revision}
		case 64:
			return common.DigestSet{"sha256": s.Revision}
		}
	case "image":
		if d, err := digest.Parse(s.Revision); err == nil {
			return common.DigestSet{d.Algorithm().String(): d.Encoded()}
		}
	}
	return nil
}

// ProvenanceStatement is the in-toto statement, with an SLSA v0.2
// provenance predicate, that says the version name@subject was built by
// p.BuilderID from p.Sources: each source is a material (URI and digest),
// the first is the invocation's configSource, and all of them, with refs,
// revisions and directories, are the invocation's parameters.
func ProvenanceStatement(name string, subject digest.Digest, p Provenance) ([]byte, error) {
	if len(p.Sources) == 0 {
		return nil, fmt.Errorf("provenance of %s: no sources", name)
	}
	materials := make([]common.ProvenanceMaterial, len(p.Sources))
	for i, s := range p.Sources {
		materials[i] = common.ProvenanceMaterial{URI: s.materialURI(), Digest: s.digestSet()}
	}
	first := p.Sources[0]
	pred := slsa02.ProvenancePredicate{
		Builder:   common.ProvenanceBuilder{ID: p.BuilderID},
		BuildType: BuildTypeSources,
		Invocation: slsa02.ProvenanceInvocation{
			ConfigSource: slsa02.ConfigSource{URI: first.materialURI(), Digest: first.digestSet(), EntryPoint: first.Dir},
			Parameters:   map[string]any{"sources": p.Sources},
		},
		Metadata: &slsa02.ProvenanceMetadata{
			Completeness: slsa02.ProvenanceComplete{Parameters: true, Materials: true},
			Reproducible: true,
		},
		Materials: materials,
	}
	if !p.Started.IsZero() {
		t := p.Started.UTC()
		pred.Metadata.BuildStartedOn = &t
	}
	if !p.Finished.IsZero() {
		t := p.Finished.UTC()
		pred.Metadata.BuildFinishedOn = &t
	}
	st := in_toto.ProvenanceStatementSLSA02{
		StatementHeader: in_toto.StatementHeader{
			Type:          in_toto.StatementInTotoV01,
			PredicateType: PredicateSLSAProvenance,
			Subject:       []in_toto.Subject{{Name: name, Digest: common.DigestSet{subject.Algorithm().String(): subject.Encoded()}}},
		},
		Predicate: pred,
	}
	return json.Marshal(st)
}
