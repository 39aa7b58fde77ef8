package sources

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/internal/pgtest"
	"github.com/berth-registry/berth/pkgsource"
)

// TestStore runs one suite on both stores.
func TestStore(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		open func(t *testing.T) (Store, Store)
	}{
		{"sqlite", func(t *testing.T) (Store, Store) {
			file := filepath.Join(t.TempDir(), "sources.db")
			a, err := OpenSQLite(ctx, file)
			if err != nil {
				t.Fatal(err)
			}
			b, err := OpenSQLite(ctx, file)
			if err != nil {
				t.Fatal(err)
			}
			return a, b
		}},
		{"postgres", func(t *testing.T) (Store, Store) {
			dsn := pgtest.Database(t)
			a, err := OpenPostgres(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			b, err := OpenPostgres(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			return a, b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leader, follower := tc.open(t)
			defer leader.Close()
			defer follower.Close()
			storeSuite(t, leader, follower)
		})
	}
}

func storeSuite(t *testing.T, leader, follower Store) {
	ctx := context.Background()
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	a := State{Key: config.SourceKey{Namespace: "team", Package: "op"}, Spec: "git\x00https://x", LastCheck: at, NextCheck: at.Add(time.Minute),
		Resolved: pkgsource.Resolved{Kind: pkgsource.Git, URL: "https://x", Ref: "refs/heads/main", Revision: "abc"}, Handled: "abc",
		LastPublished: &apiv1.SourceVersion{Version: "1.0.0", Digest: "sha256:00", Revision: "abc", Time: at},
		Refs:          []apiv1.SourceRef{{Ref: "refs/tags/v1", Revision: "abc", Version: "1.0.0"}}}
	b := State{Key: config.SourceKey{Namespace: "dev", Package: "web"}, Spec: "http", LastError: &apiv1.SourceError{Time: at, Reason: "limit", Message: "too big"}}
	if err := leader.Save(ctx, a, b); err != nil {
		t.Fatal(err)
	}
	a.Handled = "def"
	if err := leader.Save(ctx, a); err != nil {
		t.Fatal(err)
	}
	got, err := follower.States(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []State{b, a}; !reflect.DeepEqual(got, want) {
		t.Errorf("States = %+v\nwant %+v", got, want)
	}

	if reqs, err := leader.Requests(ctx); err != nil || len(reqs) != 0 {
		t.Fatalf("Requests = %v, %v; want none", reqs, err)
	}
	if err := follower.Request(ctx, a.Key, 100); err != nil {
		t.Fatal(err)
	}
	if err := follower.Request(ctx, a.Key, 200); err != nil {
		t.Fatal(err)
	}
	reqs, err := leader.Requests(ctx)
	if err != nil || !reflect.DeepEqual(reqs, map[config.SourceKey]int64{a.Key: 200}) {
		t.Fatalf("Requests = %v, %v; want the later request of %v", reqs, err, a.Key)
	}
	// Done of an earlier request leaves a later one.
	if err := leader.Done(ctx, a.Key, 100); err != nil {
		t.Fatal(err)
	}
	if reqs, _ := leader.Requests(ctx); len(reqs) != 1 {
		t.Errorf("Requests after Done(earlier) = %v, want the request kept", reqs)
	}
	if err := leader.Done(ctx, a.Key, 200); err != nil {
		t.Fatal(err)
	}
	if reqs, _ := leader.Requests(ctx); len(reqs) != 0 {
		t.Errorf("Requests after Done = %v, want none", reqs)
	}
}
