package mirror

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseSelection(t *testing.T) {
	data := `
packages:
  - namespace: kudo
  - repository: "olm/*"
    versions: ">=1.0.0 <2.0.0"
    latest: 3
  - repository: olm/etcd
    channel: stable
    from: 0.9.2
    formats: [olm]
formats: [kudo, olm]
verifiedOnly: true
`
	got, err := ParseSelection([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := &Selection{
		Packages: []Rule{
			{Namespace: "kudo"},
			{Repository: "olm/*", Versions: ">=1.0.0 <2.0.0", Latest: 3},
			{Repository: "olm/etcd", Channel: "stable", From: "0.9.2", Formats: []string{"olm"}},
		},
		Formats:      []string{"kudo", "olm"},
		VerifiedOnly: true,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseSelection = %+v, want %+v", got, want)
	}
}

func TestParseSelectionErrors(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		// want are the parts the error must contain.
		want []string
	}{
		{"unknown field in a rule", "packages:\n  - namespace: kudo\n  - repository: olm/etcd\n    version: 1.0.0\n",
			[]string{`selection: rule 2 (repository "olm/etcd"): line 4: unknown field "version"`, "versions"}},
		{"unknown top-level field", "packages:\n  - namespace: kudo\nverified: true\n",
			[]string{`selection: line 3: unknown field "verified"`, "verifiedOnly"}},
		{"field names are exact", "packages:\n  - Namespace: kudo\n",
			[]string{`rule 1: line 2: unknown field "Namespace"`}},
		{"duplicate field", "packages:\n  - namespace: kudo\n    namespace: olm\n",
			[]string{"selection: ", `"namespace"`}},
		{"wrong type", "packages:\n  - namespace: kudo\n    latest: many\n",
			[]string{`selection: rule 1 (namespace "kudo"): line 3: latest: want a whole number, not "many"`}},
		{"a list for a text field", "packages:\n  - namespace: [kudo]\n",
			[]string{`selection: rule 1: line 2: namespace: want a single value, not a list`}},
		{"a rule that is not a mapping", "packages:\n  - namespace: kudo\n  - olm/etcd\n",
			[]string{`selection: rule 2: line 3: want a mapping, like {namespace: NAME}, not "olm/etcd"`}},
		{"packages not a list", "packages: kudo\n", []string{`selection: line 1: packages: want a list, not "kudo"`}},
		{"not a mapping", "- namespace: kudo\n", []string{`selection: line 1: want a mapping with packages: [rules], not a list`}},
		{"verifiedOnly not a bool", "packages:\n  - namespace: kudo\nverifiedOnly: 1\n",
			[]string{`selection: line 3: verifiedOnly: want true or false, not "1"`}},
		{"no rules", "formats: [olm]\n", []string{"selection: no rules"}},
		{"empty rule list", "packages: []\n", []string{"selection: no rules"}},
		{"empty document", "", []string{"selection: no rules"}},
		{"rule without packages", "packages:\n  - namespace: kudo\n  - versions: \">=1\"\n",
			[]string{"selection: rule 2: needs a namespace or a repository"}},
		{"bad namespace", "packages:\n  - namespace: Kudo\n",
			[]string{`selection: rule 1 (namespace "Kudo"): namespace: namespace "Kudo" must be lowercase`}},
		{"bad glob", "packages:\n  - namespace: kudo\n  - repository: \"olm/[\"\n",
			[]string{`selection: rule 2 (repository "olm/["): repository: "olm/[" is not a glob: syntax error in pattern`}},
		{"glob without a namespace", "packages:\n  - repository: kafka\n",
			[]string{`rule 1 (repository "kafka"): repository: "kafka" is not a glob over namespace/name`}},
		{"glob with a bad literal name", "packages:\n  - repository: kudo/Kafka\n",
			[]string{`rule 1 (repository "kudo/Kafka"): repository: "kudo/Kafka" never matches: package name "Kafka"`}},
		{"glob outside the namespace", "packages:\n  - namespace: kudo\n    repository: olm/*\n",
			[]string{`rule 1 (namespace "kudo", repository "olm/*"): repository: "olm/*" never matches a package of namespace "kudo"`}},
		{"bad constraint", "packages:\n  - repository: kudo/kafka\n    versions: \">=1.x.y.z\"\n",
			[]string{`selection: rule 1 (repository "kudo/kafka"): versions: ">=1.x.y.z" is not a semver range`}},
		{"negative latest", "packages:\n  - namespace: kudo\n    latest: -2\n",
			[]string{`selection: rule 1 (namespace "kudo"): latest: must not be negative (got -2)`}},
		{"from without channel", "packages:\n  - repository: olm/etcd\n    from: 0.9.2\n",
			[]string{`selection: rule 1 (repository "olm/etcd"): from: needs a channel`}},
		{"bad from", "packages:\n  - repository: olm/etcd\n    channel: stable\n    from: \"-1\"\n",
			[]string{`selection: rule 1 (repository "olm/etcd"): from: version "-1" is not a valid tag`}},
		{"unknown rule format", "packages:\n  - namespace: kudo\n    formats: [chart]\n",
			[]string{`selection: rule 1 (namespace "kudo"): formats: unknown format "chart" (known: helm, kudo, olm, plain)`}},
		{"unknown selection format", "packages:\n  - namespace: kudo\nformats: [olm, operator]\n",
			[]string{`selection: formats: unknown format "operator"`}},
		{"rule formats outside the selection's", "packages:\n  - namespace: kudo\n    formats: [helm]\nformats: [olm, kudo]\n",
			[]string{`selection: rule 1 (namespace "kudo"): formats: none of helm is among the selection's formats (olm, kudo)`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseSelection([]byte(tt.yaml))
			if err == nil {
				t.Fatalf("ParseSelection = %+v, want an error", s)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\n does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "invalid package") {
				t.Errorf("error %q speaks of an invalid package", err)
			}
		})
	}
}

func TestSelectionValidateFromFlags(t *testing.T) {
	s := &Selection{Packages: []Rule{{Repository: "kudo/*", Latest: 1}}}
	if err := s.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	s.Packages = append(s.Packages, Rule{Namespace: "olm", Channel: "stable", From: "0.9.2", Versions: "^0.9"})
	if err := s.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	s.Packages = append(s.Packages, Rule{Namespace: "olm", From: "0.9.2"})
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), `rule 3 (namespace "olm"): from: needs a channel`) {
		t.Errorf("Validate = %v, want rule 3's from to need a channel", err)
	}
}

// TestParseSelectionKeepsVersionText checks that values YAML reads as
// numbers are taken as written: from: 1.10 is version 1.10, not 1.1.
func TestParseSelectionKeepsVersionText(t *testing.T) {
	s, err := ParseSelection([]byte("packages:\n  - repository: olm/etcd\n    channel: 2.0\n    from: 1.10\n    versions: 1.20\n  - namespace: 0755\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Rule{{Repository: "olm/etcd", Channel: "2.0", From: "1.10", Versions: "1.20"}, {Namespace: "0755"}}
	if !reflect.DeepEqual(s.Packages, want) {
		t.Errorf("Packages = %+v, want %+v", s.Packages, want)
	}
}
