package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/cobra"

	"github.com/berth-registry/berth/pkgformat"
)

// packageResult is the --format json output of berth package: the package
// metadata plus where the tarball was written, its digest and size.
type packageResult struct {
	*pkgformat.Metadata
	Path   string `json:"path"`
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// newPackageCmd returns `berth package DIR`.
func newPackageCmd() *cobra.Command {
	var (
		out, name, version string
		format             outputFormat
	)
	cmd := &cobra.Command{
		Use:   "package DIR",
		Short: "Validate a package directory and write its reproducible tarball",
		Long: `Validate a package directory (KUDO, OLM bundle, Helm chart or plain manifests)
and write its content tarball. The tarball is reproducible: the same directory
always gives the same bytes and digest. It is written to ./<name>-<version>.tgz
unless -o names another file (or an existing directory to write it into).`,
		Example: `  berth package ./kafka
  berth package ./manifests --name my-app --version 1.0.0 -o my-app.tgz
  berth package ./kafka --format json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			pkg, err := pkgformat.Load(dir, pkgformat.Options{Name: name, Version: version})
			if err != nil {
				return fmt.Errorf("package: %w", err)
			}
			data, err := pkg.Archive()
			if err != nil {
				return fmt.Errorf("package %s: %w", dir, err)
			}
			md := &pkg.Metadata
			path := packagePath(out, md.Name, md.Version)
			if err := writeFileAtomic(path, data); err != nil {
				return fmt.Errorf("write package: %w", err)
			}
			res := packageResult{Metadata: md, Path: path, Digest: digest.FromBytes(data).String(), Size: int64(len(data))}
			if format == formatJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Packaged %s\n", path)
			t := newTable(w)
			metadataRows(t, md)
			t.row("Digest", res.Digest)
			t.row("Size", exactSize(res.Size))
			return t.flush()
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the tarball to `FILE` (default ./<name>-<version>.tgz)")
	cmd.Flags().StringVar(&name, "name", "", "package name, for formats that do not carry one (plain manifests)")
	cmd.Flags().StringVar(&version, "version", "", "package version, for formats that do not carry one (plain manifests)")
	addFormatFlag(cmd, &format)
	return cmd
}

// packagePath is where berth package writes the tarball: out, or the
// conventional file name inside out when out is an existing directory, or
// the conventional file name in the current directory when out is empty.
func packagePath(out, name, version string) string {
	file := pkgformat.ContentTitle(name, version)
	if out == "" {
		return file
	}
	if fi, err := os.Stat(out); err == nil && fi.IsDir() {
		return filepath.Join(out, file)
	}
	return out
}
