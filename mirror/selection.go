package mirror

// Selection chooses what to export or sync: the union of its rules, each
// narrowed by the selection-wide Formats and VerifiedOnly. It is read from
// a YAML selection file (ParseSelection) or built from flags.
type Selection struct {
	// Packages are the rules; a version is selected when any rule selects it.
	Packages []Rule `json:"packages"`
	// Formats, when set, keeps only packages of these formats.
	Formats []string `json:"formats,omitempty"`
	// VerifiedOnly keeps only versions the source verifies against its
	// trust policy.
	VerifiedOnly bool `json:"verifiedOnly,omitempty"`
}

// Rule selects versions of packages. Namespace or Repository (or both) say
// which packages; Versions, Latest and Channel (with From) which of their
// versions; all versions when none is set.
type Rule struct {
	// Namespace selects every package of a namespace.
	Namespace string `json:"namespace,omitempty"`
	// Repository is a glob over namespace/name, as trust policies and auth
	// rules write them ("olm/*", "kudo/kafka").
	Repository string `json:"repository,omitempty"`
	// Versions is a semver range (">=1.2.0 <2.0.0", "~0.3").
	Versions string `json:"versions,omitempty"`
	// Latest keeps the newest N versions, after Versions.
	Latest int `json:"latest,omitempty"`
	// Channel takes the versions of an OLM channel; with From, only the
	// upgrade path from From to the channel's head, From included.
	Channel string `json:"channel,omitempty"`
	From    string `json:"from,omitempty"`
	// Formats, when set, keeps only packages of these formats.
	Formats []string `json:"formats,omitempty"`
}
