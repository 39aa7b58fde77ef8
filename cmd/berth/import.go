package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/pkgsource"
	"github.com/berth-registry/berth/signing"
)

// fetcher fetches package sources: each spec into dir/<its Destination>,
// returning what each resolved to, in the order of specs.
type fetcher interface {
	Compose(ctx context.Context, specs []pkgsource.Spec, dir string, l pkgsource.Limits) ([]pkgsource.Resolved, error)
}

// fetcherFunc is a function that is a fetcher.
type fetcherFunc func(ctx context.Context, specs []pkgsource.Spec, dir string, l pkgsource.Limits) ([]pkgsource.Resolved, error)

// Compose calls f.
func (f fetcherFunc) Compose(ctx context.Context, specs []pkgsource.Spec, dir string, l pkgsource.Limits) ([]pkgsource.Resolved, error) {
	return f(ctx, specs, dir, l)
}

// fetchSources is the fetcher of berth import.
var fetchSources fetcher = fetcherFunc(pkgsource.Compose)

// The environment variables that hold the credentials of berth import's
// sources, when --username and --password-stdin are not given.
const (
	sourceUsernameEnv = "BERTH_SOURCE_USERNAME"
	sourcePasswordEnv = "BERTH_SOURCE_PASSWORD"
)

// importFlags are the flags of every berth import command.
type importFlags struct {
	remote        remoteFlags
	sign          signFlags
	name, version string
	format        outputFormat
	username      string
	passwordStdin bool
	maxBytes      string
	maxFiles      int
	timeout       time.Duration
	allowHosts    []string
	allowPrivate  bool
}

// add registers the flags on cmd.
func (f *importFlags) add(cmd *cobra.Command) {
	f.remote.add(cmd)
	f.sign.add(cmd, "sign the version with this cosign private key `FILE`, and attest its SLSA provenance, between its push by digest and its tag", false)
	fl := cmd.Flags()
	fl.StringVar(&f.name, "name", "", "package name, for formats that do not carry one (default: from REF)")
	fl.StringVar(&f.version, "version", "", "package version, for formats that do not carry one (default: from REF)")
	addFormatFlag(cmd, &f.format)
	fl.StringVarP(&f.username, "username", "u", "", "user `NAME` for the source (default $"+sourceUsernameEnv+")")
	fl.BoolVar(&f.passwordStdin, "password-stdin", false, "read the source's password or token from stdin (default $"+sourcePasswordEnv+")")
	fl.StringVar(&f.maxBytes, "max-bytes", "", "refuse a source that fetches or unpacks more than `SIZE` (256MiB, 1GiB, ...; default 256MiB)")
	fl.IntVar(&f.maxFiles, "max-files", 0, "refuse a source of more than `N` files (default 10000)")
	fl.DurationVar(&f.timeout, "timeout", 0, "give up a fetch after `DURATION` (default 2m)")
	fl.StringArrayVar(&f.allowHosts, "allow-host", nil, "fetch only from this `HOST` (a glob such as *.github.com; repeatable; default any host)")
	fl.BoolVar(&f.allowPrivate, "allow-private", false, "let sources reach loopback, link-local and private addresses (refused by default)")
}

// limits are the fetch limits of the flags.
func (f *importFlags) limits() (pkgsource.Limits, error) {
	l := pkgsource.Limits{MaxFiles: f.maxFiles, Timeout: f.timeout, AllowHosts: f.allowHosts, AllowPrivate: f.allowPrivate}
	if f.maxBytes != "" {
		n, err := config.ParseByteSize(f.maxBytes)
		if err != nil || n == 0 {
			return l, fmt.Errorf("--max-bytes: want a size such as 256MiB or 1GiB (got %q)", f.maxBytes)
		}
		l.MaxBytes = int64(n)
	}
	if f.maxFiles < 0 {
		return l, fmt.Errorf("--max-files: want a positive number of files (got %d)", f.maxFiles)
	}
	if f.timeout < 0 {
		return l, fmt.Errorf("--timeout: want a positive duration (got %s)", f.timeout)
	}
	return l, nil
}

// credentials are the source credentials of the flags or the environment:
// --username or $BERTH_SOURCE_USERNAME, and the password from stdin with
// --password-stdin, else $BERTH_SOURCE_PASSWORD.
func (f *importFlags) credentials(cmd *cobra.Command) (pkgsource.Credentials, error) {
	c := pkgsource.Credentials{Username: f.username, Password: os.Getenv(sourcePasswordEnv)}
	if c.Username == "" {
		c.Username = os.Getenv(sourceUsernameEnv)
	}
	if f.passwordStdin {
		if c.Username == "" {
			return c, fmt.Errorf("--password-stdin needs --username (or $%s)", sourceUsernameEnv)
		}
		secret, err := readSecret(cmd.InOrStdin())
		if err != nil {
			return c, fmt.Errorf("read the password from stdin: %w", err)
		}
		if secret == "" {
			return c, errors.New("--password-stdin: empty password")
		}
		c.Password = secret
	}
	if c.Username == "" && c.Password != "" {
		return c, fmt.Errorf("a password for the source ($%s) needs a user name: give --username or $%s", sourcePasswordEnv, sourceUsernameEnv)
	}
	return c, nil
}

// newImportCmd returns `berth import`.
func newImportCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import",
		Short: "Build a package from a git repository, a tarball URL or an image, and push it",
		Long: `Fetch a package's content from where its publisher keeps it (a git repository
at a ref, a .tgz or .tar.gz behind an https URL, or an image in another
registry), build the package as berth package does and push it as berth push
does. Several sources, each into its own directory of the package, compose one
package with berth import sources.

REF is host[:port]/namespace/name[:version], as for berth push; the version
defaults to the package's. The version's manifest records what each source
resolved to (dev.berth.package.sources; for a single source also
org.opencontainers.image.source and org.opencontainers.image.revision).

A source's credentials come from --username and --password-stdin, or from
$BERTH_SOURCE_USERNAME and $BERTH_SOURCE_PASSWORD; they are never printed.
A source is refused beyond --max-bytes, --max-files and --timeout, outside
--allow-host, and on a loopback, link-local or private address unless
--allow-private is given. Nothing is pushed when a fetch or the build fails.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("import from where? want berth import git|http|image|sources (see berth import --help)")
		},
	}
	for _, k := range importKinds {
		cmd.AddCommand(newImportOneCmd(k))
	}
	cmd.AddCommand(newImportSourcesCmd())
	return cmd
}

// importKind is what berth import's command of one kind of source says
// and takes.
type importKind struct {
	kind                pkgsource.Kind
	use, short, example string
	refUsage, dirUsage  string // "" when the kind has no --ref or --dir
}

// importKinds are the commands of one source: berth import git, http and image.
var importKinds = []importKind{
	{
		kind: pkgsource.Git, use: "git URL REF",
		short: "Build a package from a directory of a git repository at a ref, and push it",
		example: `  berth import git https://github.com/example/kafka-operator --ref v1.2.0 --dir deploy/kudo localhost:5000/kudo/kafka
  echo "$GITHUB_TOKEN" | berth import git https://github.com/example/private --ref main -u x-access-token --password-stdin localhost:5000/team/op`,
		refUsage: "the branch, tag or commit to fetch (default: the remote's default branch)",
		dirUsage: "the `PATH` in the repository that holds the package (default: its root)",
	},
	{
		kind: pkgsource.HTTP, use: "http URL REF",
		short:    "Build a package from a .tgz or .tar.gz behind a URL, and push it",
		example:  `  berth import http https://example.com/releases/etcd-0.9.4.tgz --dir etcd localhost:5000/operators/etcd`,
		dirUsage: "the `PATH` in the tarball that holds the package (default: its root)",
	},
	{
		kind: pkgsource.Image, use: "image SOURCE REF",
		short: "Build a package from an OLM bundle image, a Helm chart in OCI or a berth package elsewhere, and push it",
		example: `  berth import image quay.io/example/etcd-bundle:v0.9.4 localhost:5000/operators/etcd
  berth import image ghcr.io/example/charts/demo:1.0.0 localhost:5000/charts/demo`,
	},
}

// newImportOneCmd returns the berth import command of one kind of source.
func newImportOneCmd(k importKind) *cobra.Command {
	var (
		f        importFlags
		ref, dir string
	)
	cmd := &cobra.Command{
		Use:     k.use,
		Short:   k.short,
		Example: k.example,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return importOne(cmd, &f, pkgsource.Spec{Kind: k.kind, URL: args[0], Ref: ref, Dir: dir}, args[1])
		},
	}
	f.add(cmd)
	if k.refUsage != "" {
		cmd.Flags().StringVar(&ref, "ref", "", k.refUsage)
	}
	if k.dirUsage != "" {
		cmd.Flags().StringVar(&dir, "dir", "", k.dirUsage)
	}
	return cmd
}

// newImportSourcesCmd returns `berth import sources FILE REF`.
func newImportSourcesCmd() *cobra.Command {
	var f importFlags
	cmd := &cobra.Command{
		Use:   "sources FILE REF",
		Short: "Build a package from several sources, each into its own directory, and push it",
		Long: `Build one package from the sources FILE lists, each fetched into its
destination directory of the package, and push it. FILE is YAML:

  sources:
  - kind: git            # git, http or image
    url: https://github.com/example/op
    ref: v1.2.0          # git only: a branch, tag or commit
    dir: deploy/bundle   # git and http: the directory that holds the files
    destination: ""      # where the files go in the package (default: its root)
  - kind: http
    url: https://example.com/crds.tgz
    destination: manifests/crds

Two sources that write the same file are refused. The credentials of
--username and --password-stdin go to every source, so they are refused when
the sources are on more than one host.`,
		Example: `  berth import sources sources.yaml localhost:5000/team/op:1.2.0`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			specs, err := readSourcesFile(args[0])
			if err != nil {
				return err
			}
			return runImport(cmd, &f, specs, "from the sources of "+args[0], args[1])
		},
	}
	f.add(cmd)
	return cmd
}

// importResult is the --format json output of berth import: what each
// source resolved to, and the push.
type importResult struct {
	Sources []pkgsource.Built `json:"sources"`
	pushResult
}

// importOne checks a single source given on the command line, then
// imports it as runImport does.
func importOne(cmd *cobra.Command, f *importFlags, s pkgsource.Spec, refArg string) error {
	what := describeSpec(s)
	if err := pkgsource.CheckSpec(s); err != nil {
		return fmt.Errorf("import %s: %w", what, err)
	}
	return runImport(cmd, f, []pkgsource.Spec{s}, what, refArg)
}

// runImport fetches specs, which pkgsource.CheckSpec accepted, into a temporary
// directory, builds the package there as berth package does and pushes it
// under refArg as berth push does. what names the sources in errors.
func runImport(cmd *cobra.Command, f *importFlags, specs []pkgsource.Spec, what, refArg string) error {
	ref, err := parsePushRef("imported "+what, refArg, f.name, f.version)
	if err != nil {
		return err
	}
	limits, err := f.limits()
	if err != nil {
		return err
	}
	creds, err := f.credentials(cmd)
	if err != nil {
		return err
	}
	if creds != (pkgsource.Credentials{}) {
		if hosts := sourceHosts(specs); len(hosts) > 1 {
			return fmt.Errorf("the sources are on %d hosts (%s): the credentials would go to all of them; import from one host at a time", len(hosts), strings.Join(hosts, ", "))
		}
		for i := range specs {
			specs[i].Credentials = creds
		}
	}
	c, err := f.remote.client(cmd)
	if err != nil {
		return err
	}
	signer, err := f.sign.signer(cmd)
	if err != nil {
		return err
	}

	started := time.Now()
	built, ref, art, err := buildImport(cmd.Context(), f, specs, limits, what, ref, refArg)
	if err != nil {
		return err
	}
	if signer.signer != nil {
		st, err := importProvenance(ref, art, built, started, time.Now())
		if err != nil {
			return err
		}
		signer.opts.Attestations = append(signer.opts.Attestations, st)
	}
	desc, err := pushArtifact(cmd.Context(), c, signer, ref, art)
	if err != nil {
		return err
	}
	res := importResult{Sources: built, pushResult: pushResult{Digest: desc.Digest.String(), Reference: ref.String(), Size: desc.Size}}
	if signer.signer != nil {
		res.SignedBy = signer.signer.KeyID
	}
	if f.format == formatJSON {
		return writeJSON(cmd.OutOrStdout(), res)
	}
	w := cmd.OutOrStdout()
	for _, b := range built {
		writeBuilt(w, b)
	}
	res.writeText(w)
	return nil
}

// buildImport builds the package of specs for ref, parsed from refArg by
// parsePushRef, as pkgsource.BuildPackage does: its artifact, annotated
// with what each source resolved to, and the reference with the package's
// version tag.
func buildImport(ctx context.Context, f *importFlags, specs []pkgsource.Spec, limits pkgsource.Limits, what string, ref client.Reference, refArg string) ([]pkgsource.Built, client.Reference, *pkgformat.Artifact, error) {
	var refErr error
	b, err := pkgsource.BuildPackage(ctx, specs, pkgsource.BuildOptions{
		Limits:  limits,
		Naming:  pkgsource.Naming{Name: f.name, Version: f.version, DefaultName: ref.Name, DefaultVersion: ref.Tag},
		Compose: fetchSources.Compose,
		Check: func(pkg *pkgformat.Package) error {
			ref, refErr = checkRef(pkg, "imported "+what, ref, refArg)
			return refErr
		},
	})
	switch {
	case refErr != nil:
		return nil, ref, nil, err
	case err != nil:
		return nil, ref, nil, fmt.Errorf("import %s: %w", what, err)
	}
	return b.Sources, ref, b.Artifact, nil
}

// ImportBuilderID is the builder.id of the SLSA provenance berth import
// --key attests (docs/sources.md#provenance).
const ImportBuilderID = "https://github.com/berth-registry/berth/cmd/berth#import"

// importProvenance is the in-toto SLSA provenance statement of the version
// art, built for ref from the sources built between started and finished.
func importProvenance(ref client.Reference, art *pkgformat.Artifact, built []pkgsource.Built, started, finished time.Time) ([]byte, error) {
	p := signing.Provenance{BuilderID: ImportBuilderID, Started: started, Finished: finished}
	for _, b := range built {
		p.Sources = append(p.Sources, signing.ProvenanceSource{
			Kind: string(b.Kind), URI: b.URL, Ref: b.Ref, Revision: b.Revision, Dir: b.Dir, Destination: b.Destination,
		})
	}
	st, err := signing.ProvenanceStatement(ref.Registry+"/"+ref.Repository(), art.ManifestDesc.Digest, p)
	if err != nil {
		return nil, fmt.Errorf("attest the provenance of %s: %w", ref, err)
	}
	return st, nil
}

// writeBuilt writes the line of berth import's text output that says what
// a source resolved to.
func writeBuilt(w io.Writer, b pkgsource.Built) {
	line := "Fetched " + string(b.Kind) + " " + clean(b.URL)
	if b.Ref != "" {
		line += " " + clean(b.Ref)
	}
	if b.Dir != "" {
		line += " dir " + clean(b.Dir)
	}
	if b.Revision != "" {
		line += " at " + clean(b.Revision)
	}
	if b.Destination != "" {
		line += " into " + clean(b.Destination)
	}
	fmt.Fprintln(w, line)
}

// describeSpec names a single source in errors, "from git URL at REF",
// without a password its URL holds.
func describeSpec(s pkgsource.Spec) string {
	shown := s.URL
	if u, err := url.Parse(s.URL); err == nil && u.User != nil {
		shown = u.Redacted()
	}
	d := "from " + string(s.Kind) + " " + shown
	if s.Ref != "" {
		d += " at " + s.Ref
	}
	if s.Dir != "" {
		d += " dir " + s.Dir
	}
	return d
}

// sourceHosts are the sorted hosts the specs fetch from.
func sourceHosts(specs []pkgsource.Spec) []string {
	var hosts []string
	for _, s := range specs {
		host := strings.SplitN(s.URL, "/", 2)[0]
		if u, err := url.Parse(s.URL); err == nil && u.Host != "" {
			host = u.Hostname()
		}
		if !slices.Contains(hosts, host) {
			hosts = append(hosts, host)
		}
	}
	slices.Sort(hosts)
	return hosts
}

// sourceKeys are the keys of an entry of a sources file.
var sourceKeys = []string{"kind", "url", "ref", "dir", "destination"}

// readSourcesFile reads the sources of berth import sources. Errors name
// the file, the entry and the key: "sources.yaml: sources[1]: ref: ...".
func readSourcesFile(file string) ([]pkgsource.Spec, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("sources: %w", err)
	}
	var doc struct {
		Sources []yaml.Node `yaml:"sources"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(doc.Sources) == 0 {
		return nil, fmt.Errorf("%s: no sources: want sources: [{kind: git, url: https://..., ref: v1.0.0}]", file)
	}
	specs := make([]pkgsource.Spec, len(doc.Sources))
	for i, node := range doc.Sources {
		if err := decodeSource(&node, &specs[i]); err != nil {
			return nil, fmt.Errorf("%s: sources[%d]: %w", file, i, err)
		}
		if err := pkgsource.CheckSpec(specs[i]); err != nil {
			return nil, fmt.Errorf("%s: sources[%d]: %w", file, i, err)
		}
	}
	return specs, nil
}

// decodeSource decodes one entry of a sources file, refusing unknown keys
// and values that are not strings.
func decodeSource(node *yaml.Node, s *pkgsource.Spec) error {
	if node.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: want a mapping of %s", node.Line, strings.Join(sourceKeys, ", "))
	}
	for i := 0; i+1 < len(node.Content); i += 2 {
		key, value := node.Content[i], node.Content[i+1]
		if !slices.Contains(sourceKeys, key.Value) {
			return fmt.Errorf("%s: unknown key (line %d): want %s", key.Value, key.Line, strings.Join(sourceKeys, ", "))
		}
		if value.Kind != yaml.ScalarNode || value.Tag == "!!null" {
			return fmt.Errorf("%s: want a string (line %d)", key.Value, value.Line)
		}
	}
	return node.Decode(s)
}
