package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
)

// table is what printTable prints: a column of medians per target, then
// ratio columns, each the median of one target over that of another, and
// the target line.
type table struct {
	header  string
	targets []*target
	ratios  [][2]int // target indexes: numerator, denominator
	rows    []*row
	// meets says whether a row, with these medians (one per target, 0 for
	// a target that takes no part), meets its target; goal says what the
	// targets are.
	meets func(r *row, medians []float64) bool
	goal  string
}

// lineup is where each server is among the main table's targets; zot is -1
// when it was skipped.
type lineup struct{ berth, upstream, zot, floor int }

// peerTable is the main table: berth against upstream, zot and the floor.
func peerTable(header string, targets []*target, l lineup, rows []*row) table {
	t := table{header: header, targets: targets, rows: rows, ratios: [][2]int{{l.berth, l.upstream}}}
	if l.zot >= 0 {
		t.ratios = append(t.ratios, [2]int{l.berth, l.zot})
	}
	t.ratios = append(t.ratios, [2]int{l.berth, l.floor})
	t.meets = func(r *row, m []float64) bool {
		zot := 0.0
		if l.zot >= 0 {
			zot = m[l.zot]
		}
		return meetsRowTarget(r.kind, m[l.berth], m[l.upstream], zot)
	}
	t.goal = peerGoal(l.zot >= 0)
	return t
}

// peerGoal is the main table's target line.
func peerGoal(zot bool) string {
	pct := func(p int) string { return fmt.Sprintf("%.2fx", float64(p)/100) }
	if zot {
		return fmt.Sprintf("target: package and mixed rows berth/zot >= %s, blob rows berth >= %s max(upstream, zot); berth/floor has none",
			pct(packageTargetPercent), pct(blobTargetPercent))
	}
	return fmt.Sprintf("target (zot skipped): package and mixed rows berth/upstream >= %s, blob rows berth >= %s upstream; berth/floor has none",
		pct(parityTargetPercent), pct(blobTargetPercent))
}

// meetsRowTarget says whether berth's median meets a row's target against
// upstream's and zot's (zot 0 when it was skipped): on a package row,
// berth/zot >= 1.20x, or berth/upstream >= 0.95x without zot; on a blob
// row, berth >= 1.00x the better of the two.
func meetsRowTarget(kind rowKind, berth, upstream, zot float64) bool {
	if kind == blobRow {
		return meetsTarget(berth, max(upstream, zot), blobTargetPercent)
	}
	if zot > 0 {
		return meetsTarget(berth, zot, packageTargetPercent)
	}
	return meetsTarget(berth, upstream, parityTargetPercent)
}

// authTable is the second table: berth with auth on against berth without.
func authTable(targets []*target, rows []*row) table {
	return parityTable("auth on against auth off (berth+auth: htpasswd user, bcrypt cost 10, token flow with oras-go's token cache)", targets, rows)
}

// parityTable is a table of two berths, the first with a feature on and
// the second without, whose target is the first >= 0.95x the second.
func parityTable(header string, targets []*target, rows []*row) table {
	return table{
		header:  header,
		targets: targets,
		ratios:  [][2]int{{0, 1}},
		rows:    rows,
		meets: func(_ *row, m []float64) bool {
			return meetsTarget(m[0], m[1], parityTargetPercent)
		},
		goal: fmt.Sprintf("target: %s >= %.2fx %s on every row", targets[0].name, float64(parityTargetPercent)/100, targets[1].name),
	}
}

// printTable writes the header, one line per row, its result (met or MISS)
// last, and the target line; with verbose, every row's samples follow.
func printTable(w io.Writer, t table, verbose bool) {
	fmt.Fprintln(w, t.header)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	cells := []string{"row"}
	for _, x := range t.targets {
		cells = append(cells, x.name+" (median)")
	}
	for _, q := range t.ratios {
		cells = append(cells, t.targets[q[0]].name+"/"+t.targets[q[1]].name)
	}
	fmt.Fprintln(tw, strings.Join(append(cells, "result"), "\t"))
	misses := 0
	for _, r := range t.rows {
		medians := make([]float64, len(t.targets))
		cells := []string{r.name}
		for i := range t.targets {
			if len(r.samples[i]) == 0 {
				cells = append(cells, "-")
				continue
			}
			medians[i] = median(r.samples[i])
			cells = append(cells, fmt.Sprintf("%.1f %s", medians[i], r.unit))
		}
		for _, q := range t.ratios {
			cells = append(cells, formatRatio(medians[q[0]], medians[q[1]]))
		}
		if t.meets(r, medians) {
			cells = append(cells, "met")
		} else {
			cells = append(cells, "MISS")
			misses++
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	tw.Flush()
	fmt.Fprint(w, t.goal)
	if misses > 0 {
		fmt.Fprintf(w, " (%d of %d rows MISS)\n", misses, len(t.rows))
	} else {
		fmt.Fprintln(w, " (met)")
	}
	if !verbose {
		return
	}
	fmt.Fprintln(w, "\nsamples, in run order:")
	for _, r := range t.rows {
		for i, x := range t.targets {
			if len(r.samples[i]) > 0 {
				fmt.Fprintf(tw, "%s\t%s\t%s %s\n", r.name, x.name, formatSamples(r.samples[i]), r.unit)
			}
		}
	}
	tw.Flush()
}

// median is the median of xs, 0 for none. It does not reorder xs.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// formatRatio prints num/den with two decimals, e.g. "0.98x"; "-" when
// either is 0 (a target that takes no part).
func formatRatio(num, den float64) string {
	if num == 0 || den == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", num/den)
}

// meetsTarget reports whether num/den, rounded to two decimals as
// formatRatio prints it, is at least percent/100, so that the verdict
// agrees with the printed number.
func meetsTarget(num, den float64, percent int) bool {
	return num > 0 && den > 0 && math.Round(num/den*100) >= float64(percent)
}

func formatSamples(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.1f", x)
	}
	return strings.Join(s, " ")
}
