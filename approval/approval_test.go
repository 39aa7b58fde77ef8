package approval

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distribution/distribution/v3/registry/storage/driver/inmemory"

	"github.com/berth-registry/berth/catalog/apiv1"
)

func TestRecordAndFind(t *testing.T) {
	ctx := context.Background()
	d := inmemory.New()
	s := New(d)
	fp, other := "sha256:"+strings.Repeat("a", 64), "sha256:"+strings.Repeat("b", 64)
	a := apiv1.Approval{Namespace: "ops", Name: "etcd", Version: "1.0.0_b1", Permissions: fp, By: "alice", At: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	if got, err := s.Find(ctx, "ops", "etcd", "1.0.0+b1", fp); got != nil || err != nil {
		t.Fatalf("Find before any approval = %v, %v", got, err)
	}
	if err := s.Record(ctx, a); err != nil {
		t.Fatal(err)
	}
	got, err := s.Find(ctx, "ops", "etcd", "1.0.0+b1", fp)
	if err != nil || got == nil || *got != a {
		t.Fatalf("Find = %+v, %v; want %+v", got, err, a)
	}
	for _, miss := range [][4]string{{"ops", "etcd", "1.0.0_b1", other}, {"ops", "etcd", "1.0.1", fp}, {"ops", "etcd2", "1.0.0_b1", fp}, {"dev", "etcd", "1.0.0_b1", fp}} {
		if got, err := s.Find(ctx, miss[0], miss[1], miss[2], miss[3]); got != nil || err != nil {
			t.Errorf("Find(%v) = %+v, %v; want none", miss, got, err)
		}
	}
	if _, err := d.Stat(ctx, "/berth/approvals/ops/etcd/1.0.0_b1/"+strings.Repeat("a", 64)+".json"); err != nil {
		t.Errorf("the approval is not where the package doc says: %v", err)
	}
}

func TestBadApprovals(t *testing.T) {
	ctx := context.Background()
	d := inmemory.New()
	s := New(d)
	fp := "sha256:" + strings.Repeat("a", 64)
	for _, tc := range []struct{ ns, name, version, fp, says string }{
		{"../x", "etcd", "1.0.0", fp, "namespace"},
		{"ops", "a/b", "1.0.0", fp, "name"},
		{"ops", "etcd", "../../../docker/registry", fp, "version"},
		{"ops", "etcd", "1.0.0", "sha256:" + strings.Repeat("A", 64), "64 lower-case hex digits"},
		{"ops", "etcd", "1.0.0", "sha256:../../" + strings.Repeat("a", 58), "64 lower-case hex digits"},
		{"ops", "etcd", "1.0.0", "", "64 lower-case hex digits"},
	} {
		a := apiv1.Approval{Namespace: tc.ns, Name: tc.name, Version: tc.version, Permissions: tc.fp}
		if err := s.Record(ctx, a); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Record(%+v): %v, want ErrInvalid saying %q", a, err, tc.says)
		}
		if _, err := s.Find(ctx, tc.ns, tc.name, tc.version, tc.fp); !errors.Is(err, ErrInvalid) {
			t.Errorf("Find(%+v): %v, want ErrInvalid", a, err)
		}
	}
	if list, err := d.List(ctx, "/"); err == nil && len(list) > 0 {
		t.Errorf("bad approvals wrote %v", list)
	}
	if err := d.PutContent(ctx, "/berth/approvals/ops/etcd/1.0.0/"+strings.Repeat("a", 64)+".json", []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Find(ctx, "ops", "etcd", "1.0.0", fp); err == nil || !strings.Contains(err.Error(), "approval /berth/approvals/ops/etcd/1.0.0/") {
		t.Errorf("Find of a damaged approval: %v", err)
	}
}
