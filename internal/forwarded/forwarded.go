// Package forwarded works out who sent a request and which URL it came to:
// the client's address, the scheme and the host. Proxies in front of berth
// say so in X-Forwarded-For, X-Forwarded-Proto, X-Forwarded-Host and
// Forwarded (RFC 7239); anyone can send those headers, so they are honoured
// only when the request's immediate peer is a trusted proxy (the
// trustedProxies setting, docs/auth.md). Every part that needs the client's
// address (login rate limiter, audit log, access log) or the external base
// URL (index download links, the UI's commands, the token realm, Secure
// cookies) asks this package, through Of and BaseURL.
package forwarded

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Proxies are the trusted proxies: the networks whose requests may say who
// the client is and which URL it asked for. The zero value trusts none.
type Proxies struct {
	nets []netip.Prefix
}

// ParseProxies parses CIDRs (or single addresses) into Proxies. Its error
// names the first entry that is neither.
func ParseProxies(cidrs []string) (Proxies, error) {
	var p Proxies
	for _, s := range cidrs {
		s = strings.TrimSpace(s)
		if prefix, err := netip.ParsePrefix(s); err == nil {
			p.nets = append(p.nets, prefix.Masked())
			continue
		}
		addr, err := netip.ParseAddr(s)
		if err != nil {
			return Proxies{}, fmt.Errorf("%q is not a CIDR (10.0.0.0/8, fd00::/8) or an IP address", s)
		}
		p.nets = append(p.nets, netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen()))
	}
	return p, nil
}

// trusts reports whether addr is in a trusted network.
func (p Proxies) trusts(addr netip.Addr) bool {
	addr = addr.Unmap()
	for _, n := range p.nets {
		if n.Contains(addr) {
			return true
		}
	}
	return false
}

// Origin is where a request came from and the URL it was sent to.
type Origin struct {
	// Client is the client's IP address (without a port), or the
	// request's RemoteAddr as it is when that is not an address.
	Client string
	// Scheme is http or https.
	Scheme string
	// Host is host[:port].
	Host string
}

type originKey struct{}

// Handler records the Origin of each request, as p tells it, for Of.
func (p Proxies) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o := p.Origin(r)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), originKey{}, o)))
	})
}

// Of is the Origin of r that Handler recorded, or, for a request that did
// not pass through it, the Origin when no proxy is trusted.
func Of(r *http.Request) Origin {
	if o, ok := r.Context().Value(originKey{}).(Origin); ok {
		return o
	}
	return Proxies{}.Origin(r)
}

// BaseURL is the external base URL (scheme://host[:port]) of r: public when
// set (without a trailing '/'), else the scheme and host of r's Origin.
func BaseURL(r *http.Request, public string) string {
	if public != "" {
		return strings.TrimRight(public, "/")
	}
	o := Of(r)
	return o.Scheme + "://" + o.Host
}

// Origin works out r's Origin. The peer is r.RemoteAddr; when p trusts it,
// the forwarding headers are read: Forwarded when present, else
// X-Forwarded-*. The client is the last address of the chain of
// forwarded-for addresses that is not a trusted proxy, walking from the
// peer (each proxy appends the address it got the request from, so the
// addresses left of the first untrusted one are whatever the client
// wrote); the scheme and host are the last values, those the proxy next to
// berth set. Values that are not a well-formed address, scheme or host are
// ignored.
func (p Proxies) Origin(r *http.Request) Origin {
	o := Origin{Client: r.RemoteAddr, Scheme: "http", Host: r.Host}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		o.Client = host
	}
	if r.TLS != nil {
		o.Scheme = "https"
	}
	peer, err := netip.ParseAddr(o.Client)
	if err != nil || !p.trusts(peer) {
		return o
	}
	o.Client = peer.Unmap().String()
	var chain []string
	var scheme, host string
	if fwd := r.Header.Values("Forwarded"); len(fwd) > 0 {
		chain, scheme, host = parseForwarded(fwd)
	} else {
		chain = splitValues(r.Header.Values("X-Forwarded-For"))
		scheme = last(splitValues(r.Header.Values("X-Forwarded-Proto")))
		host = last(splitValues(r.Header.Values("X-Forwarded-Host")))
	}
	for i := len(chain) - 1; i >= 0; i-- {
		addr, ok := parseNode(chain[i])
		if !ok {
			break
		}
		o.Client = addr.String()
		if !p.trusts(addr) {
			break
		}
	}
	if s := strings.ToLower(scheme); s == "http" || s == "https" {
		o.Scheme = s
	}
	if h := strings.ToLower(host); validHost(h) {
		o.Host = h
	}
	return o
}

// parseForwarded reads RFC 7239 Forwarded header values: the for= node of
// every element, in order, and the proto= and host= of the last element
// that has them.
func parseForwarded(values []string) (chain []string, scheme, host string) {
	for _, element := range splitValues(values) {
		for pair := range strings.SplitSeq(element, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
			if !ok {
				continue
			}
			v = strings.Trim(v, `"`)
			switch strings.ToLower(k) {
			case "for":
				chain = append(chain, v)
			case "proto":
				scheme = v
			case "host":
				host = v
			}
		}
	}
	return chain, scheme, host
}

// parseNode parses a forwarded-for address: an IP address, possibly with
// a port, IPv6 in brackets or not.
func parseNode(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	addr, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	return addr.Unmap(), err == nil
}

// splitValues splits header values at their commas.
func splitValues(values []string) []string {
	var out []string
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

func last(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

// validHost accepts host[:port] made of the characters of host names and
// IP literals.
func validHost(h string) bool {
	if h == "" || len(h) > 255 {
		return false
	}
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.ContainsRune(".-:[]", c)) {
			return false
		}
	}
	return true
}
