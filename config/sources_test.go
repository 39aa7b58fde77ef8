package config

import (
	"strings"
	"testing"
	"time"
)

func TestValidateSources(t *testing.T) {
	git := Source{Package: "op", Kind: "git", URL: "https://github.com/org/op", Ref: "v*"}
	with := func(edit func(*Source)) []Source {
		s := git
		edit(&s)
		return []Source{s}
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"valid", func(c *Config) {
			c.Namespaces = []Namespace{{Name: "dev"}, {Name: "team", Sources: []Source{git, {Package: "chart", Kind: "http", URL: "https://example.com/c.tgz", Format: "helm", Interval: time.Minute}}}}
		}, ""},
		{"glob namespace", func(c *Config) { c.Namespaces = []Namespace{{Name: "team-*", Sources: []Source{git}}} },
			`namespaces[0].sources[0]: sources belong to one namespace: namespaces[0].name "team-*" is a glob`},
		{"bad package", func(c *Config) {
			c.Namespaces = []Namespace{{Name: "a"}, {Name: "b", Sources: with(func(s *Source) { s.Package = "Op" })}}
		},
			"namespaces[1].sources[0].package: "},
		{"reserved package", func(c *Config) {
			c.Namespaces = []Namespace{{Name: "a", Sources: with(func(s *Source) { s.Package = "olm" })}}
		},
			"namespaces[0].sources[0].package: package name \"olm\" is reserved"},
		{"bad kind", func(c *Config) {
			c.Namespaces = []Namespace{{Name: "a", Sources: with(func(s *Source) { s.Kind = "svn" })}}
		},
			`namespaces[0].sources[0].kind: "svn" is not a kind of source`},
		{"url with password", func(c *Config) {
			c.Namespaces = []Namespace{{Name: "a", Sources: with(func(s *Source) { s.URL = "https://u:hunter2@github.com/org/op" })}}
		}, `namespaces[0].sources[0].url: "https://u:xxxxx@github.com/org/op" holds credentials`},
		{"bad pattern", func(c *Config) {
			c.Namespaces = []Namespace{{Name: "a", Sources: with(func(s *Source) { s.Ref = "v[" })}}
		},
			`namespaces[0].sources[0].ref: "v[" is not a valid tag pattern`},
		{"bad format", func(c *Config) {
			c.Namespaces = []Namespace{{Name: "a", Sources: with(func(s *Source) { s.Format = "rpm" })}}
		},
			`namespaces[0].sources[0].format: "rpm" is not a package format`},
		{"short interval", func(c *Config) {
			c.Namespaces = []Namespace{{Name: "a", Sources: with(func(s *Source) { s.Interval = time.Second })}}
		},
			"namespaces[0].sources[0].interval: must be at least 10s"},
		{"half credentials", func(c *Config) {
			c.Namespaces = []Namespace{{Name: "a", Sources: with(func(s *Source) { s.Credentials.PasswordFile = "/secrets/token" })}}
		}, "namespaces[0].sources[0].credentials: want both usernameFile and passwordFile"},
		{"duplicate", func(c *Config) { c.Namespaces = []Namespace{{Name: "a", Sources: []Source{git, git}}} },
			"namespaces[0].sources[1].package: a/op already has a source (namespaces[0].sources[0])"},
		{"short sources interval", func(c *Config) { c.Sources.Interval = 5 * time.Second }, "sources.interval: must be at least 10s"},
		{"negative maxFiles", func(c *Config) { c.Sources.MaxFiles = -1 }, "sources.maxFiles: must not be negative"},
		{"bad allowHosts", func(c *Config) { c.Sources.AllowHosts = []string{"github.com", "[x"} }, "sources.allowHosts[1]: want a host name"},
		{"replicas without signing key", func(c *Config) {
			c.Catalog.Database = "postgres://berth@db/berth"
			c.Namespaces = []Namespace{{Name: "a", Sources: []Source{git}}}
		}, "sources.signingKey: required when replicas share the catalog's PostgreSQL"},
		{"replicas with signing key", func(c *Config) {
			c.Catalog.Database = "postgres://berth@db/berth"
			c.Sources.SigningKey = "/secrets/provenance.key"
			c.Namespaces = []Namespace{{Name: "a", Sources: []Source{git}}}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Config{}
			c.SetDefaults()
			tc.edit(c)
			err := c.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("Validate() = %v: prints the password", err)
			}
		})
	}
}

func TestSourcesDefaults(t *testing.T) {
	c := &Config{}
	c.SetDefaults()
	if c.Sources.Interval != DefaultSourcesInterval {
		t.Errorf("sources.interval = %s, want %s", c.Sources.Interval, DefaultSourcesInterval)
	}
	if got := c.Sources.IntervalOf(Source{Interval: time.Minute}); got != time.Minute {
		t.Errorf("IntervalOf(1m source) = %s", got)
	}
	if got := c.Sources.IntervalOf(Source{}); got != DefaultSourcesInterval {
		t.Errorf("IntervalOf(source without interval) = %s", got)
	}
}
