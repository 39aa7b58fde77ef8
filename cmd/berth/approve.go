package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// newApproveCmd returns `berth approve NS/NAME:VERSION --permissions FINGERPRINT`.
func newApproveCmd() *cobra.Command {
	var (
		flags       catalogFlags
		fingerprint string
		format      outputFormat
	)
	cmd := &cobra.Command{
		Use:   "approve NS/NAME:VERSION --permissions sha256:…",
		Short: "Approve a version whose permissions the namespace's gate refused, so that it may be pushed",
		Long: `In a namespace with refuseWideningPermissions, a push of a version that asks
for RBAC permissions beyond those admitted for its package name before, or of
a package's first version rated above the namespace's maxUnapprovedRating, is
refused with DENIED, naming the permissions and their fingerprint. An
administrator of the package who accepts them records an approval of exactly
those permissions with this command; the push then succeeds, and later
versions asking for no more need no approval. A version pushed again with
other permissions needs another approval (docs/permissions.md).`,
		Example: `  berth approve operators/etcd:0.9.4 --permissions sha256:56a7c7e63990db99b6066b910c5c76c0f7682ad34d8fd03716fe0d78ff629a6f`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, name, version, err := parsePackageArg(args[0], true)
			if err != nil {
				return err
			}
			if version == "" {
				return fmt.Errorf("invalid package %q: missing version: want NS/NAME:VERSION, the version whose push was refused", args[0])
			}
			c, err := flags.catalog(cmd)
			if err != nil {
				return err
			}
			a, err := c.Approve(cmd.Context(), ns, name, version, fingerprint)
			if err != nil {
				return err
			}
			if format == formatJSON {
				return writeJSON(cmd.OutOrStdout(), a)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Approved %s/%s:%s with permissions %s (by %s); push it again.\n", clean(a.Namespace), clean(a.Name), clean(a.Version), clean(a.Permissions), clean(a.By))
			return err
		},
	}
	flags.add(cmd)
	cmd.Flags().StringVar(&fingerprint, "permissions", "", "the `FINGERPRINT` of the permissions approved, as the refusal named it (required)")
	_ = cmd.MarkFlagRequired("permissions") // cannot fail: the flag exists
	addFormatFlag(cmd, &format)
	return cmd
}
