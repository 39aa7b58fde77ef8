package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// deleteResult is the --format json output of berth delete.
type deleteResult struct {
	Reference string `json:"reference"`
	Digest    string `json:"digest"`
}

// newDeleteCmd returns `berth delete REF`.
func newDeleteCmd() *cobra.Command {
	var (
		remote remoteFlags
		format outputFormat
	)
	cmd := &cobra.Command{
		Use:   "delete REF",
		Short: "Delete a package version from a registry",
		Long: `Delete a package version, by version or digest, as oras manifest delete does:
its manifest and every tag that names it go at once, and the catalog forgets
the version. The blobs it referenced stay until garbage collection finds
that nothing references them any more (gc.interval, or berth gc; docs/gc.md).
Deleting needs the delete permission on the repository; use the credentials
of berth login.`,
		Example: `  berth delete localhost:5000/kudo/kafka:1.0.0
  berth delete registry.example.com/team-a/app@sha256:... --format json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ref, err := remote.versionRef(cmd, args[0])
			if err != nil {
				return err
			}
			desc, err := c.Delete(cmd.Context(), ref)
			if err != nil {
				return err
			}
			if format == formatJSON {
				return writeJSON(cmd.OutOrStdout(), deleteResult{Reference: ref.String(), Digest: desc.Digest.String()})
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Deleted %s (%s)\n", ref, desc.Digest)
			return err
		},
	}
	remote.add(cmd)
	addFormatFlag(cmd, &format)
	return cmd
}
