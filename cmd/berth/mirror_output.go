package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-registry/berth/mirror"
)

// runWithProgress runs op, drawing its progress on stderr when stderr is a
// terminal.
func runWithProgress(cmd *cobra.Command, label string, p *mirror.Progress, op func(context.Context) (*mirror.Summary, error)) (*mirror.Summary, error) {
	w := cmd.ErrOrStderr()
	if !isTerminal(w) {
		return op(cmd.Context())
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			fmt.Fprint(w, "\r"+renderMirrorProgress(label, p))
			select {
			case <-done:
				fmt.Fprintln(w, "\r"+renderMirrorProgress(label, p))
				return
			case <-t.C:
			}
		}
	}()
	sum, err := op(cmd.Context())
	close(done)
	<-stopped
	return sum, err
}

// renderMirrorProgress renders one line:
// "import versions [=====>    ] 12/40  bytes 18.0 MiB / 40.0 MiB".
func renderMirrorProgress(label string, p *mirror.Progress) string {
	total, done := p.VersionsTotal.Load(), p.VersionsDone.Load()
	line := fmt.Sprintf("%s versions %s %d/%d  ", label, bar(done, total), done, total)
	if bt := p.BytesTotal.Load(); bt > 0 {
		return line + fmt.Sprintf("bytes %s / %s", mebibytes(p.BytesDone.Load()), mebibytes(bt))
	}
	return line + "bytes " + mebibytes(p.BytesDone.Load())
}

// reportMirror prints what an export, import or sync did: the summary as
// JSON, or as text with each problem on its own line. It returns err, or an
// error when a version failed.
func reportMirror(cmd *cobra.Command, format outputFormat, verb string, sum *mirror.Summary, err error) error {
	if err != nil {
		return err
	}
	if format == formatJSON {
		if err := writeJSON(cmd.OutOrStdout(), sum); err != nil {
			return err
		}
	} else {
		w := cmd.OutOrStdout()
		what := fmt.Sprintf("%d versions", sum.Versions)
		if sum.Images+len(sum.ImagesFailed) > 0 {
			what += fmt.Sprintf(" and %d images", sum.Images)
		}
		fmt.Fprintf(w, "%s %s: %d blobs, %d manifests, %s sent, %s already there, in %.1fs\n",
			verb, what, sum.Blobs, sum.Manifests, mebibytes(sum.Bytes), mebibytes(sum.BytesSkipped), sum.Seconds)
		for _, f := range slices.Concat(sum.Files, sum.Resources) {
			fmt.Fprintln(w, "Wrote "+f)
		}
		for _, d := range sum.Damaged {
			fmt.Fprintln(w, "Damaged: "+d)
		}
		printProblems(w, "Quarantined", sum.Quarantined)
		printProblems(w, "Deleted upstream", sum.Deleted)
		printProblems(w, "Failed", sum.Failed)
		for _, m := range sum.ImageMirrors {
			fmt.Fprintf(w, "Images of %s are at %s\n", m.Source, m.Mirror)
		}
		for _, m := range sum.Moved {
			fmt.Fprintln(w, "Moved tag: "+m)
		}
		for _, p := range sum.ImagesFailed {
			what := "image " + p.Reference
			if p.Reference == "" {
				what = "images"
			}
			fmt.Fprintf(w, "Failed: %s (run by %s): %s\n", what, strings.Join(p.Versions, ", "), p.Reason)
		}
	}
	switch n, m := len(sum.Failed), len(sum.ImagesFailed); {
	case n > 0 && m > 0:
		return fmt.Errorf("%d versions and %d images failed", n, m)
	case n > 0:
		return fmt.Errorf("%d versions failed", n)
	case m > 0:
		return fmt.Errorf("%d images failed", m)
	}
	return nil
}

func printProblems(w io.Writer, what string, ps []mirror.Problem) {
	for _, p := range ps {
		fmt.Fprintf(w, "%s: %s:%s (%s): %s\n", what, p.Repository, p.Tag, shortDigest(p.Digest.String()), p.Reason)
	}
}

// sizeFlag is a size in bytes given with an optional unit: 700MB, 4GiB.
type sizeFlag int64

// String writes the size in the largest binary unit that divides it.
func (s *sizeFlag) String() string {
	for _, u := range []struct {
		suffix string
		factor int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if *s != 0 && int64(*s)%u.factor == 0 {
			return strconv.FormatInt(int64(*s)/u.factor, 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(*s), 10)
}

func (s *sizeFlag) Type() string { return "size" }

// Set parses a number of bytes with an optional unit: B, KB, MB, GB, TB
// (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024).
func (s *sizeFlag) Set(v string) error {
	units := []struct {
		suffix string
		factor int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	num, factor := v, int64(1)
	for _, u := range units {
		if strings.HasSuffix(v, u.suffix) {
			num, factor = strings.TrimSpace(strings.TrimSuffix(v, u.suffix)), u.factor
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/factor {
		return fmt.Errorf("want a positive size such as 700MB or 4GiB, not %q", v)
	}
	*s = sizeFlag(n * factor)
	return nil
}
