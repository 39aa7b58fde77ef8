package client

import (
	"errors"
	"strings"
	"testing"

	"oras.land/oras-go/v2/registry/remote/credentials"
)

const testDigest = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

func TestParseReference(t *testing.T) {
	tests := []struct {
		in   string
		want Reference
		str  string
	}{
		{"localhost:5000/kudo/kafka:1.0.0", Reference{Registry: "localhost:5000", Namespace: "kudo", Name: "kafka", Tag: "1.0.0"}, ""},
		{"localhost:5000/kudo/kafka", Reference{Registry: "localhost:5000", Namespace: "kudo", Name: "kafka"}, ""},
		{"registry.example.com/operators/etcd:0.9.4", Reference{Registry: "registry.example.com", Namespace: "operators", Name: "etcd", Tag: "0.9.4"}, ""},
		{"localhost/kudo/kafka:2.5.1_1.3.2", Reference{Registry: "localhost", Namespace: "kudo", Name: "kafka", Tag: "2.5.1_1.3.2"}, ""},
		{"localhost:5000/kudo/kafka:1.0.0+build.1", Reference{Registry: "localhost:5000", Namespace: "kudo", Name: "kafka", Tag: "1.0.0_build.1"}, "localhost:5000/kudo/kafka:1.0.0_build.1"},
		{"127.0.0.1:5000/my-org/my_pkg.v2:v1", Reference{Registry: "127.0.0.1:5000", Namespace: "my-org", Name: "my_pkg.v2", Tag: "v1"}, ""},
		{"[::1]:5000/kudo/kafka:1.0.0", Reference{Registry: "[::1]:5000", Namespace: "kudo", Name: "kafka", Tag: "1.0.0"}, ""},
		{"localhost:5000/kudo/kafka@" + testDigest, Reference{Registry: "localhost:5000", Namespace: "kudo", Name: "kafka", Digest: testDigest}, ""},
		{"localhost:5000/kudo/kafka:1.0.0@" + testDigest, Reference{Registry: "localhost:5000", Namespace: "kudo", Name: "kafka", Tag: "1.0.0", Digest: testDigest}, ""},
		{"Registry.Example.com:443/a/b", Reference{Registry: "Registry.Example.com:443", Namespace: "a", Name: "b"}, ""},
		{"localhost:5000/ku__do/ka--fka", Reference{Registry: "localhost:5000", Namespace: "ku__do", Name: "ka--fka"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseReference(tt.in)
			if err != nil {
				t.Fatalf("ParseReference: %v", err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			str := tt.str
			if str == "" {
				str = tt.in
			}
			if got.String() != str {
				t.Errorf("String() = %q, want %q", got.String(), str)
			}
		})
	}
}

func TestParseReferenceErrors(t *testing.T) {
	tests := []struct {
		in   string
		want string // substring of the error that names what is wrong
	}{
		{"", "empty"},
		{"localhost:5000/kafka", `invalid reference "localhost:5000/kafka": missing namespace: want host[:port]/namespace/name[:version]`},
		{"kudo/kafka", "missing registry host"},
		{"kafka", "missing registry host, namespace and name"},
		{"localhost:5000", "missing namespace and name"},
		{"localhost:5000/kudo/kafka/extra", "too many path components"},
		{"localhost:5000/", "ends with '/'"},
		{"localhost:5000//kafka", "empty namespace"},
		{"localhost:5000/kudo/:1.0.0", "empty name"},
		{"localhost:5000/Kudo/kafka", `namespace "Kudo" must be lower case`},
		{"localhost:5000/kudo/Kafka:1.0.0", `name "Kafka" must be lower case`},
		{"localhost:5000/-kudo/kafka", `namespace "-kudo" is not a valid OCI path component`},
		{"localhost:5000/kudo/kaf..ka", `name "kaf..ka" is not a valid OCI path component`},
		{"localhost:5000/kudo/kafka:", "empty version"},
		{"localhost:5000/kudo/kafka:1.0!", `version "1.0!" is not a valid tag`},
		{"localhost:5000/kudo/kafka:-1", `version "-1" is not a valid tag`},
		{"localhost:5000/kudo/kafka:1.0:2", `version "1.0:2" is not a valid tag`},
		{"localhost:5000/kudo/kafka:" + strings.Repeat("1", 129), "the limit is 128"},
		{"localhost:5000/kudo/kafka@", "empty digest"},
		{"localhost:5000/kudo/kafka@sha256:abc", `bad digest "sha256:abc"`},
		{"localhost:5000/kudo/kafka@md5:d41d8cd98f00b204e9800998ecf8427e", "unsupported digest algorithm"},
		{"localhost:99999/kudo/kafka", `port "99999" is not a number from 1 to 65535`},
		{"localhost:/kudo/kafka", "empty port"},
		{"local_host:5000/kudo/kafka", `"local_host" is not a valid host name`},
		{"[::1/kudo/kafka", "missing ']'"},
		{"[1.2.3.4]:5000/kudo/kafka", "is not an IPv6 address"},
		{"https://localhost:5000/kudo/kafka", "remove the URL scheme"},
		{"localhost:5000/kudo/kafka 1.0", "white space"},
		{"localhost:5000/kudo/" + strings.Repeat("a", 300), "the limit is 255"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParseReference(tt.in)
			if err == nil {
				t.Fatal("ParseReference succeeded, want an error")
			}
			if !errors.Is(err, ErrInvalidReference) {
				t.Errorf("error %v does not wrap ErrInvalidReference", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestParseRepositoryPrefix(t *testing.T) {
	got, err := ParseRepositoryPrefix("localhost:5000/operators")
	if err != nil {
		t.Fatal(err)
	}
	if want := (RepositoryPrefix{Registry: "localhost:5000", Namespace: "operators"}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if ref := got.Package("etcd", "0.9.4+1"); ref.String() != "localhost:5000/operators/etcd:0.9.4_1" {
		t.Errorf("Package() = %s", ref)
	}

	bad := []struct{ in, want string }{
		{"localhost:5000", "missing namespace: want host[:port]/namespace"},
		{"operators", "missing registry host and namespace"},
		{"localhost:5000/operators/etcd", "too many path components"},
		{"localhost:5000/operators:1.0", "a version is not allowed here"},
		{"localhost:5000/operators@" + testDigest, "a digest is not allowed here"},
		{"localhost:5000/Operators", "must be lower case"},
		{"localhost:5000/", "ends with '/'"},
	}
	for _, tt := range bad {
		_, err := ParseRepositoryPrefix(tt.in)
		if err == nil || !errors.Is(err, ErrInvalidReference) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseRepositoryPrefix(%q) = %v, want an error containing %q", tt.in, err, tt.want)
		}
	}
}

func TestPlainHTTPDefault(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		host  string
		opt   *bool
		plain bool
	}{
		{"localhost", nil, true},
		{"localhost:5000", nil, true},
		{"LOCALHOST:8080", nil, true},
		{"127.0.0.1", nil, true},
		{"127.0.0.1:5000", nil, true},
		{"127.1.2.3:5000", nil, true},
		{"[::1]:5000", nil, true},
		{"[::1]", nil, true},
		{"registry.example.com", nil, false},
		{"registry.example.com:5000", nil, false},
		{"10.0.0.1:5000", nil, false},
		{"localhost.example.com", nil, false},
		{"registry.example.com", &yes, true},
		{"localhost:5000", &no, false},
	}
	for _, tt := range tests {
		c, err := New(Options{PlainHTTP: tt.opt, Credentials: credentials.NewMemoryStore()})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.PlainHTTP(tt.host); got != tt.plain {
			t.Errorf("PlainHTTP(%q) with option %v = %v, want %v", tt.host, tt.opt, got, tt.plain)
		}
	}
}
