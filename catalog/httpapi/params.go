package httpapi

import (
	"encoding/base64"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/pkgformat"
)

// Limits on parameters.
const (
	maxQueryText  = 256  // bytes of q
	maxChannel    = 256  // bytes of a channel name
	maxFilePath   = 4096 // bytes of a file path
	cursorVersion = "v1:"
)

var (
	// groupRE is an API group: a DNS subdomain (matched case-insensitively).
	groupRE = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*$`)
	// kindRE is a Kubernetes kind.
	kindRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*$`)
)

// params is the query string of a request, checked against the parameters
// its endpoint takes. An empty value is the same as an absent parameter, so
// that forms and templates may leave fields blank.
type params url.Values

// queryParams parses the query string of r. A parameter the endpoint does not
// take (allowed), or one given more than once, is an error naming it.
func queryParams(r *http.Request, allowed ...string) (params, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("the query string is malformed: %v: %w", err, catalog.ErrInvalid)
	}
	names := make([]string, 0, len(v))
	for name := range v {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if !slices.Contains(allowed, name) {
			if len(allowed) == 0 {
				return nil, queryError(name, "unknown parameter: this endpoint takes none")
			}
			return nil, queryError(name, "unknown parameter: this endpoint takes %s", strings.Join(allowed, ", "))
		}
		if len(v[name]) > 1 {
			return nil, queryError(name, "given %d times, at most once allowed", len(v[name]))
		}
	}
	return params(v), nil
}

// pullable rejects any query parameter, on an endpoint that takes none, and
// returns what the caller may pull.
func (h *handler) pullable(r *http.Request) (catalog.Access, error) {
	if err := onlyParams(r); err != nil {
		return catalog.Access{}, err
	}
	return h.auth.Pullable(r.Context())
}

// onlyParams rejects any query parameter on an endpoint that takes none.
func onlyParams(r *http.Request) error {
	_, err := queryParams(r)
	return err
}

// get returns the value of a parameter, "" when absent.
func (p params) get(name string) string { return url.Values(p).Get(name) }

// limit reads a page size in 1..catalog.MaxLimit; absent means catalog.DefaultLimit.
func (p params) limit() (int, error) {
	s := p.get("limit")
	if s == "" {
		return catalog.DefaultLimit, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > catalog.MaxLimit {
		return 0, queryError("limit", "%s is not an integer in 1..%d", quote(s), catalog.MaxLimit)
	}
	return n, nil
}

// cursor reads a page cursor; absent means the first page (offset 0).
func (p params) cursor() (int, error) {
	s := p.get("cursor")
	if s == "" {
		return 0, nil
	}
	off, ok := decodeCursor(s)
	if !ok {
		return 0, queryError("cursor", "%s is not a cursor this server issued", quote(s))
	}
	return off, nil
}

// EncodeCursor returns the opaque cursor of the page that starts at offset:
// base64url (unpadded) of "v1:<offset>". The version prefix lets the format
// change later while old cursors are still recognised (or cleanly refused).
func EncodeCursor(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorVersion + strconv.Itoa(offset)))
}

// decodeCursor is the inverse of EncodeCursor; it accepts only what
// EncodeCursor produces.
func decodeCursor(s string) (int, bool) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return 0, false
	}
	digits, ok := strings.CutPrefix(string(b), cursorVersion)
	if !ok {
		return 0, false
	}
	off, err := strconv.Atoi(digits)
	if err != nil || off < 0 || off > math.MaxInt32 || strconv.Itoa(off) != digits {
		return 0, false
	}
	return off, true
}

// since reads the change-feed position, a non-negative integer; absent means 0.
func (p params) since() (int64, error) {
	s := p.get("since")
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, queryError("since", "%s is not a non-negative integer", quote(s))
	}
	return n, nil
}

// parseProvides reads an API filter: "group/Kind", or one of them alone; a
// value with a '.' is a group, any other a kind.
func parseProvides(s string) (catalog.APIFilter, error) {
	var f catalog.APIFilter
	if g, k, ok := strings.Cut(s, "/"); ok {
		f = catalog.APIFilter{Group: g, Kind: k}
		if g == "" || k == "" {
			return f, queryError("provides", "%s must be group/Kind with both parts set, a group (with a '.') or a Kind", quote(s))
		}
	} else if strings.Contains(s, ".") {
		f.Group = s
	} else {
		f.Kind = s
	}
	if f.Group != "" && (len(f.Group) > 253 || !groupRE.MatchString(f.Group)) {
		return f, queryError("provides", "API group %s is not a DNS subdomain", quote(f.Group))
	}
	if f.Kind != "" && (len(f.Kind) > 63 || !kindRE.MatchString(f.Kind)) {
		return f, queryError("provides", "kind %s must be a letter followed by letters and digits", quote(f.Kind))
	}
	return f, nil
}

// pathParam returns a path segment of the route, unescaped.
func pathParam(r *http.Request, name string) (string, error) {
	return unescapedParam(r, name, name)
}

// unescapedParam returns the route parameter key unescaped, naming it name in
// errors. chi routes on the escaped path when the request has one (when
// escaping was needed to tell an escaped '/' from a separator), else on the
// unescaped path, whose parameters are taken as they are.
func unescapedParam(r *http.Request, key, name string) (string, error) {
	raw := chi.URLParam(r, key)
	if r.URL.RawPath == "" {
		return raw, nil
	}
	v, err := url.PathUnescape(raw)
	if err != nil {
		return "", pathError(name, "%s is not validly escaped", quote(raw))
	}
	return v, nil
}

// PackagePath reads and checks the {namespace} and {name} segments of a chi
// route; its errors wrap catalog.ErrInvalid and name the segment.
func PackagePath(r *http.Request) (namespace, name string, err error) {
	if namespace, err = NamespaceParam(r); err != nil {
		return "", "", err
	}
	if name, err = pathParam(r, "name"); err != nil {
		return "", "", err
	}
	if err := pkgformat.ValidName(name); err != nil {
		return "", "", pathError("name", "%s", reason(err))
	}
	return namespace, name, nil
}

// NamespaceParam reads and checks the {namespace} segment of a chi route.
func NamespaceParam(r *http.Request) (string, error) {
	ns, err := pathParam(r, "namespace")
	if err != nil {
		return "", err
	}
	if err := pkgformat.ValidNamespace(ns); err != nil {
		return "", pathError("namespace", "%s", reason(err))
	}
	return ns, nil
}

// VersionParam reads and checks the {version} segment of a chi route.
func VersionParam(r *http.Request) (string, error) {
	v, err := pathParam(r, "version")
	if err != nil {
		return "", err
	}
	if err := pkgformat.ValidVersion(v); err != nil {
		return "", pathError("version", "%s", reason(err))
	}
	return v, nil
}

// channelParam reads and checks the {channel} segment: any printable text.
func channelParam(r *http.Request) (string, error) {
	c, err := pathParam(r, "channel")
	if err != nil {
		return "", err
	}
	if err := checkChannel(c); err != nil {
		return "", pathError("channel", "%s", err)
	}
	return c, nil
}

// checkChannel accepts non-empty printable UTF-8 up to maxChannel bytes.
func checkChannel(c string) error {
	switch {
	case c == "":
		return fmt.Errorf("is empty")
	case len(c) > maxChannel:
		return fmt.Errorf("is longer than %d bytes", maxChannel)
	case !printable(c):
		return fmt.Errorf("%s must be printable UTF-8", quote(c))
	}
	return nil
}

// FilePathParam reads and checks the file path of a chi route's "*": a clean
// relative slash-separated path, as fs.ValidPath defines it.
func FilePathParam(r *http.Request) (string, error) {
	p, err := unescapedParam(r, "*", "path")
	switch {
	case err != nil:
		return "", err
	case p == "":
		return "", fmt.Errorf("no file path after files/: %w", catalog.ErrNotFound)
	case len(p) > maxFilePath:
		return "", pathError("path", "is longer than %d bytes", maxFilePath)
	case !fs.ValidPath(p) || strings.ContainsFunc(p, isControl):
		return "", pathError("path", "%s must be a clean relative path (no '.', '..' or empty elements, no leading or trailing '/')", quote(p))
	}
	return p, nil
}

// printable reports whether s is valid UTF-8 without control characters.
func printable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, isControl)
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// reason is the message of an error from pkgformat without the sentinel's
// text that %w appended.
func reason(err error) string {
	return strings.TrimSuffix(err.Error(), ": "+pkgformat.ErrInvalid.Error())
}

// quote quotes a parameter value for an error message, shortened when long.
func quote(s string) string {
	const maxShown = 64
	if len(s) > maxShown {
		s = s[:maxShown] + "..."
	}
	return strconv.Quote(s)
}
