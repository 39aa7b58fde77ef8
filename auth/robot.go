package auth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
)

// Errors of robot accounts.
var (
	// ErrRobotNotFound: no robot of that name.
	ErrRobotNotFound = errors.New("robot not found")
	// ErrRobotExists: a robot of that name exists (revoked or not).
	ErrRobotExists = errors.New("robot already exists")
	// ErrRobotInactive: the robot is revoked or expired.
	ErrRobotInactive = errors.New("robot is revoked or expired")
)

// RobotUserPrefix starts the user name a robot logs in with:
// robot+NAMESPACE+NAME.
const RobotUserPrefix = "robot+"

// Robot is a robot account: a non-human subject of one namespace, scoped
// to repositories and actions there, with a mandatory expiry.
type Robot struct {
	Namespace   string       `json:"namespace"`
	Name        string       `json:"name"`
	Description string       `json:"description,omitempty"`
	Scopes      []RobotScope `json:"scopes"`
	CreatedBy   string       `json:"createdBy"`
	CreatedAt   time.Time    `json:"createdAt"`
	ExpiresAt   time.Time    `json:"expiresAt"`
	// RevokedAt is zero while the robot is not revoked.
	RevokedAt time.Time `json:"revokedAt,omitzero"`
	// LastUsed is zero until the robot first authenticates.
	LastUsed time.Time `json:"lastUsed,omitzero"`
	// SecretHash is the SHA-256 of the robot's secret; the secret itself
	// is shown once, at creation, and never stored.
	SecretHash []byte `json:"-"`
}

// RobotScope grants a robot actions on the repositories its globs match.
type RobotScope struct {
	// Repositories are globs over namespace/name, all within the robot's namespace.
	Repositories []string `json:"repositories"`
	// Actions are pull, push, delete or sign.
	Actions []Action `json:"actions"`
}

// Subject is the robot's subject in rules: robot:NAMESPACE+NAME.
func (r *Robot) Subject() string { return "robot:" + r.Namespace + "+" + r.Name }

// Username is the name the robot logs in with: robot+NAMESPACE+NAME.
func (r *Robot) Username() string { return RobotUserPrefix + r.Namespace + "+" + r.Name }

// ParseRobotUsername splits robot+NAMESPACE+NAME; ok is false for any other name.
func ParseRobotUsername(user string) (namespace, name string, ok bool) {
	rest, ok := strings.CutPrefix(user, RobotUserPrefix)
	if !ok {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(rest, "+")
	if !ok || namespace == "" || name == "" {
		return "", "", false
	}
	return namespace, name, true
}

// RobotNotFound is a store's error for the robot namespace+name it does not
// hold: it names the robot's user name and wraps ErrRobotNotFound.
func RobotNotFound(namespace, name string) error {
	return fmt.Errorf("%s%s+%s: %w", RobotUserPrefix, namespace, name, ErrRobotNotFound)
}

// StoredScopes checks that r can be stored, its SecretHash a SHA-256, and
// returns its scopes as the JSON array the stores keep.
func (r *Robot) StoredScopes() (string, error) {
	if len(r.SecretHash) != sha256.Size {
		return "", fmt.Errorf("the secret hash is %d bytes, not a SHA-256", len(r.SecretHash))
	}
	scopes, err := json.Marshal(r.Scopes)
	if err != nil {
		return "", err
	}
	return string(scopes), nil
}

// Active returns nil when the robot may authenticate at now, else an error
// wrapping ErrRobotInactive that says why.
func (r *Robot) Active(now time.Time) error {
	switch {
	case !r.RevokedAt.IsZero():
		return fmt.Errorf("%s was revoked at %s: %w", r.Username(), r.RevokedAt.UTC().Format(time.RFC3339), ErrRobotInactive)
	case !now.Before(r.ExpiresAt):
		return fmt.Errorf("%s expired at %s: %w", r.Username(), r.ExpiresAt.UTC().Format(time.RFC3339), ErrRobotInactive)
	}
	return nil
}

// Validate checks the robot's name and scopes: every glob within its
// namespace, only pull, push, delete and sign, and an expiry after now but
// no later than now+maxExpiry.
func (r *Robot) Validate(now time.Time, maxExpiry time.Duration) error {
	if err := validName("namespace", r.Namespace); err != nil {
		return err
	}
	if err := validName("name", r.Name); err != nil {
		return err
	}
	if len(r.Scopes) == 0 {
		return errors.New("scopes: at least one scope is required")
	}
	for i, s := range r.Scopes {
		if len(s.Repositories) == 0 {
			return fmt.Errorf("scopes[%d].repositories: required", i)
		}
		for j, g := range s.Repositories {
			ns, rest, ok := strings.Cut(g, "/")
			if _, err := path.Match(g, ""); err != nil || !ok || ns != r.Namespace || rest == "" {
				return fmt.Errorf("scopes[%d].repositories[%d]: want a glob over repositories of namespace %q, like %q (got %q)", i, j, r.Namespace, r.Namespace+"/*", g)
			}
		}
		if len(s.Actions) == 0 {
			return fmt.Errorf("scopes[%d].actions: required", i)
		}
		for j, a := range s.Actions {
			if !slices.Contains([]Action{Pull, Push, Delete, Sign}, a) {
				return fmt.Errorf("scopes[%d].actions[%d]: a robot may be given pull, push, delete or sign (got %q)", i, j, a)
			}
		}
	}
	switch {
	case r.ExpiresAt.IsZero():
		return errors.New("expiry: required; robots always expire")
	case !r.ExpiresAt.After(now):
		return fmt.Errorf("expiry: %s is not in the future", r.ExpiresAt.UTC().Format(time.RFC3339))
	case r.ExpiresAt.Sub(now) > maxExpiry:
		return fmt.Errorf("expiry: at most %s from now (auth.robots.maxExpiry), got %s", maxExpiry, r.ExpiresAt.Sub(now).Round(time.Second))
	}
	return nil
}

func validName(what, s string) error {
	if s == "" || len(s) > 128 {
		return fmt.Errorf("%s: want 1 to 128 characters (got %q)", what, s)
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%s: want lowercase letters, digits, '-', '_' and '.' (got %q)", what, s)
		}
	}
	return nil
}

// decide answers from the robot's scopes; ok is false when no scope allows.
// Without explain, the decision has no Rule nor Reason (Policy.decide).
func (r *Robot) decide(repo string, action Action, explain bool) (Decision, bool) {
	for i, s := range r.Scopes {
		if !slices.ContainsFunc(s.Actions, func(a Action) bool { return a.Covers(action) }) {
			continue
		}
		for _, g := range s.Repositories {
			if globMatch(g, repo) {
				if !explain {
					return Decision{Allowed: true}, true
				}
				src := fmt.Sprintf("robot %s+%s scopes[%d]", r.Namespace, r.Name, i)
				return Decision{Allowed: true, Rule: src, Reason: fmt.Sprintf("%s allows %s on %s", src, action, repo)}, true
			}
		}
	}
	return Decision{}, false
}

// RobotStore keeps robot accounts. Implementations are safe for concurrent use.
type RobotStore interface {
	// Create stores a new robot; ErrRobotExists when its name is taken,
	// even by a revoked robot.
	Create(ctx context.Context, r *Robot) error
	// Get returns the robot, revoked or not; ErrRobotNotFound when none.
	Get(ctx context.Context, namespace, name string) (*Robot, error)
	// List returns the robots of namespace ("" for every namespace), by name.
	List(ctx context.Context, namespace string) ([]*Robot, error)
	// Revoke marks the robot revoked at at; ErrRobotNotFound when none.
	Revoke(ctx context.Context, namespace, name string, at time.Time) error
	// Touch records that the robot authenticated at at.
	Touch(ctx context.Context, namespace, name string, at time.Time) error
	// Close releases the store.
	Close() error
}
