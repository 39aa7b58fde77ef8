package catalog_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
)

// TestRecordSourceEvent: source events join the feed, numbered among the
// changes an access allows, and only a caller who may pull the package sees
// them.
func TestRecordSourceEvent(t *testing.T) {
	e := newEnv(t, envOptions{})
	events := []apiv1.Change{
		{Namespace: "a", Name: "op", Version: "1.0.0", Digest: "sha256:" + strings.Repeat("1", 64), Status: apiv1.SourcePublished},
		{Action: apiv1.ActionSource, Namespace: "b", Name: "op", Status: apiv1.SourceFailed, Reason: apiv1.SourceReasonFetch},
		{Namespace: "a", Name: "op", Status: apiv1.SourceFailed, Reason: apiv1.SourceReasonRefused},
	}
	for _, ev := range events {
		if err := e.cat.RecordSourceEvent(e.ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		access catalog.Access
		want   []string // namespace and status of each change, in order
	}{
		{"everything", catalog.Access{All: true}, []string{"a published", "b failed", "a failed"}},
		{"namespace a", catalog.NamespaceAccess("a"), []string{"a published", "a failed"}},
		{"nothing", catalog.Access{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := e.cat.Changes(e.ctx, tc.access, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for i, c := range ch.Changes {
				got = append(got, c.Namespace+" "+c.Status)
				if c.Action != apiv1.ActionSource || c.Seq != int64(i+1) {
					t.Errorf("change %d: action %q, seq %d; want %q, %d", i, c.Action, c.Seq, apiv1.ActionSource, i+1)
				}
				if c.Status == apiv1.SourceFailed && c.Reason == "" {
					t.Errorf("failed change %d has no reason", i)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("changes %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("changes %v, want %v", got, tc.want)
					break
				}
			}
		})
	}
}

func TestRecordSourceEventInvalid(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, tc := range []struct {
		name string
		ch   apiv1.Change
	}{
		{"another action", apiv1.Change{Action: apiv1.ActionPut, Namespace: "a", Name: "op", Status: apiv1.SourceFailed, Reason: "fetch"}},
		{"no namespace", apiv1.Change{Name: "op", Status: apiv1.SourceFailed, Reason: "fetch"}},
		{"no package", apiv1.Change{Namespace: "a", Status: apiv1.SourceFailed, Reason: "fetch"}},
		{"published without a digest", apiv1.Change{Namespace: "a", Name: "op", Version: "1.0.0", Status: apiv1.SourcePublished}},
		{"failed without a reason", apiv1.Change{Namespace: "a", Name: "op", Status: apiv1.SourceFailed}},
		{"unknown status", apiv1.Change{Namespace: "a", Name: "op", Status: apiv1.StatusIndexed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := e.cat.RecordSourceEvent(e.ctx, tc.ch); !errors.Is(err, catalog.ErrInvalid) {
				t.Errorf("RecordSourceEvent(%+v) = %v, want ErrInvalid", tc.ch, err)
			}
		})
	}
	if st, err := e.store.Stats(e.ctx); err != nil || st.Seq != 0 {
		t.Errorf("invalid events were recorded: %+v %v", st, err)
	}
}
