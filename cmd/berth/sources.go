package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/pkgsource"
)

// newSourcesCmd returns `berth sources [NAMESPACE]`, with its subcommands
// check and key.
func newSourcesCmd() *cobra.Command {
	var (
		flags  catalogFlags
		format outputFormat
	)
	cmd := &cobra.Command{
		Use:   "sources [NAMESPACE]",
		Short: "Show the package sources a berth server follows, and their status",
		Long: `Show the git repositories, tarball URLs and images a berth server follows and
builds package versions from (namespaces[].sources in its configuration,
docs/sources.md), for the packages you may pull: each source's kind, URL and
ref, when it was last checked, what that check resolved (a commit, an ETag, a
digest; shortened), the last version built from it, and the last error, as
its reason (fetch, limit, denied, invalid, refused) and message.

berth sources check NS/PACKAGE asks for a check now; berth sources key prints
the public key that verifies what the server builds from sources.`,
		Example: `  berth sources
  berth sources team-a --format json
  berth sources check team-a/etcd
  berth sources key > berth-provenance.pub
  cosign verify-attestation --type slsaprovenance --key berth-provenance.pub berth.example.com/team-a/etcd:1.2.0`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := flags.catalog(cmd)
			if err != nil {
				return err
			}
			ns := ""
			if len(args) == 1 {
				ns = args[0]
			}
			res, err := c.Sources(cmd.Context(), ns)
			if err != nil {
				return err
			}
			if format == formatJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			if len(res.Sources) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "no source of a package you may pull is followed")
				return nil
			}
			return writeSources(cmd.OutOrStdout(), res.Sources)
		},
	}
	flags.add(cmd)
	addFormatFlag(cmd, &format)
	cmd.AddCommand(newSourcesCheckCmd(), newSourcesKeyCmd())
	return cmd
}

func newSourcesCheckCmd() *cobra.Command {
	var (
		flags  catalogFlags
		format outputFormat
	)
	cmd := &cobra.Command{
		Use:   "check NS/PACKAGE",
		Short: "Ask the server to check a package's source now",
		Long: `Ask the server to check the source that publishes NS/PACKAGE now, rather than
at its next interval; it needs push on the package. The check runs on the
server (its leader); berth sources shows its outcome.`,
		Example: `  berth sources check team-a/etcd`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, name, _, err := parsePackageArg(args[0], false)
			if err != nil {
				return err
			}
			c, err := flags.catalog(cmd)
			if err != nil {
				return err
			}
			res, err := c.CheckSource(cmd.Context(), ns, name)
			if err != nil {
				return err
			}
			if format == formatJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Asked for a check of the source of %s/%s; berth sources %s shows its outcome.\n",
				clean(res.Namespace), clean(res.Package), clean(res.Namespace))
			return err
		},
	}
	flags.add(cmd)
	addFormatFlag(cmd, &format)
	return cmd
}

func newSourcesKeyCmd() *cobra.Command {
	var flags catalogFlags
	cmd := &cobra.Command{
		Use:   "key",
		Short: "Print the public key that verifies what the server builds from sources",
		Long: `Print, as PEM, the public key of the key the server signs the versions it
builds from sources, and their SLSA provenance attestations, with; cosign
verify and verify-attestation take it with --key.`,
		Example: `  berth sources key > berth-provenance.pub`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := flags.catalog(cmd)
			if err != nil {
				return err
			}
			key, err := c.SourcesKey(cmd.Context())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for line := range strings.Lines(string(key)) {
				if _, err := fmt.Fprintln(w, clean(line)); err != nil {
					return err
				}
			}
			return nil
		},
	}
	flags.add(cmd)
	return cmd
}

// writeSources writes the status of sources as a table.
func writeSources(w io.Writer, sources []apiv1.Source) error {
	t := newColumns(w, "NAMESPACE/PACKAGE", "KIND", "URL", "REF", "LAST CHECK", "REVISION", "LAST VERSION", "ERROR")
	for _, s := range sources {
		lastCheck, lastVersion, lastError := "", "", ""
		if s.LastCheck != nil {
			lastCheck = s.LastCheck.UTC().Format(time.RFC3339)
		}
		if s.LastPublished != nil {
			lastVersion = s.LastPublished.Version
		}
		if s.LastError != nil {
			lastError = s.LastError.Reason + ": " + s.LastError.Message
		}
		t.add(s.Namespace+"/"+s.Package, s.Kind, s.URL, s.Ref, lastCheck, pkgsource.ShortRevision(s.Revision), lastVersion, lastError)
	}
	return t.flush()
}
