// Package approval keeps the records of the permission gate
// (docs/permissions.md): the approvals, by which an administrator of a
// gated namespace records that one version, with exactly the permissions
// reviewed (their permissions.Fingerprint), may be tagged; and each
// package name's allowance, the rule sets the gate has admitted for it.
//
// Both are decisions, not derived from packages, so they live beside the
// registry's content in its storage (filesystem, S3, ...), where every
// replica reads them and from which nothing can rebuild them: under
// /berth/approvals/<namespace>/<name>/<tag>/<fingerprint hex>.json and
// /berth/allowances/<namespace>/<name>/<fingerprint hex>.json, outside
// distribution's /docker tree, which garbage collection walks and package
// deletes remove.
package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	storagedriver "github.com/distribution/distribution/v3/registry/storage/driver"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/permissions"
	"github.com/berth-registry/berth/pkgformat"
)

// root is where approvals live in the storage.
const root = "/berth/approvals"

// maxRecord bounds the size of a stored approval that is read back.
const maxRecord = 64 << 10

// ErrInvalid says an approval names no valid package version or fingerprint.
var ErrInvalid = errors.New("invalid approval")

// Store keeps approvals in a storage driver.
type Store struct {
	driver storagedriver.StorageDriver
}

// New returns the approvals kept in d.
func New(d storagedriver.StorageDriver) *Store { return &Store{driver: d} }

// Record stores a, replacing an approval of the same version and
// permissions.
func (s *Store) Record(ctx context.Context, a apiv1.Approval) error {
	p, err := recordPath(a.Namespace, a.Name, a.Version, a.Permissions)
	if err != nil {
		return err
	}
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	if err := s.driver.PutContent(ctx, p, b); err != nil {
		return fmt.Errorf("record the approval of %s/%s:%s: %w", a.Namespace, a.Name, a.Version, err)
	}
	return nil
}

// Find returns the approval of version of namespace/name with the
// permissions fingerprint, or nil when there is none.
func (s *Store) Find(ctx context.Context, namespace, name, version, fingerprint string) (*apiv1.Approval, error) {
	p, err := recordPath(namespace, name, version, fingerprint)
	if err != nil {
		return nil, err
	}
	b, err := s.driver.GetContent(ctx, p)
	var missing storagedriver.PathNotFoundError
	if errors.As(err, &missing) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the approvals of %s/%s:%s: %w", namespace, name, version, err)
	}
	if len(b) > maxRecord {
		return nil, fmt.Errorf("approval %s: %d bytes, over %d", p, len(b), maxRecord)
	}
	var a apiv1.Approval
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("approval %s: %w", p, err)
	}
	return &a, nil
}

// Valid checks the parts that name an approval.
func Valid(namespace, name, version, fingerprint string) error {
	for _, err := range []error{validName(namespace, name), pkgformat.ValidVersion(version), permissions.ValidFingerprint(fingerprint)} {
		if err != nil {
			return err
		}
	}
	return nil
}

// recordPath is where the approval of version with fingerprint lives. It
// checks every part, so that none can name another path.
func recordPath(namespace, name, version, fingerprint string) (string, error) {
	if err := Valid(namespace, name, version, fingerprint); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return path.Join(root, namespace, name, pkgformat.Tag(version), strings.TrimPrefix(fingerprint, "sha256:")+".json"), nil
}
