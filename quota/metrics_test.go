package quota_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/berth-registry/berth/quota"
)

func TestMetrics(t *testing.T) {
	ctx := context.Background()
	l, err := quota.OpenSQLite(ctx, filepath.Join(t.TempDir(), "quota.db"), quota.Options{Limit: limits})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	reg := prometheus.NewRegistry()
	m, err := quota.NewMetrics(reg, l)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Charge(ctx, quota.Push{Namespace: "team-a", Item: quota.Item{Digest: "sha256:a", Size: 60}, Limit: 100}); err != nil {
		t.Fatal(err)
	}
	if err := l.OpenUpload(ctx, quota.Upload{UUID: "u", Repository: "team-a/app", Subject: "alice"}, -1, time.Time{}); err != nil {
		t.Fatal(err)
	}
	m.Refused("team-a", quota.ReasonQuota)
	m.Purged(2)
	want := `
# HELP berth_quota_limit_bytes Each namespace's quota (namespaces[].quota); 0 for none.
# TYPE berth_quota_limit_bytes gauge
berth_quota_limit_bytes{namespace="team-a"} 100
# HELP berth_quota_refused_total Pushes refused, by namespace and reason: quota (over the namespace's quota), size (beyond registry.uploads.maxSize), uploads (too many open uploads).
# TYPE berth_quota_refused_total counter
berth_quota_refused_total{namespace="team-a",reason="quota"} 1
# HELP berth_quota_used_bytes What each namespace stores, each blob and manifest counted once.
# TYPE berth_quota_used_bytes gauge
berth_quota_used_bytes{namespace="team-a"} 60
# HELP berth_uploads_open Blob uploads open, across replicas.
# TYPE berth_uploads_open gauge
berth_uploads_open 1
# HELP berth_uploads_purged_total Abandoned uploads purged after registry.uploads.purgeAfter.
# TYPE berth_uploads_purged_total counter
berth_uploads_purged_total 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
