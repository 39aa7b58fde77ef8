package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/berth-registry/berth/catalog/apiv1"
)

// newUpgradesCmd returns `berth upgrades NS/NAME --from VERSION`.
func newUpgradesCmd() *cobra.Command {
	var (
		flags         catalogFlags
		from, channel string
		format        outputFormat
	)
	cmd := &cobra.Command{
		Use:   "upgrades NS/NAME --from VERSION [--channel CHANNEL]",
		Short: "Show how to upgrade an installed package version to the head of its channel",
		Long: `Show the upgrades of a package from the version installed (--from) in a
channel (--channel, default: the package's default channel): the head of the
channel, the versions it upgrades to directly, and the shortest upgrade path to
the head. The upgrade graph comes from the catalog: OLM's replaces, skips and
skipRange, semver order for the other formats. Each upgrade that widens the
permissions is marked: "(widens permissions)" in text, "widensPermissions" in
the steps of --format json.`,
		Example: `  berth upgrades operators/etcd --from 0.9.0
  berth upgrades operators/etcd --from 0.9.0 --channel alpha --format json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, name, _, err := parsePackageArg(args[0], false)
			if err != nil {
				return err
			}
			c, err := flags.catalog(cmd)
			if err != nil {
				return err
			}
			up, err := c.Upgrades(cmd.Context(), ns, name, from, channel)
			if err != nil {
				return err
			}
			g, err := c.Graph(cmd.Context(), ns, name, up.Channel)
			if err != nil {
				return err
			}
			r := markUpgrades(up, wideningEdges(g))
			if format == formatJSON {
				return writeJSON(cmd.OutOrStdout(), r)
			}
			return writeUpgrades(cmd.OutOrStdout(), ns+"/"+name, r)
		},
	}
	flags.add(cmd)
	cmd.Flags().StringVar(&from, "from", "", "the installed `VERSION` (required)")
	cmd.Flags().StringVar(&channel, "channel", "", "the `CHANNEL` to follow (default: the package's default channel)")
	_ = cmd.MarkFlagRequired("from") // cannot fail: the flag exists
	addFormatFlag(cmd, &format)
	return cmd
}

// edge is an upgrade from one version to another.
type edge struct{ from, to string }

// upgradeStep is one upgrade in the --format json output of berth upgrades.
type upgradeStep struct {
	From              string `json:"from"`
	To                string `json:"to"`
	WidensPermissions bool   `json:"widensPermissions"`
}

// upgradesResult is the --format json output of berth upgrades: the
// catalog's answer, and its upgrades as steps, each marked when it widens
// permissions as the text output marks it.
type upgradesResult struct {
	*apiv1.Upgrades
	// NextSteps are the upgrades from From to each of Next; PathSteps
	// those of Path, in order.
	NextSteps []upgradeStep `json:"nextSteps"`
	PathSteps []upgradeStep `json:"pathSteps"`
}

// markUpgrades returns up with its upgrades as steps, marking those in
// widens.
func markUpgrades(up *apiv1.Upgrades, widens map[edge]bool) upgradesResult {
	r := upgradesResult{Upgrades: up, NextSteps: []upgradeStep{}, PathSteps: []upgradeStep{}}
	for _, n := range up.Next {
		r.NextSteps = append(r.NextSteps, upgradeStep{From: up.From, To: n, WidensPermissions: widens[edge{up.From, n}]})
	}
	prev := up.From
	for _, v := range up.Path {
		r.PathSteps = append(r.PathSteps, upgradeStep{From: prev, To: v, WidensPermissions: widens[edge{prev, v}]})
		prev = v
	}
	return r
}

// wideningEdges returns the edges of g that widen permissions.
func wideningEdges(g *apiv1.Graph) map[edge]bool {
	out := make(map[edge]bool)
	for _, e := range g.Edges {
		if e.WidensPermissions {
			out[edge{e.From, e.To}] = true
		}
	}
	return out
}

// widensMark is written after each version reached by an upgrade that
// widens permissions.
const widensMark = " (widens permissions)"

// writeUpgrades writes the head, the direct upgrades and the path to the
// head, marking each step of r that widens permissions.
func writeUpgrades(w io.Writer, pkg string, r upgradesResult) error {
	next := "none"
	if len(r.NextSteps) > 0 {
		marked := make([]string, len(r.NextSteps))
		for i, s := range r.NextSteps {
			marked[i] = s.To + s.mark()
		}
		next = strings.Join(marked, ", ")
	}
	t := newTable(w)
	t.row("Package", clean(pkg))
	t.row("Channel", clean(r.Channel))
	t.row("From", clean(r.From))
	t.row("Head", clean(r.Head))
	t.row("Next", clean(next))
	t.row("Path", clean(upgradePath(r)))
	if err := t.flush(); err != nil {
		return err
	}
	if slices.ContainsFunc(append(slices.Clone(r.NextSteps), r.PathSteps...), func(s upgradeStep) bool { return s.WidensPermissions }) {
		fmt.Fprintf(w, "Review what an upgrade adds with: berth permissions %s:VERSION --from %s\n", clean(pkg), clean(r.From))
	}
	return nil
}

// mark is what the text output writes after the version s reaches.
func (s upgradeStep) mark() string {
	if s.WidensPermissions {
		return widensMark
	}
	return ""
}

// upgradePath renders the path to the head, "0.9.0 → 0.9.2 → 0.9.4 (head)",
// each version reached by a widening step marked.
func upgradePath(r upgradesResult) string {
	switch {
	case len(r.PathSteps) == 0 && r.From == r.Head:
		return "already at the head"
	case len(r.PathSteps) == 0:
		return fmt.Sprintf("none: %s does not lead to the head %s", r.From, r.Head)
	}
	var b strings.Builder
	b.WriteString(r.From)
	for _, s := range r.PathSteps {
		b.WriteString(" → " + s.To + s.mark())
	}
	if r.PathSteps[len(r.PathSteps)-1].To == r.Head {
		b.WriteString(" (head)")
	}
	return b.String()
}
