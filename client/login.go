package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

// ErrRateLimited: the server refuses the request for now (HTTP 429), as berth
// does after too many failed logins.
var ErrRateLimited = errors.New("rate limited")

// NewCredentialStore returns the credential store of a Docker config file,
// the one docker, oras and helm use: configPath, or when empty
// $DOCKER_CONFIG/config.json, else ~/.docker/config.json. Credentials of a
// host go through the credential helper the file names for it
// (credHelpers), else its credsStore, else, when the file configures neither
// and holds no credentials yet, through the platform's default helper when it
// is installed (osxkeychain, wincred, pass or secretservice), else into the
// file itself.
func NewCredentialStore(configPath string) (credentials.Store, error) {
	opts := credentials.StoreOptions{AllowPlaintextPut: true, DetectDefaultNativeStore: true}
	if configPath == "" {
		return credentials.NewStoreFromDocker(opts)
	}
	return credentials.NewStore(configPath, opts)
}

// Login checks cred against the registry at host (host[:port]) and stores it
// in the client's credential store under host, as oras login does. The check
// pings /v2/ with cred, through the registry's token service when it
// challenges with Bearer. Errors start with "login to HOST failed" and wrap
// ErrInvalid (a bad host or empty credentials), ErrUnauthorized (the
// registry refused cred), ErrRateLimited (too many failed logins; the
// message says when to retry) or the registry's or the store's error.
func (c *Client) Login(ctx context.Context, host string, cred auth.Credential) error {
	prefix := "login to " + host + " failed"
	if err := checkLoginHost(host); err != nil {
		return fmt.Errorf("%s: %w: %v", prefix, ErrInvalid, err)
	}
	if cred == auth.EmptyCredential || (cred.Username != "" && cred.Password == "") {
		return fmt.Errorf("%s: %w: a password or an identity token is required", prefix, ErrInvalid)
	}
	rec := &retryAfterRecorder{}
	reg := &remote.Registry{RepositoryOptions: remote.RepositoryOptions{
		Client:    &auth.Client{Client: rec.wrap(c.once), Header: c.auth.Header},
		Reference: registry.Reference{Registry: host},
		PlainHTTP: c.PlainHTTP(host),
	}}
	err := credentials.Login(ctx, c.store, reg, cred)
	if err == nil {
		return nil
	}
	var resp *errcode.ErrorResponse
	if errors.As(err, &resp) && resp.StatusCode == http.StatusTooManyRequests {
		return &opError{msg: prefix + ": " + rateLimitMessage(rec.get()), kind: ErrRateLimited, cause: err}
	}
	return classify(prefix, host, err)
}

// Logout removes the credentials stored for host from the client's
// credential store (or its credential helper), as oras logout does. It
// reports whether any were stored. When they are an identity token (a
// refresh token, which docker login keeps from berth), Logout first revokes
// it at the registry (revokeIdentityToken), so that no copy of it works any
// more; when that fails, the credentials stay stored and the error says
// why, so that logout can be run again.
func (c *Client) Logout(ctx context.Context, host string) (bool, error) {
	if err := checkLoginHost(host); err != nil {
		return false, fmt.Errorf("logout from %s: %w: %v", host, ErrInvalid, err)
	}
	cred, err := c.store.Get(ctx, credentials.ServerAddressFromRegistry(host))
	if err != nil {
		return false, fmt.Errorf("logout from %s: %w", host, err)
	}
	if cred == auth.EmptyCredential {
		return false, nil
	}
	if cred.RefreshToken != "" {
		if err := c.revokeIdentityToken(ctx, host, cred.RefreshToken); err != nil {
			return false, fmt.Errorf("logout from %s: the stored identity token could not be revoked, so the credentials are still stored: %w", host, err)
		}
	}
	if err := credentials.Logout(ctx, c.store, host); err != nil {
		return false, fmt.Errorf("logout from %s: %w", host, err)
	}
	return true, nil
}

// bearerRealm is the realm of a Bearer challenge; "" for any other.
var bearerRealm = regexp.MustCompile(`(?i)^Bearer\s.*\brealm="([^"]+)"`)

// revokeIdentityToken revokes token at the revocation endpoint beside the
// token service that host's /v2/ challenge names: for a realm .../token,
// .../revoke, with the form token=TOKEN (RFC 7009), as berth serves
// /auth/token and /auth/revoke. A registry whose challenge names no such
// realm, or that answers 404 or 405 there, cannot revoke tokens: nothing is
// done then.
func (c *Client) revokeIdentityToken(ctx context.Context, host, token string) error {
	scheme := "https"
	if c.PlainHTTP(host) {
		scheme = "http"
	}
	ping, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+host+"/v2/", nil)
	if err != nil {
		return err
	}
	resp, err := c.auth.Client.Do(ping)
	if err != nil {
		return err
	}
	resp.Body.Close()
	m := bearerRealm.FindStringSubmatch(resp.Header.Get("WWW-Authenticate"))
	if m == nil {
		return nil
	}
	base, ok := strings.CutSuffix(m[1], "/token")
	if !ok {
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/revoke", strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = c.auth.Client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK, http.StatusNotFound, http.StatusMethodNotAllowed:
		return nil
	}
	return fmt.Errorf("POST %s/revoke: %s", base, resp.Status)
}

// checkLoginHost checks the host of Login and Logout: host[:port], which is
// what credentials are stored under, not a URL.
func checkLoginHost(host string) error {
	if strings.Contains(host, "://") {
		return fmt.Errorf("want host[:port], not a URL (got %q)", host)
	}
	return checkHost(host)
}

// rateLimitMessage says that the server refuses logins for now, and for how
// long when it said so (Retry-After).
func rateLimitMessage(retryAfter time.Duration) string {
	if retryAfter <= 0 {
		return "too many failed logins, retry later"
	}
	return fmt.Sprintf("too many failed logins, retry in %s", retryAfter.Round(time.Second))
}

// parseRetryAfter reads a Retry-After header in seconds; 0 when absent or
// given as a date.
func parseRetryAfter(h http.Header) time.Duration {
	s, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || s < 0 {
		return 0
	}
	return time.Duration(s) * time.Second
}

// retryAfterRecorder keeps the Retry-After of the last 429 answer a client
// got: the token service's answer does not reach the caller of oras-go.
type retryAfterRecorder struct {
	mu    sync.Mutex
	after time.Duration
	base  http.RoundTripper
}

// wrap returns an HTTP client that sends through hc (the client's without
// retries, so that a refused login is not repeated) and records into r.
func (r *retryAfterRecorder) wrap(hc *http.Client) *http.Client {
	wrapped := *hc
	r.base = cmp.Or(wrapped.Transport, http.DefaultTransport)
	wrapped.Transport = r
	return &wrapped
}

// RoundTrip implements http.RoundTripper.
func (r *retryAfterRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.base.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		r.mu.Lock()
		r.after = parseRetryAfter(resp.Header)
		r.mu.Unlock()
	}
	return resp, err
}

func (r *retryAfterRecorder) get() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.after
}
