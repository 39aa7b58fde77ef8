package auth

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// ErrBadCredentials is wrapped by every authentication failure that
// credentials caused: an unknown user, a wrong password, a bad or expired
// token, a revoked or expired robot. Callers answer it with 401.
var ErrBadCredentials = errors.New("bad credentials")

// RateLimitedError refuses a login attempt from a client that failed too
// often; callers answer it with 429 and Retry-After.
type RateLimitedError struct {
	// RetryAfter is how long until the client may try again.
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("too many failed logins; retry in %s", e.RetryAfter.Round(time.Second))
}

// Authenticator establishes who a request comes from.
type Authenticator interface {
	// Authenticate returns the identity the request's credentials prove,
	// AnonymousIdentity() when it carries none, or an error wrapping
	// ErrBadCredentials, or a *RateLimitedError.
	Authenticate(r *http.Request) (Identity, error)
}
