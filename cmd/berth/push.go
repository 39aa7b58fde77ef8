package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/spf13/cobra"

	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/pkgsource"
	"github.com/berth-registry/berth/signing"
)

// remoteFlags are the flags of every command that talks to a registry or
// a berth server: plain HTTP or HTTPS, and the TLS files, as oras names them.
type remoteFlags struct {
	plainHTTP bool
	tls       client.TLSOptions
}

// add registers the flags on cmd.
func (f *remoteFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.plainHTTP, "plain-http", false,
		"use plain HTTP instead of HTTPS (default: plain HTTP for localhost and loopback addresses only, unless a TLS flag is given)")
	fl.StringVar(&f.tls.CAFile, "ca-file", "", "PEM `FILE` of the certificate authorities trusted for the server's certificate, besides the system's; selects HTTPS on loopback too")
	fl.StringVar(&f.tls.CertFile, "cert-file", "", "PEM `FILE` of the client certificate, for a server that asks for one (with --key-file)")
	fl.StringVar(&f.tls.KeyFile, "key-file", "", "PEM `FILE` of the client certificate's key (with --cert-file)")
	fl.BoolVar(&f.tls.InsecureSkipVerify, "insecure-skip-verify", false,
		"accept any server certificate (test servers only: anyone in the middle can read the traffic); selects HTTPS on loopback too")
}

// options are the client options of the flags: credentials from the Docker
// config file (--registry-config), --plain-http when given, and the TLS
// files. A TLS flag selects HTTPS for every host, loopback included, unless
// --plain-http is given too.
func (f *remoteFlags) options(cmd *cobra.Command) (client.Options, error) {
	store, err := credentialStore(cmd)
	if err != nil {
		return client.Options{}, err
	}
	opts := client.Options{Credentials: store}
	if cmd.Flags().Changed("plain-http") {
		opts.PlainHTTP = &f.plainHTTP
	}
	if !f.tls.IsZero() {
		if opts.TLS, err = f.tls.Config(); err != nil {
			return client.Options{}, fmt.Errorf("--ca-file, --cert-file, --key-file: %w", err)
		}
	}
	return opts, nil
}

// client returns a registry client of the flags (options), with progress
// bars when stderr is a terminal.
func (f *remoteFlags) client(cmd *cobra.Command) (*client.Client, error) {
	return f.clientWith(cmd, nil)
}

// clientWith is client with a trust policy that Pull and Promote enforce.
func (f *remoteFlags) clientWith(cmd *cobra.Command, policy *signing.Policy) (*client.Client, error) {
	opts, err := f.options(cmd)
	if err != nil {
		return nil, err
	}
	opts.Progress, opts.TrustPolicy = progressFunc(cmd.ErrOrStderr()), policy
	return client.New(opts)
}

// versionRef parses arg, a reference to one package version (by tag or
// digest), and returns it with a client for its registry.
func (f *remoteFlags) versionRef(cmd *cobra.Command, arg string) (*client.Client, client.Reference, error) {
	ref, err := parseVersionRef("REF", arg)
	if err != nil {
		return nil, ref, err
	}
	c, err := f.client(cmd)
	return c, ref, err
}

// parseVersionRef parses arg, the argument name of a reference to one
// package version, by tag or digest.
func parseVersionRef(name, arg string) (client.Reference, error) {
	ref, err := client.ParseReference(arg)
	if err != nil {
		return ref, err
	}
	if ref.Tag == "" && ref.Digest == "" {
		return ref, fmt.Errorf("%s %q has no version: want host[:port]/namespace/name:version or host[:port]/namespace/name@sha256:<hex>", name, arg)
	}
	return ref, nil
}

// pushResult is the --format json output of a single-package push.
type pushResult struct {
	Digest    string `json:"digest"`
	Reference string `json:"reference"`
	Size      int64  `json:"size"`
	// SignedBy is the key ID of --key, which signed the version.
	SignedBy string `json:"signedBy,omitempty"`
}

// writeText writes the text output of a single-package push.
func (r pushResult) writeText(w io.Writer) {
	fmt.Fprintf(w, "Pushed %s\nDigest: %s\n", r.Reference, r.Digest)
	if r.SignedBy != "" {
		fmt.Fprintf(w, "Signed: by %s\n", r.SignedBy)
	}
}

// pushedPackage is one version of a multi-version push in --format json output.
type pushedPackage struct {
	Name      string `json:"name"`
	Version   string `json:"version"`
	Digest    string `json:"digest,omitempty"`
	Reference string `json:"reference"`
	SignedBy  string `json:"signedBy,omitempty"`
	Error     string `json:"error,omitempty"`
}

// newPushCmd returns `berth push PATH REF`.
func newPushCmd() *cobra.Command {
	var (
		remote        remoteFlags
		sign          signFlags
		name, version string
		format        outputFormat
	)
	cmd := &cobra.Command{
		Use:   "push PATH REF",
		Short: "Push a package directory or tarball to a registry",
		Long: `Push a package to a registry. PATH is a package directory or a tarball made by
berth package; REF is host[:port]/namespace/name[:version]. The version defaults
to the package's; a name or version in REF that contradicts the package is
refused. Plain-manifest packages take their name and version from REF (or
--name and --version).

Given a directory with one folder per version (the OLM package-manifest layout,
or a folder of OLM bundles) and REF host[:port]/namespace, every version is
pushed as its own package, each carrying its channels.

With --key (a cosign private key; its password from $COSIGN_PASSWORD or the
terminal), each version is pushed by digest, signed (as berth sign does), and
only then tagged: the order a namespace whose trust policy requires signatures
needs, since the registry refuses to tag an unsigned version there.`,
		Example: `  berth push ./kafka localhost:5000/kudo/kafka
  berth push kafka-1.0.0.tgz registry.example.com/kudo/kafka:1.0.0
  berth push ./etcd-olm localhost:5000/operators
  berth push ./kafka localhost:5000/stable/kafka --key cosign.key`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, refArg := args[0], args[1]
			c, err := remote.client(cmd)
			if err != nil {
				return err
			}
			s, err := sign.signer(cmd)
			if err != nil {
				return err
			}
			if fi, err := os.Stat(path); err == nil && fi.IsDir() && pkgformat.IsRepository(path) {
				if version != "" {
					return fmt.Errorf("--version cannot be used with %s, which holds one folder per version", path)
				}
				return pushRepository(cmd, c, s, path, refArg, name, format)
			}
			ref, pkg, err := loadForPush(path, refArg, name, version)
			if err != nil {
				return err
			}
			desc, err := pushVersion(cmd.Context(), c, s, ref, pkg)
			if err != nil {
				return err
			}
			res := pushResult{Digest: desc.Digest.String(), Reference: ref.String(), Size: desc.Size}
			if s.signer != nil {
				res.SignedBy = s.signer.KeyID
			}
			if format == formatJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			res.writeText(cmd.OutOrStdout())
			return nil
		},
	}
	remote.add(cmd)
	sign.add(cmd, "sign each version with this cosign private key `FILE`, between its push by digest and its tag", false)
	cmd.Flags().StringVar(&name, "name", "", "package name, for formats that do not carry one (default: from REF)")
	cmd.Flags().StringVar(&version, "version", "", "package version, for formats that do not carry one (default: from REF)")
	addFormatFlag(cmd, &format)
	return cmd
}

// loadForPush parses REF, loads the package at path and checks that the two
// agree. The returned reference carries the package's version tag.
func loadForPush(path, refArg, name, version string) (client.Reference, *pkgformat.Package, error) {
	ref, err := parsePushRef(path, refArg, name, version)
	if err != nil {
		return client.Reference{}, nil, err
	}
	return loadForRef(path, "push", path, ref, refArg, name, version)
}

// parsePushRef parses REF, the reference a package is pushed under, and
// checks it against --name and --version. what names the package in errors.
func parsePushRef(what, refArg, name, version string) (client.Reference, error) {
	ref, err := client.ParseReference(refArg)
	if err != nil {
		if _, prefixErr := client.ParseRepositoryPrefix(refArg); prefixErr == nil {
			return client.Reference{}, fmt.Errorf("%w (host[:port]/namespace alone is for a directory with one folder per version, and %s is not one)", err, what)
		}
		return client.Reference{}, err
	}
	if ref.Digest != "" {
		return client.Reference{}, fmt.Errorf("REF %q has a digest; a package is pushed under its version: want host[:port]/namespace/name[:version]", refArg)
	}
	if name != "" && name != ref.Name {
		return client.Reference{}, fmt.Errorf("--name %q contradicts the name %q in REF %q", name, ref.Name, refArg)
	}
	if version != "" && ref.Tag != "" && pkgformat.Tag(version) != ref.Tag {
		return client.Reference{}, fmt.Errorf("--version %q contradicts the version %q in REF %q", version, ref.Tag, refArg)
	}
	return ref, nil
}

// loadForRef loads the package at path for ref, parsed from refArg by
// parsePushRef, and checks that the two agree (checkRef). Errors start with
// op when the package does not load, and name the package as what when it
// does not agree with REF. The returned reference carries the package's
// version tag.
func loadForRef(path, op, what string, ref client.Reference, refArg, name, version string) (client.Reference, *pkgformat.Package, error) {
	pkg, err := pkgsource.LoadPackage(path, pkgsource.Naming{Name: name, Version: version, DefaultName: ref.Name, DefaultVersion: ref.Tag})
	if err != nil {
		return client.Reference{}, nil, fmt.Errorf("%s: %w", op, err)
	}
	ref, err = checkRef(pkg, what, ref, refArg)
	if err != nil {
		return client.Reference{}, nil, err
	}
	return ref, pkg, nil
}

// checkRef checks that the package named what agrees with ref, parsed
// from refArg, and returns ref with the package's version tag.
func checkRef(pkg *pkgformat.Package, what string, ref client.Reference, refArg string) (client.Reference, error) {
	md := pkg.Metadata
	if md.Name != ref.Name {
		return client.Reference{}, fmt.Errorf("package %s is named %q but REF %q names %q: the repository must be <namespace>/%s",
			what, md.Name, refArg, ref.Name, md.Name)
	}
	if ref.Tag != "" && pkgformat.Tag(md.Version) != ref.Tag {
		return client.Reference{}, fmt.Errorf("package %s has version %q but REF %q says %q", what, md.Version, refArg, ref.Tag)
	}
	ref.Tag = pkgformat.Tag(md.Version)
	return ref, nil
}

// pushRepository pushes every version in a directory with one folder per
// version. REF is host[:port]/namespace, or host[:port]/namespace/name when
// it names the package. Every version is tried; failures are reported on
// stderr as they happen and summed up in the returned error.
func pushRepository(cmd *cobra.Command, c *client.Client, s pushSigner, dir, refArg, name string, format outputFormat) error {
	prefix, wantName, err := parseRepositoryRef(refArg)
	if err != nil {
		return err
	}
	if name != "" && wantName != "" && name != wantName {
		return fmt.Errorf("--name %q contradicts the name %q in REF %q", name, wantName, refArg)
	}
	if name == "" {
		name = wantName
	}
	pkgs, err := pkgformat.LoadRepository(dir, pkgformat.Options{Name: name})
	if err != nil {
		return fmt.Errorf("push %s: %w", dir, err)
	}
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	results := make([]pushedPackage, 0, len(pkgs))
	var failed []string
	for _, pkg := range pkgs {
		md := pkg.Metadata
		ref := prefix.Package(md.Name, md.Version)
		res := pushedPackage{Name: md.Name, Version: md.Version, Reference: ref.String()}
		if desc, err := pushVersion(cmd.Context(), c, s, ref, pkg); err != nil {
			res.Error = err.Error()
			failed = append(failed, md.Name+" "+md.Version)
			fmt.Fprintf(stderr, "Error: %v\n", err)
		} else {
			res.Digest = desc.Digest.String()
			if s.signer != nil {
				res.SignedBy = s.signer.KeyID
			}
			if format == formatText {
				fmt.Fprintf(stdout, "Pushed %s %s\n", ref, res.Digest)
			}
		}
		results = append(results, res)
	}
	if format == formatJSON {
		if err := writeJSON(stdout, struct {
			Packages []pushedPackage `json:"packages"`
		}{results}); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d versions failed to push: %s", len(failed), len(pkgs), strings.Join(failed, ", "))
	}
	return nil
}

// pushSigner is what push signs with: no signer, unless --key is given.
type pushSigner struct {
	signer *signing.Signer
	opts   client.SignOptions
}

// signer loads the signer of --key, if it is given.
func (f *signFlags) signer(cmd *cobra.Command) (pushSigner, error) {
	if !cmd.Flags().Changed("key") {
		if f.referrer {
			return pushSigner{}, errors.New("--referrer needs --key")
		}
		if f.tlog {
			return pushSigner{}, errors.New("--tlog needs --key")
		}
		return pushSigner{}, nil
	}
	opts, err := f.options()
	if err != nil {
		return pushSigner{}, err
	}
	s, err := loadSigner(cmd, f.key)
	if err != nil {
		return pushSigner{}, err
	}
	return pushSigner{signer: s, opts: opts}, nil
}

// pushVersion builds the artifact of one package version and pushes it
// under ref, returning the manifest descriptor. With a signer it pushes by
// digest, signs, then tags.
func pushVersion(ctx context.Context, c *client.Client, s pushSigner, ref client.Reference, pkg *pkgformat.Package) (ocispec.Descriptor, error) {
	art, err := pkg.Artifact()
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("push %s: %w", ref, err)
	}
	return pushArtifact(ctx, c, s, ref, art)
}

// pushArtifact pushes art under ref as pushVersion does.
func pushArtifact(ctx context.Context, c *client.Client, s pushSigner, ref client.Reference, art *pkgformat.Artifact) (ocispec.Descriptor, error) {
	if s.signer != nil {
		return c.PushSigned(ctx, ref, art, s.signer, s.opts)
	}
	return c.Push(ctx, ref, art)
}

// parseRepositoryRef parses the REF of a multi-version push:
// host[:port]/namespace, or host[:port]/namespace/name without a version.
func parseRepositoryRef(refArg string) (client.RepositoryPrefix, string, error) {
	prefix, err := client.ParseRepositoryPrefix(refArg)
	if err == nil {
		return prefix, "", nil
	}
	ref, refErr := client.ParseReference(refArg)
	if refErr != nil {
		return client.RepositoryPrefix{}, "", err
	}
	if ref.Tag != "" || ref.Digest != "" {
		return client.RepositoryPrefix{}, "", fmt.Errorf("REF %q names one version, but PATH holds one folder per version: want host[:port]/namespace", refArg)
	}
	return client.RepositoryPrefix{Registry: ref.Registry, Namespace: ref.Namespace}, ref.Name, nil
}
