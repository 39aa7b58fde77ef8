package catalog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/berth-registry/berth/approval"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/permissions"
	"github.com/berth-registry/berth/pkgformat"
)

// Approvals keep the approvals of versions whose permissions exceed what
// the gate has admitted for their package name (package approval).
type Approvals interface {
	Record(ctx context.Context, a apiv1.Approval) error
	// Find returns nil, nil when there is no such approval.
	Find(ctx context.Context, namespace, name, version, fingerprint string) (*apiv1.Approval, error)
}

// Allowances keep, per package name, the rule sets the gate has admitted:
// its allowance, which deleting the package does not remove.
type Allowances interface {
	// Allow adds a rule set to the allowance of its package name.
	Allow(ctx context.Context, a approval.Allowed) error
	// Allowance returns the rule sets admitted for namespace/name, none
	// when the gate has kept no record of it.
	Allowance(ctx context.Context, namespace, name string) ([]approval.Allowed, error)
}

// GateRecords are what the permission gate keeps: approvals and allowances
// (approval.Store).
type GateRecords interface {
	Approvals
	Allowances
}

var _ GateRecords = (*approval.Store)(nil)

// maxNamedGrants bounds the grants, and the findings, a refusal names.
const maxNamedGrants = 10

// AdmitPermissions decides whether a package manifest pushed as repo:tag may
// be tagged under the namespace's permission gate
// (Options.RefuseWideningPermissions). It holds this invariant: in a gated
// namespace no version is tagged whose grants exceed the package name's
// allowance, the rule sets the gate has admitted for that name, unless an
// administrator approved that version with exactly its rules. The first
// version of a name is admitted without approval only when rated at most
// the namespace's Options.MaxUnapprovedRating. Each version admitted
// through an approval, or as a first version, adds its rules to the
// allowance, which lives in the registry's storage and survives the
// package's deletion. A name the gate meets with versions stored but no
// allowance (stored before the gate kept one) gets its allowance seeded
// from those versions. The package is read as the indexer reads it, under
// the same limits; one it cannot read, for whatever reason (a timeout under
// load included), is refused, for a later read could find it valid. The
// error names what the version asks beyond the allowance, or
// its rating and findings, and the approval that would admit it.
func (c *Catalog) AdmitPermissions(ctx context.Context, repo, tag, mediaType string, payload []byte) error {
	ns, name, _ := strings.Cut(repo, "/")
	if c.refuseWidening == nil || !c.refuseWidening(ns) {
		return nil
	}
	if c.gate == nil {
		return fmt.Errorf("%s:%s: namespace %s refuses widening permissions, but this catalog keeps no allowances", repo, tag, ns)
	}
	e := &Entry{Namespace: ns, Name: name, Tag: tag, Indexed: time.Now().UTC()}
	e, err := c.ix.readManifest(ctx, e, repo, mediaType, payload, false) // its bundle image is built when it is indexed
	if err != nil {
		return fmt.Errorf("%s:%s: cannot read the package to review its permissions: %w", repo, tag, err)
	}
	if e.Status != apiv1.StatusIndexed {
		return fmt.Errorf("%s:%s: namespace %s admits only versions whose permissions it can review, and this one cannot be read: %s", repo, tag, ns, e.Reason)
	}
	rules := e.Metadata.Permissions
	fp := permissions.Fingerprint(rules)
	allowance, err := c.allowance(ctx, ns, name)
	if err != nil {
		return fmt.Errorf("%s:%s: cannot read the permissions admitted for %s: %w", repo, tag, repo, err)
	}
	if len(allowance) > 0 {
		change, err := beyond(allowance, fp, rules)
		if err == nil && !change.Widens {
			return nil
		}
		ok, aerr := c.admitApproved(ctx, e, fp)
		if ok || aerr != nil {
			return aerr
		}
		return fmt.Errorf("%s:%s asks for permissions beyond those namespace %s has admitted for %s (%s), and namespace %s refuses that without an approval; %s",
			repo, tag, ns, repo, addedGrants(change, err), ns, approveHint(repo, tag, fp))
	}
	review := permissions.Of(rules)
	if maxRating := c.maxUnapproved(ns); review.Rating <= maxRating {
		return c.allow(ctx, e, fp, fmt.Sprintf("first version, rated %s, at most maxUnapprovedRating %s", review.Rating, maxRating), "")
	}
	ok, err := c.admitApproved(ctx, e, fp)
	if ok || err != nil {
		return err
	}
	return fmt.Errorf("%s:%s is the first version of %s the gate of namespace %s meets, and it is rated %s, above %s, the most namespace %s admits without an approval (%s); %s",
		repo, tag, repo, ns, review.Rating, c.maxUnapproved(ns), ns, namedFindings(review.Findings), approveHint(repo, tag, fp))
}

// maxUnapproved is the highest rating namespace ns admits for a first
// version without an approval.
func (c *Catalog) maxUnapproved(ns string) permissions.Rating {
	if c.maxUnapprovedRating == nil {
		return permissions.DefaultMaxUnapproved
	}
	return c.maxUnapprovedRating(ns)
}

// allowance returns the rule sets admitted for ns/name, seeding them from
// the versions stored when there is no record yet, one record per rule set.
func (c *Catalog) allowance(ctx context.Context, ns, name string) ([]approval.Allowed, error) {
	allowance, err := c.gate.Allowance(ctx, ns, name)
	if err != nil || len(allowance) > 0 {
		return allowance, err
	}
	entries, err := c.store.Entries(ctx, ns, name)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	seen := map[string]bool{}
	for _, old := range entries {
		if old.Status != apiv1.StatusIndexed {
			continue
		}
		fp := permissions.Fingerprint(old.Metadata.Permissions)
		if seen[fp] {
			continue
		}
		seen[fp] = true
		a := approval.Allowed{Namespace: ns, Name: name, Permissions: fp, Rules: old.Metadata.Permissions,
			Version: old.Metadata.Version, Reason: "stored before the gate kept a record of the package", At: time.Now().UTC()}
		if err := c.gate.Allow(ctx, a); err != nil {
			return nil, err
		}
		allowance = append(allowance, a)
	}
	return allowance, nil
}

// beyond returns what rules, whose fingerprint is fp, grant beyond the
// union of the allowance. It returns an error wrapping
// permissions.ErrTooBroad when that cannot be compared.
func beyond(allowance []approval.Allowed, fp string, rules *pkgformat.Permissions) (*permissions.Change, error) {
	union := &pkgformat.Permissions{}
	for _, a := range allowance {
		if a.Permissions == fp {
			return &permissions.Change{}, nil
		}
		if a.Rules != nil {
			union.Namespaced = append(union.Namespaced, a.Rules.Namespaced...)
			union.Cluster = append(union.Cluster, a.Rules.Cluster...)
		}
	}
	change, err := permissions.Diff(union, rules)
	if err != nil {
		return nil, fmt.Errorf("cannot compare with what was admitted: %w", err)
	}
	return change, nil
}

// admitApproved reports whether e, with rules whose fingerprint is fp, is
// approved, and if so adds its rules to the allowance.
func (c *Catalog) admitApproved(ctx context.Context, e *Entry, fp string) (bool, error) {
	repo := e.Namespace + "/" + e.Name
	a, err := c.gate.Find(ctx, e.Namespace, e.Name, e.Tag, fp)
	if err != nil {
		return false, fmt.Errorf("%s:%s: cannot read its approvals: %w", repo, e.Tag, err)
	}
	if a == nil {
		return false, nil
	}
	c.log.Info("permissions admitted by an approval", "repository", repo, "tag", e.Tag, "by", a.By, "at", a.At)
	return true, c.allow(ctx, e, fp, "approved", a.By)
}

// allow adds e's rules to the allowance of its package name.
func (c *Catalog) allow(ctx context.Context, e *Entry, fp, reason, by string) error {
	a := approval.Allowed{Namespace: e.Namespace, Name: e.Name, Permissions: fp, Rules: e.Metadata.Permissions,
		Version: e.Metadata.Version, Reason: reason, By: by, At: time.Now().UTC()}
	if err := c.gate.Allow(ctx, a); err != nil {
		return fmt.Errorf("%s/%s:%s: cannot record its permissions as admitted: %w", e.Namespace, e.Name, e.Tag, err)
	}
	return nil
}

// approveHint says how an administrator admits repo:tag with the rules
// whose fingerprint is fp.
func approveHint(repo, tag, fp string) string {
	return fmt.Sprintf("an administrator of %s may approve exactly these permissions with `berth approve %s:%s --permissions %s`, then push again", repo, repo, tag, fp)
}

// addedGrants names the grants change adds, at most maxNamedGrants of
// them, or why they could not be listed.
func addedGrants(change *permissions.Change, err error) string {
	if err != nil {
		return err.Error()
	}
	s := "adds " + namedFirst(change.Added, permissions.Grant.String, ", ", " ")
	if change.RatingWidens {
		s += fmt.Sprintf("; rated %s, up from %s", change.To, change.From)
	}
	return s
}

// namedFindings names the findings, worst first, at most maxNamedGrants of
// them.
func namedFindings(findings []permissions.Finding) string {
	return namedFirst(findings, func(f permissions.Finding) string { return strings.ToUpper(f.Rating.String()) + ": " + f.Text }, "; ", "; ")
}

// namedFirst names the first maxNamedGrants of items, joined by sep, and
// then, after tail, how many more there are.
func namedFirst[T any](items []T, name func(T) string, sep, tail string) string {
	names := make([]string, 0, maxNamedGrants)
	for _, it := range items[:min(len(items), maxNamedGrants)] {
		names = append(names, name(it))
	}
	s := strings.Join(names, sep)
	if n := len(items) - len(names); n > 0 {
		s += fmt.Sprintf("%sand %d more", tail, n)
	}
	return s
}

// Approve records that version of namespace/name may be tagged with the
// permissions whose fingerprint is fingerprint, approved by by.
func (c *Catalog) Approve(ctx context.Context, namespace, name, version, fingerprint, by string) (*apiv1.Approval, error) {
	if c.gate == nil {
		return nil, errorf(ErrNotImplemented, "approvals are not kept here: the catalog runs without the registry's storage (split mode)")
	}
	if err := approval.Valid(namespace, name, version, fingerprint); err != nil {
		return nil, errorf(ErrInvalid, "approval of %s/%s:%s: %v", namespace, name, version, err)
	}
	a := apiv1.Approval{Namespace: namespace, Name: name, Version: pkgformat.Tag(version), Permissions: fingerprint, By: by, At: time.Now().UTC()}
	if err := c.gate.Record(ctx, a); err != nil {
		return nil, err
	}
	c.log.Info("permissions approved", "repository", namespace+"/"+name, "tag", a.Version, "permissions", fingerprint, "by", by)
	return &a, nil
}
