package pkgformat

import (
	"sort"
	"testing"

	"github.com/Masterminds/semver/v3"
)

func TestVersionKeyOrder(t *testing.T) {
	// Ascending, as semver precedence has them; non-semver first.
	want := []string{
		"latest",
		"nightly",
		"0.1.0",
		"0.9.2",
		"0.9.10",
		"1.0.0-alpha",
		"1.0.0-alpha.1",
		"1.0.0-alpha.beta",
		"1.0.0-alpha-x",
		"1.0.0-beta",
		"1.0.0-beta.2",
		"1.0.0-beta.11",
		"1.0.0-rc.1",
		"1.0.0",
		"1.0.1",
		"1.0.1_build",
		"2.5.1",
		"2.5.1_1.3.2",
		"2.5.1_1.3.3",
		"2.5.1_1.10.0",
		"10.0.0",
	}
	got := append([]string(nil), want...)
	for i, j := 0, len(got)-1; i < j; i, j = i+1, j-1 {
		got[i], got[j] = got[j], got[i]
	}
	sort.Slice(got, func(i, j int) bool { return VersionKey(got[i]) < VersionKey(got[j]) })
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order = %v, want %v", got, want)
		}
	}
}

// TestVersionKeyAgreesWithSemver checks the key against semver's own
// comparison on every pair of a set of versions.
func TestVersionKeyAgreesWithSemver(t *testing.T) {
	vs := []string{"0.0.1", "0.1.0", "1.0.0-0", "1.0.0-1", "1.0.0-01a", "1.0.0-a.b.c", "1.0.0-a.b", "1.0.0-a.10", "1.0.0-a.9", "1.0.0", "1.2.3", "1.10.0", "3.0.0-rc.1"}
	for _, a := range vs {
		for _, b := range vs {
			c := semver.MustParse(a).Compare(semver.MustParse(b))
			ka, kb := VersionKey(a), VersionKey(b)
			switch {
			case c < 0 && ka >= kb, c > 0 && ka <= kb, c == 0 && ka != kb:
				t.Errorf("%s vs %s: semver says %d, keys %q %q", a, b, c, ka, kb)
			}
		}
	}
}

func TestKubeVersionKey(t *testing.T) {
	for _, tc := range []struct {
		in   string
		ok   bool
		less string
	}{
		{"1.20", true, "1.21.0"},
		{"v1.20.3", true, "1.20.4"},
		{"1.21.0-gke.1", true, "1.22"},
		{"1.9", true, "1.10"},
		{"not-a-version", false, ""},
		{"", false, ""},
	} {
		k, ok := KubeVersionKey(tc.in)
		if ok != tc.ok {
			t.Errorf("KubeVersionKey(%q) ok = %v, want %v", tc.in, ok, tc.ok)
			continue
		}
		if ok {
			k2, _ := KubeVersionKey(tc.less)
			if k >= k2 {
				t.Errorf("KubeVersionKey(%q)=%q is not below %q=%q", tc.in, k, tc.less, k2)
			}
		}
	}
}
