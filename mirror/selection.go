package mirror

import (
	"errors"
	"fmt"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/Masterminds/semver/v3"
	yamlnode "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"

	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/pkgformat"
)

// Selection chooses what to export or sync: the union of its rules, each
// narrowed by the selection-wide Formats and VerifiedOnly. It is read from
// a YAML selection file (ParseSelection) or built from flags and checked
// with Validate; Resolve turns it into versions.
//
// A selection file:
//
//	packages:
//	  # every version of every package of a namespace
//	  - namespace: kudo
//	  # the three newest 1.x versions of the packages that match a glob
//	  - repository: "olm/*"
//	    versions: ">=1.0.0 <2.0.0"
//	    latest: 3
//	  # the versions of an OLM channel
//	  - repository: olm/etcd
//	    channel: stable
//	  # the upgrade path from 0.9.2 to the head of a channel, 0.9.2 included
//	  - repository: olm/prometheus
//	    channel: beta
//	    from: 0.9.2
//	  # Helm charts only, of a namespace
//	  - namespace: charts
//	    formats: [helm]
//	# only packages of these formats, whatever the rule (optional)
//	formats: [kudo, olm, helm]
//	# only versions the source verifies against its trust policy (optional)
//	verifiedOnly: true
//
// Field names are exact; a field the selection does not have is an error.
type Selection struct {
	// Packages are the rules; a version is selected when any rule selects it.
	Packages []Rule `json:"packages"`
	// Formats, when set, keeps only packages of these formats.
	Formats []string `json:"formats,omitempty"`
	// VerifiedOnly keeps only versions the source verifies against its
	// trust policy. It applies after each rule has chosen, so a rule's
	// Latest counts unverified versions too, and Resolve warns of what it
	// drops.
	VerifiedOnly bool `json:"verifiedOnly,omitempty"`
}

// Rule selects versions of packages. Namespace or Repository (or both) say
// which packages; Versions, Latest and Channel (with From) which of their
// versions; all versions when none is set. When several are set, a version
// must pass each: Channel (or the upgrade path of Channel and From), then
// Versions, then Latest, which counts what the others left.
type Rule struct {
	// Namespace selects every package of a namespace.
	Namespace string `json:"namespace,omitempty"`
	// Repository is a glob over namespace/name, as trust policies and auth
	// rules write them ("olm/*", "kudo/kafka"): path.Match syntax, so '*'
	// does not cross the '/'. With Namespace, a package must be in the
	// namespace and match the glob.
	Repository string `json:"repository,omitempty"`
	// Versions is a semver range (">=1.2.0 <2.0.0", "~0.3"), in the syntax
	// of github.com/Masterminds/semver: versions that are not semver never
	// match, and pre-releases match only a range that names one. A '_' in
	// a version is read as '+', as in tags (KUDO's 5.3.2_0.9.0 is 5.3.2
	// with build metadata 0.9.0).
	Versions string `json:"versions,omitempty"`
	// Latest keeps the newest N versions, after Versions; 0 keeps all.
	Latest int `json:"latest,omitempty"`
	// Channel takes the versions of an OLM channel; with From, only the
	// upgrade path from From to the channel's head, From included.
	Channel string `json:"channel,omitempty"`
	From    string `json:"from,omitempty"`
	// Formats, when set, keeps only packages of these formats.
	Formats []string `json:"formats,omitempty"`
}

// selFormats are the formats a selection may name.
var selFormats = []pkgformat.Format{pkgformat.Helm, pkgformat.KUDO, pkgformat.OLM, pkgformat.Plain}

// ParseSelection reads a selection file (see Selection for its YAML) and
// validates it. Errors start with "selection: " and name what is wrong: the
// line and field of a field the selection does not have, the rule (by its
// number, from 1, and its namespace and repository) and field of a value
// that is not valid.
func ParseSelection(data []byte) (*Selection, error) {
	data, err := selPrepare(data)
	if err != nil {
		return nil, fmt.Errorf("selection: %w", err)
	}
	var s Selection
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return nil, fmt.Errorf("selection: %w", err)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Validate reports the first thing wrong with the selection, naming the
// rule (by its number, from 1, and its namespace and repository) and the
// field: a selection needs a rule; a rule needs Namespace or Repository;
// Namespace must be a valid namespace, Repository a glob over
// namespace/name, Versions a semver range, Latest not negative; From needs
// Channel and must be a valid version; formats must be known ones (helm,
// kudo, olm, plain), and a rule's formats must share one with the
// selection's. Errors start with "selection: ".
func (s *Selection) Validate() error {
	if err := selCheckFormats(s.Formats); err != nil {
		return fmt.Errorf("selection: formats: %w", err)
	}
	if len(s.Packages) == 0 {
		return errors.New("selection: no rules: packages must list at least one rule (namespace: NAME or repository: GLOB)")
	}
	for i, r := range s.Packages {
		if err := r.selValidate(s.Formats); err != nil {
			return fmt.Errorf("selection: %s: %w", selRuleName(i, r), err)
		}
	}
	return nil
}

// selValidate checks one rule of a selection whose formats are formats;
// errors name the field.
func (r *Rule) selValidate(formats []string) error {
	if r.Namespace == "" && r.Repository == "" {
		return errors.New("needs a namespace or a repository")
	}
	if r.Namespace != "" {
		if err := pkgformat.ValidNamespace(r.Namespace); err != nil {
			return fmt.Errorf("namespace: %s", selReason(err))
		}
	}
	if r.Repository != "" {
		if err := selCheckGlob(r.Repository, r.Namespace); err != nil {
			return fmt.Errorf("repository: %w", err)
		}
	}
	if r.Versions != "" {
		if _, err := semver.NewConstraint(r.Versions); err != nil {
			return fmt.Errorf("versions: %q is not a semver range (like \">=1.2.0 <2.0.0\" or \"~0.3\"): %w", r.Versions, err)
		}
	}
	if r.Latest < 0 {
		return fmt.Errorf("latest: must not be negative (got %d)", r.Latest)
	}
	if r.From != "" {
		if r.Channel == "" {
			return fmt.Errorf("from: needs a channel (from %q names where an upgrade path within a channel starts)", r.From)
		}
		if err := pkgformat.ValidVersion(r.From); err != nil {
			return fmt.Errorf("from: %s", selReason(err))
		}
	}
	if err := selCheckFormats(r.Formats); err != nil {
		return fmt.Errorf("formats: %w", err)
	}
	if len(r.Formats) > 0 && len(formats) > 0 && !slices.ContainsFunc(r.Formats, func(f string) bool { return slices.Contains(formats, f) }) {
		return fmt.Errorf("formats: none of %s is among the selection's formats (%s), so the rule selects nothing",
			strings.Join(r.Formats, ", "), strings.Join(formats, ", "))
	}
	return nil
}

// selCheckGlob checks a repository glob: path.Match syntax, over
// namespace/name, its literal parts valid names, and able to match a
// package of namespace when that is set.
func selCheckGlob(glob, namespace string) error {
	if _, err := path.Match(glob, ""); err != nil {
		return fmt.Errorf("%q is not a glob: %w", glob, err)
	}
	ns, name, ok := strings.Cut(glob, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("%q is not a glob over namespace/name, like \"olm/*\" or \"kudo/kafka\"", glob)
	}
	if !config.IsGlob(ns) {
		if err := pkgformat.ValidNamespace(ns); err != nil {
			return fmt.Errorf("%q never matches: %s", glob, selReason(err))
		}
	}
	if !config.IsGlob(name) {
		if err := pkgformat.ValidName(name); err != nil {
			return fmt.Errorf("%q never matches: %s", glob, selReason(err))
		}
	}
	if namespace != "" {
		if ok, _ := path.Match(ns, namespace); !ok {
			return fmt.Errorf("%q never matches a package of namespace %q", glob, namespace)
		}
	}
	return nil
}

// selCheckFormats checks that every format is one berth reads.
func selCheckFormats(formats []string) error {
	for _, f := range formats {
		if !slices.Contains(selFormats, pkgformat.Format(f)) {
			return fmt.Errorf("unknown format %q (known: %s)", f, selFormatList())
		}
	}
	return nil
}

// selFormatList is the known formats, comma separated.
func selFormatList() string {
	names := make([]string, len(selFormats))
	for i, f := range selFormats {
		names[i] = string(f)
	}
	return strings.Join(names, ", ")
}

// selReason is the message of one of pkgformat's validation errors without
// the ": invalid package" that ends it, which would mislead here.
func selReason(err error) string {
	return strings.TrimSuffix(err.Error(), ": "+pkgformat.ErrInvalid.Error())
}

// selRuleName names rule i (from 0) as errors and warnings do:
// `rule 2 (namespace "kudo", repository "kudo/k*")`.
func selRuleName(i int, r Rule) string {
	return selRuleLabel(i, r.Namespace, r.Repository)
}

func selRuleLabel(i int, namespace, repository string) string {
	var parts []string
	if namespace != "" {
		parts = append(parts, fmt.Sprintf("namespace %q", namespace))
	}
	if repository != "" {
		parts = append(parts, fmt.Sprintf("repository %q", repository))
	}
	name := fmt.Sprintf("rule %d", i+1)
	if len(parts) > 0 {
		name += " (" + strings.Join(parts, ", ") + ")"
	}
	return name
}

// selPrepare checks a selection file before it is decoded: it refuses a
// field that Selection or Rule does not have and a value of the wrong kind,
// naming the line and the field, and the rule when it is in one. It returns
// the file to decode: data itself, or data with the values of text fields
// that YAML reads as numbers or booleans quoted, so that "from: 1.10" is
// version 1.10 and not the number 1.1. Syntax errors are left to the
// decoder.
func selPrepare(data []byte) ([]byte, error) {
	var root yamlnode.Node
	if err := yamlnode.Unmarshal(data, &root); err != nil || len(root.Content) == 0 {
		return data, nil
	}
	top := root.Content[0]
	if top.Kind != yamlnode.MappingNode {
		return nil, fmt.Errorf("line %d: want a mapping with packages: [rules], not %s", top.Line, selDescribe(top))
	}
	quoted := false
	err := selCheckMapping(top, reflect.TypeFor[Selection](), &quoted, func(key string, value *yamlnode.Node) error {
		if key != "packages" || value.Kind != yamlnode.SequenceNode {
			return nil
		}
		for i, item := range value.Content {
			err := fmt.Errorf("line %d: want a mapping, like {namespace: NAME}, not %s", item.Line, selDescribe(item))
			if item.Kind == yamlnode.MappingNode {
				err = selCheckMapping(item, reflect.TypeFor[Rule](), &quoted, nil)
			}
			if err != nil {
				ns, repo := selScalar(item, "namespace"), selScalar(item, "repository")
				return fmt.Errorf("%s: %w", selRuleLabel(i, ns, repo), err)
			}
		}
		return nil
	})
	if err != nil || !quoted {
		return data, err
	}
	return yamlnode.Marshal(&root)
}

// selCheckMapping checks the keys of a mapping against the JSON field names
// of t and their values against the fields' types (see selCheckValue),
// calling each (when not nil) with every key and value.
func selCheckMapping(m *yamlnode.Node, t reflect.Type, quoted *bool, each func(key string, value *yamlnode.Node) error) error {
	fields := map[string]reflect.Type{}
	var known []string
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			fields[name] = f.Type
			known = append(known, name)
		}
	}
	slices.Sort(known)
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		ft, ok := fields[k.Value]
		if !ok {
			return fmt.Errorf("line %d: unknown field %q (known: %s)", k.Line, k.Value, strings.Join(known, ", "))
		}
		if err := selCheckValue(v, ft, quoted); err != nil {
			return fmt.Errorf("line %d: %s: %w", k.Line, k.Value, err)
		}
		if each != nil {
			if err := each(k.Value, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// selCheckValue checks that a value can be decoded into a field of type t:
// a whole number for an int, true or false for a bool, a single value for a
// string, a list for a slice. Null is the zero value. A single value for a
// string that YAML reads as other than text is marked as text, and quoted
// set.
func selCheckValue(v *yamlnode.Node, t reflect.Type, quoted *bool) error {
	if v.Kind == yamlnode.ScalarNode && v.Tag == "!!null" {
		return nil
	}
	switch t.Kind() {
	case reflect.Int:
		if v.Kind != yamlnode.ScalarNode || v.Tag != "!!int" {
			return fmt.Errorf("want a whole number, not %s", selDescribe(v))
		}
	case reflect.Bool:
		if v.Kind != yamlnode.ScalarNode || v.Tag != "!!bool" {
			return fmt.Errorf("want true or false, not %s", selDescribe(v))
		}
	case reflect.String:
		if v.Kind != yamlnode.ScalarNode {
			return fmt.Errorf("want a single value, not %s", selDescribe(v))
		}
		if v.Tag != "!!str" {
			v.Tag, v.Style = "!!str", yamlnode.DoubleQuotedStyle
			*quoted = true
		}
	case reflect.Slice:
		if v.Kind != yamlnode.SequenceNode {
			return fmt.Errorf("want a list, not %s", selDescribe(v))
		}
		if t.Elem().Kind() == reflect.String {
			for _, item := range v.Content {
				if err := selCheckValue(item, t.Elem(), quoted); err != nil {
					return fmt.Errorf("line %d: %w", item.Line, err)
				}
			}
		}
	}
	return nil
}

// selDescribe names what a YAML value is, for errors.
func selDescribe(v *yamlnode.Node) string {
	switch v.Kind {
	case yamlnode.MappingNode:
		return "a mapping"
	case yamlnode.SequenceNode:
		return "a list"
	case yamlnode.ScalarNode:
		return strconv.Quote(v.Value)
	}
	return "an alias"
}

// selScalar returns the value of key in a mapping when it is a single value.
func selScalar(m *yamlnode.Node, key string) string {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key && m.Content[i+1].Kind == yamlnode.ScalarNode {
			return m.Content[i+1].Value
		}
	}
	return ""
}
