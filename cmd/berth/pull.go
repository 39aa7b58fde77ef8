package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/berth-registry/berth/pkgformat"
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
}

// newPullCmd returns `berth pull REF`.
func newPullCmd() *cobra.Command {
	var (
		remote  remoteFlags
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
the current directory (or -o DIR), byte for byte as pushed.`,
		Example: `  berth pull localhost:5000/kudo/kafka:1.0.0
  berth pull localhost:5000/kudo/kafka@sha256:... -o ./kafka
  berth pull registry.example.com/kudo/kafka:1.0.0 --tarball -o ./dist`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ref, err := remote.versionRef(cmd, args[0])
			if err != nil {
				return err
			}
			pkg, err := c.Pull(cmd.Context(), ref)
			if err != nil {
				return err
			}
			md := pkg.Metadata
			base, err := localName(md)
			if err != nil {
				return fmt.Errorf("pull %s: %w", ref, err)
			}
			res := pullResult{Reference: ref.String(), Digest: pkg.ManifestDesc.Digest.String(), Size: pkg.ManifestDesc.Size,
				Name: md.Name, Version: md.Version, Format: string(md.Format), Files: len(md.Files)}
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
			if tarball {
				fmt.Fprintf(w, "Saved %s (%s)\n", res.Path, humanSize(int64(len(pkg.Content))))
			} else {
				fmt.Fprintf(w, "Extracted %d files into %s\n", res.Files, res.Path+string(filepath.Separator))
			}
			return nil
		},
	}
	remote.add(cmd)
	cmd.Flags().StringVarP(&out, "output", "o", "", "extract into `DIR` (default ./<name>-<version>); with --tarball, write the tarball into DIR (default .)")
	cmd.Flags().BoolVar(&tarball, "tarball", false, "write the content tarball <name>-<version>.tgz instead of extracting it")
	addFormatFlag(cmd, &format)
	return cmd
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
