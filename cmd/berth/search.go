package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/pkgformat"
)

// defaultServer is the berth server the catalog commands ask when neither
// --server nor BERTH_SERVER names one: berth serve's default address.
const defaultServer = "localhost:5000"

// catalogFlags are the flags of every command that reads a berth server's
// catalog API.
type catalogFlags struct {
	remote remoteFlags
	server string
}

// add registers the flags on cmd.
func (f *catalogFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.server, "server", defaultServer,
		"berth `SERVER`: host[:port], or http(s)://host[:port][/path] (env BERTH_SERVER)")
	f.remote.add(cmd)
}

// catalog returns a client of the server named by --server, else
// BERTH_SERVER, else defaultServer, with the credentials stored for it.
func (f *catalogFlags) catalog(cmd *cobra.Command) (*client.Catalog, error) {
	server := f.server
	if !cmd.Flags().Changed("server") {
		server = cmp.Or(os.Getenv("BERTH_SERVER"), server)
	}
	opts, err := f.remote.options(cmd)
	if err != nil {
		return nil, err
	}
	return client.NewCatalog(server, opts)
}

// newSearchCmd returns `berth search [QUERY...]`.
func newSearchCmd() *cobra.Command {
	var (
		flags        catalogFlags
		opts         client.SearchOptions
		all          bool
		format       outputFormat
		typ          = choiceFlag{choices: []string{string(pkgformat.KUDO), string(pkgformat.OLM), string(pkgformat.Helm), string(pkgformat.Plain)}}
		order        = choiceFlag{choices: []string{apiv1.SortRelevance, apiv1.SortName, apiv1.SortUpdated}}
		verifiedFlag optionalBool
	)
	cmd := &cobra.Command{
		Use:   "search [QUERY...]",
		Short: "Search the packages of a berth server",
		Long: `Search the packages a berth server holds, by name, description, keywords,
maintainers and the APIs they provide, and filter them. Each package is shown by
its latest version. Without a query, every package is listed.

One page of --limit packages is shown, followed by the total and the counts by
format when there are more; --all fetches every page.
--format is the output format; the package format filter is --type.`,
		Example: `  berth search kafka
  berth search --type olm --provides etcd.database.coreos.com/EtcdCluster
  berth search --namespace kudo --sort updated --limit 50
  berth search --verified --kube-version 1.29 --all --format json
  BERTH_SERVER=https://berth.example.com berth search postgres`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("limit") && (opts.Limit < 1 || opts.Limit > apiv1.MaxLimit) {
				return fmt.Errorf("--limit %d: want a number from 1 to %d", opts.Limit, apiv1.MaxLimit)
			}
			if all && !cmd.Flags().Changed("limit") {
				opts.Limit = apiv1.MaxLimit // the fewest pages
			}
			opts.Query = strings.Join(args, " ")
			opts.Format = pkgformat.Format(typ.value)
			opts.Sort = order.value
			opts.Verified = verifiedFlag.value
			c, err := flags.catalog(cmd)
			if err != nil {
				return err
			}
			search := c.Search
			if all {
				search = c.SearchAll
			}
			res, err := search(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if format == formatJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			if len(res.Packages) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "no packages match")
				return nil
			}
			return writeSearch(cmd.OutOrStdout(), res)
		},
	}
	flags.add(cmd)
	f := cmd.Flags()
	f.StringVar(&opts.Namespace, "namespace", "", "only packages in `NAMESPACE`")
	f.Var(&typ, "type", "only packages of this format")
	f.StringVar(&opts.Channel, "channel", "", "only packages with a version in `CHANNEL`")
	f.StringVar(&opts.Provides, "provides", "", "only packages that provide `API`: a group, a Kind, or group/Kind")
	f.StringVar(&opts.KubeVersion, "kube-version", "", "only packages with a version that supports Kubernetes `VERSION`")
	f.StringVar(&opts.Image, "image", "", "only packages with a version that runs `IMAGE` (a repository such as quay.io/org/img; a tag or digest narrows it)")
	f.Var(&verifiedFlag, "verified", "only packages whose latest version has a verified signature (--verified=false: has none)")
	f.Lookup("verified").NoOptDefVal = "true"
	f.Var(&order, "sort", "order of the results (default relevance)")
	f.IntVar(&opts.Limit, "limit", 0, fmt.Sprintf("`N` packages per page, 1 to %d (default: the server's; with --all, %d)", apiv1.MaxLimit, apiv1.MaxLimit))
	f.BoolVar(&all, "all", false, "fetch every page")
	addFormatFlag(cmd, &format)
	return cmd
}

// writeSearch writes the packages of a search as a table, and a summary when
// there are more pages.
func writeSearch(w io.Writer, res *apiv1.SearchResponse) error {
	headers := []string{"NAME", "VERSION", "FORMAT", "DESCRIPTION"}
	rows := make([][]string, 0, len(res.Packages))
	used := make([]int, 3) // widths of the columns before DESCRIPTION
	for _, p := range res.Packages {
		row := []string{clean(p.Namespace + "/" + p.Name), clean(p.Version), clean(string(p.Format)), clean(cmp.Or(p.Description, p.DisplayName))}
		rows = append(rows, row)
		for i := range used {
			used[i] = max(used[i], utf8.RuneCountInString(row[i]), len(headers[i]))
		}
	}
	width := descriptionWidth(w, used[0]+used[1]+used[2]+len(used)*columnGap)
	t := newColumns(w, headers...)
	for _, row := range rows {
		row[3] = truncate(row[3], width)
		t.add(row...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if res.Next == "" {
		return nil
	}
	summary := fmt.Sprintf("%d packages shown, more available", len(res.Packages))
	if res.Total > len(res.Packages) {
		summary = fmt.Sprintf("%d of %d packages", len(res.Packages), res.Total)
	}
	for _, f := range facetCounts(res.Facets.Format) {
		summary += " · " + clean(f)
	}
	_, err := fmt.Fprintf(w, "%s\nUse --limit N (up to %d) or --all to list more.\n", summary, apiv1.MaxLimit)
	return err
}

// facetCounts renders facet counts as "kudo 8", most frequent first.
func facetCounts(counts map[string]int) []string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b))
	})
	items := make([]string, len(keys))
	for i, k := range keys {
		items[i] = k + " " + strconv.Itoa(counts[k])
	}
	return items
}

// descriptionWidth is the width left for the last column when the others
// take used cells: what remains of the terminal's width when w is one, else
// 60 characters.
func descriptionWidth(w io.Writer, used int) int {
	const fallback, minimum = 60, 20
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return fallback
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return fallback
	}
	return max(width-used-1, minimum)
}

// truncate shortens s to at most n characters, ending it with "…" when cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	runes := []rune(s)
	return strings.TrimRight(string(runes[:n-1]), " ") + "…"
}

// clean makes text from the server safe to print on one line of a
// terminal: control and formatting characters (escape sequences, newlines,
// tabs) become spaces, and runs of white space one space.
func clean(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || !unicode.IsGraphic(r)
	}), " ")
}

// columnGap is the number of spaces between two columns of a table.
const columnGap = 3

// columns writes rows of cells in aligned columns under a header line; empty
// cells are shown as "-". The table helper writes "Key: value" rows instead.
type columns struct {
	tw *tabwriter.Writer
}

// newColumns returns a column table with the given headers, writing to w;
// call flush when done.
func newColumns(w io.Writer, headers ...string) *columns {
	t := &columns{tw: tabwriter.NewWriter(w, 0, 0, columnGap, ' ', 0)}
	t.add(headers...)
	return t
}

// add adds one row; cells are cleaned of control characters.
func (t *columns) add(cells ...string) {
	line := make([]string, len(cells))
	for i, c := range cells {
		line[i] = cmp.Or(clean(c), "-")
	}
	fmt.Fprintln(t.tw, strings.Join(line, "\t"))
}

// flush writes out the aligned table.
func (t *columns) flush() error { return t.tw.Flush() }

// choiceFlag is a flag that takes one of a few values, or none.
type choiceFlag struct {
	value   string
	choices []string
}

// String implements pflag.Value.
func (f *choiceFlag) String() string { return f.value }

// Set implements pflag.Value; it accepts the choices only.
func (f *choiceFlag) Set(s string) error {
	if !slices.Contains(f.choices, s) {
		return fmt.Errorf("want %s or %s", strings.Join(f.choices[:len(f.choices)-1], ", "), f.choices[len(f.choices)-1])
	}
	f.value = s
	return nil
}

// Type implements pflag.Value; help shows it as the flag's argument.
func (f *choiceFlag) Type() string { return strings.Join(f.choices, "|") }

// optionalBool is a boolean flag that can also be left unset (nil).
type optionalBool struct {
	value *bool
}

// String implements pflag.Value.
func (f *optionalBool) String() string {
	if f.value == nil {
		return ""
	}
	return strconv.FormatBool(*f.value)
}

// Set implements pflag.Value; it accepts what strconv.ParseBool does.
func (f *optionalBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	f.value = &v
	return nil
}

// Type implements pflag.Value. "bool" makes help show the flag as a
// switch, as pflag does for its own booleans.
func (f *optionalBool) Type() string { return "bool" }
