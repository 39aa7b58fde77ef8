package apiv1_test

import (
	"testing"

	"github.com/berth-registry/berth/catalog/apiv1"
)

func TestUsedPercent(t *testing.T) {
	for _, tc := range []struct {
		used, limit int64
		want        string
	}{
		{0, 1, "0.0%"},
		{1, 1000, "0.1%"},
		{999, 1000, "99.9%"},
		{9999, 10000, "99.9%"},
		{1000, 1000, "100.0%"},
		{1500, 1000, "150.0%"},
		{1 << 62, 1, "461168601842738790400.0%"},
		{-5, 10, "0.0%"},
		{5 << 20, 0, ""},
		{5, -1, ""},
	} {
		u := apiv1.NamespaceUsage{UsedBytes: tc.used, LimitBytes: tc.limit}
		if got := u.UsedPercent(); got != tc.want {
			t.Errorf("UsedPercent of %d of %d = %q, want %q", tc.used, tc.limit, got, tc.want)
		}
	}
}
