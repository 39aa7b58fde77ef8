package catalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/berth-registry/berth/pkgformat"
)

// Defaults of Options.IndexTimeout and Options.IndexMemory.
const (
	defaultIndexTimeout = 30 * time.Second
	defaultIndexMemory  = 256 << 20
)

// memoryBudget is the memory the packages being indexed at once may take
// between them, each weighing what reading it may cost: a few hostile
// packages wait for each other instead of adding up, while small ones,
// which weigh little, pass.
type memoryBudget struct {
	sem   *semaphore.Weighted
	total int64
}

func newMemoryBudget(total int64) *memoryBudget {
	return &memoryBudget{sem: semaphore.NewWeighted(total), total: total}
}

// acquire waits until cost (at most the whole budget) fits, or ctx ends; it
// returns the function that gives the cost back.
func (b *memoryBudget) acquire(ctx context.Context, cost int64) (func(), error) {
	cost = min(max(cost, 1), b.total)
	if err := b.sem.Acquire(ctx, cost); err != nil {
		return nil, err
	}
	return func() { b.sem.Release(cost) }, nil
}

// packageCost is what reading a package whose content holds files may take:
// the files, the YAML trees pkgformat builds from them, and what rendering
// a chart's or KUDO operator's templates for their images may build.
func packageCost(files []pkgformat.File, limits pkgformat.Limits) int64 {
	var size int64
	for _, f := range files {
		size += int64(len(f.Data))
	}
	return size + pkgformat.ParseCost(files, limits) + pkgformat.RenderCost(files, limits)
}

// tooLong is the reason of a package whose indexing did not end within
// timeout, when err is its error.
func tooLong(err error, timeout time.Duration) error {
	if !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("indexing took longer than the %s limit (catalog.indexTimeout): %w", timeout, pkgformat.ErrLimit)
}
