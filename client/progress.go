package client

import (
	"io"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Progress reports how far the transfer of one blob has come.
type Progress struct {
	// Op is "push", "pull" or "copy" (Promote).
	Op string
	// Descriptor describes the blob; Descriptor.Size is the total.
	Descriptor ocispec.Descriptor
	// Done is the number of bytes transferred so far.
	Done int64
}

// track wraps r so that reading it reports progress, if a progress callback is
// set and the blob is at least the progress threshold; otherwise it returns r.
func (c *Client) track(op string, desc ocispec.Descriptor, r io.Reader) io.Reader {
	if c.opts.Progress == nil || desc.Size < c.opts.ProgressThreshold {
		return r
	}
	c.opts.Progress(Progress{Op: op, Descriptor: desc})
	return &progressReader{r: r, report: c.opts.Progress, p: Progress{Op: op, Descriptor: desc}}
}

// progressReader calls report after every read that returned data.
type progressReader struct {
	r      io.Reader
	report func(Progress)
	p      Progress
}

func (pr *progressReader) Read(b []byte) (int, error) {
	n, err := pr.r.Read(b)
	if n > 0 {
		pr.p.Done += int64(n)
		pr.report(pr.p)
	}
	return n, err
}
