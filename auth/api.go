package auth

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"

	"github.com/berth-registry/berth/catalog/apiv1"
)

// BasicChallenge is the challenge of berth's JSON APIs (/api/v1/, /metrics):
// curl and scripts answer it with Basic credentials or a Bearer token.
const BasicChallenge = `Basic realm="berth"`

// APIOptions configure API.
type APIOptions struct {
	// Authenticator establishes who a request comes from. Required unless
	// Policy is nil.
	Authenticator Authenticator
	// Policy is the access policy; nil (auth off) makes API a no-op.
	Policy *Policy
	// Metrics count failed logins.
	Metrics *Metrics
	// Audit records failed logins.
	Audit *Auditor
}

// API is the authentication of berth's HTTP APIs outside /v2/ (/api/v1/,
// the repository indexes, /metrics): it authenticates the request's Basic
// or Bearer credentials (a user's password, a robot's secret, a token berth
// issued, an OIDC issuer's JWT) and puts the identity in the request's
// context (IdentityFrom) for the handlers' decisions. A request without
// credentials goes on as anonymous. Bad credentials are answered 401 with
// BasicChallenge, and a client that failed too often 429 with Retry-After,
// both with a JSON error document as the catalog API writes them. With a nil
// Policy, API returns the handler unchanged.
func API(opts APIOptions) func(http.Handler) http.Handler {
	if opts.Policy == nil {
		return func(next http.Handler) http.Handler { return next }
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id, err := opts.Authenticator.Authenticate(r)
			var limited *RateLimitedError
			switch {
			case err == nil:
				ctx := withRequest(WithIdentity(r.Context(), id), r)
				next.ServeHTTP(w, r.WithContext(ctx))
			case errors.As(err, &limited):
				opts.Metrics.FailedLogin("rate_limited")
				opts.Audit.Record(r, loginFailure(r, err))
				w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(limited.RetryAfter.Seconds()))))
				writeError(w, http.StatusTooManyRequests, "TOO_MANY_REQUESTS", limited.Error())
			case errors.Is(err, ErrBadCredentials):
				opts.Metrics.FailedLogin("bad_credentials")
				opts.Audit.Record(r, loginFailure(r, err))
				w.Header().Set("WWW-Authenticate", BasicChallenge)
				writeError(w, http.StatusUnauthorized, "UNAUTHORIZED",
					"authentication failed: bad credentials (a wrong password, an unknown user, a revoked or expired robot, or a bad or expired token)")
			default:
				writeError(w, http.StatusInternalServerError, "INTERNAL", "internal error: authentication failed")
			}
		})
	}
}

// MetricsGate restricts a handler (/metrics) to administrators, as AdminGate
// does, when auth.metrics is admin.
func MetricsGate(policy *Policy) func(http.Handler) http.Handler {
	return AdminGate(policy, "metrics are for administrators (auth.metrics: admin)")
}

// AdminGate restricts a handler to the subjects the policy lets administer
// everything: Decide(identity, Everything, Admin). An anonymous caller is
// challenged (401 with BasicChallenge), any other refused (403); both
// messages say what, which names what is restricted ("metrics are for
// administrators"). It reads the identity API put in the context, so it goes
// inside API. With a nil policy (auth off) it returns the handler unchanged.
func AdminGate(policy *Policy, what string) func(http.Handler) http.Handler {
	if policy == nil {
		return func(next http.Handler) http.Handler { return next }
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := IdentityFrom(r.Context())
			d := policy.Decide(id, Everything, Admin)
			switch {
			case d.Allowed:
				next.ServeHTTP(w, r)
			case id.IsAnonymous():
				w.Header().Set("WWW-Authenticate", BasicChallenge)
				writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "authentication required: "+what)
			default:
				writeError(w, http.StatusForbidden, "DENIED", what+": "+d.Reason)
			}
		})
	}
}

// loginFailure is the audit event of a failed authentication.
func loginFailure(r *http.Request, err error) Event {
	subject := Anonymous
	if user, _, ok := r.BasicAuth(); ok && user != "" {
		subject = user
	}
	return Event{Subject: subject, Action: "login", Resource: r.URL.Path, Result: ResultFailed, Reason: err.Error()}
}

// writeError writes one error as an apiv1.Errors document, the format of
// the catalog API's errors.
func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	writeJSON(w, status, apiv1.Errors{Errors: []apiv1.Error{{Code: code, Message: message}}})
}

// writeJSON writes v as a JSON document with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", apiv1.MediaTypeJSON)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
