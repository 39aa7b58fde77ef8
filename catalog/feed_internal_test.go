package catalog

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/berth-registry/berth/catalog/apiv1"
)

// feedStore is a change feed in memory that counts the changes it is asked
// to read.
type feedStore struct {
	Store
	changes []apiv1.Change
	read    int
}

func (s *feedStore) Changes(_ context.Context, since int64, limit int) ([]apiv1.Change, error) {
	var out []apiv1.Change
	for _, ch := range s.changes[min(int(since), len(s.changes)):] {
		if len(out) == limit {
			break
		}
		out = append(out, ch)
	}
	s.read += len(out)
	return out, nil
}

// add appends n changes, each in namespace a or b at random.
func (s *feedStore) add(rnd *rand.Rand, n int) {
	for range n {
		ns := []string{"a", "b"}[rnd.IntN(2)]
		s.changes = append(s.changes, apiv1.Change{Seq: int64(len(s.changes) + 1), Action: "push", Namespace: ns, Name: "p", Version: fmt.Sprint(len(s.changes))})
	}
}

// want is namespace a's feed after since, at most limit changes, numbered
// as Changes numbers them, and its head.
func (s *feedStore) want(since int64, limit int) ([]apiv1.Change, int64) {
	var out []apiv1.Change
	var n int64
	for _, ch := range s.changes {
		if ch.Namespace != "a" {
			continue
		}
		n++
		if n > since && len(out) < limit {
			ch.Seq = n
			out = append(out, ch)
		}
	}
	return out, n
}

// TestFeedNumberingRemembers: the feed of an access with a Key is numbered
// as that of one without (which reads the whole feed each time), whatever
// the cursor and however the feed grew between requests; and a request
// reads the changes made since the last one, or those after the mark below
// its cursor, not the feed from its start.
func TestFeedNumberingRemembers(t *testing.T) {
	ctx := context.Background()
	store := &feedStore{}
	const every = 5
	c := &Catalog{store: store, feeds: feedNumbering{every: every}}
	keyed := NamespaceAccess("a")
	unkeyed := keyed
	unkeyed.Key = ""
	rnd := rand.New(rand.NewPCG(1, 2))
	for round, grow := range []int{0, 1, 7, 30, 0, 3, 2500, 1, 64} {
		store.add(rnd, grow)
		_, head := store.want(0, 0)
		for _, since := range []int64{0, 1, every - 1, every, every + 1, 3 * every, head / 2, head - 1, head, head + 7} {
			if since < 0 {
				continue
			}
			for _, limit := range []int{1, 3, 100, MaxLimit} {
				want, _ := store.want(since, limit)
				for _, access := range []Access{keyed, unkeyed} {
					got, err := c.Changes(ctx, access, since, limit)
					if err != nil {
						t.Fatal(err)
					}
					if fmt.Sprint(got.Changes) != fmt.Sprint(nonNilChanges(want)) {
						t.Fatalf("round %d, since %d, limit %d, key %q: got %v, want %v", round, since, limit, access.Key, got.Changes, want)
					}
				}
			}
		}
		for _, access := range []Access{keyed, unkeyed} {
			if got, err := c.FeedHead(ctx, access); err != nil || got != head {
				t.Fatalf("round %d, key %q: FeedHead = %d, %v, want %d", round, access.Key, got, err, head)
			}
		}
	}

	// At the head, a keyed request reads only what was added since the
	// last one; one after a cursor in the middle, one page from the mark
	// below its cursor.
	_, head := store.want(0, 0)
	store.read = 0
	store.add(rnd, 10)
	if _, err := c.Changes(ctx, keyed, head, MaxLimit); err != nil {
		t.Fatal(err)
	}
	if store.read != 10 {
		t.Errorf("a request at the head read %d changes, want the 10 added", store.read)
	}
	store.read = 0
	if _, err := c.Changes(ctx, keyed, head/2, 1); err != nil {
		t.Fatal(err)
	}
	if store.read > MaxLimit {
		t.Errorf("a request from the middle read %d changes of %d", store.read, len(store.changes))
	}
}

// TestFeedNumberingIsBounded: past maxFeedKeys accesses, numbering is
// forgotten rather than kept without bound.
func TestFeedNumberingIsBounded(t *testing.T) {
	var f feedNumbering
	for i := range 3 * maxFeedKeys {
		f.of(fmt.Sprint("key", i))
	}
	if len(f.byKey) > maxFeedKeys {
		t.Errorf("%d accesses remembered, want at most %d", len(f.byKey), maxFeedKeys)
	}
}

func nonNilChanges(ch []apiv1.Change) []apiv1.Change {
	if ch == nil {
		return []apiv1.Change{}
	}
	return ch
}
