package mirror

import (
	"cmp"
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/opencontainers/go-digest"
	"golang.org/x/sync/errgroup"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/pkgformat"
)

// CatalogReader is the part of a berth server's catalog API that Resolve
// reads; *client.Catalog implements it. Its methods may be called
// concurrently.
type CatalogReader interface {
	SearchAll(ctx context.Context, opts client.SearchOptions) (*apiv1.SearchResponse, error)
	Package(ctx context.Context, namespace, name string) (*apiv1.Package, error)
	Upgrades(ctx context.Context, namespace, name, from, channel string) (*apiv1.Upgrades, error)
}

var _ CatalogReader = (*client.Catalog)(nil)

// Selected is one version a selection chose.
type Selected struct {
	Namespace, Name string
	// Version is the version as the package has it.
	Version string
	// Tag is its tag (pkgformat.Tag(Version)).
	Tag string
	// Digest is the digest of its manifest, from the catalog.
	Digest digest.Digest
	// Format is the package's format.
	Format string
	// Verified says that the source's catalog verified it against its trust
	// policy.
	Verified bool
}

// Repository returns namespace/name.
func (s Selected) Repository() string { return s.Namespace + "/" + s.Name }

// Resolution is what a selection chose from a catalog.
type Resolution struct {
	// Versions are the versions chosen, each once, ordered by repository,
	// then newest first (by pkgformat.VersionKey).
	Versions []Selected
	// Warnings say what chose less than it might have: a rule that matches
	// no package or selects no version of one, versions VerifiedOnly
	// dropped, a version of an upgrade path that is not readable.
	Warnings []string
}

// resolveWorkers bounds the packages read at once.
const resolveWorkers = 8

// Resolve reads the catalog to find the versions sel chooses: for each
// rule, the packages of its namespace or matching its repository glob (and
// of its and the selection's formats), and of each the versions its
// Channel, From, Versions and Latest keep (see Rule); VerifiedOnly then
// drops the versions the catalog has not verified. Packages are listed with
// SearchAll, narrowed to the rule's namespace (or the namespace part of its
// glob, when that has no glob characters) and to its format when it keeps
// just one, then read with Package, a few at a time and once however many
// rules match them.
//
// A rule that matches nothing is not an error but a warning of the
// Resolution. Errors are sel's Validate error; a channel the package does
// not have, naming the package and its channels; and the catalog's errors
// (see client.Catalog), wrapped with the rule that asked.
func Resolve(ctx context.Context, cat CatalogReader, sel *Selection) (*Resolution, error) {
	if err := sel.Validate(); err != nil {
		return nil, err
	}
	r := &resolver{
		cat:      cat,
		sel:      sel,
		searches: map[client.SearchOptions][]apiv1.PackageSummary{},
		packages: map[string]*apiv1.Package{},
		chosen:   map[string]Selected{},
	}
	for i, rule := range sel.Packages {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := r.rule(ctx, i, rule); err != nil {
			return nil, fmt.Errorf("%s: %w", selRuleName(i, rule), err)
		}
	}
	res := &Resolution{Versions: make([]Selected, 0, len(r.chosen)), Warnings: r.warnings}
	for _, s := range r.chosen {
		res.Versions = append(res.Versions, s)
	}
	slices.SortFunc(res.Versions, func(a, b Selected) int {
		return cmp.Or(
			strings.Compare(a.Repository(), b.Repository()),
			strings.Compare(pkgformat.VersionKey(b.Version), pkgformat.VersionKey(a.Version)),
		)
	})
	return res, nil
}

// resolver is the state of one Resolve.
type resolver struct {
	cat CatalogReader
	sel *Selection
	// searches and packages cache what the catalog answered.
	searches map[client.SearchOptions][]apiv1.PackageSummary
	packages map[string]*apiv1.Package // by namespace/name
	// chosen are the versions selected so far, by namespace/name@version.
	chosen   map[string]Selected
	warnings []string
}

// warn records a warning about rule i.
func (r *resolver) warn(i int, rule Rule, format string, args ...any) {
	r.warnings = append(r.warnings, selRuleName(i, rule)+": "+fmt.Sprintf(format, args...))
}

// rule adds the versions rule i selects.
func (r *resolver) rule(ctx context.Context, i int, rule Rule) error {
	formats := resolveFormats(rule.Formats, r.sel.Formats)
	opts := client.SearchOptions{Namespace: rule.Namespace, Sort: apiv1.SortName, Limit: apiv1.MaxLimit}
	if ns, _, _ := strings.Cut(rule.Repository, "/"); opts.Namespace == "" && !config.IsGlob(ns) {
		opts.Namespace = ns
	}
	if len(formats) == 1 {
		opts.Format = formats[0]
	}
	summaries, err := r.search(ctx, opts)
	if err != nil {
		return err
	}
	var repos []string
	for _, p := range summaries {
		repo := p.Namespace + "/" + p.Name
		if rule.Repository != "" {
			if ok, _ := path.Match(rule.Repository, repo); !ok {
				continue
			}
		}
		if rule.Namespace != "" && p.Namespace != rule.Namespace {
			continue
		}
		if formats != nil && !slices.Contains(formats, p.Format) {
			continue
		}
		repos = append(repos, repo)
	}
	if err := r.read(ctx, repos); err != nil {
		return err
	}
	matched := 0
	for _, repo := range repos {
		pkg := r.packages[repo]
		if formats != nil && !slices.Contains(formats, pkg.Format) {
			continue
		}
		matched++
		if err := r.versions(ctx, i, rule, pkg); err != nil {
			return err
		}
	}
	if matched == 0 {
		if formats != nil {
			r.warn(i, rule, "no package of format %s matches", resolveJoin(formats, " or "))
		} else {
			r.warn(i, rule, "no package matches")
		}
	}
	return nil
}

// resolveFormats returns the formats a rule keeps, given its own and the
// selection's: nil when it keeps every format.
func resolveFormats(rule, sel []string) []pkgformat.Format {
	var out []pkgformat.Format
	switch {
	case len(rule) == 0 && len(sel) == 0:
		return nil
	case len(rule) == 0:
		rule = sel
	}
	for _, f := range rule {
		if (len(sel) == 0 || slices.Contains(sel, f)) && !slices.Contains(out, pkgformat.Format(f)) {
			out = append(out, pkgformat.Format(f))
		}
	}
	return out
}

// search returns the packages SearchAll finds with opts, asking once.
func (r *resolver) search(ctx context.Context, opts client.SearchOptions) ([]apiv1.PackageSummary, error) {
	if s, ok := r.searches[opts]; ok {
		return s, nil
	}
	res, err := r.cat.SearchAll(ctx, opts)
	if err != nil {
		return nil, err
	}
	r.searches[opts] = res.Packages
	return res.Packages, nil
}

// read reads the packages of repos (namespace/name) not read yet, a few at
// a time, into r.packages.
func (r *resolver) read(ctx context.Context, repos []string) error {
	var todo []string
	for _, repo := range repos {
		if _, ok := r.packages[repo]; !ok && !slices.Contains(todo, repo) {
			todo = append(todo, repo)
		}
	}
	got := make([]*apiv1.Package, len(todo))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(resolveWorkers)
	for j, repo := range todo {
		g.Go(func() error {
			ns, name, _ := strings.Cut(repo, "/")
			pkg, err := r.cat.Package(gctx, ns, name)
			if err != nil {
				return err
			}
			got[j] = pkg
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for j, repo := range todo {
		r.packages[repo] = got[j]
	}
	return nil
}

// versions adds the versions of pkg that rule i selects.
func (r *resolver) versions(ctx context.Context, i int, rule Rule, pkg *apiv1.Package) error {
	repo := pkg.Namespace + "/" + pkg.Name
	vs := slices.Clone(pkg.Versions)
	slices.SortStableFunc(vs, func(a, b apiv1.VersionSummary) int {
		return strings.Compare(pkgformat.VersionKey(b.Version), pkgformat.VersionKey(a.Version))
	})
	if rule.Channel != "" {
		keep, err := r.channel(ctx, i, rule, pkg)
		if err != nil {
			return err
		}
		vs = slices.DeleteFunc(vs, func(v apiv1.VersionSummary) bool { return !keep[v.Version] })
	}
	if rule.Versions != "" {
		c, err := semver.NewConstraint(rule.Versions)
		if err != nil { // Validate has checked it
			return fmt.Errorf("versions: %w", err)
		}
		vs = slices.DeleteFunc(vs, func(v apiv1.VersionSummary) bool {
			sv, err := semver.NewVersion(strings.ReplaceAll(v.Version, "_", "+"))
			return err != nil || !c.Check(sv)
		})
	}
	if rule.Latest > 0 && len(vs) > rule.Latest {
		vs = vs[:rule.Latest]
	}
	if len(vs) == 0 {
		r.warn(i, rule, "selects no version of %s", repo)
		return nil
	}
	if r.sel.VerifiedOnly {
		var dropped []string
		vs = slices.DeleteFunc(vs, func(v apiv1.VersionSummary) bool {
			if !v.Verified {
				dropped = append(dropped, v.Version)
			}
			return !v.Verified
		})
		if len(dropped) > 0 {
			r.warn(i, rule, "verifiedOnly dropped %s of %s: %s", resolvePlural(len(dropped), "unverified version"), repo, resolveList(dropped))
		}
	}
	for _, v := range vs {
		d, err := digest.Parse(v.Digest)
		if err != nil {
			return fmt.Errorf("%s %s: the catalog gave digest %q: %w", repo, v.Version, v.Digest, err)
		}
		r.chosen[repo+"@"+v.Version] = Selected{
			Namespace: pkg.Namespace,
			Name:      pkg.Name,
			Version:   v.Version,
			Tag:       pkgformat.Tag(v.Version),
			Digest:    d,
			Format:    string(pkg.Format),
			Verified:  v.Verified,
		}
	}
	return nil
}

// channel returns the versions of pkg that rule i's Channel (and From)
// keep.
func (r *resolver) channel(ctx context.Context, i int, rule Rule, pkg *apiv1.Package) (map[string]bool, error) {
	repo := pkg.Namespace + "/" + pkg.Name
	at := slices.IndexFunc(pkg.Channels, func(c apiv1.Channel) bool { return c.Name == rule.Channel })
	if at < 0 {
		if len(pkg.Channels) == 0 {
			return nil, fmt.Errorf("channel: %s has no channel %q: it has no channels", repo, rule.Channel)
		}
		names := make([]string, len(pkg.Channels))
		for j, c := range pkg.Channels {
			names[j] = c.Name
		}
		return nil, fmt.Errorf("channel: %s has no channel %q (its channels: %s)", repo, rule.Channel, strings.Join(names, ", "))
	}
	keep := map[string]bool{}
	if rule.From == "" {
		for _, v := range pkg.Channels[at].Versions {
			keep[v] = true
		}
		return keep, nil
	}
	up, err := r.cat.Upgrades(ctx, pkg.Namespace, pkg.Name, rule.From, rule.Channel)
	if err != nil {
		return nil, fmt.Errorf("upgrade path of %s from %s in channel %q: %w", repo, rule.From, rule.Channel, err)
	}
	path := append([]string{rule.From}, up.Path...)
	var missing []string
	for _, v := range path {
		keep[v] = true
		if !slices.ContainsFunc(pkg.Versions, func(s apiv1.VersionSummary) bool { return s.Version == v }) {
			missing = append(missing, v)
		}
	}
	if len(missing) > 0 {
		r.warn(i, rule, "the upgrade path of %s from %s in channel %q goes through %s the package does not have as readable versions, left out: %s",
			repo, rule.From, rule.Channel, resolvePlural(len(missing), "version"), resolveList(missing))
	}
	return keep, nil
}

// resolvePlural is "1 thing" or "n things".
func resolvePlural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// resolveList lists versions, the first few of a long list.
func resolveList(vs []string) string {
	const show = 5
	if len(vs) <= show {
		return strings.Join(vs, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(vs[:show], ", "), len(vs)-show)
}

// resolveJoin joins formats with sep.
func resolveJoin(formats []pkgformat.Format, sep string) string {
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = string(f)
	}
	return strings.Join(names, sep)
}
