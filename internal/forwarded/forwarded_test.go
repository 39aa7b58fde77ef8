package forwarded_test

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/berth-registry/berth/internal/forwarded"
)

func TestParseProxiesRefusesBadEntries(t *testing.T) {
	for _, bad := range []string{"", "10.0.0.0/33", "10.0.0.0/", "example.com", "10.0.0.0/8/8", "::1/129", "10.0.0.256"} {
		_, err := forwarded.ParseProxies([]string{"127.0.0.1", bad})
		if err == nil || !strings.Contains(err.Error(), `"`+bad+`"`) {
			t.Errorf("ParseProxies(%q): %v, want an error naming it", bad, err)
		}
	}
}

func TestOrigin(t *testing.T) {
	proxies, err := forwarded.ParseProxies([]string{"10.0.0.0/8", "fd00::/8", "192.0.2.9"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		peer   string
		tls    bool
		header []string
		want   forwarded.Origin
	}{
		{"direct", "198.51.100.7:4000", false, nil, forwarded.Origin{Client: "198.51.100.7", Scheme: "http", Host: "berth.example"}},
		{"direct over TLS", "198.51.100.7:4000", true, nil, forwarded.Origin{Client: "198.51.100.7", Scheme: "https", Host: "berth.example"}},
		{"untrusted peer's headers are ignored", "198.51.100.7:4000", false,
			[]string{"X-Forwarded-For", "203.0.113.5", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "evil.example", "Forwarded", "for=203.0.113.5;host=evil.example"},
			forwarded.Origin{Client: "198.51.100.7", Scheme: "http", Host: "berth.example"}},
		{"trusted proxy", "10.1.2.3:5000", false,
			[]string{"X-Forwarded-For", "203.0.113.5", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "registry.example.com:8443"},
			forwarded.Origin{Client: "203.0.113.5", Scheme: "https", Host: "registry.example.com:8443"}},
		{"a client's own X-Forwarded-For is left of the address the proxy saw", "10.1.2.3:5000", false,
			[]string{"X-Forwarded-For", "1.1.1.1, 203.0.113.5"},
			forwarded.Origin{Client: "203.0.113.5", Scheme: "http", Host: "berth.example"}},
		{"a chain of trusted proxies", "10.1.2.3:5000", false,
			[]string{"X-Forwarded-For", "1.1.1.1, 203.0.113.5", "X-Forwarded-For", "192.0.2.9, 10.9.9.9"},
			forwarded.Origin{Client: "203.0.113.5", Scheme: "http", Host: "berth.example"}},
		{"every hop trusted", "10.1.2.3:5000", false, []string{"X-Forwarded-For", "10.0.0.1, 10.0.0.2"},
			forwarded.Origin{Client: "10.0.0.1", Scheme: "http", Host: "berth.example"}},
		{"garbage stops the walk", "10.1.2.3:5000", false, []string{"X-Forwarded-For", "203.0.113.5, nonsense"},
			forwarded.Origin{Client: "10.1.2.3", Scheme: "http", Host: "berth.example"}},
		{"the proxy's own values are the last ones", "10.1.2.3:5000", false,
			[]string{"X-Forwarded-Proto", "https, http", "X-Forwarded-Host", "evil.example, b.example"},
			forwarded.Origin{Client: "10.1.2.3", Scheme: "http", Host: "b.example"}},
		{"bad scheme and host are ignored", "10.1.2.3:5000", true, []string{"X-Forwarded-Proto", "gopher", "X-Forwarded-Host", "evil/path"},
			forwarded.Origin{Client: "10.1.2.3", Scheme: "https", Host: "berth.example"}},
		{"Forwarded", "[fd00::1]:5000", false,
			[]string{"Forwarded", `for=1.1.1.1;host=evil.example, for="[2001:db8::7]:4711";proto=https;host=Registry.Example.com`},
			forwarded.Origin{Client: "2001:db8::7", Scheme: "https", Host: "registry.example.com"}},
		{"Forwarded wins over X-Forwarded-*", "10.1.2.3:5000", false,
			[]string{"Forwarded", "for=203.0.113.5", "X-Forwarded-For", "203.0.113.99"},
			forwarded.Origin{Client: "203.0.113.5", Scheme: "http", Host: "berth.example"}},
		{"IPv4-mapped peer", "[::ffff:10.1.2.3]:5000", false, []string{"X-Forwarded-For", "203.0.113.5"},
			forwarded.Origin{Client: "203.0.113.5", Scheme: "http", Host: "berth.example"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "http://berth.example/index.yaml", nil)
			r.RemoteAddr = tc.peer
			if tc.tls {
				r.TLS = &tls.ConnectionState{}
			}
			for i := 0; i+1 < len(tc.header); i += 2 {
				r.Header.Add(tc.header[i], tc.header[i+1])
			}
			if got := proxies.Origin(r); got != tc.want {
				t.Errorf("Origin = %+v, want %+v", got, tc.want)
			}
			var seen forwarded.Origin
			var base string
			proxies.Handler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				seen, base = forwarded.Of(r), forwarded.BaseURL(r, "")
			})).ServeHTTP(httptest.NewRecorder(), r)
			if seen != tc.want || base != tc.want.Scheme+"://"+tc.want.Host {
				t.Errorf("through Handler: Of = %+v, BaseURL = %s", seen, base)
			}
		})
	}
}

func TestBaseURL(t *testing.T) {
	r := httptest.NewRequest("GET", "http://berth.example/", nil)
	r.Header.Set("X-Forwarded-Host", "evil.example")
	if got := forwarded.BaseURL(r, ""); got != "http://berth.example" {
		t.Errorf("BaseURL without Handler = %s, want the request's own host", got)
	}
	if got := forwarded.BaseURL(r, "https://registry.example.com/"); got != "https://registry.example.com" {
		t.Errorf("BaseURL with a public URL = %s", got)
	}
}
