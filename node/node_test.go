package node

import (
	"net"
	"testing"
)

func TestPublicHost(t *testing.T) {
	for _, tc := range []struct {
		publicURL, addr, want string
	}{
		{"https://berth.example.com", "0.0.0.0:5000", "berth.example.com"},
		{"http://berth.example.com:8080", "127.0.0.1:5000", "berth.example.com:8080"},
		{"", "127.0.0.1:5000", "127.0.0.1:5000"},
		{"", "0.0.0.0:5000", "localhost:5000"},
		{"", "[::]:5000", "localhost:5000"},
		{"", "[::1]:5001", "[::1]:5001"},
		{"", "10.0.0.7:443", "10.0.0.7:443"},
	} {
		addr, err := net.ResolveTCPAddr("tcp", tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := publicHost(tc.publicURL, addr); got != tc.want {
			t.Errorf("publicHost(%q, %s) = %q, want %q", tc.publicURL, tc.addr, got, tc.want)
		}
	}
}
