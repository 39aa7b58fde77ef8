package catalog_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/coord"
)

// gate is an Elector that leads once opened.
type gate struct {
	open   chan struct{}
	leader atomic.Bool
}

func newGate() *gate { return &gate{open: make(chan struct{})} }

func (g *gate) Lead(ctx context.Context, fn func(context.Context)) {
	select {
	case <-ctx.Done():
		return
	case <-g.open:
	}
	g.leader.Store(true)
	fn(ctx)
	g.leader.Store(false)
}

func (g *gate) Leader() bool { return g.leader.Load() }

// TestReconcilesOnlyWhileLeading: a replica that does not lead indexes the
// events it gets but never reconciles; once it leads it does.

func TestReconcilesOnlyWhileLeading(t *testing.T) {
	g := newGate()
	e := newEnv(t, envOptions{lose: true, elector: g})
	p := load(t, "kudo/kafka/2.5.1-1.3.2")
	e.pushPackage("kudo", p)
	time.Sleep(300 * time.Millisecond)
	if st, err := e.cat.Status(e.ctx); err != nil || st.Reconcile.Runs != 0 {
		t.Fatalf("a replica that does not lead reconciled: %+v, %v", st.Reconcile, err)
	}
	if res, _ := e.cat.Search(e.ctx, catalog.Query{Text: "kafka", Access: all}); len(res.Packages) != 0 {
		t.Fatal("kafka indexed without events or a reconciliation")
	}
	close(g.open)
	e.waitReconciled(1)
	e.waitFor("kafka indexed by the leader's reconciliation", func() bool {
		res, err := e.cat.Search(e.ctx, catalog.Query{Text: "kafka", Access: all})
		return err == nil && len(res.Packages) == 1
	})
}

// TestFollowerAsksTheLeaderToReconcile: a follower whose queue overflows
// drops events and cannot reconcile; it asks the leader, through Signals.
func TestFollowerAsksTheLeaderToReconcile(t *testing.T) {
	signals := &coord.Local{}
	leaderHears := signals.Subscribe("catalog/reconcile")
	e := newEnv(t, envOptions{elector: newGate(), signals: signals, queueSize: 1})
	for i := range 200 {
		e.cat.Notify(catalog.Event{Action: catalog.EventPush, Repository: "team/app", Tag: fmt.Sprintf("1.0.%d", i),
			Digest: "sha256:" + strings.Repeat("a", 64)})
	}
	select {
	case <-leaderHears:
	case <-time.After(5 * time.Second):
		t.Fatal("a follower that dropped events did not ask the leader for a reconciliation")
	}
}

// TestLeaderReconcilesWhenAsked: the leader runs a reconciliation as soon
// as a follower asks, not at its next interval.
func TestLeaderReconcilesWhenAsked(t *testing.T) {
	signals := &coord.Local{}
	e := newEnv(t, envOptions{elector: &coord.Local{}, signals: signals})
	e.waitReconciled(1)
	if err := signals.Notify(e.ctx, "catalog/reconcile"); err != nil {
		t.Fatal(err)
	}
	e.waitReconciled(2)
}
