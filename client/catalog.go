package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/opencontainers/go-digest"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/permissions"
	"github.com/berth-registry/berth/pkgformat"
)

const (
	// apiPath is where the catalog API lives on a berth server.
	apiPath = "/api/v1"
	// maxCatalogResponse caps a successful response. The largest document is
	// a Version: its metadata (up to a 16 MiB file's worth of text) plus the
	// file list and signatures.
	maxCatalogResponse = 32 << 20
	// maxInventoryResponse caps an inventory: some three million digests
	// over all repositories.
	maxInventoryResponse = 256 << 20
	// maxErrorBody caps how much of an error response is read.
	maxErrorBody = 64 << 10
)

// SearchOptions select and order the packages of a search; they are the query
// parameters of GET /api/v1/packages. The zero value lists every package the
// caller may see, one page of the server's default size.
type SearchOptions struct {
	// Query is matched against names (exact, then prefix) and the full text
	// of display names, descriptions, keywords, maintainers and provided APIs.
	Query string
	// Namespace keeps the packages of one namespace.
	Namespace string
	// Format keeps the packages of one format.
	Format pkgformat.Format
	// Channel keeps the packages with a version in this channel.
	Channel string
	// Provides keeps the packages that provide an API: "group", "Kind" or
	// "group/Kind".
	Provides string
	// KubeVersion keeps the packages with a version that supports this
	// Kubernetes version.
	KubeVersion string
	// Image keeps the packages with a version that runs this image: a
	// repository (quay.io/org/img, or nginx for docker.io/library/nginx),
	// narrowed to one reference by a tag or digest.
	Image string
	// Verified, if not nil, keeps the packages whose latest version is (or is
	// not) verified.
	Verified *bool
	// Sort is apiv1.SortRelevance, SortName or SortUpdated; empty is the server's
	// default (SortRelevance).
	Sort string
	// Limit is the page size, at most apiv1.MaxLimit; 0 or less is the
	// server's default.
	Limit int
	// Cursor starts the page where a previous one ended (its Next).
	Cursor string
}

// values returns the options as query parameters, leaving out empty ones.
func (o SearchOptions) values() url.Values {
	q := url.Values{}
	for _, p := range []struct{ key, value string }{
		{"q", o.Query}, {"namespace", o.Namespace}, {"format", string(o.Format)}, {"channel", o.Channel},
		{"provides", o.Provides}, {"kubeVersion", o.KubeVersion}, {"image", o.Image}, {"sort", o.Sort}, {"cursor", o.Cursor},
	} {
		if p.value != "" {
			q.Set(p.key, p.value)
		}
	}
	if o.Verified != nil {
		q.Set("verified", strconv.FormatBool(*o.Verified))
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	return q
}

// Catalog reads a berth server's catalog API (/api/v1): package search,
// package and version details, upgrade paths. It is safe for concurrent use.
//
// Errors of its methods start with what was asked for ("search",
// "kudo/kafka") and wrap the sentinel that matches the server's error code:
// ErrNotFound (NOT_FOUND), ErrInvalid (INVALID), ErrDenied (DENIED),
// ErrUnauthorized, ErrUnavailable (UNAVAILABLE) or ErrRegistry (INTERNAL, or
// an answer that is not the catalog API's), followed by the server's message:
// "kudo/kafka: not found: package kudo/kafka has no version 9.9.9".
// ErrTooLarge means a response exceeded the client's cap. A namespace, name
// or version that cannot be valid is refused with ErrInvalid before anything
// is sent. A server that cannot be reached gives an error naming its URL that
// wraps the transport's.
type Catalog struct {
	// base is the API's URL, scheme://host[:port][/prefix]/api/v1.
	base   string
	client *auth.Client
}

// NewCatalog returns a Catalog for the berth server at server: host[:port],
// or a URL http(s)://host[:port][/path] when the server is behind a path
// prefix (a trailing /api/v1 is accepted). A host[:port] is reached over
// HTTPS, except as Options.PlainHTTP says (by default plain HTTP for
// localhost and loopback addresses); the scheme of a URL is used as given.
//
// Credentials, UserAgent and HTTPClient of opts are used as by New, so that
// the catalog API can be authenticated like the registry. It returns an error
// wrapping ErrInvalid when server is malformed, or New's error.
func NewCatalog(server string, opts Options) (*Catalog, error) {
	c, err := New(opts)
	if err != nil {
		return nil, err
	}
	base, err := c.catalogURL(server)
	if err != nil {
		return nil, err
	}
	return &Catalog{base: base, client: c.auth}, nil
}

// Catalog returns a Catalog for the berth server at server, as NewCatalog
// takes it, reached with the client's credentials and HTTP rules. It
// returns an error wrapping ErrInvalid when server is malformed.
func (c *Client) Catalog(server string) (*Catalog, error) {
	base, err := c.catalogURL(server)
	if err != nil {
		return nil, err
	}
	return &Catalog{base: base, client: c.auth}, nil
}

// catalogURL resolves the server argument of NewCatalog to the API's URL.
func (c *Client) catalogURL(server string) (string, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w server %q: %s: want host[:port] or http(s)://host[:port][/path]", ErrInvalid, server, fmt.Sprintf(format, args...))
	}
	switch {
	case server == "":
		return "", invalid("empty")
	case strings.ContainsFunc(server, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return "", invalid("contains white space or control characters")
	}
	if !strings.Contains(server, "://") {
		if err := checkHost(server); err != nil {
			return "", invalid("%s", err)
		}
		scheme := "https"
		if c.PlainHTTP(server) {
			scheme = "http"
		}
		return scheme + "://" + server + apiPath, nil
	}
	u, err := url.Parse(server)
	switch {
	case err != nil:
		return "", invalid("%s", errors.Unwrap(err))
	case u.Scheme != "http" && u.Scheme != "https":
		return "", invalid("scheme %q is neither http nor https", u.Scheme)
	case u.User != nil:
		return "", invalid("credentials in the URL are not supported (log in with berth login HOST)")
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return "", invalid("a query or fragment is not allowed")
	}
	if err := checkHost(u.Host); err != nil {
		return "", invalid("%s", err)
	}
	path := strings.TrimSuffix(strings.TrimRight(u.EscapedPath(), "/"), apiPath)
	return u.Scheme + "://" + u.Host + path + apiPath, nil
}

// Search returns one page of the packages that match opts, ranked, with
// facet counts over all matches and the cursor of the next page. Options
// are checked by the server: what it refuses gives an error wrapping
// ErrInvalid with its message.
func (c *Catalog) Search(ctx context.Context, opts SearchOptions) (*apiv1.SearchResponse, error) {
	var res apiv1.SearchResponse
	if err := c.get(ctx, "search", "/packages", opts.values(), &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// SearchAll is Search following the cursors from opts.Cursor to the last
// page. It returns every package once, in the server's order, with the
// Facets and Total of the first page and an empty Next. It fails with
// ErrRegistry if the server sends a cursor twice or an empty page that is
// not the last.
func (c *Catalog) SearchAll(ctx context.Context, opts SearchOptions) (*apiv1.SearchResponse, error) {
	page, err := c.Search(ctx, opts)
	if err != nil {
		return nil, err
	}
	all := &apiv1.SearchResponse{Facets: page.Facets, Total: page.Total, Packages: make([]apiv1.PackageSummary, 0, len(page.Packages))}
	seen := map[string]bool{}
	cursors := map[string]bool{opts.Cursor: true}
	for {
		for _, p := range page.Packages {
			if key := p.Namespace + "/" + p.Name; !seen[key] {
				seen[key] = true
				all.Packages = append(all.Packages, p)
			}
		}
		switch {
		case page.Next == "":
			return all, nil
		case cursors[page.Next]:
			return nil, fmt.Errorf("search: %w: %s sent cursor %q twice", ErrRegistry, c.base, page.Next)
		case len(page.Packages) == 0:
			return nil, fmt.Errorf("search: %w: %s sent an empty page with a next cursor", ErrRegistry, c.base)
		}
		cursors[page.Next] = true
		opts.Cursor = page.Next
		if page, err = c.Search(ctx, opts); err != nil {
			return nil, err
		}
	}
}

// Package returns a package: its versions (newest first), channels, default
// channel, maintainers and the tags that are not served as versions.
// namespace and name must be OCI path components, as in ParseReference.
func (c *Catalog) Package(ctx context.Context, namespace, name string) (*apiv1.Package, error) {
	op, path, err := packagePath(namespace, name)
	if err != nil {
		return nil, err
	}
	var res apiv1.Package
	if err := c.get(ctx, op, path, nil, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Version returns one version of a package: its metadata, digest, pull
// reference, files and signatures. The version may be given as the package
// has it or as its tag ('+' written '_', see pkgformat.Tag).
func (c *Catalog) Version(ctx context.Context, namespace, name, version string) (*apiv1.Version, error) {
	var res apiv1.Version
	if err := c.versionGet(ctx, namespace, name, version, "", &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Upgrades returns the head of a channel of a package, the versions that
// from upgrades to directly, and the shortest upgrade path from from to the
// head. An empty channel is the package's default channel.
func (c *Catalog) Upgrades(ctx context.Context, namespace, name, from, channel string) (*apiv1.Upgrades, error) {
	op, path, err := packagePath(namespace, name)
	if err != nil {
		return nil, err
	}
	if err := pkgformat.ValidVersion(from); err != nil {
		return nil, fmt.Errorf("%s: %w: from: %w", op, ErrInvalid, err)
	}
	q := url.Values{"from": {from}}
	if channel != "" {
		q.Set("channel", channel)
	}
	var res apiv1.Upgrades
	if err := c.get(ctx, op, path+"/upgrades", q, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Graph returns the upgrade graph of a channel of a package: its versions,
// each with the rating of its permissions, and its edges, each marked when
// the upgrade widens permissions.
func (c *Catalog) Graph(ctx context.Context, namespace, name, channel string) (*apiv1.Graph, error) {
	op, path, err := packagePath(namespace, name)
	if err != nil {
		return nil, err
	}
	if channel == "" {
		return nil, fmt.Errorf("%s: %w: a channel is required", op, ErrInvalid)
	}
	var res apiv1.Graph
	if err := c.get(ctx, op, path+"/channels/"+url.PathEscape(channel)+"/graph", nil, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Permissions returns the review of the permissions a version asks for and,
// when from is not empty, what upgrading to it from version from changes.
func (c *Catalog) Permissions(ctx context.Context, namespace, name, version, from string) (*apiv1.Permissions, error) {
	op, path, err := packagePath(namespace, name)
	if err != nil {
		return nil, err
	}
	if err := pkgformat.ValidVersion(version); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", op, ErrInvalid, err)
	}
	var q url.Values
	if from != "" {
		if err := pkgformat.ValidVersion(from); err != nil {
			return nil, fmt.Errorf("%s: %w: from: %w", op, ErrInvalid, err)
		}
		q = url.Values{"from": {from}}
	}
	var res apiv1.Permissions
	if err := c.get(ctx, op, path+"/versions/"+url.PathEscape(pkgformat.Tag(version))+"/permissions", q, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Approve records, for a namespace that refuses versions asking for more
// than was admitted for their package, that version may be tagged with exactly the
// permissions whose fingerprint (sha256:…) the refused push named. The
// caller must administer the package.
func (c *Catalog) Approve(ctx context.Context, namespace, name, version, fingerprint string) (*apiv1.Approval, error) {
	op, path, err := packagePath(namespace, name)
	if err != nil {
		return nil, err
	}
	if err := pkgformat.ValidVersion(version); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", op, ErrInvalid, err)
	}
	if err := permissions.ValidFingerprint(fingerprint); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", op, ErrInvalid, err)
	}
	var res apiv1.Approval
	body := map[string]string{"permissions": fingerprint}
	if err := c.do(ctx, op, http.MethodPost, path+"/versions/"+url.PathEscape(pkgformat.Tag(version))+"/approval", nil, body, http.StatusCreated, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Changes returns one page of the change feed after sequence number since,
// oldest first, at most limit changes (0 or less: the server's default);
// Changes.Next is where the following page starts.
func (c *Catalog) Changes(ctx context.Context, since int64, limit int) (*apiv1.Changes, error) {
	q := url.Values{"since": {strconv.FormatInt(since, 10)}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var res apiv1.Changes
	if err := c.get(ctx, "changes", "/changes", q, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Inventory returns what the server's registry holds: for each repository
// the caller may pull, the digests of the manifests and blobs its storage
// holds (GET /api/v1/inventory). Registry is left empty. A server that has
// no inventory to give (it answers 404, 405 or 501: a registry that is not
// berth, an older berth, or berth serve catalog, which has no storage)
// gives an error that also wraps errors.ErrUnsupported. An answer that is
// not an inventory document is an error wrapping ErrRegistry.
func (c *Catalog) Inventory(ctx context.Context) (*apiv1.Inventory, error) {
	const op = "inventory"
	var inv apiv1.Inventory
	err := c.send(ctx, op, http.MethodGet, "/inventory", nil, nil, http.StatusOK, maxInventoryResponse, &inv)
	switch {
	case err != nil:
		return nil, unsupported(err, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented)
	case inv.MediaType != apiv1.InventoryMediaType:
		return nil, &opError{
			msg:  fmt.Sprintf("%s: %s: %s answered a document of media type %q, not an inventory (%s)", op, ErrRegistry, c.base+"/inventory", inv.MediaType, apiv1.InventoryMediaType),
			kind: ErrRegistry,
		}
	}
	if inv.Repositories == nil {
		inv.Repositories = map[string][]digest.Digest{}
	}
	return &inv, nil
}

// unsupported is err, also wrapping errors.ErrUnsupported when it is an
// answer of the catalog API with one of the statuses given: those by which
// a server says it has no such endpoint or cannot answer it.
func unsupported(err error, statuses ...int) error {
	var oe *opError
	if errors.As(err, &oe) && slices.Contains(statuses, oe.status) {
		return fmt.Errorf("%w: %w", err, errors.ErrUnsupported)
	}
	return err
}

// packagePath checks a namespace and name and returns them as the prefix of
// errors, namespace/name, and as the API path of the package.
func packagePath(namespace, name string) (op, path string, err error) {
	op = namespace + "/" + name
	if err := checkNames(op, namespace, name); err != nil {
		return "", "", err
	}
	return op, "/packages/" + url.PathEscape(namespace) + "/" + url.PathEscape(name), nil
}

// checkNames checks a namespace and a name as OCI path components; op
// starts the error, which wraps ErrInvalid.
func checkNames(op, namespace, name string) error {
	for _, c := range []struct{ what, value string }{{"namespace", namespace}, {"name", name}} {
		if err := checkComponent(c.what, c.value); err != nil {
			return fmt.Errorf("%s: %w: %v", op, ErrInvalid, err)
		}
	}
	return nil
}

// get sends GET base+path?query and decodes the JSON answer into out. op
// starts every error.
func (c *Catalog) get(ctx context.Context, op, path string, query url.Values, out any) error {
	return c.do(ctx, op, http.MethodGet, path, query, nil, http.StatusOK, out)
}

// do sends method base+path?query, with body as JSON when it is not nil and
// the credentials stored for the server (see authorize), and decodes the
// JSON answer into out when it is not nil. An answer other than want is an
// error; op starts every error.
func (c *Catalog) do(ctx context.Context, op, method, path string, query url.Values, body any, want int, out any) error {
	return c.send(ctx, op, method, path, query, body, want, maxCatalogResponse, out)
}

// send is do with a cap of limit bytes on the answer.
func (c *Catalog) send(ctx context.Context, op, method, path string, query url.Values, body any, want int, limit int64, out any) error {
	endpoint := c.base + path
	target := endpoint
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var reqBody io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		reqBody = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, reqBody)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	req.Header.Set("Accept", apiv1.MediaTypeJSON)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if err := c.authorize(req); err != nil {
		return c.transportError(op, err)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return c.transportError(op, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		return c.responseError(op, endpoint, resp)
	}
	if out == nil {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return fmt.Errorf("%s: read the answer of %s: %w", op, endpoint, err)
	}
	if int64(len(data)) > limit {
		return fmt.Errorf("%s: %w: the answer of %s is larger than %d MiB", op, ErrTooLarge, endpoint, limit>>20)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &opError{
			msg:  fmt.Sprintf("%s: %s: %s answered with %s, not a berth catalog API document: %v", op, ErrRegistry, endpoint, bodyKind(resp), err),
			kind: ErrRegistry, cause: err,
		}
	}
	return nil
}

// authorize sets the Authorization header of a request to the API from the
// credentials stored for the server's host, whether or not the server asks
// for them: an anonymous search succeeds with fewer packages, so waiting for
// a challenge would hide what the caller may see. A user name and password
// go as Basic; an identity (refresh) token is exchanged for an access token
// at the token service the server's /v2/ challenge names (POST, grant_type
// refresh_token), sent as Bearer; a registry token goes as Bearer. Without
// stored credentials the request goes as it is, and c.client answers a
// challenge if one comes.
func (c *Catalog) authorize(req *http.Request) error {
	ctx := req.Context()
	host := req.URL.Host
	cred, err := c.client.Credential(ctx, host)
	if err != nil {
		return fmt.Errorf("read the credentials stored for %s: %w", host, err)
	}
	switch {
	case cred.Username != "" && cred.Password != "":
		req.SetBasicAuth(cred.Username, cred.Password)
	case cred.RefreshToken != "":
		token, err := c.accessToken(ctx, req.URL)
		if err != nil {
			return err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
	case cred.AccessToken != "":
		req.Header.Set("Authorization", "Bearer "+cred.AccessToken)
	}
	return nil
}

// accessToken returns an access token for the host of u, which c.client
// fetches with the stored identity token as it answers the challenge of the
// host's /v2/ and keeps in its cache, or renews when the server no longer
// takes the cached one; "" when /v2/ does not ask for a Bearer token.
func (c *Catalog) accessToken(ctx context.Context, u *url.URL) (string, error) {
	ping, err := http.NewRequestWithContext(ctx, http.MethodGet, u.Scheme+"://"+u.Host+"/v2/", nil)
	if err != nil {
		return "", err
	}
	resp, err := c.client.Do(ping)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	token, _ := c.client.Cache.GetToken(ctx, u.Host, auth.SchemeBearer, "")
	return token, nil
}

// transportError describes a request that got no HTTP answer from the
// server, or failed in authentication.
func (c *Catalog) transportError(op string, err error) error {
	var resp *errcode.ErrorResponse
	switch {
	case errors.As(err, &resp):
		if resp.StatusCode == http.StatusTooManyRequests {
			return &opError{msg: op + ": " + rateLimitMessage(0), kind: ErrRateLimited, cause: err}
		}
		kind := responseKind(resp)
		return &opError{msg: op + ": " + kind.Error() + ": " + describeResponse(resp) + c.authHint(resp.StatusCode), kind: kind, cause: err}
	case errors.Is(err, auth.ErrBasicCredentialNotFound):
		return &opError{msg: op + ": " + ErrUnauthorized.Error() + ": " + c.base + " asks for credentials and none are stored for its host" +
			" (run berth login " + c.Host() + ")", kind: ErrUnauthorized, cause: err}
	}
	cause := err
	var uerr *url.Error
	if errors.As(err, &uerr) {
		cause = uerr.Err // without the method and URL, which the message names
	}
	return &opError{msg: fmt.Sprintf("%s: cannot reach the berth server at %s: %v", op, c.base, cause), cause: err}
}

// responseError describes an answer other than the one expected: the API's
// JSON error document, or whatever else the server (or a proxy) sent. A 401,
// 403 or 429 says what to do about it.
func (c *Catalog) responseError(op, endpoint string, resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if resp.StatusCode == http.StatusTooManyRequests {
		return &opError{msg: op + ": " + rateLimitMessage(parseRetryAfter(resp.Header)), kind: ErrRateLimited}
	}
	var doc apiv1.Errors
	if json.Unmarshal(body, &doc) == nil && len(doc.Errors) > 0 {
		kind := errorsKind(doc.Errors, resp.StatusCode)
		return &opError{msg: op + ": " + kind.Error() + ": " + describeErrors(doc.Errors) + c.authHint(resp.StatusCode), kind: kind, status: resp.StatusCode}
	}
	kind := statusKind(resp.StatusCode)
	msg := fmt.Sprintf("%s answered %s with %s, not a berth API error", endpoint, resp.Status, bodyKind(resp))
	if snippet := bodySnippet(body); snippet != "" {
		msg += ": " + strconv.Quote(snippet)
	}
	if resp.StatusCode == http.StatusNotFound {
		// A 404 that is not the API's own says nothing about the package:
		// the server is likely not a berth server with the catalog API.
		kind = ErrRegistry
		msg += " (does this server run the berth catalog API?)"
	}
	return &opError{msg: op + ": " + kind.Error() + ": " + msg + c.authHint(resp.StatusCode), kind: kind, status: resp.StatusCode}
}

// authHint says what to do about a 401 or 403 from the API; "" for any
// other status.
func (c *Catalog) authHint(status int) string {
	host := c.Host()
	switch status {
	case http.StatusUnauthorized:
		return " (run berth login " + host + ")"
	case http.StatusForbidden:
		return " (log in as someone allowed to do this: berth login " + host + ")"
	}
	return ""
}

// Host is the host[:port] of the berth server, as berth login takes it.
func (c *Catalog) Host() string {
	u, err := url.Parse(c.base)
	if err != nil {
		return c.base
	}
	return u.Host
}

// catalogCodes maps the catalog API's error codes to sentinels.
var catalogCodes = map[string]error{
	"NOT_FOUND":   ErrNotFound,
	"INVALID":     ErrInvalid,
	"DENIED":      ErrDenied,
	"UNAVAILABLE": ErrUnavailable,
	"INTERNAL":    ErrRegistry,
	"CONFLICT":    ErrConflict,
}

// errorsKind classifies an error document by its first known code, else by
// the HTTP status.
func errorsKind(errs []apiv1.Error, status int) error {
	for _, e := range errs {
		if kind, ok := catalogCodes[e.Code]; ok {
			return kind
		}
	}
	return statusKind(status)
}

// statusKind classifies an error response by its HTTP status.
func statusKind(status int) error {
	switch status {
	case http.StatusBadRequest:
		return ErrInvalid
	case http.StatusUnauthorized:
		return ErrUnauthorized
	case http.StatusForbidden:
		return ErrDenied
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return ErrUnavailable
	}
	return ErrRegistry
}

// describeErrors renders the server's messages, with their detail when it
// is text: "package kudo/kafka has no version 9.9.9".
func describeErrors(errs []apiv1.Error) string {
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, errorMessage(e.Message, e.Code, e.Detail))
	}
	return strings.Join(msgs, "; ")
}

// bodyKind names the media type of a response body: "a text/html body",
// "an application/json body", "an empty body" or "a body of no declared type".
func bodyKind(resp *http.Response) string {
	if resp.ContentLength == 0 {
		return "an empty body"
	}
	mediaType, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil {
		return "a body of no declared type"
	}
	if strings.ContainsAny(mediaType[:1], "aeiou") {
		return "an " + mediaType + " body"
	}
	return "a " + mediaType + " body"
}

// bodySnippet returns the start of a body as one line of printable text, or
// "" if it has none.
func bodySnippet(body []byte) string {
	const maxRunes = 120
	text := strings.Join(strings.FieldsFunc(string(body), func(r rune) bool {
		return unicode.IsSpace(r) || !unicode.IsPrint(r)
	}), " ")
	if runes := []rune(text); len(runes) > maxRunes {
		return string(runes[:maxRunes]) + "…"
	}
	return text
}
