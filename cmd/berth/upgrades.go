package main

import (
	"fmt"
	"io"
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
			if format == formatJSON {
				return writeJSON(cmd.OutOrStdout(), markUpgrades(up, wideningEdges(g)))
			}
			return writeUpgrades(cmd.OutOrStdout(), ns+"/"+name, up, wideningEdges(g))
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
// head, marking each upgrade that widens permissions.
func writeUpgrades(w io.Writer, pkg string, up *apiv1.Upgrades, widens map[edge]bool) error {
	next := "none"
	if len(up.Next) > 0 {
		marked := make([]string, len(up.Next))
		for i, n := range up.Next {
			marked[i] = n
			if widens[edge{up.From, n}] {
				marked[i] += widensMark
			}
		}
		next = strings.Join(marked, ", ")
	}
	t := newTable(w)
	t.row("Package", clean(pkg))
	t.row("Channel", clean(up.Channel))
	t.row("From", clean(up.From))
	t.row("Head", clean(up.Head))
	t.row("Next", clean(next))
	t.row("Path", clean(upgradePath(up, widens)))
	if err := t.flush(); err != nil {
		return err
	}
	if len(widens) > 0 && (strings.Contains(next, widensMark) || strings.Contains(upgradePath(up, widens), widensMark)) {
		fmt.Fprintf(w, "Review what an upgrade adds with: berth permissions %s:VERSION --from %s\n", clean(pkg), clean(up.From))
	}
	return nil
}

// upgradePath renders the path to the head, "0.9.0 → 0.9.2 → 0.9.4 (head)",
// each version reached by a widening upgrade marked.
func upgradePath(up *apiv1.Upgrades, widens map[edge]bool) string {
	switch {
	case len(up.Path) == 0 && up.From == up.Head:
		return "already at the head"
	case len(up.Path) == 0:
		return fmt.Sprintf("none: %s does not lead to the head %s", up.From, up.Head)
	}
	var b strings.Builder
	b.WriteString(up.From)
	prev := up.From
	for _, v := range up.Path {
		b.WriteString(" → " + v)
		if widens[edge{prev, v}] {
			b.WriteString(widensMark)
		}
		prev = v
	}
	if up.Path[len(up.Path)-1] == up.Head {
		b.WriteString(" (head)")
	}
	return b.String()
}
