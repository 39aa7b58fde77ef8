package main

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/signing"
)

// pullResult is the --format json output of berth pull.
type pullResult struct {
	Reference string `json:"reference"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
	Name      string `json:"name"`
	Version   string `json:"version"`
	Format    string `json:"format"`
	// Path is the folder the package was extracted into, or the tarball
	// written with --tarball.
	Path  string `json:"path"`
	Files int    `json:"files"`
	// Verified is true when a signature of the version verified with the
	// trust policy or --key; SignedBy is the key ID that verified it.
	Verified bool   `json:"verified"`
	SignedBy string `json:"signedBy,omitempty"`
}

// newPullCmd returns `berth pull REF`.
func newPullCmd() *cobra.Command {
	var (
		remote  remoteFlags
		trust   trustFlags
		out     string
		tarball bool
		format  outputFormat
	)
	cmd := &cobra.Command{
		Use:   "pull REF",
		Short: "Pull a package from a registry",
		Long: `Pull a package by version (host[:port]/namespace/name:version) or digest
(host[:port]/namespace/name@sha256:...), verifying every digest. The package is
extracted into ./<name>-<version>/ (or -o DIR), refusing paths that would escape
it. With --tarball, the content tarball is written as <name>-<version>.tgz into
the current directory (or -o DIR), byte for byte as pushed.

Signatures are verified when a client trust policy covers the repository: the
file given with --trust-policy, else $` + trustPolicyEnv + `, else
<config dir>/berth/trust.yaml when it exists. It is YAML:

  policies:
    - repositories: ["stable/*"]   # globs over namespace/name
      keys: [cosign.pub]           # PEM public keys, relative to the file
      require: true

The version's digest is verified before anything is downloaded, and that digest
is pulled. With require: true a version no trusted key signed is refused and
nothing is written; with require: false it is pulled with a warning. --key
(repeatable) requires a signature by one of the keys given instead.`,
		Example: `  berth pull localhost:5000/kudo/kafka:1.0.0
  berth pull localhost:5000/kudo/kafka@sha256:... -o ./kafka
  berth pull registry.example.com/kudo/kafka:1.0.0 --tarball -o ./dist
  berth pull registry.example.com/stable/kafka:1.0.0 --key cosign.pub
  berth pull registry.example.com/stable/kafka:1.0.0 --trust-policy trust.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseVersionRef("REF", args[0])
			if err != nil {
				return err
			}
			policy, err := pullPolicy(cmd, &trust, ref)
			if err != nil {
				return err
			}
			c, err := remote.clientWith(cmd, policy)
			if err != nil {
				return err
			}
			pkg, err := c.Pull(cmd.Context(), ref)
			if err != nil {
				return err
			}
			if rep := pkg.Signatures; rep != nil && !rep.Verified() {
				fmt.Fprintf(cmd.ErrOrStderr(), "Warning: %s (%s) is not verified: %s; the trust policy does not require it\n",
					ref, pkg.ManifestDesc.Digest, rep.Reason())
			}
			md := pkg.Metadata
			base, err := localName(md)
			if err != nil {
				return fmt.Errorf("pull %s: %w", ref, err)
			}
			res := pullResult{Reference: ref.String(), Digest: pkg.ManifestDesc.Digest.String(), Size: pkg.ManifestDesc.Size,
				Name: md.Name, Version: md.Version, Format: string(md.Format), Files: len(md.Files)}
			if rep := pkg.Signatures; rep != nil {
				if s, ok := rep.VerifiedBy(); ok {
					res.Verified, res.SignedBy = true, s.KeyID
				}
			}
			if tarball {
				res.Path = filepath.Join(out, base+".tgz")
				if err := writeFileAtomic(res.Path, pkg.Content); err != nil {
					return fmt.Errorf("pull %s: %w", ref, err)
				}
			} else {
				res.Path = out
				if res.Path == "" {
					res.Path = base
				}
				files, err := pkgformat.ReadArchive(bytes.NewReader(pkg.Content), pkgformat.Limits{})
				if err != nil {
					return fmt.Errorf("pull %s: %w", ref, err)
				}
				if err := pkgformat.WriteFiles(res.Path, files); err != nil {
					return fmt.Errorf("pull %s: extract into %s: %w", ref, res.Path, err)
				}
				res.Files = len(files)
			}
			if format == formatJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Pulled %s\nDigest: %s\n", ref, res.Digest)
			if res.Verified {
				fmt.Fprintf(w, "Verified: signed by %s\n", res.SignedBy)
			}
			if tarball {
				fmt.Fprintf(w, "Saved %s (%s)\n", res.Path, humanSize(int64(len(pkg.Content))))
			} else {
				dir := res.Path
				if !strings.HasSuffix(dir, string(filepath.Separator)) {
					dir += string(filepath.Separator)
				}
				fmt.Fprintf(w, "Extracted %d files into %s\n", res.Files, dir)
			}
			return nil
		},
	}
	remote.add(cmd)
	trust.addPolicy(cmd)
	trust.addKeys(cmd, "require a signature by this cosign public key `FILE` (repeatable: any of them), instead of the trust policy")
	cmd.Flags().StringVarP(&out, "output", "o", "", "extract into `DIR` (default ./<name>-<version>); with --tarball, write the tarball into DIR (default .)")
	cmd.Flags().BoolVar(&tarball, "tarball", false, "write the content tarball <name>-<version>.tgz instead of extracting it")
	addFormatFlag(cmd, &format)
	return cmd
}

// pullPolicy is the trust policy pull enforces for ref: one that requires
// a signature by the keys of --key, or the client trust policy.
func pullPolicy(cmd *cobra.Command, trust *trustFlags, ref client.Reference) (*signing.Policy, error) {
	if len(trust.keys) == 0 {
		if len(trust.tlogKeys) > 0 {
			return nil, errors.New("--tlog-key needs --key (a trust policy names its logs in tlogKeys)")
		}
		return trust.policy(cmd)
	}
	if cmd.Flags().Changed("trust-policy") {
		return nil, errors.New("give --key or --trust-policy, not both")
	}
	rule, err := trust.rule(ref.Repository(), true)
	if err != nil {
		return nil, err
	}
	return signing.NewPolicyOf(rule), nil
}

// localName is "<name>-<version>" for the files pull writes. Name and
// version come from the registry, so they are checked again to make one safe
// path component before they name anything on disk.
func localName(md *pkgformat.Metadata) (string, error) {
	if err := pkgformat.ValidName(md.Name); err != nil {
		return "", err
	}
	if md.Version == "" || strings.ContainsAny(md.Version, "/\\\x00") {
		return "", fmt.Errorf("package version %q cannot name a file: %w", md.Version, pkgformat.ErrInvalid)
	}
	return strings.TrimSuffix(pkgformat.ContentTitle(md.Name, md.Version), ".tgz"), nil
}
