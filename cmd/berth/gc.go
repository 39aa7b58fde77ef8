package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-registry/berth/maintenance"
)

// newGCCmd returns `berth gc`, which runs retention and garbage collection
// on a berth server now.
func newGCCmd() *cobra.Command {
	var (
		flags  catalogFlags
		dryRun bool
		format outputFormat
	)
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Run retention and garbage collection on a berth server now",
		Long: `Run on the server, now, what its leader runs every gc.interval (docs/gc.md):
retention untags the versions the namespaces' keepLast expire, then garbage
collection deletes the manifests and blobs nothing references any more and
that are older than gc.grace. The command waits for the run to end and
prints what it deleted, or with --dry-run what it would delete.

Without --dry-run the server's gc.dryRun decides; --dry-run=false deletes
even where gc.dryRun is set. A run already in progress on the server is an
error (try again when it ends); one on another replica is waited for. It
needs admin on everything (auth.rules: admin on */*). The server is named
by --server (env BERTH_SERVER), as for berth search; log in to it first with
berth login.`,
		Example: `  berth gc --server registry.example.com --dry-run
  berth gc --server registry.example.com --format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := flags.catalog(cmd)
			if err != nil {
				return err
			}
			var dry *bool
			if cmd.Flags().Changed("dry-run") {
				dry = &dryRun
			}
			rep, err := c.CollectGarbage(cmd.Context(), dry)
			if err != nil {
				return err
			}
			if format == formatJSON {
				return writeJSON(cmd.OutOrStdout(), rep)
			}
			return writeGCReport(cmd, rep)
		},
	}
	flags.add(cmd)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "report what would be deleted, delete nothing (default: the server's gc.dryRun)")
	addFormatFlag(cmd, &format)
	return cmd
}

// writeGCReport prints a run's report as a table.
func writeGCReport(cmd *cobra.Command, rep *maintenance.Report) error {
	verb := "Deleted"
	if rep.DryRun {
		verb = "Would delete"
		fmt.Fprintln(cmd.OutOrStdout(), "Dry run: nothing was deleted.")
	}
	t := newTable(cmd.OutOrStdout())
	t.row("Versions untagged", fmt.Sprint(rep.Versions))
	t.row(verb, fmt.Sprintf("%d manifests, %d blobs (%s)", rep.Manifests, rep.Blobs, humanSize(rep.Bytes)))
	t.row("Took", fmt.Sprintf("mark %s, sweep %s", rep.Mark.Round(time.Millisecond), rep.Sweep.Round(time.Millisecond)))
	return t.flush()
}
