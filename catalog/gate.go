package catalog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/berth-registry/berth/approval"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/graph"
	"github.com/berth-registry/berth/permissions"
	"github.com/berth-registry/berth/pkgformat"
)

// Approvals keep the approvals of versions whose permissions widen their
// predecessor's (package approval).
type Approvals interface {
	Record(ctx context.Context, a apiv1.Approval) error
	// Find returns nil, nil when there is no such approval.
	Find(ctx context.Context, namespace, name, version, fingerprint string) (*apiv1.Approval, error)
}

// maxNamedGrants bounds the grants a refusal names.
const maxNamedGrants = 10

// AdmitPermissions decides whether a package manifest pushed as repo:tag may
// be tagged under the namespace's permission gate
// (Options.RefuseWideningPermissions): not when the version asks for
// permissions its predecessor in a channel does not have, unless that
// version has been approved with exactly these permissions. The package is
// read as the indexer reads it, under the same limits; one it cannot read
// is let through, to be recorded as invalid. The error names the
// predecessor, the grants added and the approval that would admit it.
func (c *Catalog) AdmitPermissions(ctx context.Context, repo, tag, mediaType string, payload []byte) error {
	ns, name, _ := strings.Cut(repo, "/")
	if c.refuseWidening == nil || !c.refuseWidening(ns) {
		return nil
	}
	e := &Entry{Namespace: ns, Name: name, Tag: tag, Indexed: time.Now().UTC()}
	e, err := c.ix.readManifest(ctx, e, repo, mediaType, payload, false) // its bundle image is built when it is indexed
	if err != nil {
		return fmt.Errorf("%s:%s: cannot read the package to review its permissions: %w", repo, tag, err)
	}
	if e.Status != apiv1.StatusIndexed {
		return nil
	}
	prev, channel, err := c.predecessor(ctx, e)
	if err != nil || prev == nil {
		return err
	}
	change, err := permissions.Diff(prev.Metadata.Permissions, e.Metadata.Permissions)
	if err != nil && !errors.Is(err, permissions.ErrTooBroad) {
		return err
	}
	if err == nil && !change.Widens {
		return nil
	}
	fp := permissions.Fingerprint(e.Metadata.Permissions)
	if c.approvals != nil {
		a, err := c.approvals.Find(ctx, ns, name, tag, fp)
		if err != nil {
			return fmt.Errorf("%s:%s: cannot read its approvals: %w", repo, tag, err)
		}
		if a != nil {
			c.log.Info("permissions widened, approved", "repository", repo, "tag", tag, "from", prev.Tag, "by", a.By, "at", a.At)
			return nil
		}
	}
	return fmt.Errorf("%s:%s asks for permissions that %s, its predecessor in channel %s, does not have (%s), and namespace %s refuses that without an approval; an administrator of %s may approve exactly these permissions with `berth approve %s:%s --permissions %s`, then push again",
		repo, tag, prev.Tag, channel, addedGrants(change, err), ns, repo, repo, tag, fp)
}

// addedGrants names the grants change adds, at most maxNamedGrants of
// them, or why they could not be listed.
func addedGrants(change *permissions.Change, err error) string {
	if err != nil {
		return err.Error()
	}
	names := make([]string, 0, maxNamedGrants)
	for _, g := range change.Added[:min(len(change.Added), maxNamedGrants)] {
		names = append(names, g.String())
	}
	s := "adds " + strings.Join(names, ", ")
	if n := len(change.Added) - len(names); n > 0 {
		s += fmt.Sprintf(" and %d more", n)
	}
	if change.RatingWidens {
		s += fmt.Sprintf("; rated %s, up from %s", change.To, change.From)
	}
	return s
}

// predecessor returns the version e follows in a channel: in the upgrade
// graph with e among the package's versions, the newest version with an
// edge to e, in the channels in turn (the default first). A version that
// no edge reaches follows the newest older version, if any. It returns nil
// for the package's first version.
func (c *Catalog) predecessor(ctx context.Context, e *Entry) (*Entry, string, error) {
	entries, err := c.store.Entries(ctx, e.Namespace, e.Name)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, "", err
	}
	byTag := map[string]*Entry{}
	vs := []graph.Version{{Version: e.Tag, Digest: e.Digest, Metadata: e.Metadata}}
	for _, old := range entries {
		if old.Status != apiv1.StatusIndexed || old.Tag == e.Tag {
			continue
		}
		byTag[old.Tag] = old
		vs = append(vs, graph.Version{Version: old.Tag, Digest: old.Digest, Metadata: old.Metadata})
	}
	if len(byTag) == 0 {
		return nil, "", nil
	}
	g := graph.Build(vs)
	for _, ch := range g.Channels() {
		cg, err := g.Channel(ch.Name)
		if err != nil {
			return nil, "", err
		}
		var best *Entry
		for _, edge := range cg.Edges {
			if from := byTag[edge.From]; edge.To == e.Tag && from != nil && (best == nil || VersionKey(from.Tag) > VersionKey(best.Tag)) {
				best = from
			}
		}
		if best != nil {
			return best, ch.Name, nil
		}
	}
	var best *Entry
	for tag, old := range byTag {
		if VersionKey(tag) < VersionKey(e.Tag) && (best == nil || VersionKey(tag) > VersionKey(best.Tag)) {
			best = old
		}
	}
	if best == nil {
		return nil, "", nil
	}
	return best, "(none: the newest older version)", nil
}

// Approve records that version of namespace/name may be tagged with the
// permissions whose fingerprint is fingerprint, approved by by.
func (c *Catalog) Approve(ctx context.Context, namespace, name, version, fingerprint, by string) (*apiv1.Approval, error) {
	if c.approvals == nil {
		return nil, errorf(ErrNotImplemented, "approvals are not kept here: the catalog runs without the registry's storage (split mode)")
	}
	if err := approval.Valid(namespace, name, version, fingerprint); err != nil {
		return nil, errorf(ErrInvalid, "approval of %s/%s:%s: %v", namespace, name, version, err)
	}
	a := apiv1.Approval{Namespace: namespace, Name: name, Version: pkgformat.Tag(version), Permissions: fingerprint, By: by, At: time.Now().UTC()}
	if err := c.approvals.Record(ctx, a); err != nil {
		return nil, err
	}
	c.log.Info("permissions approved", "repository", namespace+"/"+name, "tag", a.Version, "permissions", fingerprint, "by", by)
	return &a, nil
}
