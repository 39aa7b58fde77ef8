// Package olm makes what berth stores installable by the Operator Lifecycle
// Manager (DESIGN.md, "OLM integration"; docs/olm.md).
//
//   - BuildBundle turns an indexed OLM package version into a registry+v1
//     bundle image: an ordinary OCI image whose config carries the bundle
//     labels and whose one layer holds manifests/ and
//     metadata/annotations.yaml. It is stored by digest in the version's own
//     repository with the version's manifest as its subject, so that it is
//     found (referrers API), mirrored and deleted with the version. The bytes
//     depend on the version's content alone: the same version always yields
//     the same digest.
//   - RenderPackage writes one package's file-based catalog (FBC): its
//     olm.package, olm.channel and olm.bundle documents, channels as
//     operator-registry's loader forms them (catalog/graph).
//   - Publisher keeps one FBC catalog image per namespace at
//     CatalogRepository(namespace):CatalogTag, its packages spread over at
//     most 128 layers by a hash of their names, so a push or delete
//     re-renders one package, rebuilds its layer and the manifest, and
//     every other layer is reused by digest.
//
// Everything here is derived from content the catalog read and checked;
// nothing a client claims in a config blob or a label is copied.
package olm
