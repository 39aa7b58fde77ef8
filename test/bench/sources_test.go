package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/config"
)

func TestParseProcStat(t *testing.T) {
	// A command name with spaces and a parenthesis, as /proc prints it.
	const stat = "4242 (berth (x) y) S 1 4242 4242 0 -1 4194560 9000 0 0 0 1234 567 0 0 20 0 12 0 100 2000000 3000 18446744073709551615"
	got, err := parseProcStat(stat)
	if err != nil || got != 18010*time.Millisecond {
		t.Errorf("parseProcStat = %s, %v; want 18.01s (1234+567 ticks)", got, err)
	}
	for _, bad := range []string{"", "4242 berth S 1", "4242 (berth) S 1 2 3"} {
		if _, err := parseProcStat(bad); err == nil {
			t.Errorf("parseProcStat(%q) succeeded", bad)
		}
	}
	self, err := processCPU(os.Getpid())
	if err != nil || self < 0 {
		t.Errorf("processCPU(self) = %s, %v", self, err)
	}
}

func TestSourcesOptions(t *testing.T) {
	good := sourcesOptions{tags: 50, count: 1000, interval: 10 * time.Second, cycles: 3}
	if err := good.validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*sourcesOptions)
		want string
	}{
		{"no tags", func(o *sourcesOptions) { o.tags = 0 }, "-sources-tags"},
		{"one source", func(o *sourcesOptions) { o.count = 1 }, "-sources-count"},
		{"no cycles", func(o *sourcesOptions) { o.cycles = 0 }, "-sources-cycles"},
		{"interval below berth's minimum", func(o *sourcesOptions) { o.interval = time.Second }, "-sources-interval"},
	} {
		o := good
		tc.edit(&o)
		if err := o.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
}

// TestPollingConfig checks that berth reads the polling row's
// configuration as meant: every source, with the row's interval.
func TestPollingConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "berth.yaml")
	doc := pollingConfig(15*time.Second, "http://127.0.0.1:1", "http://127.0.0.1:2", 3, 2)
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	srcs := c.NamespacePolicy(sourcesNamespace).Sources
	if len(srcs) != 5 || srcs[0].URL != "http://127.0.0.1:1/g0000.git" || srcs[0].Ref != "v*" || srcs[4].Kind != "http" || srcs[4].URL != "http://127.0.0.1:2/h0001.tgz" {
		t.Errorf("sources %+v", srcs)
	}
	if !c.Sources.AllowPrivate || c.Sources.Interval != 15*time.Second {
		t.Errorf("sources section %+v", c.Sources)
	}
}
