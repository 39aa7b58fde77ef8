package catalog

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/berth-registry/berth/catalog/apiv1"
)

// Changes returns the change feed of what access allows, after since: the
// changes of the packages access allows, oldest first, numbered 1, 2, 3, ...
// in the order they happened, so that neither a number, a gap between two
// numbers nor next tells of a change access hides. Next is the number of the
// last change returned, or since when none is. For an access to everything
// the numbers are the store's sequence numbers, which count every change from
// 1 without a gap. The numbers are counted over what access allows now: a
// caller whose grants change sees its feed numbered anew.
func (c *Catalog) Changes(ctx context.Context, access Access, since int64, limit int) (*apiv1.Changes, error) {
	limit = PageSize(limit)
	out := &apiv1.Changes{Changes: []apiv1.Change{}, Next: since}
	if access.All {
		ch, err := c.store.Changes(ctx, since, limit)
		if err != nil {
			return nil, err
		}
		out.Changes = append(out.Changes, ch...)
	} else {
		_, err := c.visibleChanges(ctx, access, since, func(n int64, ch apiv1.Change) bool {
			ch.Seq = n
			out.Changes = append(out.Changes, ch)
			return len(out.Changes) < limit
		})
		if err != nil {
			return nil, err
		}
	}
	if len(out.Changes) > 0 {
		out.Next = out.Changes[len(out.Changes)-1].Seq
	}
	return out, nil
}

// RecordSourceEvent appends an event of a tracked source to the change
// feed (apiv1.ActionSource; Namespace/Name is the source's package): a
// version published (Status apiv1.SourcePublished, with Version and
// Digest) or a check or build that failed (apiv1.SourceFailed, with
// Reason). The feed shows it to whoever may pull the package, as it shows
// the package's versions. ch.Action may be left empty; ch.Seq and ch.Time
// are the store's. It returns an error wrapping ErrInvalid when ch is not
// such an event.
func (c *Catalog) RecordSourceEvent(ctx context.Context, ch apiv1.Change) error {
	if err := checkSourceEvent(ch); err != nil {
		return fmt.Errorf("catalog: source event of %s/%s: %w", ch.Namespace, ch.Name, err)
	}
	ch.Action = apiv1.ActionSource
	return c.store.AppendSourceEvent(ctx, ch)
}

// checkSourceEvent returns an error wrapping ErrInvalid, saying what is
// missing, unless ch is an event RecordSourceEvent records.
func checkSourceEvent(ch apiv1.Change) error {
	switch {
	case ch.Action != "" && ch.Action != apiv1.ActionSource:
		return fmt.Errorf("action %q: a source event's is %q: %w", ch.Action, apiv1.ActionSource, ErrInvalid)
	case ch.Namespace == "" || ch.Name == "":
		return fmt.Errorf("no namespace or package: %w", ErrInvalid)
	case ch.Status == apiv1.SourcePublished && (ch.Version == "" || ch.Digest == ""):
		return fmt.Errorf("a published event needs the version and its digest: %w", ErrInvalid)
	case ch.Status == apiv1.SourceFailed && ch.Reason == "":
		return fmt.Errorf("a failed event needs its reason: %w", ErrInvalid)
	case ch.Status != apiv1.SourcePublished && ch.Status != apiv1.SourceFailed:
		return fmt.Errorf("status %q: want %q or %q: %w", ch.Status, apiv1.SourcePublished, apiv1.SourceFailed, ErrInvalid)
	}
	return nil
}

// FeedHead is the number of the last change of access's feed (Changes), 0
// when it has none: it moves exactly when a change access allows is made.
func (c *Catalog) FeedHead(ctx context.Context, access Access) (int64, error) {
	if access.All {
		st, err := c.store.Stats(ctx)
		return st.Seq, err
	}
	return c.visibleChanges(ctx, access, math.MaxInt64, func(int64, apiv1.Change) bool { return true })
}

// visibleChanges calls fn with every change access allows whose number
// among them (from 1) is above since, oldest first, until fn returns false.
// It returns the number of the last change access allows that it read. It
// reads the feed MaxLimit changes at a time, from where c.feeds says the
// changes numbered above since start: for an access with a Key, the
// changes after the last request's or after a mark below since; for one
// without, the whole feed from its start.
func (c *Catalog) visibleChanges(ctx context.Context, access Access, since int64, fn func(n int64, ch apiv1.Change) bool) (int64, error) {
	marks := &feedMarks{}
	if access.Key != "" {
		marks = c.feeds.of(access.Key)
		marks.mu.Lock()
		defer marks.mu.Unlock()
	}
	after, n := marks.start(since, c.feeds.markEvery())
	allowed := map[[2]string]bool{}
	for {
		page, err := c.store.Changes(ctx, after, MaxLimit)
		if err != nil {
			return n, err
		}
		for _, ch := range page {
			k := [2]string{ch.Namespace, ch.Name}
			ok, seen := allowed[k]
			if !seen {
				ok = access.Allows(ch.Namespace, ch.Name)
				allowed[k] = ok
			}
			if ok {
				n++
			}
			marks.saw(ch.Seq, n, ok, c.feeds.markEvery())
			if ok && n > since && !fn(n, ch) {
				return n, nil
			}
		}
		if len(page) < MaxLimit {
			return n, nil
		}
		after = page[len(page)-1].Seq
	}
}

// Bounds of feedNumbering.
const (
	// defaultFeedMarkEvery is how many changes an access allows lie between
	// two of its marks.
	defaultFeedMarkEvery = 1024
	// maxFeedKeys is how many accesses' numbering is remembered.
	maxFeedKeys = 1024
)

// feedNumbering remembers, for each access Key, how far its feed has been
// numbered and a mark at every markEvery-th change it allows, so that a
// request reads the changes made since the last one, or those after the
// mark below its cursor, instead of the whole feed from its start. Every
// store numbers its feed in commit order without holes, and never changes
// a change once written, so what is remembered stays true; two accesses
// with one Key allow the same packages. The zero value is ready to use.
type feedNumbering struct {
	mu    sync.Mutex
	byKey map[string]*feedMarks
	// every is markEvery's value; 0 means defaultFeedMarkEvery.
	every int64
}

// feedMarks is how far one access's feed has been numbered. Its lock is
// held while a request reads that feed.
type feedMarks struct {
	mu sync.Mutex
	// seq is the last change numbered, n how many changes up to it the
	// access allows.
	seq, n int64
	// marks[i] is the change that is the access's (i+1)*markEvery-th.
	marks []int64
}

func (f *feedNumbering) markEvery() int64 {
	if f.every > 0 {
		return f.every
	}
	return defaultFeedMarkEvery
}

// of returns the numbering of the access with key, new when it has none;
// past maxFeedKeys, one other access's numbering is forgotten.
func (f *feedNumbering) of(key string) *feedMarks {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byKey == nil {
		f.byKey = map[string]*feedMarks{}
	}
	m := f.byKey[key]
	if m == nil {
		if len(f.byKey) >= maxFeedKeys {
			for k := range f.byKey {
				delete(f.byKey, k)
				break
			}
		}
		m = &feedMarks{}
		f.byKey[key] = m
	}
	return m
}

// start returns the change after which the changes numbered above since
// are to be read, and the number of the changes allowed up to it.
func (m *feedMarks) start(since, every int64) (after, n int64) {
	if since >= m.n {
		return m.seq, m.n
	}
	i := since / every
	if i == 0 {
		return 0, 0
	}
	return m.marks[i-1], i * every
}

// saw records that the change seq was read, the n-th the access allows
// when allowed.
func (m *feedMarks) saw(seq, n int64, allowed bool, every int64) {
	if seq <= m.seq {
		return
	}
	m.seq = seq
	if allowed {
		m.n = n
		if n%every == 0 {
			m.marks = append(m.marks, seq)
		}
	}
}
