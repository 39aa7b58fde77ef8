package main

import (
	"fmt"
	"io"
	"math/big"
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
		limit, use := "", ""
		if u.LimitBytes > 0 {
			limit, use = humanSize(u.LimitBytes), usePercent(u.UsedBytes, u.LimitBytes)
		}
		t.add(u.Namespace, humanSize(u.UsedBytes), limit, use,
			strconv.FormatInt(u.Blobs, 10), strconv.FormatInt(u.OpenUploads, 10))
	}
	return t.flush()
}

// usePercent is used as a percentage of limit (> 0) to one decimal, rounded
// down, so that a namespace shows 100.0% only when it is full. It counts in
// big integers: used×1000 overflows an int64 past 8 PiB.
func usePercent(used, limit int64) string {
	tenths := new(big.Int).Mul(big.NewInt(max(used, 0)), big.NewInt(1000))
	s := tenths.Quo(tenths, big.NewInt(limit)).String()
	if len(s) < 2 {
		s = "0" + s
	}
	return s[:len(s)-1] + "." + s[len(s)-1:] + "%"
}
