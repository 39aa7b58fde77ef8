// Package signing is berth's provenance: cosign signatures and attestations
// of package versions, found by cosign's tag scheme (sha256-<hex>.sig and
// .att) and by the OCI referrers API, verified against a trust policy that
// maps repositories to trusted public keys. The catalog, the registry's tag
// admission and the berth CLI all verify through Check, so each gives the
// same verdict and the same reasons.
package signing
