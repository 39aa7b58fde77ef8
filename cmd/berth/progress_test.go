package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/client"
)

func TestRenderBar(t *testing.T) {
	desc := ocispec.Descriptor{Digest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Size: 40 << 20}
	tests := []struct {
		done int64
		want string
	}{
		{0, "pull sha256:0123456789ab [>                             ]   0% 0.0 MiB / 40.0 MiB"},
		{20 << 20, "pull sha256:0123456789ab [===============>              ]  50% 20.0 MiB / 40.0 MiB"},
		{40 << 20, "pull sha256:0123456789ab [==============================] 100% 40.0 MiB / 40.0 MiB"},
	}
	for _, tt := range tests {
		if got := renderBar(client.Progress{Op: "pull", Descriptor: desc, Done: tt.done}); got != tt.want {
			t.Errorf("renderBar(%d) =\n%q, want\n%q", tt.done, got, tt.want)
		}
	}
}

func TestProgressBarThrottle(t *testing.T) {
	var buf bytes.Buffer
	b := newProgressBar(&buf)
	now := time.Unix(0, 0)
	b.now = func() time.Time { return now }
	desc := ocispec.Descriptor{Digest: "sha256:00", Size: 100}
	for done := int64(0); done <= 100; done += 10 {
		b.update(client.Progress{Op: "push", Descriptor: desc, Done: done})
		now = now.Add(30 * time.Millisecond)
	}
	out := buf.String()
	// Start, end, and one redraw per progressInterval (every 4th update) in between.
	if n := strings.Count(out, "\r"); n < 3 || n > 5 {
		t.Errorf("%d redraws, want 3 to 5:\n%q", n, out)
	}
	if !strings.HasSuffix(out, "100% 0.0 MiB / 0.0 MiB\n") {
		t.Errorf("the bar does not end complete, with a newline: %q", out)
	}
}

func TestNoProgressWithoutTerminal(t *testing.T) {
	if progressFunc(&bytes.Buffer{}) != nil {
		t.Error("progress bars for a writer that is not a terminal")
	}
}
