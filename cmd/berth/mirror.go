package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/mirror"
	"github.com/berth-registry/berth/signing"
)

// newMirrorCmd returns `berth mirror`, with its subcommands.
func newMirrorCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mirror",
		Short: "Carry packages with their signatures to another registry, across an air gap or online",
		Long: `Mirror chosen package versions, with every cosign signature, attestation and
referrer, and the images they run, from a berth server to another registry:

  berth mirror export    write an archive (an OCI image layout) of a selection
  berth mirror inventory record what a registry holds, for the next delta
  berth mirror import    push an archive into any OCI registry
  berth mirror verify    check an archive, or one part of it, on its own
  berth mirror sync      registry to registry, following the source's change feed
  berth mirror check     say whether each version can install at a far berth

See docs/mirror.md for a guide from the first export to a --follow site.`,
	}
	cmd.AddCommand(newMirrorExportCmd(), newMirrorImportCmd(), newMirrorInventoryCmd(), newMirrorVerifyCmd(), newMirrorSyncCmd(), newMirrorCheckCmd())
	return cmd
}

// selectionFlags build a selection from a file or from flags.
type selectionFlags struct {
	file         string
	namespaces   []string
	repositories []string
	versions     string
	latest       int
	channel      string
	from         string
	types        []string
	verifiedOnly bool
}

func (f *selectionFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.file, "selection", "", "selection `FILE` (YAML; see docs/mirror.md)")
	fl.StringArrayVar(&f.namespaces, "namespace", nil, "select every package of `NAMESPACE` (repeatable)")
	fl.StringArrayVar(&f.repositories, "repository", nil, "select the packages matching `GLOB` over namespace/name (repeatable)")
	fl.StringVar(&f.versions, "versions", "", "with --namespace/--repository: only versions in this semver `RANGE`")
	fl.IntVar(&f.latest, "latest", 0, "with --namespace/--repository: only the newest `N` versions of each package")
	fl.StringVar(&f.channel, "channel", "", "with --namespace/--repository: only the versions of this OLM `CHANNEL`")
	fl.StringVar(&f.from, "from", "", "with --channel: only the upgrade path from `VERSION` to the channel's head")
	fl.StringArrayVar(&f.types, "type", nil, "only packages of this format: kudo, olm, helm or plain (repeatable)")
	fl.BoolVar(&f.verifiedOnly, "verified-only", false, "only versions the source verifies against its trust policy")
}

// selection returns the selection of the file, or of the flags; nil when
// neither gives one and required is false.
func (f *selectionFlags) selection(required bool) (*mirror.Selection, error) {
	byFlags := len(f.namespaces) > 0 || len(f.repositories) > 0
	var sel *mirror.Selection
	switch {
	case f.file != "" && byFlags:
		return nil, errors.New("give either --selection or --namespace/--repository, not both")
	case f.file != "":
		b, err := os.ReadFile(f.file)
		if err != nil {
			return nil, fmt.Errorf("--selection: %w", err)
		}
		if sel, err = mirror.ParseSelection(b); err != nil {
			return nil, fmt.Errorf("--selection %s: %w", f.file, err)
		}
	case byFlags:
		sel = &mirror.Selection{}
		rule := func(ns, repo string) mirror.Rule {
			return mirror.Rule{Namespace: ns, Repository: repo, Versions: f.versions, Latest: f.latest, Channel: f.channel, From: f.from}
		}
		for _, ns := range f.namespaces {
			sel.Packages = append(sel.Packages, rule(ns, ""))
		}
		for _, repo := range f.repositories {
			sel.Packages = append(sel.Packages, rule("", repo))
		}
	case required:
		return nil, errors.New("say what to export: --selection FILE, or --namespace / --repository")
	default:
		if len(f.types) > 0 || f.verifiedOnly || f.versions != "" || f.latest != 0 || f.channel != "" || f.from != "" {
			return nil, errors.New("--type, --verified-only, --versions, --latest, --channel and --from narrow a selection: give --selection, --namespace or --repository too")
		}
		return nil, nil
	}
	sel.Formats = append(sel.Formats, f.types...)
	sel.VerifiedOnly = sel.VerifiedOnly || f.verifiedOnly
	if err := sel.Validate(); err != nil {
		return nil, err
	}
	return sel, nil
}

// checkHost checks a registry argument, host[:port].
func checkHost(what, arg string) error {
	if _, err := client.ParseRepositoryPrefix(arg + "/x"); err != nil || strings.Contains(arg, "/") {
		return fmt.Errorf("%s %q: want a registry, host[:port]", what, arg)
	}
	return nil
}

func newMirrorExportCmd() *cobra.Command {
	var (
		remote      remoteFlags
		sel         selectionFlags
		format      outputFormat
		source      string
		output      string
		maxSize     sizeFlag
		inventory   string
		since       string
		keyFile     string
		concurrency int
		images      bool
		platforms   []string
		registryMap []string
	)
	cmd := &cobra.Command{
		Use:   "export --source HOST --selection FILE -o DIR|FILE.tar",
		Short: "Write the selected versions, with their signatures, to an archive",
		Long: `Export writes the versions a selection chooses in a berth server, each with its
manifest, config and content, every cosign signature and attestation (the
sha256-<hex>.sig/.att/.sbom tags and OCI referrers) and the referrers of those,
to one archive: an OCI image layout (a directory, or a .tar file) plus
berth-mirror.json, which lists the selection, every version and digest, the
source and the time.

With each version go the container images it runs, as the source's catalog
lists them, by digest: a tag is resolved now and both are recorded. An image
index keeps only the --platform children when given (the index itself is
carried unchanged, so its digest stays valid); cosign signatures, attestations
and referrers of each image go too. --registry-map quay.io=mirror.internal:5000
reads the images of quay.io from mirror.internal:5000, while they keep their
quay.io names. --images=false carries the packages alone. An image that cannot
be read is reported, with the versions that run it, and the rest is carried.

--inventory (from berth mirror inventory on the far side) or --since (the
berth-mirror.json of the previous export) make a delta: only what the far side
lacks is packed. --max-size splits a .tar archive into parts. --key signs
berth-mirror.json (cosign sign-blob format) so that the far side can check the
archive before reading anything else.

A version that cannot be read is reported and left out; the archive still
holds every other version.`,
		Example: `  berth mirror export --source registry.example.com --namespace kudo -o kudo.tar
  berth mirror export --source registry.example.com --selection site.yaml --inventory inv.json -o delta.tar --key cosign.key
  berth mirror export --source registry.example.com --selection site.yaml --since last/berth-mirror.json -o next.tar --max-size 4GiB`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if source == "" {
				return errors.New("--source: give the berth server to export from, host[:port]")
			}
			if err := checkHost("--source", source); err != nil {
				return err
			}
			if output == "" {
				return errors.New("-o: give the archive to write, a directory or FILE.tar")
			}
			if inventory != "" && since != "" {
				return errors.New("give either --inventory or --since, not both")
			}
			regMap, err := mirror.ParseRegistryMap(registryMap)
			if err != nil {
				return err
			}
			plats, err := mirror.ParsePlatforms(platforms)
			if err != nil {
				return err
			}
			if !images && (len(registryMap) > 0 || len(platforms) > 0) {
				return errors.New("--registry-map and --platform choose how images are read: drop them, or --images=false")
			}
			selection, err := sel.selection(true)
			if err != nil {
				return err
			}
			c, err := remote.client(cmd)
			if err != nil {
				return err
			}
			cat, err := c.Catalog(source)
			if err != nil {
				return err
			}
			opts := mirror.ExportOptions{Client: c, Source: source, Catalog: cat, Selection: selection, Output: output,
				MaxSize: int64(maxSize), Concurrency: concurrency, Progress: &mirror.Progress{},
				SkipImages: !images, RegistryMap: regMap, Platforms: plats,
				Warn: func(s string) { fmt.Fprintln(cmd.ErrOrStderr(), "Warning: "+s) }}
			if opts.Base, opts.BaseInfo, err = exportBase(inventory, since); err != nil {
				return err
			}
			if keyFile != "" {
				if opts.Signer, err = signing.LoadSigner(keyFile, []byte(os.Getenv(signing.PasswordEnv))); err != nil {
					return fmt.Errorf("--key: %w", err)
				}
			}
			sum, err := runWithProgress(cmd, "export", opts.Progress, func(ctx context.Context) (*mirror.Summary, error) {
				return mirror.Export(ctx, opts)
			})
			return reportMirror(cmd, format, "Exported", sum, err)
		},
	}
	sel.add(cmd)
	remote.add(cmd)
	addFormatFlag(cmd, &format)
	cmd.Flags().StringVar(&source, "source", "", "the berth server to export from, `HOST[:PORT]`")
	cmd.Flags().StringVarP(&output, "output", "o", "", "the archive to write: a `DIR`ectory, or FILE.tar")
	cmd.Flags().Var(&maxSize, "max-size", "split a .tar archive into parts of at most `SIZE` (e.g. 4GiB, 700MB)")
	cmd.Flags().StringVar(&inventory, "inventory", "", "pack only what the registry of this inventory `FILE` lacks")
	cmd.Flags().StringVar(&since, "since", "", "pack only what the previous archive's manifest `FILE` (berth-mirror.json) did not")
	cmd.Flags().StringVar(&keyFile, "key", "", "sign the archive manifest with this cosign private key `FILE` (password in $"+signing.PasswordEnv+")")
	cmd.Flags().IntVar(&concurrency, "concurrency", mirror.DefaultConcurrency, "versions read at a time")
	cmd.Flags().BoolVar(&images, "images", true, "carry the container images the versions run")
	cmd.Flags().StringSliceVar(&platforms, "platform", nil, "of an image index, carry only the manifests of `OS/ARCH[/VARIANT]` (repeatable or comma separated; default: all)")
	cmd.Flags().StringArrayVar(&registryMap, "registry-map", nil, "read the images of registry FROM from TO, keeping their FROM names: `FROM=TO` (repeatable)")
	return cmd
}

// exportBase reads the inventory or previous archive manifest a delta is
// taken against.
func exportBase(inventory, since string) (*mirror.Inventory, *mirror.Base, error) {
	switch {
	case inventory != "":
		inv, d, err := mirror.ReadInventory(inventory)
		if err != nil {
			return nil, nil, fmt.Errorf("--inventory: %w", err)
		}
		return inv, &mirror.Base{Kind: "inventory", Registry: inv.Registry, Taken: inv.Taken, Digest: d}, nil
	case since != "":
		m, d, err := mirror.ReadManifest(since)
		if err != nil {
			return nil, nil, fmt.Errorf("--since: %w", err)
		}
		return mirror.InventoryOf(m), &mirror.Base{Kind: "archive", Taken: m.Created, Digest: d}, nil
	}
	return nil, nil, nil
}

func newMirrorImportCmd() *cobra.Command {
	var (
		remote      remoteFlags
		trust       trustFlags
		format      outputFormat
		archiveKey  string
		concurrency int
		prefixes    []string
		resources   string
		chunkSize   = sizeFlag(mirror.DefaultChunkSize)
		stateDir    string
	)
	cmd := &cobra.Command{
		Use:   "import ARCHIVE... TARGET",
		Short: "Push an archive into a registry, each version tagged last",
		Long: `Import pushes the versions of an archive (a directory, a .tar, or every part of
a split archive) into TARGET, any OCI registry (berth, distribution's registry,
zot): for each version its blobs and manifests by digest, skipping what TARGET
has, then its signature tags, and last its own tag, so that a version half
imported never appears. Every blob is checked against its digest as it is read;
a version with a corrupt entry is reported and not tagged. From a tar cut short
or a split archive with a part missing or cut, the versions whose content is
all there are imported and the others reported, with what was lost.

The archive's images go first, each by digest to TARGET/PREFIX/PATH:
quay.io/org/img goes to TARGET/mirror/org/img by default, --image-prefix
site/upstream puts every registry under site/upstream, and
--image-prefix quay.io=quay gives one registry its own. An image named by tag
is tagged last, at the digest exported, even if the tag moved since (a tag of
TARGET that named another digest is re-pointed and reported). A berth TARGET
records where each source repository's images now live. The resources a
cluster needs to pull from the mirror are written to --resources DIR.

With --archive-key the archive manifest's signature is checked before anything
else. With a trust policy (--trust-policy, or --policy) a version whose
signatures it does not verify is quarantined: pushed by digest, left untagged,
and reported. A berth TARGET also applies its own trust policy when tagging.

Killed at any point, the same import run again finishes the job and sends only
what TARGET still lacks. Blobs larger than --chunk-size go in chunks, and their
uploads are recorded in --state-dir, so that a rerun takes each up at the offset
TARGET holds instead of sending the blob again from zero.`,
		Example: `  berth mirror import kudo.tar registry.internal:5000
  berth mirror import delta-001.tar delta-002.tar registry.internal:5000 --archive-key cosign.pub --policy trust.yaml
  berth mirror import site.tar mirror.site:5000 --image-prefix quay.io=upstream/quay --image-prefix ghcr.io=upstream/ghcr`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			tgt := args[len(args)-1]
			if err := checkHost("TARGET", tgt); err != nil {
				return err
			}
			policy, err := trust.policy(cmd)
			if err != nil {
				return err
			}
			c, err := remote.client(cmd)
			if err != nil {
				return err
			}
			imagePrefixes, err := mirror.ParseImagePrefixes(prefixes, tgt)
			if err != nil {
				return err
			}
			if stateDir == "" {
				if stateDir, err = mirror.DefaultStateDir(args[:len(args)-1], tgt); err != nil {
					return err
				}
			}
			opts := mirror.ImportOptions{Client: c, Target: tgt, Policy: policy, Concurrency: concurrency, Progress: &mirror.Progress{},
				ImagePrefixes: imagePrefixes, ResourcesDir: resources,
				ChunkSize: int64(chunkSize), StateDir: stateDir, Log: slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)),
				Warn: func(s string) { fmt.Fprintln(cmd.ErrOrStderr(), "Warning: "+s) }}
			if archiveKey != "" {
				k, err := signing.LoadPublicKey(archiveKey)
				if err != nil {
					return fmt.Errorf("--archive-key: %w", err)
				}
				opts.ArchiveKey = &k
			}
			a, err := mirror.OpenArchive(args[:len(args)-1]...)
			if err != nil {
				return err
			}
			defer a.Close()
			sum, err := runWithProgress(cmd, "import", opts.Progress, func(ctx context.Context) (*mirror.Summary, error) {
				return mirror.Import(ctx, a, opts)
			})
			return reportMirror(cmd, format, "Imported", sum, err)
		},
	}
	remote.add(cmd)
	trust.addPolicy(cmd)
	cmd.Flags().SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "policy" {
			name = "trust-policy"
		}
		return pflag.NormalizedName(name)
	})
	addFormatFlag(cmd, &format)
	cmd.Flags().StringVar(&archiveKey, "archive-key", "", "require the archive manifest to be signed by this cosign public key `FILE`")
	cmd.Flags().IntVar(&concurrency, "concurrency", mirror.DefaultConcurrency, "versions imported at a time")
	cmd.Flags().StringArrayVar(&prefixes, "image-prefix", nil, "put images under this repository `PREFIX` of TARGET (default "+mirror.DefaultImagePrefix+"), or REGISTRY=PREFIX for one source registry (repeatable)")
	cmd.Flags().StringVar(&resources, "resources", "berth-mirror-resources", "write the resources a cluster needs to pull the images from TARGET to this `DIR`")
	cmd.Flags().Var(&chunkSize, "chunk-size", "send blobs larger than this `SIZE` in chunks of it, resumable")
	cmd.Flags().StringVar(&stateDir, "state-dir", "", "`DIR` recording the uploads in progress, for a rerun to resume (default: a directory of the user's cache named after the archive and TARGET)")
	return cmd
}

// inventoryResult is what `berth mirror inventory --format json` prints.
type inventoryResult struct {
	Registry     string        `json:"registry"`
	Repositories int           `json:"repositories"`
	Digests      int           `json:"digests"`
	File         string        `json:"file"`
	Digest       digest.Digest `json:"digest"`
}

func newMirrorInventoryCmd() *cobra.Command {
	var (
		remote remoteFlags
		format outputFormat
		output string
	)
	cmd := &cobra.Command{
		Use:   "inventory TARGET -o FILE",
		Short: "Record the digests a registry holds, for the next delta export",
		Long: `Inventory records, for each repository of TARGET, the digests of the manifests
and blobs it holds. A berth server answers from its storage in one request
(GET /api/v1/inventory); any other registry is walked: its catalog, tags,
manifests and referrers. Carry the file to the sending side and give it to
berth mirror export --inventory: only what TARGET lacks is packed.`,
		Example: `  berth mirror inventory registry.internal:5000 -o inv.json`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkHost("TARGET", args[0]); err != nil {
				return err
			}
			if output == "" {
				return errors.New("-o: give the inventory file to write")
			}
			c, err := remote.client(cmd)
			if err != nil {
				return err
			}
			var progress func(int)
			if isTerminal(cmd.ErrOrStderr()) {
				progress = func(n int) { fmt.Fprintf(cmd.ErrOrStderr(), "\rinventory: %d repositories", n) }
			}
			inv, err := mirror.TakeInventory(cmd.Context(), c, args[0], progress)
			if progress != nil {
				fmt.Fprintln(cmd.ErrOrStderr())
			}
			if err != nil {
				return err
			}
			d, err := mirror.WriteInventory(output, inv)
			if err != nil {
				return err
			}
			res := inventoryResult{Registry: args[0], Repositories: len(inv.Repositories), File: output, Digest: d}
			for _, ds := range inv.Repositories {
				res.Digests += len(ds)
			}
			if format == formatJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Inventory of %s: %d repositories, %d digests → %s\n", res.Registry, res.Repositories, res.Digests, res.File)
			return nil
		},
	}
	remote.add(cmd)
	addFormatFlag(cmd, &format)
	cmd.Flags().StringVarP(&output, "output", "o", "", "the inventory `FILE` to write")
	return cmd
}

// archiveCheck is what `berth mirror verify --format json` prints: for one
// part of a split archive checked on its own, Part, Archive and Blobs; for
// a whole archive, Versions, Images (those carried), Source, Created and,
// with --archive-key, SignedBy.
type archiveCheck struct {
	Files    []string   `json:"files"`
	Part     int        `json:"part,omitempty"`
	Archive  string     `json:"archive,omitempty"`
	Blobs    int        `json:"blobs,omitempty"`
	Versions int        `json:"versions,omitempty"`
	Images   int        `json:"images,omitempty"`
	Source   string     `json:"source,omitempty"`
	Created  *time.Time `json:"created,omitempty"`
	SignedBy string     `json:"signedBy,omitempty"`
}

func newMirrorVerifyCmd() *cobra.Command {
	var (
		archiveKey string
		format     outputFormat
	)
	cmd := &cobra.Command{
		Use:   "verify ARCHIVE...",
		Short: "Check an archive, or one part of a split archive, on its own",
		Long: `Verify reads an archive and checks every entry against its digest and the
archive manifest, and with --archive-key the manifest's signature. Given one
part of a split archive that is not the last, it checks that part on its own:
every blob its listing names is there, whole and matching its digest.`,
		Example: `  berth mirror verify kudo.tar --archive-key cosign.pub
  berth mirror verify delta-002.tar`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w := cmd.OutOrStdout()
			res := archiveCheck{Files: args}
			if len(args) == 1 && strings.HasSuffix(args[0], ".tar") {
				listing, err := mirror.VerifyPart(args[0])
				if err == nil && !listing.Last {
					if format == formatJSON {
						res.Part, res.Archive, res.Blobs = listing.Number, listing.Archive, len(listing.Blobs)
						return writeJSON(w, res)
					}
					fmt.Fprintf(w, "%s: part %d of archive %s: %d blobs, all whole\n", args[0], listing.Number, listing.Archive, len(listing.Blobs))
					return nil
				}
				if err != nil && !errors.Is(err, mirror.ErrNotPart) {
					return err
				}
			}
			a, err := mirror.OpenArchive(args...)
			if err != nil {
				return err
			}
			defer a.Close()
			if archiveKey != "" {
				k, err := signing.LoadPublicKey(archiveKey)
				if err != nil {
					return fmt.Errorf("--archive-key: %w", err)
				}
				if err := a.CheckSignature(k); err != nil {
					return err
				}
				res.SignedBy = k.ID
			}
			if err := a.Verify(cmd.Context(), nil); err != nil {
				return err
			}
			m := a.Manifest()
			res.Versions, res.Source, res.Created = len(m.Versions), m.Source, &m.Created
			for _, img := range m.Images {
				if img.Problem == "" {
					res.Images++
				}
			}
			if format == formatJSON {
				return writeJSON(w, res)
			}
			if res.SignedBy != "" {
				fmt.Fprintf(w, "Archive manifest signed by %s\n", res.SignedBy)
			}
			fmt.Fprintf(w, "Archive of %d versions and %d images from %s, made %s: every entry matches its digest\n",
				len(m.Versions), res.Images, m.Source, m.Created.Format(time.RFC3339))
			return nil
		},
	}
	addFormatFlag(cmd, &format)
	cmd.Flags().StringVar(&archiveKey, "archive-key", "", "require the archive manifest to be signed by this cosign public key `FILE`")
	return cmd
}

func newMirrorSyncCmd() *cobra.Command {
	var (
		remote      remoteFlags
		sel         selectionFlags
		format      outputFormat
		state       string
		prune       bool
		follow      bool
		interval    time.Duration
		concurrency int
	)
	cmd := &cobra.Command{
		Use:   "sync SRC DST",
		Short: "Copy what changed in a berth server to another registry, incrementally",
		Long: `Sync copies to DST (any OCI registry) the versions put in SRC (a berth server)
since the last sync, each with its signatures, attestations and referrers,
tagged last. It follows SRC's change feed (/api/v1/changes) from the cursor
kept in the --state file; when nothing changed it costs one request. A
cosign signature or attestation put in SRC later carries its version again.

A version that fails is reported (exit status 1) and kept in the state file,
and each later sync retries it; the cursor still moves past everything else.
Versions deleted in SRC are reported once and kept in the state file until a
sync with --prune deletes them in DST. A state file is of one selection: a
sync with another selection and the same --state is refused.
--follow keeps DST current, syncing every --interval.`,
		Example: `  berth mirror sync registry.example.com mirror.example.com --state site.state.json
  berth mirror sync registry.example.com mirror.example.com --state site.state.json --namespace kudo --follow`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkHost("SRC", args[0]); err != nil {
				return err
			}
			if err := checkHost("DST", args[1]); err != nil {
				return err
			}
			if state == "" {
				return errors.New("--state: give the state file that keeps the sync's place in SRC's change feed")
			}
			if follow && interval <= 0 {
				return errors.New("--interval must be positive")
			}
			selection, err := sel.selection(false)
			if err != nil {
				return err
			}
			c, err := remote.client(cmd)
			if err != nil {
				return err
			}
			cat, err := c.Catalog(args[0])
			if err != nil {
				return err
			}
			opts := mirror.SyncOptions{Client: c, Source: args[0], Catalog: cat, Target: args[1], Selection: selection,
				State: state, Prune: prune, Concurrency: concurrency}
			for {
				opts.Progress = &mirror.Progress{}
				sum, err := runWithProgress(cmd, "sync", opts.Progress, func(ctx context.Context) (*mirror.Summary, error) {
					return mirror.Sync(ctx, opts)
				})
				if err := reportMirror(cmd, format, "Synced", sum, err); err != nil && !follow {
					return err
				} else if err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), "Error: "+err.Error())
				}
				if !follow {
					return nil
				}
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(interval):
				}
			}
		},
	}
	sel.add(cmd)
	remote.add(cmd)
	addFormatFlag(cmd, &format)
	cmd.Flags().StringVar(&state, "state", "", "the state `FILE` keeping the sync's cursor in SRC's change feed")
	cmd.Flags().BoolVar(&prune, "prune", false, "delete in DST the versions deleted in SRC")
	cmd.Flags().BoolVar(&follow, "follow", false, "keep syncing, every --interval, until interrupted")
	cmd.Flags().DurationVar(&interval, "interval", 30*time.Second, "with --follow: the time between two syncs")
	cmd.Flags().IntVar(&concurrency, "concurrency", mirror.DefaultConcurrency, "versions copied at a time")
	return cmd
}
