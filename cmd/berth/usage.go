package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/berth-registry/berth/catalog/apiv1"
)

// newUsageCmd returns `berth usage [NAMESPACE]`.
func newUsageCmd() *cobra.Command {
	var (
		flags  catalogFlags
		format outputFormat
	)
	cmd := &cobra.Command{
		Use:   "usage [NAMESPACE]",
		Short: "Show the storage namespaces use against their quotas",
		Long: `Show what each namespace of a berth server stores against its quota
(namespaces[].quota in the server's configuration): the bytes of the distinct
blobs and manifests its repositories reference, each counted once however many
repositories hold it, the quota ("-": none) and how much of it is used, how
many blobs that counts and how many uploads into it are open.

Without a namespace, every namespace you may pull from that stores something or
has a quota is listed. A namespace that stores nothing and has no quota, or that
you may not pull from, is an error (exit status 1).`,
		Example: `  berth usage
  berth usage team-a
  berth usage --server https://berth.example.com --format json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := flags.catalog(cmd)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if len(args) == 1 {
				u, err := c.Usage(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if format == formatJSON {
					return writeJSON(w, u)
				}
				return writeUsage(w, []apiv1.NamespaceUsage{*u})
			}
			res, err := c.Usages(cmd.Context())
			if err != nil {
				return err
			}
			if format == formatJSON {
				return writeJSON(w, res)
			}
			if len(res.Namespaces) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "no namespace you may pull from stores anything or has a quota")
				return nil
			}
			return writeUsage(w, res.Namespaces)
		},
	}
	flags.add(cmd)
	addFormatFlag(cmd, &format)
	return cmd
}

// writeUsage writes namespaces' usage as a table, sizes in binary units.
func writeUsage(w io.Writer, usages []apiv1.NamespaceUsage) error {
	t := newColumns(w, "NAMESPACE", "USED", "LIMIT", "USE%", "BLOBS", "UPLOADS")
	for _, u := range usages {
		limit := ""
		if u.LimitBytes > 0 {
			limit = humanSize(u.LimitBytes)
		}
		t.add(u.Namespace, humanSize(u.UsedBytes), limit, u.UsedPercent(),
			strconv.FormatInt(u.Blobs, 10), strconv.FormatInt(u.OpenUploads, 10))
	}
	return t.flush()
}
