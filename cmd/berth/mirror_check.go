package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/berth-registry/berth/mirror"
)

func newMirrorCheckCmd() *cobra.Command {
	var (
		remote     remoteFlags
		sel        selectionFlags
		format     outputFormat
		far        string
		policyFile string
	)
	cmd := &cobra.Command{
		Use:   "check --registry FAR --selection FILE",
		Short: "Say whether each selected version can install at a far berth",
		Long: `Check resolves a selection against the catalog of FAR, a berth server (usually
the one an import filled), and asks it, for each version chosen, whether
everything the version needs to install is there: its images at their mirrors,
and its signatures verified. It prints, per version, yes or no and a line for
each problem, naming the image or the signature.

With --policy, each image present at its mirror is also verified there by this
client, offline, against the trust policy: the first policy whose images globs
match the image's source repository (images: ["quay.io/org/*"]) gives the keys. An image
that rule requires to be signed, and that no trusted signature verifies, makes
its version not installable.

The exit status is 1 when any version cannot install.`,
		Example: `  berth mirror check --registry registry.internal:5000 --selection site.yaml
  berth mirror check --registry registry.internal:5000 --namespace community --policy images-trust.yaml --format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if far == "" {
				return errors.New("--registry: give the berth server to check against, host[:port]")
			}
			if err := checkHost("--registry", far); err != nil {
				return err
			}
			selection, err := sel.selection(false)
			if err != nil {
				return err
			}
			if selection == nil {
				return errors.New("say what to check: --selection FILE, or --namespace / --repository")
			}
			c, err := remote.client(cmd)
			if err != nil {
				return err
			}
			cat, err := c.Catalog(far)
			if err != nil {
				return err
			}
			opts := mirror.CheckOptions{Catalog: cat, Selection: selection, Fetchers: c}
			if policyFile != "" {
				if opts.Policy, err = loadTrustPolicy(policyFile); err != nil {
					return err
				}
			}
			rep, err := mirror.CheckInstall(cmd.Context(), opts)
			if err != nil {
				return err
			}
			for _, w := range rep.Warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "Warning: "+w)
			}
			if format == formatJSON {
				if err := writeJSON(cmd.OutOrStdout(), rep); err != nil {
					return err
				}
			} else if err := printCheck(cmd.OutOrStdout(), rep); err != nil {
				return err
			}
			if rep.NotInstallable > 0 {
				return fmt.Errorf("%d of %d versions cannot install at %s", rep.NotInstallable, len(rep.Versions), far)
			}
			return nil
		},
	}
	sel.add(cmd)
	remote.add(cmd)
	addFormatFlag(cmd, &format)
	cmd.Flags().StringVar(&far, "registry", "", "the berth server to check against, `HOST[:PORT]`")
	cmd.Flags().StringVar(&policyFile, "policy", "",
		"also verify each image's signatures at its mirror against this trust policy `FILE` (its images: globs match source repositories, e.g. quay.io/org/*)")
	cmd.Flags().SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "trust-policy" {
			name = "policy"
		}
		return pflag.NormalizedName(name)
	})
	return cmd
}

// printCheck prints a check's table: each version and whether it can
// install, and under it a line per problem, as the far berth or the policy
// check wrote it (cleaned for a terminal); then the counts.
func printCheck(w io.Writer, rep *mirror.CheckReport) error {
	width := len("VERSION")
	for _, v := range rep.Versions {
		width = max(width, len(v.Namespace)+len(v.Name)+len(v.Version)+2)
	}
	fmt.Fprintf(w, "%-*s%sINSTALLABLE\n", width, "VERSION", strings.Repeat(" ", columnGap))
	for _, v := range rep.Versions {
		yes := "no"
		if v.Installable {
			yes = "yes"
		}
		fmt.Fprintf(w, "%-*s%s%s\n", width, v.Namespace+"/"+v.Name+" "+v.Version, strings.Repeat(" ", columnGap), yes)
		for _, p := range v.Problems {
			fmt.Fprintln(w, "  "+clean(p))
		}
	}
	_, err := fmt.Fprintf(w, "%d versions: %d can install, %d cannot\n", len(rep.Versions), rep.Installable, rep.NotInstallable)
	return err
}
