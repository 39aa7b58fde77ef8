// Package mirror carries chosen package versions, with their signatures,
// attestations and referrers, from one registry to another: through an
// archive on removable media across an air gap (Export, Import), or
// registry to registry (Sync).
//
// An archive is an OCI image layout (oci-layout, index.json, blobs/) plus
// berth's archive manifest, berth-mirror.json, which lists the selection,
// every version with the digests of everything it needs, and what the
// archive carries, and optionally berth-mirror.json.sig, its signature in
// cosign sign-blob format. A tar archive split for media limits is a
// series of parts, each ending with berth-part.json, the list of the blobs
// it holds, so that each can be checked on its own. Deltas come from what the far side actually holds (an
// Inventory, or the manifest of the previous archive), never from a history
// kept on the sending side.
package mirror
