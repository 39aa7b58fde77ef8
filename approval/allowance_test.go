package approval

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/distribution/distribution/v3/registry/storage/driver/inmemory"

	"github.com/berth-registry/berth/permissions"
	"github.com/berth-registry/berth/pkgformat"
)

// rules returns a rule set that gets resource.
func rules(resource string) *pkgformat.Permissions {
	return &pkgformat.Permissions{Cluster: []pkgformat.PolicyRule{{APIGroups: []string{""}, Resources: []string{resource}, Verbs: []string{"get"}}}}
}

func allowed(ns, name string, r *pkgformat.Permissions) Allowed {
	return Allowed{Namespace: ns, Name: name, Permissions: permissions.Fingerprint(r), Rules: r, Version: "1.0.0", Reason: "approved", By: "alice"}
}

// TestAllowanceOfManyReplicas: replicas adding rule sets to one allowance
// at once lose none of them, and each package name has its own.
func TestAllowanceOfManyReplicas(t *testing.T) {
	ctx := context.Background()
	d := inmemory.New()
	if got, err := New(d).Allowance(ctx, "ops", "etcd"); got != nil || err != nil {
		t.Fatalf("Allowance before any = %v, %v", got, err)
	}
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- New(d).Allow(ctx, allowed("ops", "etcd", rules(fmt.Sprintf("r%d", i))))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := New(d).Allow(ctx, allowed("ops", "etcd2", rules("other"))); err != nil {
		t.Fatal(err)
	}
	got, err := New(d).Allowance(ctx, "ops", "etcd")
	if err != nil || len(got) != n {
		t.Fatalf("Allowance = %d rule sets, %v; want %d", len(got), err, n)
	}
	// A rule set admitted again keeps its first record.
	again := allowed("ops", "etcd", rules("r0"))
	again.By = "bob"
	if err := New(d).Allow(ctx, again); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Stat(ctx, "/berth/allowances/ops/etcd/"+strings.TrimPrefix(again.Permissions, "sha256:")+".json"); err != nil {
		t.Errorf("the rule set is not where the package doc says: %v", err)
	}
	got, _ = New(d).Allowance(ctx, "ops", "etcd")
	for _, a := range got {
		if a.By != "alice" {
			t.Errorf("rule set %s recorded by %q, want alice's record kept", a.Permissions, a.By)
		}
	}
}

func TestBadAllowances(t *testing.T) {
	ctx := context.Background()
	d := inmemory.New()
	s := New(d)
	good := rules("pods")
	for _, tc := range []struct {
		a    Allowed
		says string
	}{
		{allowed("../x", "etcd", good), "namespace"},
		{allowed("ops", "a/b", good), "name"},
		{Allowed{Namespace: "ops", Name: "etcd", Permissions: "sha256:../../" + strings.Repeat("a", 58), Rules: good}, "have fingerprint"},
		{Allowed{Namespace: "ops", Name: "etcd", Permissions: permissions.Fingerprint(rules("secrets")), Rules: good}, "have fingerprint"},
	} {
		if err := s.Allow(ctx, tc.a); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Allow(%+v): %v, want ErrInvalid saying %q", tc.a, err, tc.says)
		}
	}
	if _, err := s.Allowance(ctx, "ops", "../etcd"); !errors.Is(err, ErrInvalid) {
		t.Errorf("Allowance of a bad name: %v, want ErrInvalid", err)
	}
	if list, err := d.List(ctx, "/"); err == nil && len(list) > 0 {
		t.Errorf("bad allowances wrote %v", list)
	}
	// Damaged records, and one under another rule set's name, are errors,
	// never an allowance.
	for _, tc := range []struct{ body, says string }{
		{"{not json", "invalid character"},
		{`{"rules":{"cluster":[{"verbs":["*"],"apiGroups":["*"],"resources":["*"]}]}}`, "holds rules with fingerprint"},
	} {
		p := "/berth/allowances/ops/etcd/" + strings.TrimPrefix(permissions.Fingerprint(good), "sha256:") + ".json"
		if err := d.PutContent(ctx, p, []byte(tc.body)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Allowance(ctx, "ops", "etcd"); err == nil || !strings.Contains(err.Error(), "allowance "+p) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Allowance with %s stored: %v, want an error naming it and saying %q", tc.body, err, tc.says)
		}
	}
}
