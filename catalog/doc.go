// Package catalog is berth's search and metadata sidecar (DESIGN.md, "The
// catalog"). It indexes what is inside every package the registry holds —
// fed by the registry's push and delete events and reconciled against the
// registry's tags — into a Store, and answers searches, package and version
// details, upgrade graphs and the change feed.
package catalog
