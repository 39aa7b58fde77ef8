package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/permissions"
	"github.com/berth-registry/berth/pkgformat"
)

// newShowCmd returns `berth show NS/NAME[:VERSION]`.
func newShowCmd() *cobra.Command {
	var (
		flags  catalogFlags
		format outputFormat
	)
	cmd := &cobra.Command{
		Use:   "show NS/NAME[:VERSION]",
		Short: "Show a package, or one version of it, from a berth server's catalog",
		Long: `Show what a berth server's catalog knows about a package: its format, latest
version, default channel, description and maintainers, its channels (head and
versions) and its versions (digest, creation date, channels). Tags of the
repository that are not served as versions are listed with the reason.

With a version, show that version: digest and pull reference, metadata,
provided and required APIs, supported Kubernetes versions, files, the RBAC
permissions it asks for with their rating and findings (see berth
permissions), signatures, and the container images it runs: each reference,
whether it names a mutable tag, and where the image lives at the server's site
when an image mirror covers its repository (berth mirror import records them).
A '+' in the version may be written '_', as in its tag.`,
		Example: `  berth show kudo/kafka
  berth show kudo/kafka:2.5.1_1.3.2
  berth show operators/etcd:0.9.4 --server https://berth.example.com --format json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, name, version, err := parsePackageArg(args[0], true)
			if err != nil {
				return err
			}
			c, err := flags.catalog(cmd)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if version == "" {
				pkg, err := c.Package(cmd.Context(), ns, name)
				if err != nil {
					return err
				}
				if format == formatJSON {
					return writeJSON(w, pkg)
				}
				return writePackage(w, pkg)
			}
			v, err := c.Version(cmd.Context(), ns, name, version)
			if err != nil {
				return err
			}
			// A server older than the images endpoint answers it 404,
			// after the version itself was found.
			imgs, err := c.VersionImages(cmd.Context(), ns, name, version)
			if err != nil && !errors.Is(err, client.ErrNotFound) {
				return err
			}
			if format == formatJSON {
				out := shownVersion{Version: v}
				if imgs != nil {
					out.Images = imgs.Images
				}
				return writeJSON(w, out)
			}
			return writeVersion(w, v, imgs)
		},
	}
	flags.add(cmd)
	addFormatFlag(cmd, &format)
	return cmd
}

// shownVersion is what berth show --format json writes of a version: the
// version document, and the images it runs with their mirrors (GET
// …/images), absent when the server does not serve them.
type shownVersion struct {
	*apiv1.Version
	Images []apiv1.VersionImage `json:"images,omitempty"`
}

// parsePackageArg splits NS/NAME[:VERSION] (NS/NAME unless withVersion).
// The parts themselves are checked by the client before it sends anything.
func parsePackageArg(arg string, withVersion bool) (ns, name, version string, err error) {
	want := "want NS/NAME, e.g. kudo/kafka"
	if withVersion {
		want = "want NS/NAME[:VERSION], e.g. kudo/kafka or kudo/kafka:1.0.0"
	}
	invalid := func(what string) error { return fmt.Errorf("invalid package %q: %s: %s", arg, what, want) }
	ns, rest, ok := strings.Cut(arg, "/")
	if !ok {
		return "", "", "", invalid("missing namespace")
	}
	if strings.Contains(rest, "/") {
		return "", "", "", invalid("too many '/' (the server is given by --server, not in the package name)")
	}
	name, version, hasVersion := strings.Cut(rest, ":")
	switch {
	case hasVersion && !withVersion:
		return "", "", "", invalid("a version is not allowed here")
	case hasVersion && version == "":
		return "", "", "", invalid("empty version after ':'")
	}
	return ns, name, version, nil
}

// writePackage writes a package's details, its channels and its versions.
func writePackage(w io.Writer, pkg *apiv1.Package) error {
	t := newTable(w)
	t.row("Name", clean(pkg.Namespace+"/"+pkg.Name))
	t.row("Display name", clean(pkg.DisplayName))
	t.row("Format", clean(string(pkg.Format)))
	t.row("Latest version", clean(pkg.LatestVersion))
	t.row("Default channel", clean(pkg.DefaultChannel))
	t.row("Verified", yesNo(pkg.Verified))
	t.row("Description", clean(pkg.Description))
	t.row("Maintainers", clean(maintainerList(pkg.Maintainers)))
	if err := t.flush(); err != nil {
		return err
	}
	if len(pkg.Channels) > 0 {
		fmt.Fprintln(w, "\nChannels:")
		c := newColumns(w, "NAME", "HEAD", "VERSIONS")
		for _, ch := range pkg.Channels {
			c.add(ch.Name, ch.Head, shortList(ch.Versions))
		}
		if err := c.flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "\nVersions:")
	c := newColumns(w, "VERSION", "DIGEST", "CREATED", "CHANNELS")
	for _, v := range pkg.Versions {
		c.add(v.Version, shortDigest(v.Digest), date(v.Created), strings.Join(v.Channels, ", "))
	}
	if err := c.flush(); err != nil {
		return err
	}
	if len(pkg.Unindexed) > 0 {
		fmt.Fprintln(w, "\nUnindexed tags:")
		c := newColumns(w, "TAG", "DIGEST", "STATUS", "REASON")
		for _, a := range pkg.Unindexed {
			c.add(a.Tag, shortDigest(a.Digest), a.Status, a.Reason)
		}
		return c.flush()
	}
	return nil
}

// writeVersion writes the details of one version, its files, the images it
// runs (imgs; nil when the server does not serve them), its permissions and
// its signatures.
func writeVersion(w io.Writer, v *apiv1.Version, imgs *apiv1.VersionImages) error {
	md := &v.Metadata
	t := newTable(w)
	t.row("Name", clean(v.Namespace+"/"+v.Name))
	t.row("Version", clean(v.Version))
	t.row("Digest", clean(v.Digest))
	t.row("Pull reference", clean(v.PullReference))
	if v.Bundle != nil {
		t.row("Bundle", clean(v.Bundle.Reference))
	}
	t.row("Format", clean(string(v.Format)))
	t.row("Display name", clean(md.DisplayName))
	t.row("Description", clean(md.Description))
	t.row("App version", clean(md.AppVersion))
	t.row("Channels", clean(channelList(md.Channels, md.DefaultChannel)))
	t.row("Provides", clean(apiList(md.ProvidedAPIs)))
	t.row("Requires", clean(apiList(md.RequiredAPIs)))
	t.row("Min Kubernetes", clean(md.MinKubeVersion))
	t.row("Max Kubernetes", clean(md.MaxKubeVersion))
	t.row("Maintainers", clean(maintainerList(md.Maintainers)))
	t.row("License", clean(md.License))
	t.row("Source", clean(md.Source))
	t.row("Created", date(md.Created))
	if v.Content.Size > 0 {
		t.row("Content size", exactSize(v.Content.Size))
	}
	t.row("Verified", yesNo(v.Verified))
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nFiles:")
	c := newColumns(w, "PATH", "SIZE")
	for _, f := range v.Files {
		c.add(f.Path, humanSize(f.Size))
	}
	if err := c.flush(); err != nil {
		return err
	}
	if err := writeImages(w, imgs); err != nil {
		return err
	}
	if err := writePermissions(w, md.Permissions); err != nil {
		return err
	}
	if len(v.Signatures) == 0 {
		_, err := fmt.Fprintln(w, "\nSignatures: none")
		return err
	}
	fmt.Fprintln(w, "\nSignatures:")
	c = newColumns(w, "DIGEST", "KEY", "KIND", "VERIFIED", "REASON")
	for _, s := range v.Signatures {
		c.add(shortDigest(s.Digest), s.KeyID, s.Kind, yesNo(s.Verified), s.Reason)
	}
	return c.flush()
}

// writeImages writes the images a version runs: reference, "tag" when it
// names a mutable tag, where it lives at the server's site, and why a
// reference is not valid.
func writeImages(w io.Writer, imgs *apiv1.VersionImages) error {
	switch {
	case imgs == nil:
		_, err := fmt.Fprintln(w, "\nImages: not served by this server")
		return err
	case len(imgs.Images) == 0 && imgs.Incomplete == "":
		_, err := fmt.Fprintln(w, "\nImages: none")
		return err
	}
	fmt.Fprintln(w, "\nImages:")
	c := newColumns(w, "REFERENCE", "MUTABLE", "MIRROR", "PROBLEM")
	for _, im := range imgs.Images {
		mutable := ""
		if im.Mutable {
			mutable = "tag"
		}
		c.add(im.Reference, mutable, im.Mirror, im.Problem)
	}
	if err := c.flush(); err != nil {
		return err
	}
	if imgs.Incomplete != "" {
		_, err := fmt.Fprintf(w, "Images may be incomplete: %s\n", clean(imgs.Incomplete))
		return err
	}
	return nil
}

// writePermissions writes the RBAC rules a version asks for, one per line,
// then the review's rating and findings (permissions.Of). It writes nothing
// when the metadata holds no rules.
func writePermissions(w io.Writer, p *pkgformat.Permissions) error {
	if p == nil || len(p.Cluster)+len(p.Namespaced) == 0 {
		return nil
	}
	review := permissions.Of(p)
	fmt.Fprintf(w, "\nPermissions (rated %s):\n", review.Rating)
	c := newColumns(w, "SCOPE", "RESOURCES", "VERBS")
	for _, r := range review.Rules {
		c.add(r.Scope, ruleResources(r.Rule), strings.Join(r.Rule.Verbs, ", "))
	}
	if err := c.flush(); err != nil {
		return err
	}
	writeFindings(w, review)
	return nil
}

// ruleResources renders what a rule applies to as kubectl does:
// "deployments.apps, secrets (tls)" or non-resource URLs.
func ruleResources(r pkgformat.PolicyRule) string {
	groups := r.APIGroups
	if len(groups) == 0 {
		groups = []string{""}
	}
	var items []string
	for _, res := range r.Resources {
		for _, g := range groups {
			if g == "" {
				items = append(items, res)
			} else {
				items = append(items, res+"."+g)
			}
		}
	}
	s := strings.Join(append(items, r.NonResourceURLs...), ", ")
	if len(r.ResourceNames) > 0 {
		s += " (" + strings.Join(r.ResourceNames, ", ") + ")"
	}
	return s
}

// maintainerList renders maintainers as "Jane Doe <jane@example.com>, Team <https://...>".
func maintainerList(ms []pkgformat.Maintainer) string {
	items := make([]string, 0, len(ms))
	for _, m := range ms {
		item := m.Name
		if contact := cmp.Or(m.Email, m.URL); contact != "" {
			item += " <" + contact + ">"
		}
		items = append(items, strings.TrimSpace(item))
	}
	return strings.Join(items, ", ")
}

// maxListed is how many items of a list a table cell shows.
const maxListed = 8

// shortList renders items as "a, b, c", and "a, b, … (+12)" past maxListed.
func shortList(items []string) string {
	if len(items) <= maxListed {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:maxListed], ", ") + fmt.Sprintf(", … (+%d)", len(items)-maxListed)
}

// date renders a time as its UTC date, or "" when unknown.
func date(t *time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.DateOnly)
}

// yesNo renders a boolean for people.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
