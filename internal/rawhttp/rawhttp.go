// Package rawhttp sends one HTTP/1.1 request over a connection of its own and
// returns everything the server sent, for tests that check what net/http's
// client hides, such as bytes after the header of a response to HEAD.
package rawhttp

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
)

// Exchange sends method target to addr (host:port) with Connection: close
// and returns the response, its body, and whatever the server sent after
// the body, which is nothing from a well-behaved server. The response to a
// HEAD has no body, so after is then everything beyond its header. It
// returns an error when the connection or the response fails.
func Exchange(addr, method, target string) (resp *http.Response, body, after []byte, err error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, nil, nil, err
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", method, target, addr); err != nil {
		return nil, nil, nil, err
	}
	br := bufio.NewReader(conn)
	if resp, err = http.ReadResponse(br, &http.Request{Method: method}); err != nil {
		return nil, nil, nil, fmt.Errorf("%s %s: %w", method, target, err)
	}
	if body, err = io.ReadAll(resp.Body); err != nil {
		return nil, nil, nil, fmt.Errorf("%s %s: body: %w", method, target, err)
	}
	if after, err = io.ReadAll(br); err != nil {
		return nil, nil, nil, fmt.Errorf("%s %s: after the body: %w", method, target, err)
	}
	return resp, body, after, nil
}
