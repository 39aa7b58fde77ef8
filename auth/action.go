package auth

import (
	"fmt"
	"strings"
)

// Action is what a subject does to a repository.
type Action string

// The actions rules grant.
const (
	// Pull reads manifests, blobs, tags, referrers and catalog metadata.
	Pull Action = "pull"
	// Push uploads blobs and manifests and writes tags.
	Push Action = "push"
	// Delete removes manifests, tags and packages.
	Delete Action = "delete"
	// Sign pushes signatures and referrers of existing versions (cosign's
	// sha256-<hex>.sig/.att/.sbom tags and manifests with a subject), never
	// a package version or a version tag.
	Sign Action = "sign"
	// Admin manages a namespace (robot accounts) and implies every other action.
	Admin Action = "admin"
)

// Actions lists every action, in a fixed order.
var Actions = []Action{Pull, Push, Delete, Sign, Admin}

// ParseAction returns the action named s.
func ParseAction(s string) (Action, error) {
	for _, a := range Actions {
		if string(a) == s {
			return a, nil
		}
	}
	return "", fmt.Errorf("unknown action %q: want one of %s", s, actionNames())
}

// Covers reports whether granting a grants b: admin grants every action and
// push grants sign; every action grants itself.
func (a Action) Covers(b Action) bool {
	return a == b || a == Admin || (a == Push && b == Sign)
}

func actionNames() string {
	names := make([]string, len(Actions))
	for i, a := range Actions {
		names[i] = string(a)
	}
	return strings.Join(names, ", ")
}
