package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/berth-registry/berth/client"
)

// promoteResult is the --format json output of berth promote.
type promoteResult struct {
	// Source is the version promoted, Reference the version created.
	Source    string `json:"source"`
	Reference string `json:"reference"`
	Digest    string `json:"digest"`
	// Tags are cosign's signature, attestation and SBOM tags the
	// destination has, as in the source; Kept those it had already with
	// other content, left as they were.
	Tags []string `json:"tags"`
	Kept []string `json:"kept,omitempty"`
	// Referrers are the manifests that refer to the version, copied.
	Referrers []referrerResult `json:"referrers"`
	// Verified and SignedBy are the client trust policy's verdict on the
	// destination, when a policy covers it.
	Verified *bool  `json:"verified,omitempty"`
	SignedBy string `json:"signedBy,omitempty"`
}

// referrerResult is one referrer copied.
type referrerResult struct {
	Digest       string `json:"digest"`
	ArtifactType string `json:"artifactType,omitempty"`
}

// newPromoteCmd returns `berth promote SRC DST`.
func newPromoteCmd() *cobra.Command {
	var (
		remote remoteFlags
		trust  trustFlags
		format outputFormat
	)
	cmd := &cobra.Command{
		Use:   "promote SRC DST",
		Short: "Copy a package version with its signatures into another repository",
		Long: `Promote a package version, e.g. from incubator/ to stable/: copy its manifest
and blobs by digest into DST's repository, then its cosign signatures,
attestations and SBOMs (sha256-<hex>.sig, .att, .sbom, under the same tags) and
every manifest that refers to it (OCI 1.1 referrers), and last tag it there.
SRC is host[:port]/namespace/name:version or ...@sha256:<hex>; DST is
host[:port]/namespace/name, or host[:port]/namespace/name:version (the version
defaults to SRC's). Within one registry blobs are mounted, not copied.

A registry whose trust policy requires verified signatures in DST's namespace
refuses the final tag of a version none of whose signatures it trusts; the
error carries the registry's reason. When the client trust policy (see
--trust-policy) covers DST and requires signatures, the signatures are checked
before anything is copied.`,
		Example: `  berth promote localhost:5000/incubator/kafka:1.3.2 localhost:5000/stable/kafka
  berth promote localhost:5000/incubator/kafka@sha256:... localhost:5000/stable/kafka:1.3.2
  berth promote staging.example.com/kudo/kafka:1.3.2 registry.example.com/kudo/kafka --trust-policy trust.yaml`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := parseVersionRef("SRC", args[0])
			if err != nil {
				return err
			}
			dst, err := client.ParseReference(args[1])
			if err != nil {
				return fmt.Errorf("DST: %w", err)
			}
			if dst.Digest != "" {
				return fmt.Errorf("DST %q has a digest: want host[:port]/namespace/name[:version]", args[1])
			}
			if dst.Tag == "" && src.Tag == "" {
				return fmt.Errorf("DST %q has no version and SRC is given by digest: want host[:port]/namespace/name:version", args[1])
			}
			policy, err := trust.policy(cmd)
			if err != nil {
				return err
			}
			c, err := remote.clientWith(cmd, policy)
			if err != nil {
				return err
			}
			p, err := c.Promote(cmd.Context(), src, dst)
			if err != nil {
				return err
			}
			created := p.Destination
			created.Digest = ""
			res := promoteResult{Source: args[0], Reference: created.String(), Digest: p.Descriptor.Digest.String(),
				Tags: p.Tags, Kept: p.Kept, Referrers: []referrerResult{}}
			if res.Tags == nil {
				res.Tags = []string{}
			}
			for _, r := range p.Referrers {
				res.Referrers = append(res.Referrers, referrerResult{Digest: r.Digest.String(), ArtifactType: r.ArtifactType})
			}
			if p.Signatures != nil {
				verified := p.Signatures.Verified()
				res.Verified = &verified
				if s, ok := p.Signatures.VerifiedBy(); ok {
					res.SignedBy = s.KeyID
				}
			}
			for _, tag := range p.Kept {
				fmt.Fprintf(cmd.ErrOrStderr(), "Warning: %s/%s:%s already exists with signatures the source lacks; kept it, not merged\n",
					dst.Registry, dst.Repository(), tag)
			}
			if format == formatJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Promoted %s → %s\n", res.Source, res.Reference)
			t := newTable(w)
			t.row("Digest", res.Digest)
			for _, tag := range res.Tags {
				t.row("Copied", tag)
			}
			for _, r := range res.Referrers {
				t.row("Copied", "referrer "+r.Digest+" "+r.ArtifactType)
			}
			if res.SignedBy != "" {
				t.row("Verified", "signed by "+res.SignedBy)
			}
			return t.flush()
		},
	}
	remote.add(cmd)
	trust.addPolicy(cmd)
	addFormatFlag(cmd, &format)
	return cmd
}
