package main

import (
	"fmt"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/spf13/cobra"

	"github.com/berth-registry/berth/pkgformat"
)

// inspectResult is the --format json output of berth inspect. Digest, size
// and mediaType describe the manifest.
type inspectResult struct {
	Reference    string              `json:"reference"`
	Name         string              `json:"name"`
	Version      string              `json:"version"`
	Format       string              `json:"format"`
	Digest       string              `json:"digest"`
	Size         int64               `json:"size"`
	MediaType    string              `json:"mediaType"`
	ArtifactType string              `json:"artifactType,omitempty"`
	Config       ocispec.Descriptor  `json:"config"`
	Content      ocispec.Descriptor  `json:"content"`
	Annotations  map[string]string   `json:"annotations,omitempty"`
	Metadata     *pkgformat.Metadata `json:"metadata"`
}

// newInspectCmd returns `berth inspect REF`.
func newInspectCmd() *cobra.Command {
	var (
		remote remoteFlags
		format outputFormat
	)
	cmd := &cobra.Command{
		Use:   "inspect REF",
		Short: "Show a package's metadata, digest and media types without writing it",
		Long: `Show the metadata, manifest digest and size, and media types of a package
version in a registry. The manifest and the content are downloaded and
verified, and the metadata is derived from the content, as the catalog
derives it; nothing is written to disk and the config blob is not read.`,
		Example: `  berth inspect localhost:5000/kudo/kafka:1.0.0
  berth inspect localhost:5000/kudo/kafka@sha256:... --format json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ref, err := remote.versionRef(cmd, args[0])
			if err != nil {
				return err
			}
			pkg, err := c.Inspect(cmd.Context(), ref)
			if err != nil {
				return err
			}
			md := pkg.Metadata
			res := inspectResult{
				Reference: ref.String(), Name: md.Name, Version: md.Version, Format: string(md.Format),
				Digest: pkg.ManifestDesc.Digest.String(), Size: pkg.ManifestDesc.Size, MediaType: pkg.ManifestDesc.MediaType,
				ArtifactType: pkg.Manifest.ArtifactType, Config: pkg.ConfigDesc, Content: pkg.ContentDesc,
				Annotations: pkg.Manifest.Annotations, Metadata: md,
			}
			if format == formatJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			t := newTable(cmd.OutOrStdout())
			t.row("Reference", res.Reference)
			metadataRows(t, md)
			t.row("Digest", res.Digest)
			t.row("Size", exactSize(res.Size))
			t.row("Media type", res.MediaType)
			t.row("Artifact type", res.ArtifactType)
			t.row("Config", descriptorLine(res.Config))
			t.row("Content", descriptorLine(res.Content))
			return t.flush()
		},
	}
	remote.add(cmd)
	addFormatFlag(cmd, &format)
	return cmd
}

// descriptorLine renders a blob descriptor as "<media type> <digest>, <size>".
func descriptorLine(d ocispec.Descriptor) string {
	return fmt.Sprintf("%s %s, %s", d.MediaType, d.Digest, humanSize(d.Size))
}
