package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/berth-registry/berth/client"
)

// progressInterval is the shortest time between two redraws of a bar.
const progressInterval = 100 * time.Millisecond

// barWidth is the number of cells of a progress bar.
const barWidth = 30

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progressFunc returns the progress callback for a client writing bars to w,
// or nil (no progress) when w is not a terminal. The client calls it only for
// blobs of at least client.DefaultProgressThreshold bytes.
func progressFunc(w io.Writer) func(client.Progress) {
	if !isTerminal(w) {
		return nil
	}
	return newProgressBar(w).update
}

// progressBar draws one line per blob, redrawn in place with '\r', and ends
// it with a newline when the blob is complete.
type progressBar struct {
	w   io.Writer
	now func() time.Time

	mu    sync.Mutex
	drawn time.Time
}

// newProgressBar returns a bar writing to w.
func newProgressBar(w io.Writer) *progressBar {
	return &progressBar{w: w, now: time.Now}
}

// update redraws the bar for p, at most every progressInterval except at the
// start and the end of a blob.
func (b *progressBar) update(p client.Progress) {
	b.mu.Lock()
	defer b.mu.Unlock()
	total := p.Descriptor.Size
	done := p.Done >= total
	now := b.now()
	if p.Done > 0 && !done && now.Sub(b.drawn) < progressInterval {
		return
	}
	b.drawn = now
	fmt.Fprint(b.w, "\r"+renderBar(p))
	if done {
		fmt.Fprintln(b.w)
	}
}

// renderBar renders one line:
// "pull sha256:0123456789ab [=======>      ]  45%  18.0 MiB / 40.0 MiB".
func renderBar(p client.Progress) string {
	total := max(p.Descriptor.Size, 1)
	done := min(max(p.Done, 0), total)
	return fmt.Sprintf("%s %s %s %3d%% %s / %s", p.Op, shortDigest(p.Descriptor.Digest.String()), bar(done, total),
		done*100/total, mebibytes(done), mebibytes(total))
}

// bar draws done out of total as "[=======>      ]", barWidth cells wide.
func bar(done, total int64) string {
	total = max(total, 1)
	filled := int(min(max(done, 0), total) * barWidth / total)
	b := strings.Repeat("=", filled)
	if filled < barWidth {
		b += ">" + strings.Repeat(" ", barWidth-filled-1)
	}
	return "[" + b + "]"
}

// shortDigest shortens "sha256:<hex>" to "sha256:" and 12 hex digits.
func shortDigest(d string) string {
	algo, hex, ok := strings.Cut(d, ":")
	if !ok || len(hex) <= 12 {
		return d
	}
	return algo + ":" + hex[:12]
}

// mebibytes renders n bytes as "12.3 MiB".
func mebibytes(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
