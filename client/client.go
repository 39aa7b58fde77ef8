// Package client pushes, pulls and inspects berth packages in any OCI
// registry, on oras-go v2; signs and verifies them with cosign's formats
// (Sign, Verify, and Pull under Options.TrustPolicy, through the signing
// package), and promotes them with their signatures from one repository to
// another (Promote).
//
// A package version is one OCI image manifest (DESIGN.md, "Package artifact"):
// a metadata config blob and one gzipped tar content layer, tagged with the
// package version. References are host[:port]/namespace/name[:version] or
// ...@sha256:<hex> (ParseReference).
//
// Errors wrap one of the sentinels below with the operation and reference that
// failed; errors the registry sent also keep its *errcode.ErrorResponse in
// the chain, and their text carries the registry's code and message.
package client

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/retry"

	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/signing"
)

// Sentinel errors. Errors returned by Client methods wrap one of these when
// the cause is known.
var (
	// ErrNotFound: the repository, tag, manifest or blob does not exist.
	ErrNotFound = errors.New("not found")
	// ErrNotPackage: the artifact exists but is not a berth package.
	ErrNotPackage = errors.New("not a berth package")
	// ErrDenied: the registry refused the operation (OCI DENIED, HTTP 403),
	// e.g. pushing a different digest to an existing version.
	ErrDenied = errors.New("denied")
	// ErrUnauthorized: the registry wants credentials, or rejected the ones given.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrDigestMismatch: content did not match its digest or size.
	ErrDigestMismatch = errors.New("content does not match its digest")
	// ErrTooLarge: a manifest or blob is larger than the client accepts.
	ErrTooLarge = errors.New("too large")
	// ErrRegistry: the registry answered with another error.
	ErrRegistry = errors.New("registry error")
	// ErrInvalid: the catalog API refused a request as invalid (INVALID,
	// HTTP 400), or NewCatalog or a Catalog method was given an invalid argument.
	ErrInvalid = errors.New("invalid")
	// ErrUnavailable: the catalog API cannot answer now (UNAVAILABLE, HTTP
	// 503), or a proxy in front of it could not reach it (HTTP 502, 504).
	ErrUnavailable = errors.New("unavailable")
	// ErrConflict: the server refused a request that conflicts with work in
	// progress (CONFLICT, HTTP 409), e.g. a garbage collection while one runs.
	ErrConflict = errors.New("conflict")
)

// DefaultUserAgent is the User-Agent sent when Options.UserAgent is empty.
const DefaultUserAgent = "berth"

// DefaultProgressThreshold is the blob size from which progress is reported
// when Options.ProgressThreshold is not set.
const DefaultProgressThreshold = 4 << 20

// Options configure a Client. The zero value is a working default.
type Options struct {
	// PlainHTTP selects plain HTTP (true) or HTTPS (false) for every registry.
	// If nil, plain HTTP is used for localhost and loopback addresses (any
	// port), as docker does, and HTTPS for every other host; but HTTPS for
	// every host, loopback included, when TLS is set.
	PlainHTTP *bool

	// TLS configures the HTTPS connections: the certificate authorities
	// trusted, a client certificate (TLSOptions.Config reads them from
	// files). If nil, the system's authorities are trusted. When
	// HTTPClient is set, its transport's TLS settings apply instead, and
	// TLS only selects HTTPS on loopback (PlainHTTP).
	TLS *tls.Config

	// Credentials resolves the credentials for a registry, and keeps those
	// of Login. If nil, the Docker config file is used
	// (NewCredentialStore("")), as docker, oras and helm do.
	Credentials credentials.Store

	// UserAgent is sent with every request. If empty, DefaultUserAgent is used.
	UserAgent string

	// HTTPClient sends the requests. If nil, a client that retries as
	// oras-go's retry.DefaultClient does is used, with the TLS settings.
	HTTPClient *http.Client

	// Progress, if not nil, is called as blobs of at least ProgressThreshold
	// bytes are pushed or pulled. Smaller blobs report nothing.
	Progress func(Progress)

	// ProgressThreshold is the smallest blob size that reports progress. If
	// <= 0, DefaultProgressThreshold is used.
	ProgressThreshold int64

	// TrustPolicy, if not nil, is enforced by Pull and Promote. Pull checks
	// the signatures of a version whose repository the policy covers before
	// downloading it, and refuses it (ErrUnverified) when the policy
	// requires a verified signature and none verifies. Promote checks the
	// source's signatures against the destination's policy before copying
	// anything, in the same way.
	TrustPolicy *signing.Policy

	// Package tunes how pulled packages are read: limits (the zero value
	// uses pkgformat's defaults; MaxArchiveSize caps the content download),
	// and the name and version of packages that carry none. Packages pushed
	// with the empty config that carry no name or version take them from the
	// reference (repository name and tag).
	Package pkgformat.Options
}

// Client pushes, pulls and inspects berth packages. It is safe for concurrent use.
type Client struct {
	opts  Options
	auth  *auth.Client
	store credentials.Store
	// once sends requests without retrying them: Options.HTTPClient, else
	// one over transport.
	once *http.Client
	// transport is the transport of once, for cosign's libraries.
	transport http.RoundTripper
}

// New returns a Client. It returns an error if Options.Credentials is nil and
// the Docker config file exists but cannot be read.
func New(opts Options) (*Client, error) {
	store := opts.Credentials
	if store == nil {
		docker, err := NewCredentialStore("")
		if err != nil {
			return nil, fmt.Errorf("read docker credentials: %w", err)
		}
		store = docker
	}
	if opts.UserAgent == "" {
		opts.UserAgent = DefaultUserAgent
	}
	if opts.ProgressThreshold <= 0 {
		opts.ProgressThreshold = DefaultProgressThreshold
	}
	httpClient, once := opts.HTTPClient, opts.HTTPClient
	if httpClient == nil {
		base := transport(opts.TLS)
		httpClient, once = &http.Client{Transport: retry.NewTransport(base)}, &http.Client{Transport: base}
	}
	return &Client{
		opts:      opts,
		store:     store,
		once:      once,
		transport: cmp.Or(once.Transport, http.DefaultTransport),
		auth: &auth.Client{
			Client:     httpClient,
			Header:     http.Header{"User-Agent": {opts.UserAgent}},
			Cache:      auth.NewCache(),
			Credential: credentials.Credential(store),
		},
	}, nil
}

// PlainHTTP reports whether the client talks plain HTTP to the registry
// host[:port].
func (c *Client) PlainHTTP(registryHost string) bool {
	if c.opts.PlainHTTP != nil {
		return *c.opts.PlainHTTP
	}
	return c.opts.TLS == nil && isLoopback(registryHost)
}

// isLoopback reports whether host[:port] names this machine: localhost or a
// loopback IP address (127.0.0.0/8, ::1).
func isLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// repository returns the oras-go repository that ref lives in.
func (c *Client) repository(ref Reference) *remote.Repository {
	return c.Repository(ref.Registry, ref.Repository())
}

// Repository returns the oras-go repository of the registry host[:port]
// named repository, reached with the client's credentials and HTTP rules.
func (c *Client) Repository(registryHost, repository string) *remote.Repository {
	return &remote.Repository{
		Client:    c.auth,
		Reference: registry.Reference{Registry: registryHost, Repository: repository},
		PlainHTTP: c.PlainHTTP(registryHost),
	}
}

// Registry returns the oras-go registry at host[:port], reached with the
// client's credentials and HTTP rules: for listing its repositories.
func (c *Client) Registry(registryHost string) *remote.Registry {
	return &remote.Registry{RepositoryOptions: remote.RepositoryOptions{
		Client:    c.auth,
		Reference: registry.Reference{Registry: registryHost},
		PlainHTTP: c.PlainHTTP(registryHost),
	}}
}
