package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
)

// secrets are the strings that no berth process may print and no HTTP
// answer the tests read may carry: passwords, keys, robot secrets once
// shown. Tests register them with secrets.add. Every line a berth serve
// logs (startProcess), every answer's headers and body read through
// http.DefaultTransport (TestMain wraps it) and every line a CLI prints
// (runWith) is looked through for every secret registered so far; a test's
// cleanup reports what was found, naming the secret, never showing it.
var secrets = &secretRegistry{names: map[string]string{}, watched: map[testing.TB]bool{}}

// minSecret is the length below which a string is too common to look for.
const minSecret = 8

type secretRegistry struct {
	mu sync.Mutex
	// names maps each secret to what it is ("alice's password").
	names map[string]string
	// leaks are the places a secret was seen, not reported yet.
	leaks []string
	// watched are the tests whose cleanup reports leaks.
	watched map[testing.TB]bool
}

// add registers value, named what, for the rest of the run. The test's
// cleanup reports every leak seen until then.
func (r *secretRegistry) add(t testing.TB, what, value string) {
	t.Helper()
	if len(value) < minSecret {
		t.Fatalf("the secret %s is %d characters long: too short to look for (at least %d)", what, len(value), minSecret)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.names[value] = what
	if !r.watched[t] {
		r.watched[t] = true
		t.Cleanup(func() { r.report(t) })
	}
}

// addPEM registers each line of the PEM file's base64 body, so that a
// key printed in any wrapping is found.
func (r *secretRegistry) addPEM(t *testing.T, what, file string) {
	t.Helper()
	for i, line := range strings.Split(string(readFile(t, file)), "\n") {
		if line = strings.TrimSpace(line); len(line) >= minSecret && !strings.HasPrefix(line, "-----") {
			r.add(t, fmt.Sprintf("line %d of %s", i+1, what), line)
		}
	}
}

// found returns the names of the secrets data holds, sorted.
func (r *secretRegistry) found(data []byte) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for s, what := range r.names {
		if bytes.Contains(data, []byte(s)) {
			names = append(names, what)
		}
	}
	sort.Strings(names)
	return names
}

// scan records a leak for each secret that data, seen at where, holds.
func (r *secretRegistry) scan(where string, data []byte) { r.record(where, r.found(data)) }

// record records that where holds the secrets named.
func (r *secretRegistry) record(where string, names []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, what := range names {
		r.leaks = append(r.leaks, fmt.Sprintf("%s holds %s", where, what))
	}
}

// scanLines scans text line by line, naming each line's number in where.
func (r *secretRegistry) scanLines(where, text string) {
	for i, line := range strings.Split(text, "\n") {
		r.scan(fmt.Sprintf("line %d of %s", i+1, where), []byte(line))
	}
}

// longest is the length of the longest secret.
func (r *secretRegistry) longest() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for s := range r.names {
		n = max(n, len(s))
	}
	return n
}

// take returns the leaks recorded since the last take and forgets them.
func (r *secretRegistry) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	leaks := r.leaks
	r.leaks = nil
	return leaks
}

// report fails t for each leak recorded since the last report.
func (r *secretRegistry) report(t testing.TB) {
	t.Helper()
	for _, leak := range r.take() {
		t.Errorf("never print a secret: %s", leak)
	}
}

// pending prints the leaks no test reported and says whether there were any.
func (r *secretRegistry) pending() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, leak := range r.leaks {
		fmt.Fprintf(os.Stderr, "never print a secret: %s\n", leak)
	}
	return len(r.leaks) > 0
}

// scanningTransport is an http.RoundTripper that looks through every
// answer's headers and body for the registered secrets.
type scanningTransport struct{ next http.RoundTripper }

func (s scanningTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	where := fmt.Sprintf("the answer to %s %s", req.Method, redactedURL(req.URL))
	for k, vs := range resp.Header {
		secrets.scan(where+", header "+k, []byte(strings.Join(vs, "\n")))
	}
	resp.Body = &scanningBody{ReadCloser: resp.Body, where: where + ", body"}
	return resp, nil
}

// redactedURL is u without its query, which may carry a credential the
// caller sent.
func redactedURL(u *url.URL) string {
	c := *u
	c.RawQuery = ""
	return c.Redacted()
}

// scanningBody scans a body as it is read, keeping the tail of what was
// read so that a secret split between two reads is found.
type scanningBody struct {
	io.ReadCloser
	where string
	tail  []byte
	seen  map[string]bool
}

func (b *scanningBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		window := append(b.tail, p[:n]...)
		var fresh []string
		for _, what := range secrets.found(window) {
			if !b.seen[what] {
				fresh = append(fresh, what)
			}
		}
		if len(fresh) > 0 {
			if b.seen == nil {
				b.seen = map[string]bool{}
			}
			for _, what := range fresh {
				b.seen[what] = true
			}
			secrets.record(b.where, fresh)
		}
		keep := min(len(window), max(secrets.longest()-1, 0))
		b.tail = append(b.tail[:0:0], window[len(window)-keep:]...)
	}
	return n, err
}

// TestSecretScanFinds checks the scan itself: a secret in a log line, in a
// header or in a body, whole or split between two reads, is reported, and
// nothing else is.
func TestSecretScanFinds(t *testing.T) {
	const secret = "e2e-scan-test-secret"
	r := &secretRegistry{names: map[string]string{}, watched: map[testing.TB]bool{}}
	r.names[secret] = "the test's secret"
	for _, tc := range []struct {
		name string
		text string
		want int
	}{
		{"clean", "level=INFO msg=serving\nnothing here", 0},
		{"whole", "level=INFO password=" + secret, 1},
		{"twice on two lines", secret + "\n" + secret, 2},
		{"a prefix only", "level=INFO " + secret[:len(secret)-1], 0},
	} {
		r.scanLines("a log", tc.text)
		leaks := r.take()
		if len(leaks) != tc.want {
			t.Errorf("%s: %d leaks %q, want %d", tc.name, len(leaks), leaks, tc.want)
		}
		for _, leak := range leaks {
			if strings.Contains(leak, secret) {
				t.Errorf("%s: the report shows the secret: %q", tc.name, leak)
			}
		}
	}

	// Through the transport, split between reads of one byte.
	secrets.add(t, "the scan test's secret", secret)
	for _, tc := range []struct {
		name   string
		header string
		body   string
		want   int
	}{
		{"clean", "x", "nothing here", 0},
		{"header", secret, "nothing", 1},
		{"body", "x", strings.Repeat("a", 100) + secret + strings.Repeat("b", 100), 1},
	} {
		resp := &http.Response{Header: http.Header{"X-Test": {tc.header}}, Body: io.NopCloser(strings.NewReader(tc.body))}
		got := scanningTransport{next: roundTripperFunc(func(*http.Request) (*http.Response, error) { return resp, nil })}
		req, _ := http.NewRequest("GET", "http://127.0.0.1/?token="+secret, nil)
		res, err := got.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		for buf := make([]byte, 1); ; {
			if _, err := res.Body.Read(buf); err != nil {
				break
			}
		}
		leaks := secrets.take()
		if len(leaks) != tc.want {
			t.Errorf("%s: %d leaks %q, want %d", tc.name, len(leaks), leaks, tc.want)
		}
	}
}

// roundTripperFunc is a function as an http.RoundTripper.
type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
