package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	storagedriver "github.com/distribution/distribution/v3/registry/storage/driver"

	"github.com/berth-registry/berth/permissions"
	"github.com/berth-registry/berth/pkgformat"
)

// allowanceRoot is where the allowances live in the storage.
const allowanceRoot = "/berth/allowances"

// maxAllowed bounds the size of one stored rule set, written or read back.
const maxAllowed = 1 << 20

// Allowed is one rule set the permission gate admitted for a package name:
// the package name's allowance is the union of its Allowed rule sets.
type Allowed struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Permissions is the fingerprint of Rules (permissions.Fingerprint).
	Permissions string                 `json:"permissions"`
	Rules       *pkgformat.Permissions `json:"rules"`
	// Version is the version admitted with these rules.
	Version string `json:"version"`
	// Reason says why they were admitted: an approval by By, a first
	// version within the namespace's maxUnapprovedRating, or a version
	// stored before the gate kept a record of the name.
	Reason string    `json:"reason"`
	By     string    `json:"by,omitempty"`
	At     time.Time `json:"at"`
}

// Allow adds a's rules to the allowance of its package name. Each rule set
// is an object of its own, named by its fingerprint, so that replicas
// admitting different rule sets at once do not overwrite each other; a
// rule set already there is left as it is.
func (s *Store) Allow(ctx context.Context, a Allowed) error {
	if fp := permissions.Fingerprint(a.Rules); a.Permissions != fp {
		return fmt.Errorf("%w: the rules of %s/%s:%s have fingerprint %s, not %s", ErrInvalid, a.Namespace, a.Name, a.Version, fp, a.Permissions)
	}
	p, err := allowedPath(a.Namespace, a.Name, a.Permissions)
	if err != nil {
		return err
	}
	if _, err := s.driver.Stat(ctx, p); err == nil {
		return nil
	}
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	if len(b) > maxAllowed {
		return fmt.Errorf("the rules of %s/%s:%s take %d bytes, over the %d bytes an allowance keeps", a.Namespace, a.Name, a.Version, len(b), maxAllowed)
	}
	if err := s.driver.PutContent(ctx, p, b); err != nil {
		return fmt.Errorf("record the allowance of %s/%s: %w", a.Namespace, a.Name, err)
	}
	return nil
}

// Allowance returns the rule sets admitted for namespace/name, none when
// the gate has kept no record of the name.
func (s *Store) Allowance(ctx context.Context, namespace, name string) ([]Allowed, error) {
	if err := validName(namespace, name); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	dir := path.Join(allowanceRoot, namespace, name)
	files, err := s.driver.List(ctx, dir)
	var missing storagedriver.PathNotFoundError
	if errors.As(err, &missing) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the allowance of %s/%s: %w", namespace, name, err)
	}
	out := make([]Allowed, 0, len(files))
	for _, f := range files {
		if !strings.HasSuffix(f, ".json") {
			continue
		}
		a, err := s.readAllowed(ctx, f)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// readAllowed reads the rule set stored at p, checking that it is the one
// its name says.
func (s *Store) readAllowed(ctx context.Context, p string) (Allowed, error) {
	var a Allowed
	b, err := s.driver.GetContent(ctx, p)
	if err != nil {
		return a, fmt.Errorf("allowance %s: %w", p, err)
	}
	if len(b) > maxAllowed {
		return a, fmt.Errorf("allowance %s: %d bytes, over %d", p, len(b), maxAllowed)
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return a, fmt.Errorf("allowance %s: %w", p, err)
	}
	if fp := permissions.Fingerprint(a.Rules); path.Base(p) != strings.TrimPrefix(fp, "sha256:")+".json" {
		return a, fmt.Errorf("allowance %s: holds rules with fingerprint %s", p, fp)
	}
	return a, nil
}

// allowedPath is where the rule set with fingerprint lives in the
// allowance of namespace/name. It checks every part, so that none can name
// another path.
func allowedPath(namespace, name, fingerprint string) (string, error) {
	if err := validName(namespace, name); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := permissions.ValidFingerprint(fingerprint); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return path.Join(allowanceRoot, namespace, name, strings.TrimPrefix(fingerprint, "sha256:")+".json"), nil
}

// validName checks the parts that name a package.
func validName(namespace, name string) error {
	if err := pkgformat.ValidNamespace(namespace); err != nil {
		return err
	}
	return pkgformat.ValidName(name)
}
