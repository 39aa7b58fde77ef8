package pkgsource

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// session is the network side of one fetch or check: an http.Client whose
// every connection and redirect is checked against Limits, whose response
// bodies count against MaxBytes together and fail when the server stalls.
type session struct {
	src       string
	limits    Limits
	transport *http.Transport
	received  atomic.Int64
}

func newSession(src string, l Limits) *session {
	s := &session{src: src, limits: l}
	dialer := &net.Dialer{Timeout: l.StallTimeout, Control: s.checkAddress}
	s.transport = &http.Transport{
		// No proxy from the environment: the address checked at dial
		// time must be the server's.
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   l.StallTimeout,
		ResponseHeaderTimeout: l.StallTimeout,
		MaxIdleConnsPerHost:   4,
		ForceAttemptHTTP2:     true,
	}
	return s
}

// client returns an http.Client that goes through the session.
func (s *session) client() *http.Client {
	return &http.Client{Transport: s, CheckRedirect: s.checkRedirect}
}

func (s *session) close() { s.transport.CloseIdleConnections() }

// checkAddress runs when a connection is dialled, after name resolution,
// so that a name that resolves to a private address (DNS rebinding
// included) is refused.
func (s *session) checkAddress(_, address string, _ syscall.RawConn) error {
	if s.limits.AllowPrivate {
		return nil
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("%s: address %s: %w", s.src, address, ErrDenied)
	}
	ip = ip.Unmap()
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsUnspecified() || ip.IsMulticast() {
		return fmt.Errorf("%s: address %s is loopback, link-local, private or unspecified (allow private addresses to fetch it): %w",
			s.src, ip, ErrDenied)
	}
	return nil
}

func (s *session) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return fmt.Errorf("%s: more than 10 redirects: %w", s.src, ErrDenied)
	}
	if !s.limits.hostAllowed(req.URL.Hostname()) {
		return fmt.Errorf("%s: redirect from %s to host %s, which is not in the allowed hosts: %w",
			s.src, via[len(via)-1].URL.Host, req.URL.Hostname(), ErrDenied)
	}
	return nil
}

// RoundTrip checks the host, sends req and wraps the response body.
func (s *session) RoundTrip(req *http.Request) (*http.Response, error) {
	if !s.limits.hostAllowed(req.URL.Hostname()) {
		return nil, fmt.Errorf("%s: host %s is not in the allowed hosts: %w", s.src, req.URL.Hostname(), ErrDenied)
	}
	resp, err := s.transport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = newGuardedBody(s, resp.Body)
	return resp, nil
}

// guardedBody counts what a session receives against MaxBytes and closes
// the body when nothing arrives for StallTimeout.
type guardedBody struct {
	s      *session
	body   io.ReadCloser
	timer  *time.Timer
	mu     sync.Mutex
	stalls bool
}

func newGuardedBody(s *session, body io.ReadCloser) *guardedBody {
	g := &guardedBody{s: s, body: body}
	g.timer = time.AfterFunc(s.limits.StallTimeout, func() {
		g.mu.Lock()
		g.stalls = true
		g.mu.Unlock()
		body.Close()
	})
	return g
}

func (g *guardedBody) Read(p []byte) (int, error) {
	n, err := g.body.Read(p)
	g.mu.Lock()
	stalled := g.stalls
	g.mu.Unlock()
	if stalled {
		return n, fmt.Errorf("%s: the server sent nothing for %s (stall timeout): %w", g.s.src, g.s.limits.StallTimeout, ErrLimit)
	}
	if n > 0 {
		g.timer.Reset(g.s.limits.StallTimeout)
		if g.s.received.Add(int64(n)) > g.s.limits.MaxBytes {
			g.body.Close()
			return n, fmt.Errorf("%s: more than %d bytes downloaded: %w", g.s.src, g.s.limits.MaxBytes, ErrLimit)
		}
	}
	return n, err
}

func (g *guardedBody) Close() error {
	g.timer.Stop()
	return g.body.Close()
}

// withTimeout bounds ctx by Limits.Timeout, with an error that says so.
func withTimeout(ctx context.Context, src string, l Limits) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, l.Timeout,
		fmt.Errorf("%s: the fetch took longer than %s (timeout): %w", src, l.Timeout, ErrLimit))
}

// ctxErr is ctx's cause when ctx is done, else err.
func ctxErr(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		return cause
	}
	return err
}
