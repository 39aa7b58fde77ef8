package pkgsource

import "testing"

func TestShortRevision(t *testing.T) {
	for _, tc := range []struct{ rev, want string }{
		{"0123456789abcdef0123456789abcdef01234567", "0123456789ab"},
		{"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "sha256:0123456789ab"},
		{`"5d8c72a5edda8d6a:1"`, `"5d8c72a5edd`},
		{"short", "short"},
		{"", ""},
	} {
		if got := ShortRevision(tc.rev); got != tc.want {
			t.Errorf("ShortRevision(%q) = %q, want %q", tc.rev, got, tc.want)
		}
	}
}
