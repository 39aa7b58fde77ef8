package catalog

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/graph"
	"github.com/berth-registry/berth/permissions"
	"github.com/berth-registry/berth/pkgformat"
)

// Search returns one page of the packages that match q.
func (c *Catalog) Search(ctx context.Context, q Query) (*SearchResult, error) {
	return c.store.Search(ctx, q)
}

// pkg is one package as stored: its readable versions, newest first, and the
// tags that are not served as versions; the Metadata of each version is its
// Summary, without Files.
type pkg struct {
	versions  []*Entry
	unindexed []*Entry
}

// load reads a package the access allows; unknown and forbidden packages
// are both ErrNotFound, so that callers learn nothing of what they may not pull.
func (c *Catalog) load(ctx context.Context, access Access, ns, name string) (*pkg, error) {
	if !access.Allows(ns, name) {
		return nil, errorf(ErrNotFound, "package %s/%s", ns, name)
	}
	entries, err := c.store.Summaries(ctx, ns, name)
	if errors.Is(err, ErrNotFound) {
		return nil, errorf(ErrNotFound, "package %s/%s", ns, name)
	}
	if err != nil {
		return nil, err
	}
	p := &pkg{}
	for _, e := range entries {
		if e.Status == apiv1.StatusIndexed {
			p.versions = append(p.versions, e)
		} else {
			p.unindexed = append(p.unindexed, e)
		}
	}
	keys := make(map[string]string, len(p.versions))
	for _, e := range p.versions {
		keys[e.Tag] = VersionKey(e.Tag)
	}
	sort.Slice(p.versions, func(i, j int) bool { return keys[p.versions[i].Tag] > keys[p.versions[j].Tag] })
	sort.Slice(p.unindexed, func(i, j int) bool { return p.unindexed[i].Tag < p.unindexed[j].Tag })
	return p, nil
}

// readable is load for requests that need at least one readable version.
func (c *Catalog) readable(ctx context.Context, access Access, ns, name string) (*pkg, error) {
	p, err := c.load(ctx, access, ns, name)
	if err != nil {
		return nil, err
	}
	if len(p.versions) == 0 {
		return nil, errorf(ErrNotFound, "package %s/%s has no readable version", ns, name)
	}
	return p, nil
}

func (p *pkg) graph() *graph.Graph {
	vs := make([]graph.Version, len(p.versions))
	for i, e := range p.versions {
		vs[i] = graph.Version{Version: e.Tag, Digest: e.Digest, Metadata: e.Metadata}
	}
	return graph.Build(vs)
}

// Package describes a package: its versions, channels and unindexed tags.
func (c *Catalog) Package(ctx context.Context, access Access, ns, name string) (*apiv1.Package, error) {
	p, err := c.load(ctx, access, ns, name)
	if err != nil {
		return nil, err
	}
	out, _, err := p.describe(ns, name)
	return out, err
}

// Overview describes a package as Package does and returns the upgrade
// graph of one of its channels, as Graph does, reading the package once:
// the default channel when channel is empty, or the first when there is no
// default; no graph when the package has no channel.
func (c *Catalog) Overview(ctx context.Context, access Access, ns, name, channel string) (*apiv1.Package, *apiv1.Graph, error) {
	p, err := c.load(ctx, access, ns, name)
	if err != nil {
		return nil, nil, err
	}
	out, g, err := p.describe(ns, name)
	if err != nil {
		return nil, nil, err
	}
	if channel == "" {
		channel = out.DefaultChannel
	}
	if channel == "" && len(out.Channels) > 0 {
		channel = out.Channels[0].Name
	}
	if channel == "" {
		return out, nil, nil
	}
	cg, err := g.Channel(channel)
	if err != nil {
		return nil, nil, graphError(ns, name, err)
	}
	cg.Namespace, cg.Name = ns, name
	p.judgePermissions(&cg)
	return out, &cg, nil
}

// describe is the Package document of p, and its upgrade graph.
func (p *pkg) describe(ns, name string) (*apiv1.Package, *graph.Graph, error) {
	if len(p.versions) == 0 {
		return nil, nil, errorf(ErrNotFound, "package %s/%s has no readable version: %s", ns, name, describeUnindexed(p.unindexed))
	}
	out := &apiv1.Package{Namespace: ns, Name: name, Versions: []apiv1.VersionSummary{}, Channels: []apiv1.Channel{}}
	for _, e := range p.unindexed {
		out.Unindexed = append(out.Unindexed, artifact(e))
	}
	latest := p.versions[0]
	md := latest.Metadata
	out.Format, out.DisplayName, out.Description = md.Format, md.DisplayName, md.Description
	out.LatestVersion, out.Maintainers, out.Verified = latest.Tag, md.Maintainers, latest.Verified
	g := p.graph()
	out.DefaultChannel = g.DefaultChannel()
	out.Channels = g.Channels()
	inChannels := make(map[string][]string)
	for _, ch := range out.Channels {
		for _, v := range ch.Versions {
			inChannels[v] = append(inChannels[v], ch.Name)
		}
	}
	for _, e := range p.versions {
		out.Versions = append(out.Versions, apiv1.VersionSummary{
			Version: e.Tag, Digest: e.Digest, AppVersion: e.Metadata.AppVersion, Created: e.Metadata.Created,
			Indexed: e.Indexed, Channels: inChannels[e.Tag], Verified: e.Verified,
		})
	}
	return out, g, nil
}

// Version describes one version in full.
func (c *Catalog) Version(ctx context.Context, access Access, ns, name, version string) (*apiv1.Version, error) {
	e, err := c.version(ctx, access, ns, name, version)
	if err != nil {
		return nil, err
	}
	files := make([]pkgformat.FileInfo, len(e.Files))
	for i, f := range e.Files {
		files[i] = pkgformat.FileInfo{Path: f.Path, Size: f.Size}
	}
	sc, err := c.signaturesOf(ctx, e)
	if err != nil {
		return nil, err
	}
	v := &apiv1.Version{
		Namespace: ns, Name: name, Version: e.Tag, Digest: e.Digest, Format: e.Metadata.Format,
		PullReference: ns + "/" + name + "@" + e.Digest,
		Content:       e.Content, Metadata: *e.Metadata, Files: files, Permissions: e.Metadata.Permissions,
		Indexed: e.Indexed, Verified: e.Verified,
		Signatures: []apiv1.Signature{}, Attestations: []apiv1.Attestation{},
	}
	if e.OLM != nil {
		v.Bundle = &apiv1.Bundle{Digest: e.OLM.Digest, Reference: ns + "/" + name + "@" + e.OLM.Digest}
	}
	if !v.Verified {
		v.VerifiedReason = verifiedReason(sc)
	}
	if sc != nil {
		for _, r := range sc.Signatures {
			if r.Attestation() {
				v.Attestations = append(v.Attestations, apiv1.Attestation{
					Digest: r.Digest, Layer: r.Layer, PredicateType: r.PredicateType, KeyID: r.KeyID,
					Verified: r.Verified, Reason: r.Reason, Kind: r.Kind, Checked: sc.Checked, Sources: r.Sources,
				})
				continue
			}
			v.Signatures = append(v.Signatures, apiv1.Signature{
				Digest: r.Digest, Layer: r.Layer, KeyID: r.KeyID, Verified: r.Verified,
				Reason: r.Reason, Kind: r.Kind, Checked: sc.Checked,
			})
		}
	}
	return v, nil
}

// signaturesOf returns what the last check of e's signatures found; nil
// when they were not checked yet.
func (c *Catalog) signaturesOf(ctx context.Context, e *Entry) (*SignatureCheck, error) {
	sc, err := c.store.Signatures(ctx, e.Namespace, e.Name, e.Digest)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c.applyPolicy(sc)
	return sc, nil
}

// version returns a readable version; a tag that is not one is ErrNotFound
// with the reason. A package the access does not allow is answered as one
// without the version.
func (c *Catalog) version(ctx context.Context, access Access, ns, name, version string) (*Entry, error) {
	if !access.Allows(ns, name) {
		return nil, errorf(ErrNotFound, "package %s/%s has no version %s", ns, name, version)
	}
	tag := pkgformat.Tag(version)
	e, err := c.store.Entry(ctx, ns, name, tag)
	if errors.Is(err, ErrNotFound) {
		return nil, errorf(ErrNotFound, "package %s/%s has no version %s", ns, name, version)
	}
	if err != nil {
		return nil, err
	}
	if e.Status != apiv1.StatusIndexed {
		return nil, errorf(ErrNotFound, "%s/%s:%s is not a readable package version (%s: %s)", ns, name, tag, e.Status, e.Reason)
	}
	return e, nil
}

// Graph returns the upgrade graph of one channel.
func (c *Catalog) Graph(ctx context.Context, access Access, ns, name, channel string) (*apiv1.Graph, error) {
	p, err := c.readable(ctx, access, ns, name)
	if err != nil {
		return nil, err
	}
	g, err := p.graph().Channel(channel)
	if err != nil {
		return nil, graphError(ns, name, err)
	}
	g.Namespace, g.Name = ns, name
	p.judgePermissions(&g)
	return &g, nil
}

// graphGrantBudget bounds the grants one graph's permission comparisons
// expand (permissions.Comparer).
const graphGrantBudget = 4 * permissions.MaxGrants

// judgePermissions rates each node of g and marks the edges that widen
// permissions.
func (p *pkg) judgePermissions(g *apiv1.Graph) {
	perms := make(map[string]*pkgformat.Permissions, len(p.versions))
	for _, e := range p.versions {
		perms[e.Tag] = e.Metadata.Permissions
	}
	for i := range g.Nodes {
		g.Nodes[i].Rating = permissions.Of(perms[g.Nodes[i].Version]).Rating
	}
	cmp := permissions.NewComparer(graphGrantBudget)
	for i := range g.Edges {
		e := &g.Edges[i]
		e.WidensPermissions = cmp.Widens(perms[e.From], perms[e.To])
	}
}

// Permissions reviews the permissions version asks for and, when from is
// not empty, compares them with from's.
func (c *Catalog) Permissions(ctx context.Context, access Access, ns, name, version, from string) (*apiv1.Permissions, error) {
	e, err := c.version(ctx, access, ns, name, version)
	if err != nil {
		return nil, err
	}
	out := &apiv1.Permissions{Namespace: ns, Name: name, Version: e.Tag, Review: permissions.Of(e.Metadata.Permissions)}
	if from == "" {
		return out, nil
	}
	old, err := c.version(ctx, access, ns, name, from)
	if err != nil {
		return nil, err
	}
	out.From = old.Tag
	out.Change, err = permissions.Diff(old.Metadata.Permissions, e.Metadata.Permissions)
	if errors.Is(err, permissions.ErrTooBroad) {
		return nil, errorf(ErrInvalid, "cannot compare the permissions of %s/%s %s with %s's: %v; compare their rules (GET without from)", ns, name, e.Tag, old.Tag, err)
	}
	return out, err
}

// Upgrades returns what version from can upgrade to in channel (empty: the
// default channel) and the path to the channel's head.
func (c *Catalog) Upgrades(ctx context.Context, access Access, ns, name, channel, from string) (*apiv1.Upgrades, error) {
	p, err := c.readable(ctx, access, ns, name)
	if err != nil {
		return nil, err
	}
	u, err := p.graph().Upgrades(channel, pkgformat.Tag(from))
	var le *graph.LookupError
	if errors.As(err, &le) && le.Version != "" {
		if len(le.Channels) == 0 {
			for _, e := range p.versions {
				if e.Tag == pkgformat.Tag(from) {
					return nil, errorf(ErrNotFound, "version %s of %s/%s is in no channel: no channel's head reaches it through replaces (docs/olm.md)", from, ns, name)
				}
			}
			return nil, errorf(ErrNotFound, "package %s/%s has no version %s", ns, name, from)
		}
		return nil, errorf(ErrNotFound, "version %s of %s/%s is not in channel %s (channels of %s: %s)",
			from, ns, name, le.Channel, from, strings.Join(le.Channels, ", "))
	}
	if err != nil {
		return nil, graphError(ns, name, err)
	}
	return &u, nil
}

// File opens one file of a version's content. It reads the stored tarball up
// to the file and no further, and never unpacks the other files.
func (c *Catalog) File(ctx context.Context, access Access, ns, name, version, file string) (io.ReadCloser, int64, error) {
	e, err := c.version(ctx, access, ns, name, version)
	if err != nil {
		return nil, 0, err
	}
	var fe *FileEntry
	for i := range e.Files {
		if e.Files[i].Path == file {
			fe = &e.Files[i]
			break
		}
	}
	if fe == nil {
		return nil, 0, errorf(ErrNotFound, "%s/%s:%s has no file %s", ns, name, e.Tag, file)
	}
	blob, err := c.source.Blob(ctx, ns+"/"+name, e.Content.Digest)
	if err != nil {
		return nil, 0, err
	}
	zr, err := gzip.NewReader(blob)
	if err == nil {
		_, err = io.CopyN(io.Discard, zr, fe.Offset)
	}
	if err != nil {
		blob.Close()
		return nil, 0, fmt.Errorf("%s/%s:%s: read %s: %w", ns, name, e.Tag, file, err)
	}
	return &fileReader{Reader: io.LimitReader(zr, fe.Size), blob: blob}, fe.Size, nil
}

// graphError classifies an error of the upgrade graph by the catalog's sentinels.
func graphError(ns, name string, err error) error {
	var le *graph.LookupError
	if errors.As(err, &le) && le.Version == "" {
		return errorf(ErrNotFound, "package %s/%s has no channel %s (channels: %s)", ns, name, le.Channel, strings.Join(le.Channels, ", "))
	}
	switch {
	case errors.Is(err, graph.ErrNotFound):
		return fmt.Errorf("package %s/%s: %w: %w", ns, name, ErrNotFound, err)
	case errors.Is(err, graph.ErrInvalid):
		return fmt.Errorf("package %s/%s: %w: %w", ns, name, ErrInvalid, err)
	}
	return err
}

type fileReader struct {
	io.Reader
	blob io.Closer
}

func (f *fileReader) Close() error { return f.blob.Close() }

// DeletePackage deletes every version of a package from the registry —
// manifests, tags and signatures — and then from the catalog. It returns the
// versions deleted.
func (c *Catalog) DeletePackage(ctx context.Context, ns, name string) ([]string, error) {
	entries, err := c.store.Entries(ctx, ns, name)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	repo := ns + "/" + name
	if err := c.source.DeleteRepository(ctx, repo); err != nil {
		if errors.Is(err, ErrNotFound) && len(entries) > 0 {
			err = nil // already gone from the registry; the catalog follows below
		}
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				return nil, errorf(ErrNotFound, "package %s/%s", ns, name)
			}
			return nil, err
		}
	}
	var deleted []string
	for _, e := range entries {
		if _, err := c.store.Delete(ctx, ns, name, e.Tag); err != nil {
			return deleted, err
		}
		if e.Status == apiv1.StatusIndexed {
			deleted = append(deleted, e.Tag)
		}
	}
	sort.Slice(deleted, func(i, j int) bool { return VersionKey(deleted[i]) > VersionKey(deleted[j]) })
	return deleted, nil
}

// Unindexed lists the tags that are not served as package versions.
func (c *Catalog) Unindexed(ctx context.Context, access Access, limit, offset int) ([]apiv1.Artifact, error) {
	return c.store.Unindexed(ctx, access, limit, offset)
}

// Walk streams every readable version the access allows, by namespace and name.
func (c *Catalog) Walk(ctx context.Context, access Access, ns string, fn func(*Entry) error) error {
	return c.store.Walk(ctx, access, ns, fn)
}

// Status reports what the catalog holds and its last reconciliation.
func (c *Catalog) Status(ctx context.Context) (*apiv1.Status, error) {
	// The report first: the counts then include every write of the
	// reconciliation it reports.
	rec := c.reconcileStatus()
	st, err := c.store.Stats(ctx)
	if err != nil {
		return nil, err
	}
	st.Reconcile = rec
	c.reindexStatus(&st.Reindex)
	return &st, nil
}

// describeUnindexed says why the first few tags of a package are not versions.
func describeUnindexed(es []*Entry) string {
	const shown = 3
	var parts []string
	for _, e := range es[:min(len(es), shown)] {
		parts = append(parts, fmt.Sprintf("%s is %s (%s)", e.Tag, e.Status, e.Reason))
	}
	if len(es) > shown {
		parts = append(parts, fmt.Sprintf("and %d more tags (GET /api/v1/artifacts lists them)", len(es)-shown))
	}
	return strings.Join(parts, "; ")
}

func artifact(e *Entry) apiv1.Artifact {
	return apiv1.Artifact{Namespace: e.Namespace, Name: e.Name, Tag: e.Tag, Digest: e.Digest, Status: e.Status, Reason: e.Reason, Indexed: e.Indexed}
}
