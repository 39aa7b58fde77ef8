package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/permissions"
)

// newPermissionsCmd returns `berth permissions NS/NAME:VERSION [--from VERSION]`.
func newPermissionsCmd() *cobra.Command {
	var (
		flags  catalogFlags
		from   string
		format outputFormat
	)
	cmd := &cobra.Command{
		Use:   "permissions NS/NAME:VERSION [--from VERSION]",
		Short: "Review the RBAC permissions a package version asks for, and what an upgrade adds",
		Long: `Review the RBAC permissions a version asks for (OLM permissions and
clusterPermissions; the Roles and ClusterRoles of KUDO and plain packages):
each rule in plain language, the findings a cluster admin should weigh
(wildcards, Secrets, writes across the cluster, bind/escalate/impersonate,
RBAC writes, exec into pods, privileged security policies) and a worst-case
rating: none, low, medium, high or critical.

With --from, compare with the version installed: the grants the upgrade adds
and removes, and whether it widens the permissions or the rating. The
command exits 0 either way; script on --format json's change.widens.`,
		Example: `  berth permissions operators/etcd:0.9.4
  berth permissions operators/etcd:0.9.4 --from 0.9.2
  berth permissions operators/etcd:0.9.4 --from 0.9.2 --format json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, name, version, err := parsePackageArg(args[0], true)
			if err != nil {
				return err
			}
			if version == "" {
				return fmt.Errorf("invalid package %q: missing version: want NS/NAME:VERSION, e.g. operators/etcd:0.9.4", args[0])
			}
			c, err := flags.catalog(cmd)
			if err != nil {
				return err
			}
			p, err := c.Permissions(cmd.Context(), ns, name, version, from)
			if err != nil {
				return err
			}
			if format == formatJSON {
				return writeJSON(cmd.OutOrStdout(), p)
			}
			return writePermissionReview(cmd.OutOrStdout(), p)
		},
	}
	flags.add(cmd)
	cmd.Flags().StringVar(&from, "from", "", "compare with `VERSION`, usually the one installed")
	addFormatFlag(cmd, &format)
	return cmd
}

// writePermissionReview writes the review, then the change from the
// version compared with.
func writePermissionReview(w io.Writer, p *apiv1.Permissions) error {
	t := newTable(w)
	t.row("Package", clean(p.Namespace+"/"+p.Name))
	t.row("Version", clean(p.Version))
	t.row("Rating", p.Review.Rating.String())
	if err := t.flush(); err != nil {
		return err
	}
	if len(p.Review.Rules) == 0 {
		fmt.Fprintln(w, "\nNo RBAC rules.")
	} else {
		fmt.Fprintln(w, "\nRules:")
		for _, r := range p.Review.Rules {
			fmt.Fprintln(w, "  "+clean(r.Text))
		}
	}
	writeFindings(w, p.Review)
	if p.Change == nil {
		return nil
	}
	c := p.Change
	verdict := "does not widen the permissions"
	if c.Widens {
		verdict = "WIDENS the permissions"
	}
	fmt.Fprintf(w, "\nFrom %s: the upgrade %s (rating %s -> %s).\n", clean(p.From), verdict, c.From, c.To)
	for _, g := range [...]struct {
		title  string
		grants []permissions.Grant
	}{{"Added", c.Added}, {"Removed", c.Removed}} {
		if len(g.grants) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s (%d):\n", g.title, len(g.grants))
		for _, gr := range g.grants {
			fmt.Fprintln(w, "  "+clean(gr.String()))
		}
	}
	return nil
}

// writeFindings writes the review's findings, worst first, one per line.
func writeFindings(w io.Writer, r *permissions.Review) {
	for _, f := range r.Findings {
		fmt.Fprintln(w, clean(fmt.Sprintf("%s: %s", strings.ToUpper(f.Rating.String()), f.Text)))
	}
}
