package signing_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/berth-registry/berth/signing"
)

func TestProvenanceStatement(t *testing.T) {
	subject := digest.FromString("version")
	commit := "0123456789abcdef0123456789abcdef01234567"
	body, err := signing.ProvenanceStatement("berth.example/team/op", subject, signing.Provenance{
		BuilderID: "https://berth.example",
		Sources: []signing.ProvenanceSource{
			{Kind: "git", URI: "https://github.com/org/op", Ref: "refs/tags/v1.0.0", Revision: commit, Dir: "operator"},
			{Kind: "http", URI: "https://example.com/crds.tgz", Revision: `"etag-1"`, Destination: "crds"},
		},
		Started: time.Unix(100, 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Type          string `json:"_type"`
		PredicateType string `json:"predicateType"`
		Subject       []struct {
			Name   string            `json:"name"`
			Digest map[string]string `json:"digest"`
		} `json:"subject"`
		Predicate struct {
			Builder    struct{ ID string } `json:"builder"`
			BuildType  string              `json:"buildType"`
			Invocation struct {
				ConfigSource struct {
					URI        string            `json:"uri"`
					Digest     map[string]string `json:"digest"`
					EntryPoint string            `json:"entryPoint"`
				} `json:"configSource"`
				Parameters struct {
					Sources []signing.ProvenanceSource `json:"sources"`
				} `json:"parameters"`
			} `json:"invocation"`
			Materials []struct {
				URI    string            `json:"uri"`
				Digest map[string]string `json:"digest"`
			} `json:"materials"`
		} `json:"predicate"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != "https://in-toto.io/Statement/v0.1" || st.PredicateType != "https://slsa.dev/provenance/v0.2" {
		t.Errorf("type %q, predicate %q", st.Type, st.PredicateType)
	}
	if len(st.Subject) != 1 || st.Subject[0].Name != "berth.example/team/op" || st.Subject[0].Digest["sha256"] != subject.Encoded() {
		t.Errorf("subject %+v", st.Subject)
	}
	p := st.Predicate
	if p.Builder.ID != "https://berth.example" || p.BuildType != signing.BuildTypeSources {
		t.Errorf("builder %q, buildType %q", p.Builder.ID, p.BuildType)
	}
	cs := p.Invocation.ConfigSource
	if cs.URI != "https://github.com/org/op" || cs.Digest["sha1"] != commit || cs.EntryPoint != "operator" {
		t.Errorf("configSource %+v", cs)
	}
	if len(p.Materials) != 2 || p.Materials[0].Digest["sha1"] != commit || p.Materials[1].URI != "https://example.com/crds.tgz" || len(p.Materials[1].Digest) != 0 {
		t.Errorf("materials %+v", p.Materials)
	}
	if ps := p.Invocation.Parameters.Sources; len(ps) != 2 || ps[1].Revision != `"etag-1"` || ps[1].Destination != "crds" {
		t.Errorf("parameters %+v", ps)
	}
	if _, err := signing.ProvenanceStatement("x", subject, signing.Provenance{}); err == nil {
		t.Error("a provenance without sources was accepted")
	}
}
