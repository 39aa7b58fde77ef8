package catalog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/berth-registry/berth/pkgformat"
)

// TestMemoryBudgetMakesCostlyPackagesWait: packages whose costs add up past
// the budget are read one after the other, a cost over the whole budget
// still gets its turn, and a wait ends with its context.
func TestMemoryBudgetMakesCostlyPackagesWait(t *testing.T) {
	ctx := context.Background()
	b := newMemoryBudget(100)
	releaseFirst, err := b.acquire(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	small, err := b.acquire(ctx, 40)
	if err != nil {
		t.Fatalf("a cost that fits beside the first: %v", err)
	}
	small()

	second := make(chan func(), 1)
	go func() {
		release, err := b.acquire(ctx, 60)
		if err != nil {
			t.Error(err)
			close(second)
			return
		}
		second <- release
	}()
	select {
	case <-second:
		t.Fatal("a second package of 60 was admitted while 60 of a budget of 100 were taken")
	case <-time.After(100 * time.Millisecond):
	}
	releaseFirst()
	var releaseSecond func()
	select {
	case releaseSecond = <-second:
	case <-time.After(10 * time.Second):
		t.Fatal("the second package was not admitted once the first gave its cost back")
	}
	releaseSecond()

	whole, err := b.acquire(ctx, 1000)
	if err != nil {
		t.Fatalf("a cost over the whole budget: %v", err)
	}
	waiting, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := b.acquire(waiting, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting behind the whole budget: %v, want the context's deadline", err)
	}
	whole()
}

// TestPackageCostCountsFilesAndYAML: a package weighs its files and the
// YAML trees reading them may build, so a small file of many nodes weighs
// far more than its bytes.
func TestPackageCostCountsFilesAndYAML(t *testing.T) {
	text := pkgformat.File{Path: "README.md", Data: make([]byte, 1000)}
	if got := packageCost([]pkgformat.File{text}, pkgformat.Limits{}); got != 1000 {
		t.Errorf("a non-YAML file of 1000 bytes costs %d, want 1000", got)
	}
	flow := pkgformat.File{Path: "a.yaml", Data: []byte("[1,1,1,1,1,1,1,1,1,1]\n")}
	if got := packageCost([]pkgformat.File{flow}, pkgformat.Limits{}); got <= 10*int64(len(flow.Data)) {
		t.Errorf("a YAML flow sequence of %d bytes costs %d, want it weighed by its nodes", len(flow.Data), got)
	}
}

// TestPackageCostCountsRendering: a chart weighs what rendering its
// templates may build too; a plain package does not.
func TestPackageCostCountsRendering(t *testing.T) {
	manifest := pkgformat.File{Path: "manifests/a.yaml", Data: []byte("kind: ConfigMap\n")}
	chart := []pkgformat.File{
		{Path: "Chart.yaml", Data: []byte("apiVersion: v2\nname: a\nversion: 1.0.0\n")},
		{Path: "templates/a.yaml", Data: manifest.Data},
	}
	plain, rendered := packageCost([]pkgformat.File{manifest}, pkgformat.Limits{}), packageCost(chart, pkgformat.Limits{})
	if want := pkgformat.RenderCost(chart, pkgformat.Limits{}); want == 0 || rendered < want {
		t.Errorf("a chart costs %d, want at least its render cost %d", rendered, want)
	}
	if pkgformat.RenderCost([]pkgformat.File{manifest}, pkgformat.Limits{}) != 0 || plain >= rendered {
		t.Errorf("a plain package costs %d, a chart %d: want the chart to weigh its rendering", plain, rendered)
	}
}
