package auth_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/sqlite"
)

// TestHiddenActivityDoesNotShow checks that what a caller reads of the change
// feed and the repository indexes (bodies, cursors, sequence numbers,
// ETags) is the same before and after changes to packages it may not pull,
// and that its feed numbers its own changes without gaps.
func TestHiddenActivityDoesNotShow(t *testing.T) {
	targets := []string{
		"/api/v1/changes", "/api/v1/changes?since=1", "/api/v1/changes?limit=1", "/api/v1/changes?since=1000",
		"/index.yaml", "/a/index.yaml", "/pub/index.yaml",
		"/api/helm/index.yaml", "/api/helm/a/index.yaml", "/api/helm/pub/index.yaml",
		"/api/v1/packages", "/api/v1/artifacts",
	}
	// bob's activity, in b/*, which none of the subjects may pull.
	hidden := []func(t *testing.T, h *visibilityHarness){
		func(t *testing.T, h *visibilityHarness) { h.put(t, entry("b", "bison", "3.0.0", apiv1.StatusIndexed)) },
		func(t *testing.T, h *visibilityHarness) { h.put(t, entry("b", "newt", "1.0.0", apiv1.StatusIndexed)) },
		func(t *testing.T, h *visibilityHarness) { h.put(t, entry("b", "bobcat", "1.0.0", apiv1.StatusInvalid)) },
		func(t *testing.T, h *visibilityHarness) { h.del(t, "b", "bison", "1.0.0") },
	}
	for _, subject := range []string{"", "alice", "reader"} {
		name := subject
		if name == "" {
			name = "anonymous"
		}
		t.Run(name, func(t *testing.T) {
			h := newVisibilityHarness(t)
			before := map[string]exchange{}
			for _, target := range targets {
				before[target] = do(h.api, "GET", target, subject)
			}
			for i, act := range hidden {
				act(t, h)
				for _, target := range targets {
					if got := do(h.api, "GET", target, subject); !sameAnswer(got, before[target]) {
						t.Errorf("after hidden change %d, GET %s:\n%d %v %s\nbefore:\n%d %v %s", i, target,
							got.status, got.header, got.body, before[target].status, before[target].header, before[target].body)
					}
				}
			}
		})
	}
}

// TestFeedNumbersVisibleChanges checks that a caller's feed numbers the
// changes it may see 1, 2, 3, ..., whatever happened in between elsewhere,
// and that next and the index's ETag move with its own changes.
func TestFeedNumbersVisibleChanges(t *testing.T) {
	h := newVisibilityHarness(t)
	h.put(t, entry("b", "bison", "3.0.0", apiv1.StatusIndexed))
	h.put(t, entry("a", "aardvark", "3.0.0", apiv1.StatusIndexed))
	h.put(t, entry("b", "bison", "4.0.0", apiv1.StatusIndexed))
	h.del(t, "a", "aardvark", "1.0.0")
	for _, tc := range []struct {
		subject string
		want    []string // namespace/name:version of the changes, in order
	}{
		{"", []string{"pub/puffin:1.0.0"}},
		{"alice", []string{"a/aardvark:1.0.0", "a/aardvark:2.0.0", "a/aardvark-vault:1.0.0", "a/axolotl:latest", "pub/puffin:1.0.0", "a/aardvark:3.0.0", "a/aardvark:1.0.0"}},
		{"reader", []string{"a/aardvark:1.0.0", "a/aardvark:2.0.0", "a/axolotl:latest", "pub/puffin:1.0.0", "a/aardvark:3.0.0", "a/aardvark:1.0.0"}},
		{"root", nil}, // every change, numbered as the store does
	} {
		t.Run(tc.subject, func(t *testing.T) {
			all := feed(t, h.api, "/api/v1/changes", tc.subject)
			if tc.want != nil {
				var got []string
				for _, c := range all.Changes {
					got = append(got, c.Namespace+"/"+c.Name+":"+c.Version)
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("changes = %v, want %v", got, tc.want)
				}
			}
			for i, c := range all.Changes {
				if c.Seq != int64(i+1) {
					t.Errorf("change %d has seq %d, want %d", i, c.Seq, i+1)
				}
			}
			if all.Next != int64(len(all.Changes)) {
				t.Errorf("next = %d, want %d", all.Next, len(all.Changes))
			}
			// Paging one by one finds the same changes.
			var since int64
			for i := range all.Changes {
				page := feed(t, h.api, "/api/v1/changes?limit=1&since="+strconv.FormatInt(since, 10), tc.subject)
				if len(page.Changes) != 1 || page.Changes[0] != all.Changes[i] || page.Next != int64(i+1) {
					t.Fatalf("page after %d = %+v, want change %+v", since, page, all.Changes[i])
				}
				since = page.Next
			}
			if end := feed(t, h.api, "/api/v1/changes?since="+strconv.FormatInt(since, 10), tc.subject); len(end.Changes) != 0 || end.Next != since {
				t.Errorf("feed after its end = %+v", end)
			}
		})
	}
	// alice's own push moves her cursor by one and her index's ETag.
	etag := do(h.api, "GET", "/a/index.yaml", "alice").header.Get("ETag")
	next := feed(t, h.api, "/api/v1/changes", "alice").Next
	h.put(t, entry("a", "aardvark", "4.0.0", apiv1.StatusIndexed))
	if got := feed(t, h.api, "/api/v1/changes", "alice").Next; got != next+1 {
		t.Errorf("next after alice's push = %d, want %d", got, next+1)
	}
	if got := do(h.api, "GET", "/a/index.yaml", "alice").header.Get("ETag"); got == etag || got == "" {
		t.Errorf("ETag after alice's push = %q, before %q", got, etag)
	}
}

type visibilityHarness struct {
	api   http.Handler
	store *sqlite.Store
}

func newVisibilityHarness(t *testing.T) *visibilityHarness {
	api, store := catalogAPIStore(t)
	return &visibilityHarness{api: api, store: store}
}

func (h *visibilityHarness) put(t *testing.T, e *catalog.Entry) {
	t.Helper()
	if _, err := h.store.Put(context.Background(), e); err != nil {
		t.Fatal(err)
	}
}

func (h *visibilityHarness) del(t *testing.T, ns, name, tag string) {
	t.Helper()
	if _, err := h.store.Delete(context.Background(), ns, name, tag); err != nil {
		t.Fatal(err)
	}
}

func feed(t *testing.T, h http.Handler, target, subject string) apiv1.Changes {
	t.Helper()
	res := do(h, "GET", target, subject)
	if res.status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", target, res.status, res.body)
	}
	var c apiv1.Changes
	if err := json.Unmarshal([]byte(res.body), &c); err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	return c
}
