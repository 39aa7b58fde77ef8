package retention

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/sqlite"
	"github.com/berth-registry/berth/pkgformat"
)

func version(ns, name, v, channel string) *catalog.Entry {
	md := &pkgformat.Metadata{SchemaVersion: pkgformat.MetadataSchemaVersion, Name: name, Version: v, Format: pkgformat.Helm}
	if channel != "" {
		md.Channels = []pkgformat.Channel{{Name: channel}}
	}
	return &catalog.Entry{Namespace: ns, Name: name, Tag: v, Digest: digest.FromString(ns + name + v).String(),
		Status: apiv1.StatusIndexed, Indexed: time.Now(), Metadata: md}
}

type untagger struct{ calls []string }

func (u *untagger) Untag(_ context.Context, repo, tag string, d digest.Digest) (bool, error) {
	u.calls = append(u.calls, fmt.Sprintf("%s:%s@%s", repo, tag, d))
	return true, nil
}

func TestExpired(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for _, e := range []*catalog.Entry{
		// keepLast 2: 1.10.0-rc.1 (the newest, head of candidate) and 1.4.0
		// (head of stable) stay, and 0.9.0, which heads legacy.
		version("team", "app", "1.4.0", "stable"), version("team", "app", "1.3.0", "stable"),
		version("team", "app", "1.10.0-rc.1", "candidate"), version("team", "app", "1.2.0", "stable"),
		version("team", "app", "1.0.0", "stable"), version("team", "app", "0.9.0", "legacy"),
		// Fewer versions than keepLast.
		version("team", "small", "1.0.0", ""), version("team", "small", "2.0.0", ""),
		// No policy in this namespace.
		version("other", "app", "1.0.0", ""), version("other", "app", "2.0.0", ""), version("other", "app", "3.0.0", ""),
	} {
		if _, err := store.Put(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	keep := func(ns string) int {
		if ns == "team" {
			return 2
		}
		return 0
	}
	got, err := Expired(ctx, store, keep)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range got {
		names = append(names, v.Namespace+"/"+v.Name+":"+v.Version)
	}
	want := []string{"team/app:1.3.0", "team/app:1.2.0", "team/app:1.0.0"}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("expired %v, want %v", names, want)
	}

	u := &untagger{}
	if n, err := Apply(ctx, u, got, true); err != nil || n != 3 || len(u.calls) != 0 {
		t.Errorf("dry run: %d, %v, calls %v; want 3 counted and nothing untagged", n, err, u.calls)
	}
	if n, err := Apply(ctx, u, got, false); err != nil || n != 3 {
		t.Errorf("apply: %d, %v", n, err)
	}
	var wantCalls []string
	for _, v := range []string{"1.3.0", "1.2.0", "1.0.0"} {
		wantCalls = append(wantCalls, fmt.Sprintf("team/app:%s@%s", v, digest.FromString("teamapp"+v)))
	}
	slices.Sort(u.calls)
	slices.Sort(wantCalls)
	if !slices.Equal(u.calls, wantCalls) {
		t.Errorf("untagged %v, want %v", u.calls, wantCalls)
	}
}
