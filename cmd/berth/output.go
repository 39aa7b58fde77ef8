package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/internal/atomicfile"
	"github.com/berth-registry/berth/pkgformat"
)

// outputFormat is the value of the --format flag every client command takes.
type outputFormat string

const (
	formatText outputFormat = "text"
	formatJSON outputFormat = "json"
)

// addFormatFlag registers --format on cmd, defaulting to text.
func addFormatFlag(cmd *cobra.Command, f *outputFormat) {
	*f = formatText
	cmd.Flags().Var(f, "format", "output format: text or json (one JSON document on stdout)")
}

// String implements pflag.Value.
func (f *outputFormat) String() string { return string(*f) }

// Set implements pflag.Value; it accepts text and json.
func (f *outputFormat) Set(s string) error {
	switch outputFormat(s) {
	case formatText, formatJSON:
		*f = outputFormat(s)
		return nil
	}
	return fmt.Errorf("want json or text, not %q", s)
}

// Type implements pflag.Value.
func (f *outputFormat) Type() string { return "json|text" }

// writeJSON writes v as one indented JSON document followed by a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// table writes aligned "Key: value" lines; rows with empty values are left out.
type table struct {
	tw *tabwriter.Writer
}

// newTable returns a table writing to w; call flush when done.
func newTable(w io.Writer) *table {
	return &table{tw: tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)}
}

// row adds one line unless value is empty.
func (t *table) row(key, value string) {
	if value == "" {
		return
	}
	value = strings.ReplaceAll(value, "\n", " ")
	fmt.Fprintf(t.tw, "%s:\t%s\n", key, value)
}

// flush writes out the aligned table.
func (t *table) flush() error { return t.tw.Flush() }

// metadataRows adds the readable summary of a package's metadata to t.
func metadataRows(t *table, md *pkgformat.Metadata) {
	t.row("Name", md.Name)
	t.row("Version", md.Version)
	t.row("Format", string(md.Format))
	t.row("App version", md.AppVersion)
	t.row("Description", md.Description)
	t.row("Channels", channelList(md.Channels, md.DefaultChannel))
	t.row("Provides", apiList(md.ProvidedAPIs))
	t.row("Requires", apiList(md.RequiredAPIs))
	t.row("Files", fmt.Sprint(len(md.Files)))
}

// channelList renders channels as "stable (default, replaces 1.0.0), beta".
func channelList(channels []pkgformat.Channel, defaultChannel string) string {
	items := make([]string, 0, len(channels))
	for _, c := range channels {
		var notes []string
		if c.Name == defaultChannel {
			notes = append(notes, "default")
		}
		if c.Replaces != "" {
			notes = append(notes, "replaces "+c.Replaces)
		}
		if len(c.Skips) > 0 {
			notes = append(notes, "skips "+strings.Join(c.Skips, " "))
		}
		if c.SkipRange != "" {
			notes = append(notes, "skipRange "+c.SkipRange)
		}
		if len(notes) > 0 {
			items = append(items, c.Name+" ("+strings.Join(notes, ", ")+")")
		} else {
			items = append(items, c.Name)
		}
	}
	return strings.Join(items, ", ")
}

// apiList renders APIs as "group/version Kind, ...".
func apiList(apis []pkgformat.API) string {
	items := make([]string, 0, len(apis))
	for _, a := range apis {
		gv := a.Version
		if a.Group != "" {
			gv = a.Group + "/" + a.Version
		}
		items = append(items, gv+" "+a.Kind)
	}
	return strings.Join(items, ", ")
}

// humanSize renders a byte count as "212 B" or "1.5 MiB" (config.ByteSize.Human).
func humanSize(n int64) string { return config.ByteSize(n).Human() }

// exactSize renders a byte count as "1.5 MiB (1572864 bytes)", or "212 B".
func exactSize(n int64) string {
	if n < 1024 {
		return humanSize(n)
	}
	return fmt.Sprintf("%s (%d bytes)", humanSize(n), n)
}

// writeFileAtomic writes data to path, creating its directory, so that path
// never holds a partial file (atomicfile.Write).
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, data)
}
