package pkgsource

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"time"
)

// The defaults of Limits' zero fields.
const (
	DefaultMaxBytes     = 256 << 20
	DefaultMaxFiles     = 10000
	DefaultTimeout      = 2 * time.Minute
	DefaultStallTimeout = 30 * time.Second
)

// Errors of a fetch wrap one of these.
var (
	// ErrLimit is a source over a bound of Limits (bytes, files, time).
	ErrLimit = errors.New("over the limit")
	// ErrDenied is a source that reaches a host or an address Limits do
	// not allow, or that needs credentials it was not given.
	ErrDenied = errors.New("denied")
	// ErrInvalid is a source whose content cannot be fetched safely or
	// faithfully (a path out of the directory, a symlink out of it, a
	// device file, a git LFS pointer, a submodule, an unknown ref).
	ErrInvalid = errors.New("invalid source")
)

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	if l.StallTimeout <= 0 {
		l.StallTimeout = DefaultStallTimeout
	}
	return l
}

// hostAllowed reports whether Limits let a fetch reach host (a host name
// or an IP address, without port).
func (l Limits) hostAllowed(host string) bool {
	if len(l.AllowHosts) == 0 {
		return true
	}
	host = strings.ToLower(host)
	for _, pattern := range l.AllowHosts {
		if ok, _ := path.Match(strings.ToLower(pattern), host); ok {
			return true
		}
	}
	return false
}

// name names a source in errors: its kind and URL, never its credentials.
func (s Spec) name() string {
	return fmt.Sprintf("%s source %s", s.Kind, redact(s.URL))
}

// redact drops a user and password written into a URL.
func redact(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	authority, tail, _ := strings.Cut(rest, "/")
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		authority = authority[at+1:]
	}
	if tail != "" || strings.Contains(rest, "/") {
		return scheme + "://" + authority + "/" + tail
	}
	return scheme + "://" + authority
}

// named prefixes err with src, unless err holds an error of pkgsource
// that names src already (a bound a session enforced under a library's
// call), which is returned alone.
func named(src string, err error) error {
	if e := ours(src, err); e != nil {
		return e
	}
	return fmt.Errorf("%s: %w", src, err)
}

// ours is the error in err's chain that names src, or nil.
func ours(src string, err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if strings.HasPrefix(e.Error(), src+":") {
			return e
		}
	}
	return nil
}
