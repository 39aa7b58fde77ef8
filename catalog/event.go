package catalog

import "github.com/berth-registry/berth/registry"

// Event tells the catalog that a tag was written or removed, or a manifest
// deleted, in a repository: the embedded registry's events, or those a
// remote registry's notification webhook reports. Events are hints: the
// catalog re-reads the registry rather than trusting them, and the
// reconciler repairs whatever events were lost.
type Event = registry.Event

// Event actions.
const (
	EventPush   = registry.EventPush
	EventDelete = registry.EventDelete
)
