// Package testenv answers what tests ask of the environment they run in:
// whether it is CI, and which random seed to use.
package testenv

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// CI reports whether the tests run in CI, where a missing tool fails a test
// instead of skipping it: the CI variable is set to anything but a false value
// of strconv.ParseBool ("false", "0", "f", ...). A value ParseBool does not
// know counts as CI, as CI services set CI to such values.
func CI() bool {
	v := os.Getenv("CI")
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	return err != nil || b
}

// Seed returns the random seed a test uses: the integer in the environment
// variable env when it is set, else a new one. It logs the seed and how to
// replay it, and fails the test when env holds no integer.
func Seed(tb testing.TB, env string) int64 {
	tb.Helper()
	seed := time.Now().UnixNano()
	if v := os.Getenv(env); v != "" {
		var err error
		if seed, err = strconv.ParseInt(v, 10, 64); err != nil {
			tb.Fatalf("%s=%q is not a seed: %v", env, v, err)
		}
	}
	tb.Logf("random seed %d; replay with %s=%d", seed, env, seed)
	return seed
}
