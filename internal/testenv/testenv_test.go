package testenv

import "testing"

func TestCI(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  bool
	}{
		{"", false},
		{"false", false},
		{"0", false},
		{"FALSE", false},
		{"true", true},
		{"1", true},
		{"True", true},
		{"yes", true},
		{"woodpecker", true},
	} {
		t.Setenv("CI", tc.value)
		if got := CI(); got != tc.want {
			t.Errorf("CI=%q: CI() = %v, want %v", tc.value, got, tc.want)
		}
	}
}

func TestSeed(t *testing.T) {
	const env = "BERTH_TEST_SEED"
	t.Setenv(env, "42")
	if got := Seed(t, env); got != 42 {
		t.Errorf("%s=42: Seed = %d", env, got)
	}
}
