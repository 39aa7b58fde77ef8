package main

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/signing"
)

// verifyResult is the --format json output of berth verify.
type verifyResult struct {
	Reference string `json:"reference"`
	Digest    string `json:"digest"`
	Verified  bool   `json:"verified"`
	// SignedBy is the key ID of the first verified signature.
	SignedBy string `json:"signedBy,omitempty"`
	// Reason says why the version is not verified.
	Reason       string            `json:"reason,omitempty"`
	Signatures   []signatureResult `json:"signatures"`
	Attestations []signatureResult `json:"attestations"`
}

// signatureResult is one signature or attestation and its verdict.
type signatureResult struct {
	// Digest is the manifest that carries it; Layer its payload.
	Digest        string `json:"digest"`
	Layer         string `json:"layer,omitempty"`
	Kind          string `json:"kind"`
	PredicateType string `json:"predicateType,omitempty"`
	KeyID         string `json:"keyId,omitempty"`
	Verified      bool   `json:"verified"`
	Reason        string `json:"reason,omitempty"`
	// Sources are the sources a verified SLSA provenance attestation names.
	Sources []string `json:"sources,omitempty"`
}

// newVerifyResult turns a report into the output of berth verify.
func newVerifyResult(ref client.Reference, rep *signing.Report) verifyResult {
	res := verifyResult{
		Reference: ref.String(), Digest: rep.Subject, Verified: rep.Verified(), Reason: rep.Reason(),
		Signatures: signatureResults(rep.Signatures), Attestations: signatureResults(rep.Attestations),
	}
	if s, ok := rep.VerifiedBy(); ok {
		res.SignedBy = s.KeyID
	}
	return res
}

func signatureResults(sigs []signing.Signature) []signatureResult {
	out := make([]signatureResult, len(sigs))
	for i, s := range sigs {
		out[i] = signatureResult{Digest: s.Digest, Layer: s.Layer, Kind: string(s.Kind), PredicateType: s.PredicateType,
			KeyID: s.KeyID, Verified: s.Verified, Reason: s.Reason, Sources: s.Sources}
	}
	return out
}

// newVerifyCmd returns `berth verify REF`.
func newVerifyCmd() *cobra.Command {
	var (
		remote        remoteFlags
		trust         trustFlags
		format        outputFormat
		requireSource []string
	)
	cmd := &cobra.Command{
		Use:   "verify REF (--key FILE ... | --trust-policy FILE)",
		Short: "Verify the signatures of a package version",
		Long: `Find the cosign signatures and attestations of a package version, under
cosign's tags (sha256-<hex>.sig, .att) and as OCI 1.1 referrers, and verify each
with the public keys given with --key, or with the keys a trust policy trusts
for the version's repository. Every signature and attestation is listed with
how it was found, the key that verified it, or why it did not verify.

The command fails unless a signature verifies, and the error says why: no
signature; not signed by a trusted key (another key signed it, or the payload or
signature was altered); payload digest mismatch (a signature of another
version); bad signature. With --require-source (or requireSource in a trust
policy) it also fails unless a verified SLSA provenance attestation names only
sources the globs match; the sources of each verified provenance are listed.

Without --key or --trust-policy, the trust policy of $` + trustPolicyEnv + ` or
<config dir>/berth/trust.yaml is used.

Transparency log entries are not checked unless asked for: --tlog-key (with
--key), or tlogKeys in a trust policy, trusts a signature only when it carries
an entry signed by that log's key, checked offline.`,
		Example: `  berth verify localhost:5000/stable/kafka:1.3.2 --key cosign.pub
  berth verify localhost:5000/stable/kafka@sha256:... --trust-policy trust.yaml --format json
  berth verify registry.example.com/stable/kafka:1.3.2 --key cosign.pub --tlog-key rekor.pub`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ref, err := remote.versionRef(cmd, args[0])
			if err != nil {
				return err
			}
			var rep *signing.Report
			switch {
			case len(trust.keys) > 0 && cmd.Flags().Changed("trust-policy"):
				return errors.New("give --key or --trust-policy, not both")
			case len(requireSource) > 0 && len(trust.keys) == 0:
				return errors.New("--require-source needs --key (a trust policy names its sources in requireSource)")
			case len(trust.keys) > 0:
				rule, err := trust.rule(ref.Repository(), false)
				if err != nil {
					return err
				}
				for i, glob := range requireSource {
					if err := config.CheckSourceGlob(glob); err != nil {
						return fmt.Errorf("--require-source[%d]: %w", i, err)
					}
				}
				rule.RequireSource = requireSource
				if rep, err = c.Verify(cmd.Context(), ref, signing.NewPolicyOf(rule)); err != nil {
					return err
				}
			case len(trust.tlogKeys) > 0:
				return errors.New("--tlog-key needs --key (a trust policy names its logs in tlogKeys)")
			default:
				policy, err := trust.policy(cmd)
				if err != nil {
					return err
				}
				if policy == nil {
					return fmt.Errorf("no key to verify with: give --key FILE (a cosign public key) or --trust-policy FILE, or set $%s", trustPolicyEnv)
				}
				if rep, err = c.Verify(cmd.Context(), ref, policy); err != nil {
					return err
				}
			}
			res := newVerifyResult(ref, rep)
			if format == formatJSON {
				if err := writeJSON(cmd.OutOrStdout(), res); err != nil {
					return err
				}
			} else if err := writeVerifyText(cmd.OutOrStdout(), res); err != nil {
				return err
			}
			if !res.Verified {
				return fmt.Errorf("verify %s: %s is not verified: %s", ref, res.Digest, res.Reason)
			}
			return nil
		},
	}
	remote.add(cmd)
	trust.addKeys(cmd, "cosign public key `FILE` (cosign.pub) to verify with (repeatable: any of them)")
	trust.addPolicy(cmd)
	cmd.Flags().StringArrayVar(&requireSource, "require-source", nil,
		"with --key: also require a verified SLSA provenance attestation whose every source this `GLOB` (https://github.com/org/*) or another matches (repeatable)")
	addFormatFlag(cmd, &format)
	return cmd
}

// writeVerifyText writes the verdict and one line per signature and attestation.
func writeVerifyText(w io.Writer, res verifyResult) error {
	if res.Verified {
		fmt.Fprintf(w, "Verified %s (%s): signed by %s\n", res.Reference, res.Digest, res.SignedBy)
	} else {
		fmt.Fprintf(w, "Not verified %s (%s)\n", res.Reference, res.Digest)
	}
	if len(res.Signatures)+len(res.Attestations) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TYPE\tDIGEST\tKIND\tKEY\tVERIFIED\tREASON")
	line := func(typ string, s signatureResult) {
		key, verified := "-", "no"
		if s.KeyID != "" {
			key = shortKeyID(s.KeyID)
		}
		if s.Verified {
			verified = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", typ, shortDigest(s.Digest), s.Kind, key, verified, s.Reason)
	}
	for _, s := range res.Signatures {
		line("signature", s)
	}
	for _, s := range res.Attestations {
		line("attestation "+s.PredicateType, s)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range res.Attestations {
		if len(s.Sources) > 0 {
			fmt.Fprintf(w, "\nProvenance %s built from:\n", shortDigest(s.Digest))
			for _, src := range s.Sources {
				fmt.Fprintf(w, "  %s\n", clean(src))
			}
		}
	}
	return nil
}

// shortKeyID shortens a key fingerprint to "sha256:" and 16 hex digits, as
// signing's messages do.
func shortKeyID(id string) string {
	if len(id) > len("sha256:")+16 {
		return id[:len("sha256:")+16]
	}
	return id
}
