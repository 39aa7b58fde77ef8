package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
)

// TestWritesReusePreparedStatements checks that the writes prepare their
// queries once: after the first write of a kind, more writes of that kind
// prepare nothing new, and each reads back as written.
func TestWritesReusePreparedStatements(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	put := func(i int) {
		t.Helper()
		e := &catalog.Entry{Namespace: "ns", Name: "pkg", Tag: fmt.Sprintf("1.0.%d", i),
			Digest: fmt.Sprintf("sha256:%064d", i), Status: apiv1.StatusIgnored, Reason: "not a package", Indexed: time.Now()}
		if changed, err := s.Put(ctx, e); err != nil || !changed {
			t.Fatalf("put %s: changed %v, %v", e.Tag, changed, err)
		}
		got, err := s.Entry(ctx, "ns", "pkg", e.Tag)
		if err != nil || got.Digest != e.Digest {
			t.Fatalf("entry %s: %+v, %v", e.Tag, got, err)
		}
	}
	put(0)
	prepared, reads := len(s.stmts.prepared), len(s.reads.prepared)
	if prepared == 0 || reads == 0 {
		t.Fatalf("after a put: %d write and %d read statements prepared, want some of each", prepared, reads)
	}
	for i := 1; i < 5; i++ {
		put(i)
	}
	if len(s.stmts.prepared) != prepared || len(s.reads.prepared) != reads {
		t.Errorf("after more puts: %d write and %d read statements prepared, want the first put's %d and %d",
			len(s.stmts.prepared), len(s.reads.prepared), prepared, reads)
	}
	if changed, err := s.Delete(ctx, "ns", "pkg", "1.0.0"); err != nil || !changed {
		t.Fatalf("delete: changed %v, %v", changed, err)
	}
	if _, err := s.Entry(ctx, "ns", "pkg", "1.0.0"); err == nil {
		t.Error("the deleted tag still reads back")
	}
}
