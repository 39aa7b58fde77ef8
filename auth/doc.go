// Package auth is berth's authentication and authorization: who a caller is
// (htpasswd users and their groups, robot accounts, subjects of trusted OIDC
// issuers, tokens berth issued) and the one access decision every surface
// asks, Policy.Decide(identity, repository, action), for the OCI API under
// /v2/, the catalog API under /api/v1/, the repository indexes and /metrics.
//
// Precedence is fixed and documented: a deny rule that matches the subject,
// the repository and the action wins over every allow; otherwise the action
// is allowed when any allow rule (or, for a robot, any of its scopes) grants
// it; otherwise it is denied.
package auth
